"""One training step of full softmax over ``[B, C]`` against sampled softmax with ``S`` negatives
as the number of classes ``C`` grows, on the Keras 3 backend of the process.

A step is ``model.train_on_batch`` (the backend's compiled train function: forward, loss,
gradient, SGD update) of an encoder ``Dense(d)`` over ``B`` random features, then either a full
dot-product head (``Dense(C, use_bias=False)``, ``compile(loss="softmax_loss")``) or
:class:`tfrank4class.heads.SampledClassifier` with ``SampledDotProduct(C, S)`` (uniform
negatives, the log-Q correction, the same loss on ``[B, 1 + S]`` lists). The class table
(``C x d`` floats) is part of both models and updated by the optimizer (``--optimizer``, SGD by
default) every step: on JAX with SGD or Adagrad, the sampled model's step updates the gathered
rows alone (``tfrank4class/heads/row_sparse.py``); with Adam it is Keras's dense step.

Timing: all models are built and warmed up (traced, compiled) first; then every round times each
(method, C) in turn, the order rotated from round to round; a round's time is the fastest of
``--repeats`` steps (on a shared machine a step's time is its cost plus the time it was
preempted). The table gives the median over rounds and the min-max, and each time's ratio to the
full-softmax step at the smallest C, taken within each round (median and min-max). Memory:
``_common.peak_rss_mb`` of one step after the rounds (the step's growth of the resident set, in
this process, with the allocator's defaults), and the class table's size beside it.

Usage (writes benchmarks/out/sampled_<backend>.json; run once per backend):
  KERAS_BACKEND=tensorflow python benchmarks/sampled.py
  KERAS_BACKEND=jax python benchmarks/sampled.py
  KERAS_BACKEND=tensorflow python benchmarks/sampled.py --quality   # the quality check
  python benchmarks/sampled.py --compare   # over seeds, CLINC150 and C = 10^5 (_sampled_quality)
  python benchmarks/sampled.py --sweep     # quality against C = 10^3 .. 10^6 (_sampled_quality)
  python benchmarks/sampled.py --goemotions   # multi-label, other positives masked
  python benchmarks/sampled.py --quick    # C = 100, 1000, S = 20, 2 rounds; quality at C = 200

Quality (``--quality``): a synthetic catalogue of ``C`` classes with Zipf frequencies (class id =
frequency rank, so the log-uniform sampler matches it) and a planted structure (an example of
class ``y`` has the features ``u_y + noise``, ``u`` ``[C, 16]`` Gaussian); the same encoder
``Dense(16)`` and a dot-product head with bias trained with Adam for ``--epochs`` by full softmax
and by sampled softmax with and without the log-Q correction; Top-1, Top-5 and Recall@10 (the
true class among the 10 best) on held-out examples, over every class.
"""

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402
import _sampled_goemotions  # noqa: E402
import _sampled_quality  # noqa: E402

#: The optimizers of ``--optimizer`` (learning rate 0.01 in every cell).
OPTIMIZERS = _sampled_quality.OPTIMIZERS


def _models(num_classes, num_negatives, dim, features, optimizer):
  from tfrank4class.compat import keras  # noqa: PLC0415  (after _common set the path)
  from tfrank4class.heads import SampledClassifier, SampledDotProduct  # noqa: PLC0415

  full = keras.Sequential(
    [
      keras.Input((features,)),
      keras.layers.Dense(dim),
      keras.layers.Dense(num_classes, use_bias=False),
    ]
  )
  sampled = SampledClassifier(
    keras.layers.Dense(dim), SampledDotProduct(num_classes, num_negatives, seed=0)
  )
  for model in (full, sampled):
    make_optimizer = getattr(keras.optimizers, OPTIMIZERS[optimizer])
    model.compile(optimizer=make_optimizer(0.01), loss="softmax_loss")
  return {"full": full, "sampled": sampled}


def _fastest(model, x, y, repeats):
  best = float("inf")
  for _ in range(repeats):
    start = time.perf_counter()
    model.train_on_batch(x, y)
    best = min(best, time.perf_counter() - start)
  return best * 1000.0


def run(sizes, full_max_c, batch, num_negatives, dim, rounds, repeats, optimizer="sgd"):
  import numpy as np  # noqa: PLC0415

  from tfrank4class.compat import BACKEND  # noqa: PLC0415

  rng = np.random.default_rng(0)
  features = 32
  x = rng.normal(size=(batch, features)).astype("float32")
  cells = {}
  for c in sizes:
    y = rng.integers(0, c, size=batch)
    for method, model in _models(c, num_negatives, dim, features, optimizer).items():
      if method == "full" and c > full_max_c:
        continue
      model.train_on_batch(x, y)  # build, trace, compile
      cells[(method, c)] = (model, y)
  keys = list(cells)
  times = {k: [] for k in keys}
  for r in range(rounds):
    order = keys[r % len(keys) :] + keys[: r % len(keys)]
    for key in order:
      model, y = cells[key]
      times[key].append(_fastest(model, x, y, repeats))
  base = times[("full", sizes[0])]
  rows = []
  for key in keys:
    model, y = cells[key]
    ratios = [t / b for t, b in zip(times[key], base)]
    rows.append(
      {
        "method": key[0],
        "C": key[1],
        "ms": statistics.median(times[key]),
        "ms_range": [min(times[key]), max(times[key])],
        "ratio": statistics.median(ratios),
        "ratio_range": [min(ratios), max(ratios)],
        "step_peak_mb": _common.peak_rss_mb(lambda m=model, y=y: m.train_on_batch(x, y)),
        "table_mb": key[1] * dim * 4 / 2**20,
      }
    )
  return {
    "backend": BACKEND,
    "B": batch,
    "S": num_negatives,
    "d": dim,
    "rounds": rounds,
    "repeats": repeats,
    "optimizer": optimizer,
    "rows": rows,
  }


def table(result):
  lines = [
    f"{result['backend']}: B = {result['B']}, S = {result['S']}, d = {result['d']}, "
    f"{result['optimizer']}, {result['rounds']} rounds (fastest of {result['repeats']} steps "
    "each); ratio = time / "
    f"full softmax at the smallest C, within a round",
    "| method | C | step ms (median, min-max) | ratio (median, min-max) | step peak MB "
    "| table MB |",
    "|---|---:|---:|---:|---:|---:|",
  ]
  for r in result["rows"]:
    lines.append(
      f"| {r['method']} | {r['C']:,} | {r['ms']:.2f} ({r['ms_range'][0]:.2f}-"
      f"{r['ms_range'][1]:.2f}) | {r['ratio']:.2f} ({r['ratio_range'][0]:.2f}-"
      f"{r['ratio_range'][1]:.2f}) | {r['step_peak_mb']:.0f} | {r['table_mb']:.0f} |"
    )
  return "\n".join(lines)


def _catalogue(num_classes, examples, rank, seed):
  """Zipf class frequencies (class id = frequency rank) and a planted low-rank structure: the
  features of an example of class ``y`` are ``u_y + noise``, ``u`` ``[C, rank]`` Gaussian."""
  import numpy as np  # noqa: PLC0415

  rng = np.random.default_rng(seed)
  centres = rng.normal(size=(num_classes, rank)).astype("float32")
  weights = 1.0 / np.arange(1, num_classes + 1)
  y = rng.choice(num_classes, size=examples, p=weights / weights.sum())
  x = centres[y] + 0.5 * rng.normal(size=(examples, rank)).astype("float32")
  return x.astype("float32"), y


def quality(num_classes, examples, num_negatives, epochs, batch, rank=16):
  """Top-1 / Top-5 / Recall@10 on held-out examples after training full softmax and sampled
  softmax (log-uniform negatives, with and without the log-Q correction)."""
  import numpy as np  # noqa: PLC0415

  from tfrank4class.compat import BACKEND, keras  # noqa: PLC0415
  from tfrank4class.heads import SampledClassifier, SampledDotProduct  # noqa: PLC0415

  x, y = _catalogue(num_classes, examples + examples // 5, rank, seed=1)
  (x_train, y_train), (x_test, y_test) = (x[:examples], y[:examples]), (x[examples:], y[examples:])
  builders = {
    "full softmax": lambda: keras.Sequential(
      [keras.Input((rank,)), keras.layers.Dense(rank), keras.layers.Dense(num_classes)]
    ),
  }
  for name, correction in (("sampled, log-Q", True), ("sampled, no log-Q", False)):
    builders[name] = lambda c=correction: SampledClassifier(
      keras.layers.Dense(rank),
      SampledDotProduct(
        num_classes, num_negatives, "log_uniform", log_q_correction=c, use_bias=True, seed=0
      ),
    )
  rows = []
  for name, build in builders.items():
    keras.utils.set_random_seed(0)
    model = build()
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="softmax_loss")
    start = time.perf_counter()
    model.fit(x_train, y_train, batch_size=batch, epochs=epochs, verbose=0)
    seconds = time.perf_counter() - start
    scores = np.asarray(model.predict(x_test, batch_size=1024, verbose=0))
    rank_of_true = (scores > scores[np.arange(len(y_test)), y_test][:, None]).sum(axis=1)
    rows.append(
      {
        "model": name,
        "top1": float(np.mean(rank_of_true < 1)),
        "top5": float(np.mean(rank_of_true < 5)),
        "recall_at_10": float(np.mean(rank_of_true < 10)),
        "fit_seconds": seconds,
      }
    )
  return {
    "backend": BACKEND,
    "C": num_classes,
    "examples": examples,
    "S": num_negatives,
    "epochs": epochs,
    "B": batch,
    "rank": rank,
    "rows": rows,
  }


def quality_table(result):
  lines = [
    f"{result['backend']}: C = {result['C']:,} (Zipf), {result['examples']:,} training examples, "
    f"S = {result['S']} log-uniform negatives, {result['epochs']} epochs, B = {result['B']}",
    "| model | Top-1 | Top-5 | Recall@10 | fit s |",
    "|---|---:|---:|---:|---:|",
  ]
  for r in result["rows"]:
    lines.append(
      f"| {r['model']} | {r['top1']:.3f} | {r['top5']:.3f} | {r['recall_at_10']:.3f} | "
      f"{r['fit_seconds']:.0f} |"
    )
  return "\n".join(lines)


def _add_compare_flags(parser):
  """The flags of ``--compare`` (``benchmarks/_sampled_quality.py``)."""
  parser.add_argument(
    "--compare",
    action="store_true",
    help="full vs sampled softmax vs a ranking loss on sampled lists, over seeds, on CLINC150 "
    "and a synthetic catalogue (benchmarks/_sampled_quality.py)",
  )
  parser.add_argument(
    "--compare_data", default="clinc150,catalogue", help="clinc150 and/or catalogue"
  )
  parser.add_argument("--seeds", type=int, default=3)
  parser.add_argument("--compare_epochs", type=int, default=5)
  parser.add_argument("--compare_negatives", default="5,20,80", help="the S of the sampled runs")
  parser.add_argument("--width", type=int, default=64, help="the encoder's output width")
  parser.add_argument(
    "--ranking_max_negatives",
    type=int,
    default=200,
    help="the largest S of the pairwise-loss runs (it holds [B, 1 + S, 1 + S] pairs)",
  )
  parser.add_argument("--catalogue_classes", type=int, default=100_000)
  parser.add_argument("--catalogue_examples", type=int, default=20_000)
  parser.add_argument(
    "--catalogue_test", type=int, default=5000, help="held-out examples of --sweep"
  )
  parser.add_argument("--compare_optimizer", choices=sorted(OPTIMIZERS), default="adam")
  parser.add_argument("--lr", type=float, default=0.01, help="--compare_optimizer's")
  parser.add_argument(
    "--sweep",
    action="store_true",
    help="quality against C on the synthetic catalogue, one child process per (C, method, "
    "seed), resuming from its JSON (benchmarks/_sampled_quality.py)",
  )
  parser.add_argument("--sweep_classes", default="1000,10000,100000,1000000")
  parser.add_argument(
    "--methods",
    default=",".join(_sampled_quality.METHODS),
    help="the methods of --compare, --sweep and --goemotions: names of _sampled_quality.METHODS",
  )
  parser.add_argument(
    "--goemotions",
    action="store_true",
    help="the multi-label comparison on GoEmotions (benchmarks/_sampled_goemotions.py)",
  )
  parser.add_argument("--sweep_cell", help=argparse.SUPPRESS)  # C,method index,seed: a child
  parser.add_argument("--data_dir", default="../shared/datasets", help="unless TFRANK4CLASS_DATA")


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--sizes", default="1000,10000,100000,1000000")
  parser.add_argument(
    "--full_max_c",
    type=int,
    default=100_000,
    help="largest C of the full-softmax cells ([B, C] scores and gradients)",
  )
  parser.add_argument("--batch", type=int, default=256)
  parser.add_argument("--num_negatives", type=int, default=1000)
  parser.add_argument("--dim", type=int, default=32)
  parser.add_argument("--rounds", type=int, default=5)
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--optimizer", choices=sorted(OPTIMIZERS), default="sgd")
  parser.add_argument(
    "--quality",
    action="store_true",
    help="run the quality check on a synthetic catalogue instead of timing",
  )
  parser.add_argument("--quality_classes", type=int, default=10_000)
  parser.add_argument("--quality_examples", type=int, default=50_000)
  parser.add_argument("--epochs", type=int, default=5)
  parser.add_argument("--quick", action="store_true")
  _add_compare_flags(parser)
  args = parser.parse_args()
  if args.quick:
    args.sizes, args.num_negatives, args.rounds, args.repeats = "100,1000", 20, 2, 1
    args.quality_classes, args.quality_examples, args.epochs = 200, 1000, 1
    args.seeds, args.compare_epochs, args.compare_negatives = 1, 1, "5"
    args.catalogue_classes = 300
  _common.OUT.mkdir(parents=True, exist_ok=True)
  if args.sweep_cell or args.sweep or args.goemotions:
    from tfrank4class.compat import BACKEND  # noqa: PLC0415

    if args.goemotions:
      _sampled_goemotions.run_goemotions(args, _common.OUT, BACKEND)
    elif args.sweep_cell:
      _sampled_quality.sweep_cell(args, BACKEND)
    else:
      _sampled_quality.run_sweep(args, _common.OUT, BACKEND, os.path.abspath(__file__))
    return
  if args.compare or args.quick:
    from tfrank4class.compat import BACKEND  # noqa: PLC0415

    _sampled_quality.run_compare(args, _common.OUT, BACKEND)
    if args.compare:
      return
  if args.quality or args.quick:
    result = quality(
      args.quality_classes, args.quality_examples, args.num_negatives, args.epochs, args.batch
    )
    path = _common.OUT / f"sampled_quality_{result['backend']}.json"
    path.write_text(json.dumps(result, indent=1))
    print(quality_table(result))
    print(f"wrote {path}")
    if args.quality:
      return
  result = run(
    [int(c) for c in args.sizes.split(",")],
    args.full_max_c,
    args.batch,
    args.num_negatives,
    args.dim,
    args.rounds,
    args.repeats,
    args.optimizer,
  )
  _common.OUT.mkdir(parents=True, exist_ok=True)
  path = _common.OUT / f"sampled_{result['backend']}.json"
  path.write_text(json.dumps(result, indent=1))
  print(table(result))
  print(f"wrote {path}")


if __name__ == "__main__":
  main()
