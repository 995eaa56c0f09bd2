"""The statistics of the evidence grid's second edition: paired t tests, Holm, power, convergence.

Pure Python on top of :mod:`tfrank4class.metrics.intervals` (Student's t in closed form), so the
grid's verdicts do not depend on scipy; ``tests/test_grid_statistics.py`` checks every function
against scipy or a hand-computed case.

* :func:`paired_t_test`: the paired t interval of ``d_s = x_s - b_s`` over seeds and the two-sided
  p-value ``2 (1 - F_{n-1}(|mean(d)| / (sd(d) / sqrt(n))))`` (:func:`t_test_p_value`).
* :func:`holm`: Holm's (1979) step-down adjusted p-values. With ``p_(1) <= .. <= p_(m)``,
  ``p~_(i) = max_{j <= i} min(1, (m - j + 1) p_(j))``; rejecting where ``p~ < alpha`` controls the
  family-wise error rate at ``alpha``.
* :func:`paired_t_power` and :func:`minimum_detectable_effect`: the power of the two-sided paired
  t test at a true mean difference ``delta`` (noncentral t with ``n - 1`` degrees of freedom and
  noncentrality ``lambda = sqrt(n) delta / sigma``), and the ``delta`` that reaches a given power.
* :func:`converged_fraction`: the share of runs whose best epoch came before their last epoch.

Example:
  >>> [round(p, 3) for p in holm([0.01, 0.04, 0.03])]
  [0.03, 0.06, 0.06]
  >>> round(minimum_detectable_effect(1.0, 6), 2)
  1.43
"""

import functools
import math

import confidence_intervals as intervals

from tfrank4class import checks


def paired_t_test(values, baseline, confidence=0.95):
  """``(interval, p_value)`` of the paired differences ``values[i] - baseline[i]``.

  ``interval`` is :func:`tfrank4class.metrics.intervals.paired_difference`; ``p_value`` is the
  two-sided paired t test's (1.0 when every difference is 0, 0.0 when they are all the same
  non-zero number).

  Example:
    >>> interval, p = paired_t_test([0.71, 0.73, 0.72], [0.70, 0.71, 0.71])
    >>> round(interval.mean, 4), round(p, 4)
    (0.0133, 0.0572)
  """
  interval = intervals.paired_difference(values, baseline, confidence)
  return interval, t_test_p_value(interval)


def t_test_p_value(interval):
  """The two-sided p-value of the one-sample t test of mean 0 behind ``interval`` (an
  ``Interval`` of a mean, e.g. of paired differences): 1.0 when every value is 0, 0.0 when
  they are all the same non-zero number.

  Example:
    >>> differences = intervals.paired_difference([0.71, 0.73, 0.72], [0.70, 0.71, 0.71])
    >>> round(t_test_p_value(differences), 4)
    0.0572
  """
  if interval.sd == 0.0:
    return 1.0 if interval.mean == 0.0 else 0.0
  t = abs(interval.mean) / (interval.sd / math.sqrt(interval.n))
  return min(1.0, 2.0 * (1.0 - intervals.t_cdf(t, interval.n - 1)))


def holm(p_values):
  """Holm's step-down adjusted p-values of ``p_values``, in their order (see the module doc).

  Args:
    p_values: probabilities in ``[0, 1]``, one per comparison of the family.

  Returns:
    A list of adjusted p-values, ``>=`` the raw ones and at most 1.
  """
  p_values = [checks.check_float(f"p_values[{i}]", p) for i, p in enumerate(p_values)]
  for i, p in enumerate(p_values):
    if not 0.0 <= p <= 1.0:
      raise ValueError(f"`p_values[{i}]` must be a probability in [0, 1], got {p!r}.")
  m = len(p_values)
  adjusted, running = [0.0] * m, 0.0
  for rank, i in enumerate(sorted(range(m), key=lambda k: p_values[k])):
    running = max(running, min(1.0, (m - rank) * p_values[i]))
    adjusted[i] = running
  return adjusted


def _normal_cdf(x):
  return 0.5 * math.erfc(-x / math.sqrt(2.0))


def paired_t_power(noncentrality, n, alpha=0.05, intervals_count=4000):
  """The power of the two-sided paired t test with ``n`` pairs at noncentrality ``lambda``.

  With ``T = (Z + lambda) / S``, ``Z`` standard normal and ``S = sqrt(V / df)``, ``V ~
  chi^2_df``, ``df = n - 1``, and ``c = t_{1 - alpha/2, df}``:

      power = P(|T| > c) = int_0^inf f_S(s) [Phi(lambda - c s) + Phi(-lambda - c s)] ds,
      f_S(s) = 2 (df/2)^(df/2) / Gamma(df/2) s^(df-1) exp(-df s^2 / 2),

  integrated by Simpson's rule on ``[0, 12]`` with ``intervals_count`` intervals.

  Args:
    noncentrality: ``lambda = sqrt(n) delta / sigma`` (a finite number).
    n: pairs (seeds), ``>= 2``.
    alpha: two-sided level, in ``(0, 1)``.
    intervals_count: an even number of Simpson intervals.

  Example:
    >>> round(paired_t_power(0.0, 6), 4)  # no effect: the level
    0.05
  """
  noncentrality = checks.check_float("noncentrality", noncentrality)
  n = checks.check_int("n", n, minimum=2)
  alpha = _check_probability("alpha", alpha)
  intervals_count = checks.check_int("intervals_count", intervals_count, minimum=2)
  if intervals_count % 2:
    raise ValueError(f"`intervals_count` must be even (Simpson's rule), got {intervals_count}.")
  df = n - 1
  c = intervals.t_ppf(1.0 - alpha / 2.0, df)
  log_norm = math.log(2.0) + df / 2.0 * math.log(df / 2.0) - math.lgamma(df / 2.0)
  upper = 12.0
  h = upper / intervals_count
  total = 0.0
  for k in range(intervals_count + 1):
    s = k * h
    if s == 0.0:
      density = math.exp(log_norm) if df == 1 else 0.0
    else:
      density = math.exp(log_norm + (df - 1) * math.log(s) - df * s * s / 2.0)
    value = density * (_normal_cdf(noncentrality - c * s) + _normal_cdf(-noncentrality - c * s))
    weight = 1 if k in (0, intervals_count) else (4 if k % 2 else 2)
    total += weight * value
  return min(1.0, total * h / 3.0)


def minimum_detectable_effect(sd, n, alpha=0.05, power=0.8):
  """The smallest true mean difference the two-sided paired t test detects with ``power``.

  Solves ``paired_t_power(sqrt(n) delta / sd, n, alpha) = power`` for ``delta`` by bisection
  (the noncentrality solved once per ``(n, alpha, power)``, then scaled by ``sd``).

  Args:
    sd: standard deviation of the paired differences (``>= 0``; 0 gives 0).
    n: pairs (seeds), ``>= 2``.
    alpha: two-sided level, in ``(0, 1)``.
    power: in ``(alpha, 1)``.
  """
  sd = checks.check_float("sd", sd, minimum=0.0)
  n = checks.check_int("n", n, minimum=2)
  alpha = _check_probability("alpha", alpha)
  power = _check_probability("power", power)
  if power <= alpha:
    raise ValueError(f"`power` must exceed `alpha` ({alpha!r}), got {power!r}.")
  return sd * _detectable_noncentrality(n, alpha, power) / math.sqrt(n)


@functools.cache
def _detectable_noncentrality(n, alpha, power):
  """The noncentrality at which :func:`paired_t_power` reaches ``power`` (bisection); it depends
  only on ``n``, ``alpha`` and ``power``, so a report's many cells share one solve."""
  lo, hi = 0.0, 1.0
  while paired_t_power(hi, n, alpha) < power:
    lo, hi = hi, 2.0 * hi
  for _ in range(60):
    mid = 0.5 * (lo + hi)
    if paired_t_power(mid, n, alpha) < power:
      lo = mid
    else:
      hi = mid
  return 0.5 * (lo + hi)


def converged_fraction(records):
  """The share of ``records`` whose ``best_epoch`` comes before their last epoch
  (``epochs_run``): runs stopped by the patience rule rather than by the epoch budget.

  Example:
    >>> runs = [{"best_epoch": 3, "epochs_run": 11}, {"best_epoch": 9, "epochs_run": 9}]
    >>> converged_fraction(runs)
    0.5
  """
  records = list(records)
  if not records:
    raise ValueError("`records` must hold at least one run, got none.")
  return sum(r["best_epoch"] < r["epochs_run"] for r in records) / len(records)


def _check_probability(name, value):
  value = checks.check_float(name, value)
  if not 0.0 < value < 1.0:
    raise ValueError(f"`{name}` must be in (0, 1), got {value!r}.")
  return value
