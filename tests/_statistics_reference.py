"""Statistics written out independently of ``experiments/statistics.py`` (Holm's step-down by
hand, paired t intervals from scipy), the reference the grid tests recompute the reports' and the
README's verdicts with."""

import numpy as np
from scipy import stats


def holm_adjusted(p_values):
  """Holm's adjusted p-values, in the order given: the i-th smallest p times (m - i), capped at
  1, made non-decreasing."""
  adjusted, running = [0.0] * len(p_values), 0.0
  for step, i in enumerate(sorted(range(len(p_values)), key=lambda i: p_values[i])):
    running = max(running, min(1.0, (len(p_values) - step) * p_values[i]))
    adjusted[i] = running
  return adjusted


def paired_interval(values, base):
  """``(mean, low, high)`` of ``values - base``: scipy's paired 95 % t interval (a point if the
  differences are constant)."""
  values, base = np.asarray(values, dtype=float), np.asarray(base, dtype=float)
  d = values - base
  if np.std(d) == 0:
    return (d.mean(), d.mean(), d.mean())
  ci = stats.ttest_rel(values, base).confidence_interval(0.95)
  return (d.mean(), ci.low, ci.high)
