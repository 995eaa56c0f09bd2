"""One train step under each Keras front end: Keras 3 against tf-keras, same model, same loss.

On a stack without the ``tf_keras`` package (TensorFlow before 2.16, whose ``tf.keras`` is its own
Keras 2) only the default front end runs, and the table has no ratio.

The two flavours cannot share a process (``tf.keras`` is one or the other, fixed when TensorFlow
is imported; ``tfrank4class.compat``), so each round starts one child process per flavour, in
turn (Keras 3 with no ``TF_USE_LEGACY_KERAS``, then tf-keras with ``TF_USE_LEGACY_KERAS=1``), and
every child times every configuration:

  * ``dense keras_ce``: ``Input(d) -> Dense(C)``, Keras' own sparse cross-entropy and no metric,
    nothing of ours: what the front end itself costs per step;
  * ``dense softmax``: ``Input(d) -> Dense(C)``, TF-Ranking's softmax loss;
  * ``dense approx_ndcg``: the same with ApproxNDCG;
  * ``dense blackbox_ndcg``: the same with RaMBO's blackbox NDCG loss (custom gradient);
  * ``latent_cross approx_ndcg``: ``Input(d) -> Dense(d) -> Rank4ClassHead(C, latent_cross)``.

Each other one compiles with Adam and our four ranking metrics (Top-1, Top-5, NDCG@5, MRR).
Every configuration fits a few warm-up steps (tracing), then times ``model.fit`` over
``--steps`` steps of a repeated in-memory batch: ms per step of process CPU time (one intra- and
one inter-op thread, so it is the step time of a quiet machine and does not count time other
processes hold the shared cores). The ratio is Keras 3 over tf-keras, the median over rounds of
the per-round ratio.

``--quick`` is a smoke run of every code path, not a measurement: one round of two steps at
B = 32, of two configurations (``QUICK_CONFIGS``).

Usage:
  nice -n 10 .venv/bin/python benchmarks/front_ends.py [--rounds 5] [--steps 100]
      [--classes 100] [--batch 256] [--dim 128]
Writes benchmarks/out/front_ends.json.
"""

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time

from _common import OUT, ROOT, setup_tensorflow  # noqa: E402

CONFIGS = (
  "dense keras_ce",
  "dense softmax",
  "dense approx_ndcg",
  "dense blackbox_ndcg",
  "latent_cross approx_ndcg",
)
#: ``--quick``: a smoke run of both bodies and both ways of compiling (Keras's loss; ours with
#: our metrics).
QUICK_CONFIGS = ("dense keras_ce", "latent_cross approx_ndcg")
FLAVOURS = {"keras 3": {}, "tf-keras": {"TF_USE_LEGACY_KERAS": "1"}}


def _child(args):
  """Times every configuration in this process's Keras; prints one JSON line."""
  tf = setup_tensorflow(1)
  import numpy as np  # pylint: disable=g-import-not-at-top

  from tfrank4class import compat, heads, losses, metrics  # pylint: disable=g-import-not-at-top

  keras = compat.keras
  rng = np.random.default_rng(0)
  x = rng.normal(size=(args.batch, args.dim)).astype("float32")
  y = rng.integers(0, args.classes, size=args.batch)
  data = tf.data.Dataset.from_tensors((x, y)).repeat()
  times = {}
  for config in QUICK_CONFIGS if args.quick else CONFIGS:
    body, loss = config.split()
    keras.utils.set_random_seed(0)
    inputs = keras.Input((args.dim,))
    if body == "dense":
      scores = keras.layers.Dense(args.classes)(inputs)
    else:
      hidden = keras.layers.Dense(args.dim, activation="relu")(inputs)
      scores = heads.Rank4ClassHead(args.classes, body, hidden_units=(64,))(hidden)
    model = keras.Model(inputs, scores)
    if loss == "keras_ce":
      model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
      )
    else:
      model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=losses.get(f"{loss}_loss"),
        metrics=[
          metrics.TopKAccuracy(1),
          metrics.TopKAccuracy(5),
          metrics.NDCG(5),
          metrics.MRR(),
        ],
      )
    model.fit(data, steps_per_epoch=1 if args.quick else 5, epochs=1, verbose=0)
    start = time.process_time()
    model.fit(data, steps_per_epoch=args.steps, epochs=1, verbose=0)
    times[config] = (time.process_time() - start) / args.steps * 1e3
  version = keras.__version__
  print(json.dumps({"keras": version, "tensorflow": tf.__version__, "ms": times}))


def _run_child(flavour, args):
  env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
  env.update(FLAVOURS[flavour], TF_CPP_MIN_LOG_LEVEL="3", NO_GCE_CHECK="true")
  command = (
    [sys.executable, __file__, "--child"]
    + [f"--{k}={getattr(args, k)}" for k in ("steps", "classes", "batch", "dim")]
    + (["--quick"] if args.quick else [])
  )
  result = subprocess.run(
    command, env=env, cwd=ROOT, capture_output=True, text=True, check=False, timeout=1800
  )
  if result.returncode:
    raise RuntimeError(f"{flavour} child failed:\n{result.stderr[-3000:]}")
  return json.loads(result.stdout.strip().splitlines()[-1])


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--rounds", type=int, default=5)
  parser.add_argument("--steps", type=int, default=100)
  parser.add_argument("--classes", type=int, default=100)
  parser.add_argument("--batch", type=int, default=256)
  parser.add_argument("--dim", type=int, default=128)
  parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
  parser.add_argument(
    "--quick", action="store_true", help="a smoke run: 1 round of 2 steps, B=32, two configurations"
  )
  args = parser.parse_args()
  if args.quick:
    args.rounds, args.steps, args.batch = 1, 2, 32
  if args.child:
    return _child(args)
  # tf-keras needs the tf_keras package (TensorFlow 2.16+); before, there is one front end.
  flavours = [f for f in FLAVOURS if f != "tf-keras" or importlib.util.find_spec("tf_keras")]
  rounds = []
  for r in range(args.rounds):
    rounds.append({flavour: _run_child(flavour, args) for flavour in flavours})
    print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
  versions = {f: (rounds[0][f]["keras"], rounds[0][f]["tensorflow"]) for f in flavours}
  rows = []
  for config in QUICK_CONFIGS if args.quick else CONFIGS:
    k3 = [r["keras 3"]["ms"][config] for r in rounds]
    rows.append({"config": config, "keras3_ms": statistics.median(k3)})
    if "tf-keras" in flavours:
      k2 = [r["tf-keras"]["ms"][config] for r in rounds]
      rows[-1]["tf_keras_ms"] = statistics.median(k2)
      rows[-1]["ratio"] = statistics.median(a / b for a, b in zip(k3, k2))
  setting = (
    f"One train step, ms of process CPU time (median of {args.rounds} rounds, {args.steps} "
    f"steps each; C={args.classes}, B={args.batch}, d={args.dim}, 1 thread)"
  )
  if "tf-keras" not in flavours:
    keras_version, tf_version = versions["keras 3"]
    print(f"{setting}; Keras {keras_version}, TensorFlow {tf_version} (no tf_keras package: one")
    print("front end on this stack, nothing to compare)")
    print(f"| {'configuration':<26} | Keras {keras_version} |")
    print(f"|{'-' * 28}|{'-' * (len(keras_version) + 8)}|")
    for row in rows:
      print(f"| {row['config']:<26} | {row['keras3_ms']:{len(keras_version) + 6}.2f} |")
  else:
    print(
      f"{setting}; Keras {versions['keras 3'][0]} vs tf-keras {versions['tf-keras'][0]}, "
      f"TensorFlow {versions['keras 3'][1]}"
    )
    print(f"| {'configuration':<26} | Keras 3 | tf-keras | Keras 3 / tf-keras |")
    print(f"|{'-' * 28}|---------|----------|--------------------|")
    for row in rows:
      print(
        f"| {row['config']:<26} | {row['keras3_ms']:7.2f} | {row['tf_keras_ms']:8.2f} | "
        f"{row['ratio']:18.2f} |"
      )
  OUT.mkdir(parents=True, exist_ok=True)
  with open(OUT / "front_ends.json", "w", encoding="utf-8") as f:
    json.dump(
      {"args": vars(args), "versions": versions, "rows": rows, "rounds": rounds}, f, indent=1
    )


if __name__ == "__main__":
  main()
