"""tfrank4class.ranking.precision (the one AP core) against exact sums, brute force over orderings
and scikit-learn, on every backend (float64 cases too: JAX with x64 on)."""

import fractions
import itertools

import backend_testing as bt
import numpy as np
import pytest
from scipy.special import digamma
from sklearn.metrics import average_precision_score

from tfrank4class import backend
from tfrank4class.compat import ops
from tfrank4class.ranking.precision import (
  average_precision_from_ranks,
  expected_precision,
  harmonic_difference,
)

RNG = np.random.default_rng(2024)


def test_harmonic_difference_float32_error():
  a = np.concatenate([np.arange(0, 40), np.geomspace(40, 1e7, 300).round()])
  t = np.concatenate([np.arange(0, 40), RNG.integers(0, 50, 300), np.geomspace(1, 1e6, 40).round()])
  a, t = np.meshgrid(a, t[:80])
  a, t = a.ravel(), t.ravel()
  # float64 reference: exact sums for short ranges, the difference of log-gamma derivatives else.
  want = np.where(
    t <= 50,
    [np.sum(1.0 / np.arange(x + 1, x + y + 1)) if y <= 50 else 0.0 for x, y in zip(a, t)],
    digamma(a + t + 1) - digamma(a + 1),
  )
  got = bt.numpy(harmonic_difference(a.astype(np.float32), t.astype(np.float32)))
  nonzero = want > 0
  assert np.all(got[~nonzero] == 0)
  assert np.max(np.abs(got[nonzero] / want[nonzero] - 1)) < 5e-7


def test_harmonic_difference_float64_is_exact_to_float64_resolution():
  a = np.array([0.0, 1.0, 5.0, 17.0, 1e3, 1e5])
  t = np.array([0.0, 3.0, 1.0, 9.0, 7.0, 2.0])
  with bt.float64():
    got = harmonic_difference(ops.convert_to_tensor(a), ops.convert_to_tensor(t))
    assert backend.dtype_name(got) == "float64"
    got = bt.numpy(got)
  want = [
    float(sum(fractions.Fraction(1, q) for q in range(int(x) + 1, int(x + y) + 1)))
    for x, y in zip(a, t)
  ]
  np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


def _brute_expected_precision(a, t, big_r, r, cutoff=None):
  """E[prec_i 1[pos_i <= cutoff]] of one relevant item of a tie group, by enumerating every order
  of the group (positions a+1..a+t, r relevant items of which item 0 is ours)."""
  group = [True] * r + [False] * (t - r)
  total, count = fractions.Fraction(0), 0
  for order in itertools.permutations(range(t)):
    pos = order.index(0)  # where our relevant item lands in the group
    rel_before = sum(group[j] for j in order[:pos])
    position = a + pos + 1
    if cutoff is None or position <= cutoff:
      total += fractions.Fraction(big_r + rel_before + 1, position)
    count += 1
  return float(total / count)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_expected_precision_equals_the_mean_over_all_orderings(dtype):
  cases = [
    (a, t, big_r, r)
    for a in (0, 1, 4)
    for t in (1, 2, 3, 4)
    for r in range(1, t + 1)
    for big_r in range(0, a + 1, 2)
  ]
  for cutoff in (None, 1, 3, 6):
    a, t, big_r, r = (np.array(c, np.float64) for c in zip(*cases))
    with bt.float64():
      got = bt.numpy(
        expected_precision(
          *(ops.convert_to_tensor(x, dtype) for x in (a, t, big_r, r)),
          cutoff=None if cutoff is None else ops.convert_to_tensor(float(cutoff), dtype),
        )
      )
    assert got.dtype == dtype
    want = [_brute_expected_precision(*map(int, c), cutoff=cutoff) for c in cases]
    np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == "float32" else 1e-12)


def test_expected_precision_without_ties_is_the_formula_from_ranks():
  # t = 1: E[prec] = (R + 1) / (a + 1) = rk+ / rk.
  a = np.array([0.0, 3.0, 9.0])
  big_r = np.array([0.0, 1.0, 4.0])
  t = ops.convert_to_tensor
  with bt.float64():
    got = bt.numpy(expected_precision(t(a), t(np.ones(3)), t(big_r), t(np.ones(3))))
  assert got.dtype == np.float64
  np.testing.assert_allclose(got, (big_r + 1) / (a + 1), rtol=1e-14)


def test_average_precision_from_ranks_matches_sklearn():
  scores = RNG.normal(size=(20, 9))  # distinct scores: ranks are exact
  relevant = RNG.random((20, 9)) < 0.4
  relevant[:, 0] = True
  ranks = (-scores).argsort(axis=1).argsort(axis=1) + 1.0
  rel_ranks = np.zeros_like(ranks)
  for b in range(20):
    order = np.argsort(-np.where(relevant[b], scores[b], -np.inf))
    rel_ranks[b, order] = np.arange(1, 10)
  with bt.float64():
    got = bt.numpy(average_precision_from_ranks(ranks, rel_ranks, relevant))
  assert got.dtype == np.float64
  want = [average_precision_score(relevant[b], scores[b]) for b in range(20)]
  np.testing.assert_allclose(got, want, rtol=1e-12)


def test_average_precision_from_ranks_no_relevant_item_and_gradient():
  ranks = np.array([[1.0, 2.0, 3.0], [1.0, 3.0, 2.0]], np.float32)
  rel_ranks = np.array([[1.0, 1.0, 1.0], [1.0, 2.0, 1.0]], np.float32)
  relevant = np.array([[False, False, False], [True, True, False]])
  ap = bt.numpy(average_precision_from_ranks(ranks, rel_ranks, relevant))
  np.testing.assert_allclose(ap, [0.0, (1 / 1 + 2 / 3) / 2], rtol=1e-6)
  # d AP / d rk_i = -rk+_i / (|P| rk_i^2) at relevant items, 0 elsewhere.
  _, (grad,) = bt.value_and_grad(
    lambda r: ops.sum(average_precision_from_ranks(r, rel_ranks, relevant)), ranks
  )
  np.testing.assert_allclose(grad, [[0, 0, 0], [-1 / 2, -2 / 18, 0]], rtol=1e-6)


def test_docstring_examples_run():
  import doctest  # noqa: PLC0415

  import tfrank4class.ranking.precision as module  # noqa: PLC0415

  result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
  assert result.attempted > 0 and result.failed == 0, result
