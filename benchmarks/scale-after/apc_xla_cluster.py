"""APC and map-APC with class ids against softmax, loss + gradient, in one process, interleaved.

Run from a checkout's root with ``PYTHONPATH`` at that checkout, pinned to one core, e.g.
``KERAS_BACKEND=tensorflow PYTHONPATH=$PWD taskset -c 0 python
benchmarks/scale-after/apc_xla_cluster.py 32 100000``; run it from two checkouts back to back to
compare them (apc.md, "XLA clusters on TensorFlow"). Prints the first call (trace and compile)
and the best of 5 calls per loss in each of 3 rounds, in ms.
"""

import sys
import time

import keras
import numpy as np

import tfrank4class.losses.rambo as rambo


def main(batch, classes):
  rng = np.random.default_rng(0)
  scores = rng.normal(size=(batch, classes)).astype(np.float32)
  ids = rng.integers(0, classes, batch).astype(np.int32)
  if keras.backend.backend() == "tensorflow":
    import tensorflow as tf  # noqa: PLC0415

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)

    def compiled(loss):
      @tf.function
      def step(s, y):
        with tf.GradientTape() as tape:
          tape.watch(s)
          value = loss(y, s)
        return value, tape.gradient(value, s)

      return step

    scores, ids = tf.constant(scores), tf.constant(ids)
  else:
    import jax  # noqa: PLC0415

    def compiled(loss):
      return jax.jit(jax.value_and_grad(lambda s, y: loss(y, s)))

  losses = {
    "softmax": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    "apc": rambo.APCLoss(),
    "map_apc": rambo.MapApcLoss(),
  }
  steps = {name: compiled(loss) for name, loss in losses.items()}
  for name, step in steps.items():
    start = time.perf_counter()
    np.asarray(step(scores, ids)[1])
    print(name, "first call", round(time.perf_counter() - start, 2), "s")
  for _ in range(3):
    best = {}
    for name, step in steps.items():
      times = []
      for _ in range(5):
        start = time.perf_counter()
        np.asarray(step(scores, ids)[1])
        times.append(time.perf_counter() - start)
      best[name] = min(times) * 1e3
    print(" ".join(f"{name}={ms:.1f}" for name, ms in best.items()), flush=True)


if __name__ == "__main__":
  main(int(sys.argv[1]), int(sys.argv[2]))
