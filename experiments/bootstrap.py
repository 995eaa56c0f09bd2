"""The third edition's comparisons: paired over seeds, and over seeds and test examples.

A comparison pairs a cell with its experiment's reference (softmax + dot, or softmax + concat in
the head-scale experiment) by seed and by test example: ``values[s, i]`` is an endpoint's value on
test example ``i`` of seed ``s`` (from the stored ranks, :mod:`experiments.true_ranks`).

* :func:`seed_interval`: the mean paired difference of the per-seed test means with a 95 %
  paired t interval (``experiments.statistics.paired_difference``).
* :func:`two_stage_bootstrap`: ``replicates`` draws of the seeds with replacement and then of the
  test examples with replacement (one draw of examples per replicate, the same for the cell and
  its reference and for every drawn seed); the mean difference of each replicate, its 95 %
  percentile interval, its standard error and the two-sided p-value
  ``2 min(P(d* <= 0), P(d* >= 0))``, at least ``1 / replicates``.
* :func:`minimum_detectable_effect`: ``(z_{1 - alpha / 2} + z_{power}) * se``, the difference a
  two-sided test at ``alpha`` detects with ``power``, from the bootstrap's standard error.
Holm's adjustment is ``experiments.statistics.holm``, used as it is.

Example:
  >>> cell = np.array([[1.0, 1.0, 0.0, 1.0]] * 3)
  >>> reference = np.array([[0.0, 1.0, 0.0, 1.0]] * 3)
  >>> result = two_stage_bootstrap(cell, reference, replicates=2000, seed=0)
  >>> result["difference"], 0.0 <= result["low"] <= result["high"] <= 1.0
  (0.25, True)
  >>> round(minimum_detectable_effect(0.01), 4)
  0.028
"""

import statistics as py_statistics

import numpy as np

from experiments import statistics
from tfrank4class import checks

CHUNK = 200


def _paired(values, reference):
  values = np.asarray(values, np.float64)
  reference = np.asarray(reference, np.float64)
  if values.ndim != 2 or values.shape != reference.shape or min(values.shape) < 1:
    raise ValueError(
      f"`values` and `reference` must be [seeds, examples] arrays of one shape, got "
      f"{values.shape} and {reference.shape}."
    )
  return values, reference


def seed_interval(values, reference, confidence=0.95):
  """``experiments.statistics.paired_difference`` of the per-seed means (rows)."""
  values, reference = _paired(values, reference)
  return statistics.paired_difference(
    values.mean(axis=1).tolist(), reference.mean(axis=1).tolist(), confidence
  )


def two_stage_bootstrap(values, reference, replicates=10_000, seed=0, confidence=0.95):
  """``{"difference", "low", "high", "se", "p_value", "replicates"}`` (see the module doc)."""
  values, reference = _paired(values, reference)
  replicates = checks.check_int("replicates", replicates, minimum=1)
  difference = values - reference
  seeds, examples = difference.shape
  rng = np.random.default_rng(seed)
  draws = []
  for start in range(0, replicates, CHUNK):
    n = min(CHUNK, replicates - start)
    seed_counts = rng.multinomial(seeds, [1.0 / seeds] * seeds, size=n)  # [n, S]
    drawn = rng.integers(0, examples, size=(n, examples))  # the test examples of each replicate
    per_seed = difference[:, drawn].sum(axis=-1).T  # [n, S]: each seed's sum over them
    draws.append((per_seed * seed_counts).sum(axis=1) / (seeds * examples))
  draws = np.concatenate(draws)
  tail = (1.0 - confidence) / 2.0
  p_value = 2.0 * min(np.mean(draws <= 0.0), np.mean(draws >= 0.0))
  return {
    "difference": float(difference.mean()),
    "low": float(np.quantile(draws, tail)),
    "high": float(np.quantile(draws, 1.0 - tail)),
    "se": float(np.std(draws, ddof=1)) if replicates > 1 else 0.0,
    "p_value": float(min(1.0, max(p_value, 1.0 / replicates))),
    "replicates": replicates,
  }


def minimum_detectable_effect(se, alpha=0.05, power=0.8):
  """The smallest true difference a two-sided normal test at ``alpha`` detects with ``power``,
  given the standard error ``se`` of the difference."""
  se = checks.check_float("se", se, minimum=0.0)
  normal = py_statistics.NormalDist()
  return (normal.inv_cdf(1.0 - alpha / 2.0) + normal.inv_cdf(power)) * se
