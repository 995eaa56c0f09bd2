"""Sorter accuracy and speed (SoDeep, Engilberge et al., CVPR 2019, Table 1 and Figure 5).

    .venv/bin/python benchmarks/sorters.py            # full: 10,000 held-out lists per length
    .venv/bin/python benchmarks/sorters.py --lists=500  # quick look
    .venv/bin/python benchmarks/sorters.py --only=handcrafted  # only rows whose name has this

1. Accuracy: on a fixed held-out synthetic set (``synthetic_batch(lists, n, seed=[20190408, n])``,
   never used in training) of 10,000 lists at n = 10, 100 and 1,000, the L1 error between
   predicted and exact *normalised* ranks,

       err = mean_{b, i} | (rank_hat_{b,i} - 1) / (n - 1)  -  (rank_{b,i} - 1) / (n - 1) |,

   for the shipped AttentionSorter, LSTMSorter and ConvSorter (n = 100 only: it is tied to that
   length) and the handcrafted PairwiseSigmoidSorter (SoDeep Sec. 4.1.2: its default, the
   paper's lambda = 10, and 20, on raw scores; and 5 on standardised scores).
2. Speed: forward + backward time of each rank operator on a [64, n] batch (one thread), beside
   the blackbox ranker (RaMBO) and one ``tf.argsort`` (forward only: it has no gradient).
3. Figure 5: the predicted rank of one element of a list of 100 as its value sweeps -1 -> 1,
   over the exact step curve (``benchmarks/out/sorters_fig5.png``).
"""

import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("NO_GCE_CHECK", "true")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from _common import OUT, setup_tensorflow  # noqa: E402

from tfrank4class import ranking  # noqa: E402
from tfrank4class.ranking import synthetic  # noqa: E402

SEED = 20190408


def sorters():
  """name -> (layer, lengths it handles)."""
  out = {
    "attention (shipped)": (ranking.AttentionSorter.pretrained(), None),
    "lstm (shipped)": (ranking.LSTMSorter.pretrained(), None),
  }
  conv = ranking.ConvSorter.pretrained()
  out["conv (shipped)"] = (conv, {conv.list_size})
  out["handcrafted c=10 raw"] = (ranking.PairwiseSigmoidSorter(), None)  # the paper's lambda
  out["handcrafted c=20 raw"] = (ranking.PairwiseSigmoidSorter(20.0), None)
  out["handcrafted c=5 std"] = (ranking.PairwiseSigmoidSorter(5.0, standardize_scores=True), None)
  return out


def accuracy(layer, n, lists):
  scores, exact = synthetic.synthetic_batch(lists, n, seed=[SEED, n])
  if isinstance(layer, (ranking.AttentionSorter, ranking.PairwiseSigmoidSorter)):
    chunk = max(1, 4_000_000 // (n * min(n, 256)))  # O(n^2) work, block-wise memory
  else:
    chunk = 2000  # LSTM / CNN: big batches are cheapest
  chunk = min(lists, chunk)
  # No AutoGraph: the layers need none, and in one long process TF 2.15's conversion cache once
  # handed ConvSorter._check_length the converted code of an unrelated __init__.
  predict = tf.function(lambda s: layer(s, training=False), reduce_retracing=True, autograph=False)
  total = 0.0
  for start in range(0, lists, chunk):
    s = scores[start : start + chunk]
    total += float(tf.reduce_sum(tf.abs(predict(s) - exact[start : start + chunk])))
  return total / (lists * n * (n - 1))


def timing(fn, n, batch=64, repeats=5, backward=True):
  scores, _ = synthetic.synthetic_batch(batch, n, seed=[SEED + 1, n])
  weights = tf.random.stateless_normal([batch, n], [1, 2])

  @tf.function(autograph=False)
  def step(s):
    if not backward:
      return tf.reduce_sum(tf.cast(fn(s), tf.float32))
    with tf.GradientTape() as tape:
      tape.watch(s)
      loss = tf.reduce_sum(fn(s) * weights)
    return tape.gradient(loss, s)

  step(scores)  # trace and warm up
  times = []
  for _ in range(repeats):
    t0 = time.perf_counter()
    out = step(scores)
    _ = out.numpy()
    times.append(time.perf_counter() - t0)
  return float(np.median(times))


def figure5(layers, path):
  import matplotlib

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt

  rng = np.random.default_rng(5)
  base = rng.uniform(-1, 1, size=100).astype(np.float32)
  sweep = np.linspace(-1, 1, 401).astype(np.float32)
  lists = np.repeat(base[None, :], len(sweep), axis=0)
  lists[:, 0] = sweep
  exact = ranking.rank(lists).numpy()[:, 0]
  fig, ax = plt.subplots(figsize=(7, 4.5))
  ax.step(sweep, exact, where="post", color="black", lw=2, label="exact rank")
  curves = {}
  for name, (layer, lengths) in layers.items():
    if lengths is not None and 100 not in lengths:
      continue
    pred = layer(tf.constant(lists), training=False).numpy()[:, 0]
    curves[name] = pred
    ax.plot(sweep, pred, lw=1.2, label=name)
  ax.set_xlabel("value of element 0 (other 99 fixed, uniform on [-1, 1])")
  ax.set_ylabel("predicted rank of element 0 (1 = highest)")
  ax.set_title("Sorter response to one swept value, n = 100 (cf. SoDeep Fig. 5)")
  ax.legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  return {name: float(np.abs(c - exact).mean()) for name, c in curves.items()}


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--lists", type=int, default=10_000)
  parser.add_argument("--lengths", default="10,100,1000")
  parser.add_argument("--threads", type=int, default=1)
  parser.add_argument(
    "--only", default="", help="comma-separated substrings: run only the rows whose name has one"
  )
  parser.add_argument(
    "--quick", action="store_true", help="a smoke run: 50 lists of n = 10, timings at n = 10, 100"
  )
  args = parser.parse_args()
  if args.quick:
    args.lists, args.lengths = 50, "10"
  setup_tensorflow(args.threads)
  OUT.mkdir(exist_ok=True)
  lengths = [int(x) for x in args.lengths.split(",")]
  layers = sorters()
  if args.only:
    keep = args.only.split(",")
    layers = {k: v for k, v in layers.items() if any(part in k for part in keep)}
  results = {"lists": args.lists, "accuracy": {}, "time_ms": {}}

  print(
    f"\nL1 error of normalised ranks, {args.lists} held-out synthetic lists per length "
    f"(paper Table 1 at n=100: LSTM 0.0033, CNN 0.0120, handcrafted 0.0350)"
  )
  print(f"{'sorter':24s}" + "".join(f"{'n=' + str(n):>12s}" for n in lengths))
  for name, (layer, allowed) in layers.items():
    row = {}
    for n in lengths:
      if allowed is not None and n not in allowed:
        row[n] = None
        continue
      t0 = time.time()
      row[n] = accuracy(layer, n, args.lists)
      print(f"    [{name} n={n}: {time.time() - t0:.0f}s]", flush=True)
    results["accuracy"][name] = row
    print(
      f"{name:24s}"
      + "".join(f"{row[n]:12.5f}" if row[n] is not None else f"{'-':>12s}" for n in lengths),
      flush=True,
    )

  ops = {
    name: (lambda s, sorter=layer: sorter(s, training=False), allowed)
    for name, (layer, allowed) in layers.items()
  }
  ops["blackbox ranker (l=1)"] = (ranking.BlackboxRanker(lambda_=1.0), None)
  ops["exact rank() (fwd)"] = (ranking.rank, None)
  print(
    "\nforward+backward time, batch of 64 lists, ms (median of 5; exact rank and argsort: "
    "forward only, no gradient)"
  )
  sizes = (10, 100) if args.quick else (100, 1000)
  print(f"{'operator':24s}" + "".join(f"{'n=' + str(n):>12s}" for n in sizes))
  timings = {}
  for name, (fn, allowed) in ops.items():
    row = {}
    for n in sizes:
      if allowed is not None and n not in allowed:
        row[n] = None
        continue
      row[n] = 1000 * timing(fn, n, backward=name != "exact rank() (fwd)")
    timings[name] = row
  row = {n: 1000 * timing(lambda s: tf.argsort(s, axis=-1), n, backward=False) for n in sizes}
  timings["tf.argsort (fwd only)"] = row
  for name, row in timings.items():
    print(
      f"{name:24s}"
      + "".join(f"{row[n]:12.2f}" if row[n] is not None else f"{'-':>12s}" for n in sizes)
    )
  results["time_ms"] = timings
  argsort_100 = timings["tf.argsort (fwd only)"][100]
  print(
    "ratios to one tf.argsort at n=100: "
    + ", ".join(
      f"{k}: {v[100] / argsort_100:.0f}x" for k, v in timings.items() if v[100] is not None
    )
  )

  fig_path = OUT / "sorters_fig5.png"
  results["figure5_mean_abs_rank_error"] = figure5(layers, fig_path)
  print(f"\nFigure 5 written to {fig_path}; mean |predicted - exact| rank along the sweep:")
  for name, e in results["figure5_mean_abs_rank_error"].items():
    print(f"  {name:24s}{e:8.3f}")
  with open(OUT / "sorters.json", "w") as f:
    json.dump(results, f, indent=1, default=str)


if __name__ == "__main__":
  main()
