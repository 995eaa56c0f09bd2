"""tie_statistics against a brute-force numpy count, on every backend and compile mode."""

import math

import backend_testing as bt
import numpy as np
import pytest

from tfrank4class.compat import ops
from tfrank4class.ranking import tie_statistics
from tfrank4class.ranking.ties import log_binomial


def test_against_brute_force_with_padding():
  rng = np.random.default_rng(0)
  scores = rng.integers(0, 4, (20, 9)).astype(np.float32)
  relevant = rng.random((20, 9)).astype(np.float32)
  mask = rng.random((20, 9)) < 0.8
  got = {k: bt.numpy(v) for k, v in tie_statistics(scores, relevant, mask).items()}
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


@pytest.mark.parametrize("mode", bt.compile_modes())
def test_compiled(mode):
  scores = ops.convert_to_tensor(np.array([[1.0, 3.0, 3.0, 2.0]], np.float32))
  fn = bt.compiled(lambda s: tie_statistics(s, ops.ones_like(s)), mode)
  out = {k: bt.numpy(v) for k, v in fn(scores).items()}
  np.testing.assert_array_equal(out["above"], [[3, 0, 0, 2]])
  np.testing.assert_array_equal(out["tied"], [[1, 2, 2, 1]])
  np.testing.assert_array_equal(out["rel_above"], [[3, 0, 0, 2]])
  np.testing.assert_array_equal(bt.numpy(fn(scores)["rel_tied"]), [[1, 2, 2, 1]])


def test_log_binomial_against_math_comb():
  n = np.array([0, 1, 5, 10, 30, 100], np.float64)
  k = np.array([0, 1, 2, 3, 15, 50], np.float64)
  want = [math.log(math.comb(int(a), int(b))) for a, b in zip(n, k)]
  with bt.float64():
    got = bt.numpy(log_binomial(ops.convert_to_tensor(n), ops.convert_to_tensor(k)))
  assert got.dtype == np.float64
  np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
