"""experiments/bootstrap.py: the two-stage bootstrap against hand-made cases and a naive
resampling, the paired seed interval, the minimum detectable effect against the normal
quantiles."""

import numpy as np
import pytest
from scipy import stats

from experiments import bootstrap


def test_a_constant_difference_has_a_degenerate_interval_and_the_smallest_p():
  reference = np.random.default_rng(0).random((6, 50))
  result = bootstrap.two_stage_bootstrap(reference + 0.1, reference, replicates=1000)
  assert result["difference"] == pytest.approx(0.1)
  assert result["low"] == pytest.approx(0.1) and result["high"] == pytest.approx(0.1)
  assert result["p_value"] == pytest.approx(1 / 1000) and result["se"] == pytest.approx(
    0, abs=1e-12
  )


def test_standard_error_matches_a_naive_two_stage_resampling():
  rng = np.random.default_rng(1)
  seed_effect = rng.normal(0, 0.02, size=(6, 1))
  difference = seed_effect + rng.normal(0, 0.3, size=(6, 400))
  reference = np.zeros_like(difference)
  result = bootstrap.two_stage_bootstrap(difference, reference, replicates=4000, seed=3)
  naive = []
  for _ in range(4000):
    s = rng.integers(0, 6, 6)
    i = rng.integers(0, 400, 400)
    naive.append(difference[s][:, i].mean())
  assert result["se"] == pytest.approx(np.std(naive, ddof=1), rel=0.1)
  assert result["low"] < result["difference"] < result["high"]


def test_no_difference_gives_a_large_p_value():
  rng = np.random.default_rng(2)
  a, b = rng.random((6, 300)), rng.random((6, 300))
  assert bootstrap.two_stage_bootstrap(a, a.copy(), replicates=500)["p_value"] == 1.0
  assert bootstrap.two_stage_bootstrap(a, b, replicates=2000)["p_value"] > 0.05


def test_seed_interval_is_the_paired_t_of_the_seed_means():
  rng = np.random.default_rng(4)
  a, b = rng.random((6, 20)), rng.random((6, 20))
  interval = bootstrap.seed_interval(a, b)
  d = a.mean(1) - b.mean(1)
  half = stats.t.ppf(0.975, 5) * d.std(ddof=1) / np.sqrt(6)
  assert interval.mean == pytest.approx(d.mean())
  assert interval.high - interval.mean == pytest.approx(half, rel=1e-4)


def test_minimum_detectable_effect_against_normal_quantiles():
  expected = (stats.norm.ppf(0.975) + stats.norm.ppf(0.8)) * 0.01
  assert bootstrap.minimum_detectable_effect(0.01) == pytest.approx(expected)
  expected = (stats.norm.ppf(1 - 0.05 / 12) + stats.norm.ppf(0.8)) * 0.01
  assert bootstrap.minimum_detectable_effect(0.01, alpha=0.05 / 6) == pytest.approx(expected)


def test_shapes_are_checked():
  with pytest.raises(ValueError, match="one shape"):
    bootstrap.two_stage_bootstrap(np.zeros((6, 3)), np.zeros((6, 4)))
