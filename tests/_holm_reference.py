"""Holm's step-down adjustment written out independently of ``benchmarks/grid_statistics.py``,
the reference the grid tests recompute the reports' and the README's verdicts with."""


def holm_adjusted(p_values):
  """Holm's adjusted p-values, in the order given: the i-th smallest p times (m - i), capped at
  1, made non-decreasing."""
  adjusted, running = [0.0] * len(p_values), 0.0
  for step, i in enumerate(sorted(range(len(p_values)), key=lambda i: p_values[i])):
    running = max(running, min(1.0, (len(p_values) - step) * p_values[i]))
    adjusted[i] = running
  return adjusted
