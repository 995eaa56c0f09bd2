"""The record behind docs/scale.md, "After: `sorter_ap_loss` ranks its one item without a sort":
the attention sorter's one-item rank with the whole-list steepness it used before (kept here, and
only here, as the "before") against ``AttentionSorter.ranks_at``, interleaved, values and gradients
asserted equal. Run: ``python benchmarks/scale-after/sorter_ap_before_after.py 1000,10000,100000``.
"""

import sys
import time

import numpy as np
import tensorflow as tf

from tfrank4class.compat import ops
from tfrank4class.ranking import AttentionSorter, sigmoid_comparisons, sorter_base

SORTER = AttentionSorter.pretrained()
ROUNDS, CALLS, BATCH = 7, 5, 32


def before(scores, index):
  """The old ``ranks_at``: the steepness of every item, two sorts and the binary searches."""
  scores = SORTER._row_inputs(scores)
  k = SORTER.steepness(sorter_base.standardize(scores))
  scale = sorter_base.standard_scale(scores)
  soft = sigmoid_comparisons.pairwise_sigmoid_row_sum(scores, k * scale, index) - 0.5
  n = ops.shape(scores)[-1]
  return sorter_base.to_ranks(ops.cast(soft / ops.cast(n - 1, soft.dtype), "float32"), n)


def ranks_and_gradient(fn):
  weights = tf.range(1.0, BATCH + 1.0)

  @tf.function
  def step(scores, index):
    with tf.GradientTape() as tape:
      tape.watch(scores)
      ranks = fn(scores, index)
      total = tf.reduce_sum(ranks * weights)
    return ranks, tape.gradient(total, scores)

  return step


def main(sizes):
  for c in sizes:
    rng = np.random.default_rng(0)
    scores = tf.constant(rng.normal(size=(BATCH, c)).astype(np.float32))
    index = tf.constant(rng.integers(0, c, BATCH), tf.int32)
    steps = {"before": ranks_and_gradient(before), "after": ranks_and_gradient(SORTER.ranks_at)}
    out = {name: step(scores, index) for name, step in steps.items()}
    np.testing.assert_allclose(out["after"][0].numpy(), out["before"][0].numpy(), rtol=1e-5)
    np.testing.assert_allclose(
      out["after"][1].numpy(), out["before"][1].numpy(), rtol=1e-4, atol=1e-6
    )
    times = {name: [] for name in steps}
    for _ in range(ROUNDS):
      for name, step in steps.items():
        start = time.perf_counter()
        for _ in range(CALLS):
          step(scores, index)
        times[name].append((time.perf_counter() - start) / CALLS)
    ratio = [b / a for b, a in zip(times["before"], times["after"])]
    print(
      f"C={c}: before {np.median(times['before']) * 1e3:.2f} ms, after "
      f"{np.median(times['after']) * 1e3:.2f} ms, before/after median {np.median(ratio):.2f} "
      f"(range {min(ratio):.2f}-{max(ratio):.2f}), {ROUNDS} rounds"
    )


if __name__ == "__main__":
  main([int(c) for c in sys.argv[1].split(",")])
