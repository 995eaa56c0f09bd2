"""experiments/statistics.py against scipy and hand-computed cases: Student's t, the t
intervals, the paired t test, Holm, power and the minimum detectable effect."""

import doctest
import math

import numpy as np
import pytest
from scipy import stats

from experiments import statistics


@pytest.mark.parametrize("df", list(range(1, 31)) + [47, 100, 250])
def test_t_cdf_matches_scipy(df):
  for t in (-40.0, -6.3, -2.0, -0.7, -1e-3, 0.0, 1e-3, 0.4, 1.0, 2.2, 3.5, 12.0, 80.0):
    assert statistics.t_cdf(t, df) == pytest.approx(stats.t.cdf(t, df), abs=1e-13), (t, df)


@pytest.mark.parametrize("df", list(range(1, 31)) + [47, 100])
def test_t_ppf_matches_scipy(df):
  for q in (1e-4, 0.005, 0.025, 0.05, 0.3, 0.5, 0.7, 0.9, 0.95, 0.975, 0.995, 0.9999):
    assert statistics.t_ppf(q, df) == pytest.approx(stats.t.ppf(q, df), rel=1e-10, abs=1e-12), (
      q,
      df,
    )


@pytest.mark.parametrize("n", [2, 3, 5, 8, 20])
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_mean_interval_matches_scipy(n, confidence):
  values = np.random.default_rng(n).normal(0.7, 0.01, size=n)
  got = statistics.mean_interval(values, confidence)
  low, high = stats.t.interval(confidence, n - 1, loc=np.mean(values), scale=stats.sem(values))
  assert got.mean == pytest.approx(np.mean(values), abs=1e-15)
  assert got.low == pytest.approx(low, abs=1e-12)
  assert got.high == pytest.approx(high, abs=1e-12)
  assert got.sd == pytest.approx(np.std(values, ddof=1), rel=1e-12)
  assert got.half_width == pytest.approx((high - low) / 2, abs=1e-12)
  assert (got.n, got.confidence) == (n, confidence)


@pytest.mark.parametrize("n", [2, 3, 5, 10])
def test_paired_difference_matches_scipy_ttest_rel(n):
  rng = np.random.default_rng(100 + n)
  baseline = rng.normal(0.6, 0.02, size=n)
  values = baseline + rng.normal(0.004, 0.003, size=n)
  got = statistics.paired_difference(values, baseline)
  ci = stats.ttest_rel(values, baseline).confidence_interval(0.95)
  assert got.low == pytest.approx(ci.low, abs=1e-12)
  assert got.high == pytest.approx(ci.high, abs=1e-12)
  assert got.mean == pytest.approx(np.mean(values - baseline), abs=1e-15)
  assert got.difference_detected == (not ci.low <= 0.0 <= ci.high)


def test_difference_detected_by_hand():
  # d = (0.01, 0.01, 0.01): sd 0, the interval is the point 0.01: a difference.
  assert statistics.paired_difference([0.71, 0.72, 0.73], [0.70, 0.71, 0.72]).difference_detected
  # d = (+0.01, -0.01): mean 0, the interval straddles 0.
  same = statistics.paired_difference([0.71, 0.70], [0.70, 0.71])
  assert not same.difference_detected and same.low < 0 < same.high
  # 2 values 0.70, 0.72: mean 0.71, sd sqrt(2) * 0.01, half width t(0.975, 1) * 0.01 = 0.127062...
  iv = statistics.mean_interval([0.70, 0.72])
  assert iv.half_width == pytest.approx(12.706204736 * 0.01, rel=1e-9)


@pytest.mark.parametrize(
  "call, match",
  [
    (lambda: statistics.mean_interval([0.5]), "`values` needs at least 2"),
    (lambda: statistics.mean_interval([0.5, float("nan")]), "`values` must be finite"),
    (lambda: statistics.mean_interval(["a", "b"]), "`values` must be a sequence"),
    (lambda: statistics.mean_interval([0.5, 0.6], confidence=1.0), "`confidence` must be in"),
    (lambda: statistics.paired_difference([0.5, 0.6], [0.5, 0.6, 0.7]), "pair up one to one"),
    (lambda: statistics.t_ppf(1.0, 3), "`q` must be a probability in"),
    (lambda: statistics.t_ppf(0.5, 0), "`df` must be an integer >= 1"),
    (lambda: statistics.t_cdf(1.0, 2.5), "`df` must be an integer"),
    (lambda: statistics.t_cdf(float("inf"), 2), "`t` must be a finite number"),
  ],
)
def test_bad_input_is_named(call, match):
  with pytest.raises(ValueError, match=match):
    call()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_paired_t_test_is_scipy_ttest_rel(seed):
  rng = np.random.default_rng(seed)
  base = rng.normal(0.7, 0.01, size=6)
  values = base + rng.normal(0.002 * seed, 0.003, size=6)
  interval, p = statistics.paired_t_test(values, base)
  reference = stats.ttest_rel(values, base)
  np.testing.assert_allclose(p, reference.pvalue, rtol=1e-9, atol=1e-12)
  ci = reference.confidence_interval(0.95)
  np.testing.assert_allclose([interval.low, interval.high], [ci.low, ci.high], rtol=1e-9)


def test_paired_t_test_without_spread():
  assert statistics.paired_t_test([0.5, 0.6], [0.5, 0.6])[1] == 1.0
  assert statistics.paired_t_test([0.6, 0.7], [0.5, 0.6])[1] == 0.0


def test_holm_hand_computed():
  # sorted: 0.01 (x4 = 0.04), 0.02 (x3 = 0.06), 0.03 (x2 = 0.06), 0.04 (x1 = 0.04 -> 0.06 by
  # monotonicity); back in the input order.
  adjusted = statistics.holm([0.03, 0.01, 0.04, 0.02])
  np.testing.assert_allclose(adjusted, [0.06, 0.04, 0.06, 0.06], rtol=1e-12)
  # capped at 1; ties keep the same adjusted value
  np.testing.assert_allclose(statistics.holm([0.5, 0.5, 0.9]), [1.0, 1.0, 1.0])
  assert statistics.holm([]) == []


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
  adjusted = statistics.holm(p)
  assert {i for i, a in enumerate(adjusted) if a < alpha} == rejected
  assert all(a >= raw for a, raw in zip(adjusted, p))


@pytest.mark.parametrize("bad", [[-0.1], [1.5], [float("nan")], ["x"]])
def test_holm_refuses_non_probabilities(bad):
  with pytest.raises(ValueError, match="p_values"):
    statistics.holm(bad)


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
  got = statistics.paired_t_power(noncentrality, n, alpha)
  np.testing.assert_allclose(got, _scipy_power(noncentrality, n, alpha), atol=2e-6)


@pytest.mark.parametrize("n,alpha", [(6, 0.05), (6, 0.05 / 29), (3, 0.05), (12, 0.05)])
def test_minimum_detectable_effect_reaches_the_power(n, alpha):
  sd = 0.004
  delta = statistics.minimum_detectable_effect(sd, n, alpha=alpha, power=0.8)
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
  delta = statistics.minimum_detectable_effect(sd, n)
  d = np.random.default_rng(0).normal(delta, sd, size=(200_000, n))
  t = d.mean(1) / (d.std(1, ddof=1) / math.sqrt(n))
  np.testing.assert_allclose(np.mean(np.abs(t) > stats.t.ppf(0.975, n - 1)), 0.8, atol=0.005)


def test_minimum_detectable_effect_checks_arguments():
  assert statistics.minimum_detectable_effect(0.0, 6) == 0.0
  with pytest.raises(ValueError, match="sd"):
    statistics.minimum_detectable_effect(-1.0, 6)
  with pytest.raises(ValueError, match="`n`"):
    statistics.minimum_detectable_effect(1.0, 1)
  with pytest.raises(ValueError, match="power"):
    statistics.minimum_detectable_effect(1.0, 6, alpha=0.05, power=0.01)
  with pytest.raises(ValueError, match="intervals_count"):
    statistics.paired_t_power(1.0, 6, intervals_count=7)


def test_converged_fraction():
  runs = [{"best_epoch": b, "epochs_run": e} for b, e in [(1, 9), (12, 20), (5, 5), (150, 150)]]
  assert statistics.converged_fraction(runs) == 0.5
  with pytest.raises(ValueError, match="records"):
    statistics.converged_fraction([])


def test_examples():  # experiments/ is outside the suite's doctest collection
  assert doctest.testmod(statistics).failed == 0
