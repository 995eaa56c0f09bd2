"""benchmarks/grid_statistics.py against scipy and hand-computed cases."""

import math

import grid_statistics
import numpy as np
import pytest
from scipy import stats


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_paired_t_test_is_scipy_ttest_rel(seed):
  rng = np.random.default_rng(seed)
  base = rng.normal(0.7, 0.01, size=6)
  values = base + rng.normal(0.002 * seed, 0.003, size=6)
  interval, p = grid_statistics.paired_t_test(values, base)
  reference = stats.ttest_rel(values, base)
  np.testing.assert_allclose(p, reference.pvalue, rtol=1e-9, atol=1e-12)
  ci = reference.confidence_interval(0.95)
  np.testing.assert_allclose([interval.low, interval.high], [ci.low, ci.high], rtol=1e-9)


def test_paired_t_test_without_spread():
  assert grid_statistics.paired_t_test([0.5, 0.6], [0.5, 0.6])[1] == 1.0
  assert grid_statistics.paired_t_test([0.6, 0.7], [0.5, 0.6])[1] == 0.0


def test_holm_hand_computed():
  # sorted: 0.01 (x4 = 0.04), 0.02 (x3 = 0.06), 0.03 (x2 = 0.06), 0.04 (x1 = 0.04 -> 0.06 by
  # monotonicity); back in the input order.
  adjusted = grid_statistics.holm([0.03, 0.01, 0.04, 0.02])
  np.testing.assert_allclose(adjusted, [0.06, 0.04, 0.06, 0.06], rtol=1e-12)
  # capped at 1; ties keep the same adjusted value
  np.testing.assert_allclose(grid_statistics.holm([0.5, 0.5, 0.9]), [1.0, 1.0, 1.0])
  assert grid_statistics.holm([]) == []


def test_holm_rejects_as_the_step_down_procedure():
  # The step-down rule written out: reject p_(i) while p_(i) < alpha / (m - i), stop at the
  # first failure; the adjusted p-values below alpha must be exactly those rejections.
  rng = np.random.default_rng(3)
  p = np.concatenate([rng.uniform(0, 0.004, 5), rng.uniform(0, 1, 20)])
  alpha, m = 0.05, len(p)
  rejected = set()
  for rank, i in enumerate(np.argsort(p)):
    if p[i] >= alpha / (m - rank):
      break
    rejected.add(int(i))
  adjusted = grid_statistics.holm(p)
  assert {i for i, a in enumerate(adjusted) if a < alpha} == rejected
  assert all(a >= raw for a, raw in zip(adjusted, p))


@pytest.mark.parametrize("bad", [[-0.1], [1.5], [float("nan")], ["x"]])
def test_holm_refuses_non_probabilities(bad):
  with pytest.raises(ValueError, match="p_values"):
    grid_statistics.holm(bad)


def _scipy_power(noncentrality, n, alpha):
  df = n - 1
  c = stats.t.ppf(1 - alpha / 2, df)
  lower = stats.nct.cdf(-c, df, noncentrality)
  return stats.nct.sf(c, df, noncentrality) + (0.0 if math.isnan(lower) else lower)


@pytest.mark.parametrize(
  "noncentrality,n,alpha",
  [
    (0.0, 6, 0.05),
    (1.5, 6, 0.05),
    (3.5, 6, 0.05),
    (2.0, 2, 0.05),
    (3.0, 10, 0.01),
    (-2.5, 4, 0.05),
    (4.0, 30, 0.05 / 29),
  ],
)
def test_power_is_scipy_noncentral_t(noncentrality, n, alpha):
  got = grid_statistics.paired_t_power(noncentrality, n, alpha)
  np.testing.assert_allclose(got, _scipy_power(noncentrality, n, alpha), atol=2e-6)


@pytest.mark.parametrize("n,alpha", [(6, 0.05), (6, 0.05 / 29), (3, 0.05), (12, 0.05)])
def test_minimum_detectable_effect_reaches_the_power(n, alpha):
  sd = 0.004
  delta = grid_statistics.minimum_detectable_effect(sd, n, alpha=alpha, power=0.8)
  np.testing.assert_allclose(_scipy_power(math.sqrt(n) * delta / sd, n, alpha), 0.8, atol=1e-5)
  # larger than the normal-approximation formula (z_{1-a/2} + z_{0.8}) sd / sqrt(n), and close
  # to its t-quantile version for a few degrees of freedom
  z = (stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(0.8)) * sd / math.sqrt(n)
  t = (stats.t.ppf(1 - alpha / 2, n - 1) + stats.t.ppf(0.8, n - 1)) * sd / math.sqrt(n)
  assert z < delta
  np.testing.assert_allclose(delta, t, rtol=0.1)


def test_minimum_detectable_effect_by_simulation():
  # 200,000 simulated experiments of 6 seeds with the MDE as the true difference: the paired t
  # test rejects in 80 % of them.
  n, sd = 6, 0.003
  delta = grid_statistics.minimum_detectable_effect(sd, n)
  d = np.random.default_rng(0).normal(delta, sd, size=(200_000, n))
  t = d.mean(1) / (d.std(1, ddof=1) / math.sqrt(n))
  np.testing.assert_allclose(np.mean(np.abs(t) > stats.t.ppf(0.975, n - 1)), 0.8, atol=0.005)


def test_minimum_detectable_effect_checks_arguments():
  assert grid_statistics.minimum_detectable_effect(0.0, 6) == 0.0
  with pytest.raises(ValueError, match="sd"):
    grid_statistics.minimum_detectable_effect(-1.0, 6)
  with pytest.raises(ValueError, match="`n`"):
    grid_statistics.minimum_detectable_effect(1.0, 1)
  with pytest.raises(ValueError, match="power"):
    grid_statistics.minimum_detectable_effect(1.0, 6, alpha=0.05, power=0.01)
  with pytest.raises(ValueError, match="intervals_count"):
    grid_statistics.paired_t_power(1.0, 6, intervals_count=7)


def test_converged_fraction():
  runs = [{"best_epoch": b, "epochs_run": e} for b, e in [(1, 9), (12, 20), (5, 5), (150, 150)]]
  assert grid_statistics.converged_fraction(runs) == 0.5
  with pytest.raises(ValueError, match="records"):
    grid_statistics.converged_fraction([])


def test_examples():  # benchmarks/ is outside the suite's doctest collection
  import doctest

  assert doctest.testmod(grid_statistics).failed == 0
