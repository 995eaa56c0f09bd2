"""The record behind benchmarks/scale-after/linear_constants.md, "RaMBO with class ids and sample
weights": a batch-level RaMBO loss of class ids with sample weights (one weight 0), loss and
gradient under ``tf.function``, one thread, B = 32, on the class-id path (``loss(ids, s, w)``)
against the one-hot path it took before (``Loss.call_without`` of the base class: one-hot rows,
the weight-0 rows as padding, the sorting path), interleaved in one process, values and gradients
asserted equal. Run: ``python benchmarks/scale-after/linear_constants/rambo_sample_weights.py
1000,10000``.
"""

import statistics
import sys
import time

import numpy as np
import tensorflow as tf

from tfrank4class.compat import ops
from tfrank4class.losses import APCLoss, MapApcLoss, MeanAveragePrecisionLoss
from tfrank4class.losses.base import Loss

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
ROUNDS, CALLS, BATCH = 5, 3, 32


def step(loss, one_hot_path):
  @tf.function
  def value_and_gradient(ids, scores, weights):
    with tf.GradientTape() as tape:
      tape.watch(scores)
      if one_hot_path:
        kept = ops.not_equal(weights, 0)
        value = Loss.call_without(loss, ids, scores, kept) * ops.mean(weights)
      else:
        value = loss(ids, scores, sample_weight=weights)
    return value, tape.gradient(value, scores)

  return value_and_gradient


def main(sizes):
  for c in sizes:
    rng = np.random.default_rng(c)
    scores = tf.constant(rng.normal(size=(BATCH, c)).astype(np.float32))
    ids = tf.constant(rng.integers(0, c, BATCH).astype(np.int32))
    weights = tf.constant(
      np.where(np.arange(BATCH) == 3, 0.0, rng.uniform(0.5, 2.0, BATCH)), "float32"
    )
    for cls in (MeanAveragePrecisionLoss, APCLoss, MapApcLoss):
      loss = cls()
      steps = {"one-hot": step(loss, True), "ids": step(loss, False)}
      out = {name: fn(ids, scores, weights) for name, fn in steps.items()}
      np.testing.assert_allclose(out["ids"][0].numpy(), out["one-hot"][0].numpy(), rtol=1e-5)
      np.testing.assert_allclose(
        out["ids"][1].numpy(), out["one-hot"][1].numpy(), rtol=1e-5, atol=1e-7
      )
      times = {name: [] for name in steps}
      for _ in range(ROUNDS):
        for name, fn in steps.items():
          start = time.perf_counter()
          for _ in range(CALLS):
            fn(ids, scores, weights)[1].numpy()
          times[name].append((time.perf_counter() - start) / CALLS * 1e3)
      ratio = [a / b for a, b in zip(times["one-hot"], times["ids"])]
      print(
        f"| {loss.name} | {c:,} | {statistics.median(times['one-hot']):.1f} | "
        f"{statistics.median(times['ids']):.1f} | {statistics.median(ratio):.1f}x "
        f"({min(ratio):.1f}-{max(ratio):.1f}) |",
        flush=True,
      )


if __name__ == "__main__":
  main([int(c) for c in sys.argv[1].split(",")])
