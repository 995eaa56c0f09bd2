"""Rank4Class heads against a plain Dense classifier: training-step time and peak memory.

For C in {10, 28, 1000} classes, instance embeddings of size d = 512 and batch B = 64 (the
encoder is left out: the input is a fixed random [B, d] batch), this measures in one process:

  * step ms: one training step (forward, softmax_loss from the registry, backward, Adam update)
    inside ``tf.function``, median over rounds;
  * infer ms: one forward pass inside ``tf.function``;
  * peak MB: how far the process's resident set rises during one training step (or one forward
    pass) above its size before it, measured by ``_common.peak_rss_mb`` in a child process
    started with ``_common.PEAK_MEMORY_ENV`` (oneDNN off, glibc returning freed buffers at once),
    so that it counts the live tensor buffers (and any other memory the step touches) in 4 KiB
    pages; a Dense peak below ``MIN_PEAK_FOR_RATIO_MB`` gives no ratio ("-");
  * ratios against ``Dense(C)`` at the same C, measured side by side: every round times every
    configuration once, in turn, so they share the machine's load.

Configurations: ``Dense(C)``; ``Rank4ClassHead`` with ``"dot"`` (the same maths, Sec. 3.2),
``"latent_cross"`` and ``"concat"`` with two hidden layers of ``--width`` (the paper tuned
{64, 128, 256, 512}); at C = 1000 also both MLP heads with ``class_chunk_size=--chunk``.

Usage:
  nice -n 10 .venv/bin/python benchmarks/heads.py [--threads 1] [--width 256] [--chunk 100]
      [--rounds 5] [--quick]
Writes benchmarks/out/heads.json and benchmarks/out/heads.png.
"""

import argparse
import json
import statistics
import sys
import time

from _common import (  # noqa: E402
  OUT,
  PEAK_MEMORY_DESCRIPTION,
  peak_rss_mb,
  run_peak_memory_child,
  setup_tensorflow,
)

from tfrank4class.compat import keras


class Case:
  """One model with its compiled train step and forward pass."""

  def __init__(self, tf, label, num_classes, d, batch, interaction, width, chunk):
    from tfrank4class import losses  # pylint: disable=g-import-not-at-top
    from tfrank4class.heads import Rank4ClassHead  # pylint: disable=g-import-not-at-top

    self.tf, self.label, self.num_classes = tf, label, num_classes
    if interaction is None:
      layer = keras.layers.Dense(num_classes)
    else:
      layer = Rank4ClassHead(
        num_classes, interaction=interaction, hidden_units=(width, width), class_chunk_size=chunk
      )
    self.model = keras.Sequential([keras.Input((d,)), layer])
    self.params = self.model.count_params()
    loss_fn = losses.get("softmax_loss")
    optimizer = keras.optimizers.Adam(1e-3)
    model = self.model
    rng = tf.random.Generator.from_seed(num_classes)
    self.x = rng.normal([batch, d])
    self.y = rng.uniform([batch], 0, num_classes, dtype=tf.int64)

    @tf.function
    def train_step(x, y):
      with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
      grads = tape.gradient(loss, model.trainable_variables)
      optimizer.apply_gradients(zip(grads, model.trainable_variables))
      return loss

    @tf.function
    def infer(x):
      return model(x, training=False)

    self.train_step, self.infer = train_step, infer
    for _ in range(2):  # trace and warm up
      float(train_step(self.x, self.y))
      infer(self.x).numpy()

  def time_train(self, steps):
    start = time.perf_counter()
    for _ in range(steps):
      loss = self.train_step(self.x, self.y)
    float(loss)
    return (time.perf_counter() - start) / steps * 1e3

  def time_infer(self, steps):
    start = time.perf_counter()
    for _ in range(steps):
      out = self.infer(self.x)
    out.numpy()
    return (time.perf_counter() - start) / steps * 1e3

  def peak_mb(self, train):
    """``_common.peak_rss_mb`` of one training step (or forward pass), after the warm-up."""
    if train:
      return peak_rss_mb(lambda: float(self.train_step(self.x, self.y)))
    return peak_rss_mb(lambda: self.infer(self.x).numpy())


def _cases(tf, num_classes, args):
  """The configurations measured at ``num_classes`` (see the module docstring)."""
  specs = [
    ("Dense(C)", None, None),
    ("dot", "dot", None),
    ("latent_cross", "latent_cross", None),
    ("concat", "concat", None),
  ]
  if num_classes >= 1000:
    specs += [
      (f"latent_cross chunk={args.chunk}", "latent_cross", args.chunk),
      (f"concat chunk={args.chunk}", "concat", args.chunk),
    ]
  return [
    Case(tf, label, num_classes, args.dim, args.batch, kind, args.width, chunk)
    for label, kind, chunk in specs
  ]


#: A Dense peak below this (a few pages) gives no ratio: page-sized noise would dominate it.
MIN_PEAK_FOR_RATIO_MB = 0.25


def _ratio(value):
  return "-" if value != value else f"{value:.1f}"  # NaN: the Dense peak is below the minimum


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--threads", type=int, default=1)
  parser.add_argument("--width", type=int, default=256, help="MLP hidden width (2 layers)")
  parser.add_argument("--chunk", type=int, default=100, help="class_chunk_size at C = 1000")
  parser.add_argument("--rounds", type=int, default=5)
  parser.add_argument("--dim", type=int, default=512)
  parser.add_argument("--batch", type=int, default=64)
  parser.add_argument("--classes", type=int, nargs="+", default=[10, 28, 1000])
  parser.add_argument("--quick", action="store_true", help="smoke run: 1 round, 3 steps, C=10")
  parser.add_argument("--peak_memory_child", action="store_true", help=argparse.SUPPRESS)
  argv = sys.argv[1:] if argv is None else argv
  args = parser.parse_args(argv)
  if args.quick:
    args.rounds, args.classes = 1, [10]
  tf = setup_tensorflow(args.threads)
  if args.peak_memory_child:  # started by the parent below, with PEAK_MEMORY_ENV
    peaks = {}
    for num_classes in args.classes:
      cases = _cases(tf, num_classes, args)
      peaks[num_classes] = {c.label: (c.peak_mb(True), c.peak_mb(False)) for c in cases}
    print(json.dumps(peaks))
    return
  peaks_by_classes = run_peak_memory_child(__file__, [*argv, "--peak_memory_child"])

  rows = []
  for num_classes in args.classes:
    cases = _cases(tf, num_classes, args)
    peaks = peaks_by_classes[str(num_classes)]
    steps = 3 if num_classes >= 1000 or args.quick else 20
    train_times = {c.label: [] for c in cases}
    infer_times = {c.label: [] for c in cases}
    for _ in range(args.rounds):  # interleaved: every configuration once per round
      for c in cases:
        train_times[c.label].append(c.time_train(steps))
        infer_times[c.label].append(c.time_infer(steps))
    base = statistics.median(train_times["Dense(C)"])
    base_peak = peaks["Dense(C)"][0]
    for c in cases:
      train_ms = statistics.median(train_times[c.label])
      rows.append(
        {
          "C": num_classes,
          "model": c.label,
          "params": c.params,
          "step_ms": train_ms,
          "step_ratio": train_ms / base,
          "infer_ms": statistics.median(infer_times[c.label]),
          "train_peak_mb": peaks[c.label][0],
          "infer_peak_mb": peaks[c.label][1],
          "peak_ratio": (
            peaks[c.label][0] / base_peak if base_peak >= MIN_PEAK_FOR_RATIO_MB else float("nan")
          ),
        }
      )
      print(f"  measured C={num_classes} {c.label}", file=sys.stderr, flush=True)

  header = (
    f"B={args.batch}, d={args.dim}, MLP 2x{args.width}, threads={args.threads}, "
    f"median of {args.rounds} interleaved rounds; {PEAK_MEMORY_DESCRIPTION}"
  )
  print(header)
  print(
    f"| {'C':>4} | {'model':<24} | {'params':>9} | {'step ms':>8} | {'x Dense':>7} | "
    f"{'infer ms':>8} | {'train peak MB':>13} | {'x Dense':>8} | {'infer peak MB':>13} |"
  )
  print(
    "|"
    + "|".join(
      ["------"]
      + ["-" * 26]
      + ["-" * 11]
      + ["-" * 10]
      + ["-" * 9]
      + ["-" * 10]
      + ["-" * 15]
      + ["-" * 10]
      + ["-" * 15]
    )
    + "|"
  )
  for r in rows:
    print(
      f"| {r['C']:>4} | {r['model']:<24} | {r['params']:>9,} | {r['step_ms']:>8.2f} | "
      f"{r['step_ratio']:>7.1f} | {r['infer_ms']:>8.2f} | {r['train_peak_mb']:>13.2f} | "
      f"{_ratio(r['peak_ratio']):>8} | {r['infer_peak_mb']:>13.2f} |"
    )

  OUT.mkdir(parents=True, exist_ok=True)
  (OUT / "heads.json").write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))
  try:
    import matplotlib  # pylint: disable=g-import-not-at-top

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  except ImportError:
    print("matplotlib not installed: no plot written.")
    return rows
  fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
  labels = list(dict.fromkeys(r["model"] for r in rows))
  classes = list(dict.fromkeys(r["C"] for r in rows))
  width = 0.8 / len(labels)
  for ax, key, title in (
    (axes[0], "step_ms", "training step (ms, log)"),
    (axes[1], "train_peak_mb", "training-step peak memory (MB, log)"),
  ):
    for i, label in enumerate(labels):
      xs, ys = [], []
      for j, num_classes in enumerate(classes):
        match = [r[key] for r in rows if r["model"] == label and r["C"] == num_classes]
        if match:
          xs.append(j + i * width)
          ys.append(max(match[0], 1e-3))
      ax.bar(xs, ys, width, label=label)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(classes))])
    ax.set_xticklabels([f"C={c}" for c in classes])
    ax.set_yscale("log")
    ax.set_title(title)
  axes[0].legend(fontsize=8)
  fig.suptitle(header, fontsize=8)
  fig.tight_layout()
  fig.savefig(OUT / "heads.png", dpi=120)
  print(f"wrote {OUT / 'heads.png'} and {OUT / 'heads.json'}")
  return rows


if __name__ == "__main__":
  main()
