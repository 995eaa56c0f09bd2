"""One training step of full softmax over ``[B, C]`` against sampled softmax with ``S`` negatives
as the number of classes ``C`` grows, on the Keras 3 backend of the process.

A step is ``model.train_on_batch`` (the backend's compiled train function: forward, loss,
gradient, SGD update) of an encoder ``Dense(d)`` over ``B`` random features, then either a full
dot-product head (``Dense(C, use_bias=False)``, ``compile(loss="softmax_loss")``) or
:class:`tfrank4class.heads.SampledClassifier` with ``SampledDotProduct(C, S)`` (uniform
negatives, the log-Q correction, the same loss on ``[B, 1 + S]`` lists). The class table
(``C x d`` floats) is part of both models and updated by the optimizer every step.

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
  python benchmarks/sampled.py --quick    # C = 100, 1000, S = 20, 2 rounds
"""

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402


def _models(num_classes, num_negatives, dim, features):
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
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="softmax_loss")
  return {"full": full, "sampled": sampled}


def _fastest(model, x, y, repeats):
  best = float("inf")
  for _ in range(repeats):
    start = time.perf_counter()
    model.train_on_batch(x, y)
    best = min(best, time.perf_counter() - start)
  return best * 1000.0


def run(sizes, full_max_c, batch, num_negatives, dim, rounds, repeats):
  import numpy as np  # noqa: PLC0415

  from tfrank4class.compat import BACKEND  # noqa: PLC0415

  rng = np.random.default_rng(0)
  features = 32
  x = rng.normal(size=(batch, features)).astype("float32")
  cells = {}
  for c in sizes:
    y = rng.integers(0, c, size=batch)
    for method, model in _models(c, num_negatives, dim, features).items():
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
    "rows": rows,
  }


def table(result):
  lines = [
    f"{result['backend']}: B = {result['B']}, S = {result['S']}, d = {result['d']}, "
    f"{result['rounds']} rounds (fastest of {result['repeats']} steps each); ratio = time / "
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
  parser.add_argument("--quick", action="store_true")
  args = parser.parse_args()
  if args.quick:
    args.sizes, args.num_negatives, args.rounds, args.repeats = "100,1000", 20, 2, 1
  result = run(
    [int(c) for c in args.sizes.split(",")],
    args.full_max_c,
    args.batch,
    args.num_negatives,
    args.dim,
    args.rounds,
    args.repeats,
  )
  _common.OUT.mkdir(parents=True, exist_ok=True)
  path = _common.OUT / f"sampled_{result['backend']}.json"
  path.write_text(json.dumps(result, indent=1))
  print(table(result))
  print(f"wrote {path}")


if __name__ == "__main__":
  main()
