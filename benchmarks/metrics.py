"""Ranking metrics in a train step against Keras' own top-k accuracy.

For C classes, batch B and input width d, one train step of a ``Dense(C)`` classifier (forward,
sparse softmax cross-entropy, backward, Adam update) is timed inside ``tf.function`` with
different metric sets updated in the same step, as ``model.compile(metrics=...)`` does:

  * ``none``: no metric (the bare step);
  * ``keras 1+5``: Keras' ``SparseTopKCategoricalAccuracy(1)`` and ``(5)``;
  * ``ours 4``: our ``TopKAccuracy(1)``, ``TopKAccuracy(5)``, ``NDCG(5)``, ``MRR()``;
  * ``keras top5``: ``SparseTopKCategoricalAccuracy(5)`` alone;
  * ``top1`` / ``top5`` / ``ndcg5`` / ``mrr``: one of ours alone;
  * ``exact 4``: the four computed by the exact float64 reference (the implementation before
    the metrics were made fast), wrapped in ``keras.metrics.Mean``; only up to
    ``--exact_max_classes`` (it grows slow with C, and under XLA its searchsorted needs more
    memory than a machine has: docs/metrics.md, "Benchmark").

Every round times every configuration once, in turn, so they share the machine's load; a ratio
is the median over rounds of the per-round ratio (``ours 4`` and ``exact 4`` over ``keras 1+5``,
each single metric over ``keras top5``); times are medians in ms per step of *process CPU time*
(with one intra- and one inter-op thread that is the step time of a quiet machine, and it does
not count the time other processes hold the shared cores). The last column is the spread of
``top5``'s per-round ratio (min-max over the rounds). Runs with and without
``jit_compile=True``; one thread by default. A timing runs ``--steps`` steps, or more when the
bare step is short (enough for about 0.2 s of it).

Usage:
  nice -n 10 .venv/bin/python benchmarks/metrics.py [--threads 1] [--dim 128] [--rounds 5]
      [--steps 10] [--classes 28,100,1000,10000] [--batches 64,256] [--exact_max_classes 1000]
Writes benchmarks/out/metrics.json and benchmarks/out/metrics.png.

``--update_only``: the metric update alone, our ``TopKAccuracy(5)`` against Keras'
``SparseTopKCategoricalAccuracy(5)`` (each ``update_state`` in its own ``tf.function``, no XLA),
at ``--classes`` for each of ``--batches``, on two score forms (``--score_forms``):
``random`` (normal scores: the true class ranks anywhere, so Keras' ``in_top_k`` kernel stops
reading a row after ``k`` scores above it) and ``trained`` (the true class at rank 1, 2 or 3, as
a trained model puts it: every score is read). Rounds interleave the two; the ratio is the median
of the per-round ratios, with their min-max. Writes benchmarks/out/metrics_update.json.
"""

import argparse
import json
import statistics
import time

from _common import OUT, setup_tensorflow  # noqa: E402

SINGLE = ("top1", "top5", "ndcg5", "mrr")
CONFIGS = ("none", "keras 1+5", "ours 4", "keras top5") + SINGLE + ("exact 4",)


def _metric_sets(tf):
  """Configuration name -> a function building its fresh metric objects."""
  from tfrank4class import metrics  # pylint: disable=g-import-not-at-top
  from tfrank4class.compat import keras  # pylint: disable=g-import-not-at-top
  from tfrank4class.metrics import reference  # pylint: disable=g-import-not-at-top

  class Exact(keras.metrics.Mean):
    """The batch mean of a reference (float64, sort-based) per-list function."""

    def __init__(self, fn, **kwargs):
      super().__init__()
      self.fn, self.kwargs = fn, kwargs

    def update_state(self, y_true, y_pred, sample_weight=None):
      return super().update_state(self.fn(y_true, y_pred, **self.kwargs))

  keras_top = keras.metrics.SparseTopKCategoricalAccuracy
  return {
    "none": lambda: [],
    "keras 1+5": lambda: [keras_top(1), keras_top(5)],
    "ours 4": lambda: [
      metrics.TopKAccuracy(1),
      metrics.TopKAccuracy(5),
      metrics.NDCG(5),
      metrics.MRR(),
    ],
    "keras top5": lambda: [keras_top(5)],
    "top1": lambda: [metrics.TopKAccuracy(1)],
    "top5": lambda: [metrics.TopKAccuracy(5)],
    "ndcg5": lambda: [metrics.NDCG(5)],
    "mrr": lambda: [metrics.MRR()],
    "exact 4": lambda: [
      Exact(reference.top_k_accuracy, k=1),
      Exact(reference.top_k_accuracy, k=5),
      Exact(reference.ndcg, k=5),
      Exact(reference.reciprocal_rank),
    ],
  }


class Step:
  """One Dense(C) model with a compiled train step updating a set of metrics."""

  def __init__(self, tf, num_classes, batch, dim, metric_list, jit):
    from tfrank4class.compat import keras  # pylint: disable=g-import-not-at-top

    self.model = keras.Sequential([keras.Input((dim,)), keras.layers.Dense(num_classes)])
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    optimizer = keras.optimizers.Adam(1e-3)
    model = self.model
    rng = tf.random.Generator.from_seed(num_classes + batch)
    self.x = rng.normal([batch, dim])
    self.y = rng.uniform([batch], 0, num_classes, dtype=tf.int64)

    @tf.function(jit_compile=jit)
    def train_step(x, y):
      with tf.GradientTape() as tape:
        logits = model(x, training=True)
        loss = loss_fn(y, logits)
      grads = tape.gradient(loss, model.trainable_variables)
      optimizer.apply_gradients(zip(grads, model.trainable_variables))
      for metric in metric_list:
        metric.update_state(y, logits)
      return loss

    self.train_step = train_step
    for _ in range(2):  # trace, compile and warm up
      float(train_step(self.x, self.y))

  def time(self, steps):
    start = time.process_time()
    for _ in range(steps):
      loss = self.train_step(self.x, self.y)
    float(loss)
    return (time.process_time() - start) / steps * 1e3


def run_cell(tf, num_classes, batch, dim, jit, rounds, steps, exact_max_classes):
  builders = _metric_sets(tf)
  names = [n for n in CONFIGS if n != "exact 4" or num_classes <= exact_max_classes]
  cases = {name: Step(tf, num_classes, batch, dim, builders[name](), jit) for name in names}
  # Short steps are repeated until a timing spans about 0.2 s of the bare step.
  steps = max(steps, int(200.0 / max(cases["none"].time(steps), 1e-3)))
  times = {name: [] for name in names}
  for _ in range(rounds):
    for name, case in cases.items():
      times[name].append(case.time(steps))

  def per_round(name, base):
    return [a / b for a, b in zip(times.get(name, []), times[base])] or [float("nan")]

  def ratio(name, base):
    return statistics.median(per_round(name, base))

  row = {
    "C": num_classes,
    "B": batch,
    "xla": jit,
    "ms": {
      name: statistics.median(times[name]) if name in times else float("nan") for name in CONFIGS
    },
    "ours 4 / keras 1+5": ratio("ours 4", "keras 1+5"),
    "exact 4 / keras 1+5": ratio("exact 4", "keras 1+5"),
  }
  for name in SINGLE:
    row[f"{name} / keras top5"] = ratio(name, "keras top5")
    spread = per_round(name, "keras top5")
    row[f"{name} / keras top5 spread"] = [min(spread), max(spread)]
  return row


def score_form(num_classes, batch, form):
  """``(ids, scores)`` numpy: normal scores; ``"trained"`` moves each true class to rank 1, 2 or
  3 (its score set just above the first, or to the second or third highest score)."""
  import numpy as np  # pylint: disable=g-import-not-at-top

  rng = np.random.default_rng(num_classes + batch)
  scores = rng.normal(size=(batch, num_classes)).astype(np.float32)
  ids = rng.integers(0, num_classes, batch)
  if form == "trained":
    rows = np.arange(batch)
    top = -np.sort(-scores, axis=1)[:, :3]
    rank = rng.integers(0, 3, batch)
    scores[rows, ids] = np.where(rank == 0, top[:, 0] + 0.5, top[rows, rank])
  return ids, scores


def update_cell(tf, num_classes, batch, form, rounds):
  """Ours and Keras' top-5 update timed in interleaved rounds: ms a call and our ratio."""
  from tfrank4class import metrics  # pylint: disable=g-import-not-at-top
  from tfrank4class.compat import keras  # pylint: disable=g-import-not-at-top

  ids, scores = (tf.constant(x) for x in score_form(num_classes, batch, form))
  built = {
    "ours": metrics.TopKAccuracy(5),
    "keras": keras.metrics.SparseTopKCategoricalAccuracy(5),
  }
  steps = {n: tf.function(lambda y, s, m=m: m.update_state(y, s)) for n, m in built.items()}
  for step in steps.values():
    step(ids, scores)
  values = {n: float(m.result()) for n, m in built.items()}
  calls = max(5, int(2e6 / (num_classes * batch)))
  times = {name: [] for name in steps}
  for _ in range(rounds):
    for name, step in steps.items():
      start = time.process_time()
      for _ in range(calls):
        step(ids, scores)
      times[name].append((time.process_time() - start) / calls * 1e3)
  ratios = [a / b for a, b in zip(times["ours"], times["keras"])]
  return {
    "C": num_classes,
    "B": batch,
    "form": form,
    "values": values,
    "ms": {n: statistics.median(t) for n, t in times.items()},
    "ours / keras": statistics.median(ratios),
    "spread": [min(ratios), max(ratios)],
  }


def update_only(tf, args):
  print("| C | B | scores | ours ms | Keras ms | ours / Keras (min-max) | top-5 ours, Keras |")
  print("|---|---|---|---|---|---|---|", flush=True)
  rows = []
  for batch in (int(b) for b in args.batches.split(",")):
    for num_classes in (int(c) for c in args.classes.split(",")):
      for form in args.score_forms.split(","):
        row = update_cell(tf, num_classes, batch, form, args.rounds)
        rows.append(row)
        print(
          f"| {num_classes:,} | {batch} | {form} | {row['ms']['ours']:.3f} | "
          f"{row['ms']['keras']:.3f} | {row['ours / keras']:.2f}x "
          f"({row['spread'][0]:.2f}-{row['spread'][1]:.2f}) | "
          f"{row['values']['ours']:.3f}, {row['values']['keras']:.3f} |",
          flush=True,
        )
  OUT.mkdir(parents=True, exist_ok=True)
  (OUT / "metrics_update.json").write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--threads", type=int, default=1)
  parser.add_argument("--dim", type=int, default=128)
  parser.add_argument("--rounds", type=int, default=5)
  parser.add_argument("--steps", type=int, default=10)
  parser.add_argument("--classes", default="28,100,1000,10000")
  parser.add_argument("--batches", default="64,256")
  parser.add_argument("--exact_max_classes", type=int, default=1000)
  parser.add_argument(
    "--quick", action="store_true", help="a smoke run: C = 28, B = 64, no XLA, 1 round"
  )
  parser.add_argument("--update_only", action="store_true", help="the top-5 update alone")
  parser.add_argument("--score_forms", default="random,trained", help="with --update_only")
  args = parser.parse_args()
  if args.quick:
    args.classes, args.batches, args.rounds, args.steps = "28", "64", 1, 2
  tf = setup_tensorflow(args.threads)
  if args.update_only:
    update_only(tf, args)
    return
  rows = []
  header = (
    f"| {'C':>6} | {'B':>3} | XLA | {'none':>6} | {'keras1+5':>8} | {'ours 4':>7} "
    f"| {'exact 4':>8} | ours4/keras | exact4/keras | "
    + " | ".join(f"{n}/k5" for n in SINGLE)
    + " | top5/k5 min-max |"
  )
  print(header)
  print("|" + "|".join("-" * (len(c)) for c in header.split("|")[1:-1]) + "|", flush=True)
  for jit in (False,) if args.quick else (False, True):
    for batch in (int(b) for b in args.batches.split(",")):
      for num_classes in (int(c) for c in args.classes.split(",")):
        row = run_cell(
          tf, num_classes, batch, args.dim, jit, args.rounds, args.steps, args.exact_max_classes
        )
        rows.append(row)
        ms = row["ms"]
        singles = " | ".join(
          f"{row[f'{n} / keras top5']:{len(n) + 3}.2f}x"[-(len(n) + 4) :] for n in SINGLE
        )
        print(
          f"| {num_classes:>6} | {batch:>3} | {'yes' if jit else 'no':>3} | "
          f"{ms['none']:6.2f} | {ms['keras 1+5']:8.2f} | {ms['ours 4']:7.2f} | "
          f"{ms['exact 4']:8.1f} | {row['ours 4 / keras 1+5']:10.2f}x | "
          f"{row['exact 4 / keras 1+5']:11.1f}x | "
          + singles
          + " | "
          + "{:6.2f}-{:<6.2f}".format(*row["top5 / keras top5 spread"])
          + "  |",
          flush=True,
        )
  OUT.mkdir(parents=True, exist_ok=True)
  (OUT / "metrics.json").write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))
  _plot(rows)


def _plot(rows):
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  batches = sorted({r["B"] for r in rows})
  fig, axes = plt.subplots(len(batches), 2, figsize=(11, 4 * len(batches)), squeeze=False)
  for i, batch in enumerate(batches):
    for j, jit in enumerate((False, True)):
      ax = axes[i][j]
      cells = sorted((r for r in rows if r["B"] == batch and r["xla"] == jit), key=lambda r: r["C"])
      for name in ("none", "keras 1+5", "ours 4", "exact 4"):
        points = [(r["C"], r["ms"][name]) for r in cells if r["ms"][name] == r["ms"][name]]
        if points:
          ax.plot(*zip(*points), marker="o", label=name)
      ax.set_xscale("log")
      ax.set_yscale("log")
      ax.set_xlabel("classes C")
      ax.set_ylabel("train step (ms)")
      ax.set_title(f"Dense(C) train step + metrics, B={batch}, {'XLA' if jit else 'no XLA'}")
      ax.grid(True, which="both", alpha=0.3)
      ax.legend()
  fig.tight_layout()
  fig.savefig(OUT / "metrics.png", dpi=100)


if __name__ == "__main__":
  main()
