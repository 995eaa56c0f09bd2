"""tie_statistics against a brute-force numpy count."""

import numpy as np
import tensorflow as tf

from tfrank4class.ranking import tie_statistics


def test_against_brute_force_with_padding():
  rng = np.random.default_rng(0)
  scores = rng.integers(0, 4, (20, 9)).astype(np.float32)
  relevant = rng.random((20, 9)).astype(np.float32)
  mask = rng.random((20, 9)) < 0.8
  got = {k: v.numpy() for k, v in tie_statistics(scores, relevant, mask).items()}
  for b in range(20):
    for i in range(9):
      if not mask[b, i]:
        continue
      valid = mask[b]
      gt = valid & (scores[b] > scores[b, i])
      eq = valid & (scores[b] == scores[b, i])
      assert got["above"][b, i] == gt.sum()
      assert got["tied"][b, i] == eq.sum()
      np.testing.assert_allclose(
        got["rel_above"][b, i], relevant[b][gt].sum(), rtol=1e-5, atol=1e-6
      )
      np.testing.assert_allclose(got["rel_tied"][b, i], relevant[b][eq].sum(), rtol=1e-5, atol=1e-6)


def test_in_xla():
  scores = tf.constant([[1.0, 3.0, 3.0, 2.0]])
  out = tf.function(lambda s: tie_statistics(s, tf.ones_like(s)), jit_compile=True)(scores)
  np.testing.assert_array_equal(out["above"].numpy(), [[3, 0, 0, 2]])
  np.testing.assert_array_equal(out["tied"].numpy(), [[1, 2, 2, 1]])
  np.testing.assert_array_equal(out["rel_above"].numpy(), [[3, 0, 0, 2]])


def test_log_binomial_against_math_comb():
  import math

  from tfrank4class.ranking.ties import log_binomial

  n = np.array([0, 1, 5, 10, 30, 100], np.float64)
  k = np.array([0, 1, 2, 3, 15, 50], np.float64)
  want = [math.log(math.comb(int(a), int(b))) for a, b in zip(n, k)]
  np.testing.assert_allclose(
    log_binomial(tf.constant(n), tf.constant(k)).numpy(), want, rtol=1e-12, atol=1e-12
  )
