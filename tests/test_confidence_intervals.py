"""benchmarks/confidence_intervals.py against scipy.stats."""

import doctest

import confidence_intervals as intervals
import numpy as np
import pytest
from scipy import stats


@pytest.mark.parametrize("df", list(range(1, 31)) + [47, 100, 250])
def test_t_cdf_matches_scipy(df):
  for t in (-40.0, -6.3, -2.0, -0.7, -1e-3, 0.0, 1e-3, 0.4, 1.0, 2.2, 3.5, 12.0, 80.0):
    assert intervals.t_cdf(t, df) == pytest.approx(stats.t.cdf(t, df), abs=1e-13), (t, df)


@pytest.mark.parametrize("df", list(range(1, 31)) + [47, 100])
def test_t_ppf_matches_scipy(df):
  for q in (1e-4, 0.005, 0.025, 0.05, 0.3, 0.5, 0.7, 0.9, 0.95, 0.975, 0.995, 0.9999):
    assert intervals.t_ppf(q, df) == pytest.approx(stats.t.ppf(q, df), rel=1e-10, abs=1e-12), (
      q,
      df,
    )


@pytest.mark.parametrize("n", [2, 3, 5, 8, 20])
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_mean_interval_matches_scipy(n, confidence):
  values = np.random.default_rng(n).normal(0.7, 0.01, size=n)
  got = intervals.mean_interval(values, confidence)
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
  got = intervals.paired_difference(values, baseline)
  ci = stats.ttest_rel(values, baseline).confidence_interval(0.95)
  assert got.low == pytest.approx(ci.low, abs=1e-12)
  assert got.high == pytest.approx(ci.high, abs=1e-12)
  assert got.mean == pytest.approx(np.mean(values - baseline), abs=1e-15)
  assert got.difference_detected == (not ci.low <= 0.0 <= ci.high)


def test_difference_detected_by_hand():
  # d = (0.01, 0.01, 0.01): sd 0, the interval is the point 0.01: a difference.
  assert intervals.paired_difference([0.71, 0.72, 0.73], [0.70, 0.71, 0.72]).difference_detected
  # d = (+0.01, -0.01): mean 0, the interval straddles 0.
  same = intervals.paired_difference([0.71, 0.70], [0.70, 0.71])
  assert not same.difference_detected and same.low < 0 < same.high
  # 2 values 0.70, 0.72: mean 0.71, sd sqrt(2) * 0.01, half width t(0.975, 1) * 0.01 = 0.127062...
  iv = intervals.mean_interval([0.70, 0.72])
  assert iv.half_width == pytest.approx(12.706204736 * 0.01, rel=1e-9)


@pytest.mark.parametrize(
  "call, match",
  [
    (lambda: intervals.mean_interval([0.5]), "`values` needs at least 2"),
    (lambda: intervals.mean_interval([0.5, float("nan")]), "`values` must be finite"),
    (lambda: intervals.mean_interval(["a", "b"]), "`values` must be a sequence"),
    (lambda: intervals.mean_interval([0.5, 0.6], confidence=1.0), "`confidence` must be in"),
    (lambda: intervals.paired_difference([0.5, 0.6], [0.5, 0.6, 0.7]), "pair up one to one"),
    (lambda: intervals.t_ppf(1.0, 3), "`q` must be a probability in"),
    (lambda: intervals.t_ppf(0.5, 0), "`df` must be an integer >= 1"),
    (lambda: intervals.t_cdf(1.0, 2.5), "`df` must be an integer"),
    (lambda: intervals.t_cdf(float("inf"), 2), "`t` must be a finite number"),
  ],
)
def test_bad_input_is_named(call, match):
  with pytest.raises(ValueError, match=match):
    call()


def test_docstring_examples_run():
  assert doctest.testmod(intervals).failed == 0
