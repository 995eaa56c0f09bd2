"""The statistics of the evidence grid: t intervals, paired t tests, Holm, power, convergence.

Pure Python (Student's t in closed form), so the grid's verdicts do not depend on scipy;
``tests/test_experiments_statistics.py`` checks every function against scipy or a hand-computed
case.

* :func:`t_cdf`, :func:`t_ppf`: Student's t for whole degrees of freedom. The distribution
  function has a finite closed form there (Abramowitz & Stegun, 1964, 26.7.3-26.7.4), inverted by
  bisection to double precision.
* :func:`mean_interval`: a metric over ``n`` seeds, ``mean +- t_{(1 + confidence) / 2, n - 1} *
  sd / sqrt(n)`` (Student, 1908), ``sd`` with ``n - 1`` in the denominator;
  :func:`paired_difference`: the same interval of the per-seed differences ``d_i = x_i - b_i``
  of two configurations trained with the same seeds. An interval of differences containing 0
  shows no difference at that confidence; it does not show that there is none.
* :func:`paired_t_test`: that interval and the two-sided p-value
  ``2 (1 - F_{n-1}(|mean(d)| / (sd(d) / sqrt(n))))`` (:func:`t_test_p_value`).
* :func:`holm`: Holm's (1979) step-down adjusted p-values. With ``p_(1) <= .. <= p_(m)``,
  ``p~_(i) = max_{j <= i} min(1, (m - j + 1) p_(j))``; rejecting where ``p~ < alpha`` controls the
  family-wise error rate at ``alpha``.
* :func:`paired_t_power` and :func:`minimum_detectable_effect`: the power of the two-sided paired
  t test at a true mean difference ``delta`` (noncentral t with ``n - 1`` degrees of freedom and
  noncentrality ``lambda = sqrt(n) delta / sigma``), and the ``delta`` that reaches a given power.
* :func:`converged_fraction`: the share of runs whose best epoch came before their last epoch.

Example:
  >>> round(t_ppf(0.975, 4), 4)
  2.7764
  >>> interval = mean_interval([0.70, 0.72, 0.71])
  >>> round(interval.mean, 4), round(interval.half_width, 4)
  (0.71, 0.0248)
  >>> paired_difference([0.71, 0.73, 0.72], [0.70, 0.72, 0.71]).difference_detected
  True
  >>> [round(p, 3) for p in holm([0.01, 0.04, 0.03])]
  [0.03, 0.06, 0.06]
  >>> round(minimum_detectable_effect(1.0, 6), 2)
  1.43
"""

import collections
import functools
import math

from tfrank4class import checks


def t_cdf(t, df):
  """The distribution function ``P(T <= t)`` of Student's t with ``df`` (a whole number) degrees.

  With ``theta = atan(t / sqrt(df))``, ``A = P(|T| <= |t|)`` is (Abramowitz & Stegun 26.7.3-4)

      df = 1:      A = 2 theta / pi
      df odd:      A = 2/pi * (theta + sin(theta) cos(theta) * sum_{k=0}^{(df-3)/2} a_k cos^{2k}),
                   a_0 = 1, a_k = a_{k-1} * 2k / (2k + 1)
      df even:     A = sin(theta) * sum_{k=0}^{(df-2)/2} b_k cos^{2k}(theta),
                   b_0 = 1, b_k = b_{k-1} * (2k - 1) / (2k)

  and ``P(T <= t) = (1 + sign(t) A) / 2``.

  Args:
    t: a finite real number.
    df: degrees of freedom, a whole number ``>= 1``.
  """
  df = checks.check_int("df", df, minimum=1)
  t = checks.check_float("t", t)
  theta = math.atan(abs(t) / math.sqrt(df))
  cos2 = math.cos(theta) ** 2
  if df % 2:
    series, term = 0.0, 1.0
    for k in range((df - 1) // 2):
      if k:
        term *= cos2 * (2 * k) / (2 * k + 1)
      series += term
    a = 2.0 / math.pi * (theta + math.sin(theta) * math.cos(theta) * series)
  else:
    series, term = 0.0, 1.0
    for k in range(df // 2):
      if k:
        term *= cos2 * (2 * k - 1) / (2 * k)
      series += term
    a = math.sin(theta) * series
  return 0.5 + math.copysign(0.5 * a, t) if t else 0.5


def t_ppf(q, df):
  """The quantile ``t`` with ``P(T <= t) = q`` of Student's t with ``df`` degrees of freedom.

  Found by bisection on :func:`t_cdf` (which increases in ``t``) to a relative width of 1e-15.

  Args:
    q: a probability in ``(0, 1)``.
    df: degrees of freedom, a whole number ``>= 1``.
  """
  df = checks.check_int("df", df, minimum=1)
  q = checks.check_float("q", q)
  if not 0.0 < q < 1.0:
    raise ValueError(f"`q` must be a probability in (0, 1), got {q!r}.")
  if q == 0.5:
    return 0.0
  upper = q > 0.5
  target = q if upper else 1.0 - q  # solve on the upper half, then mirror
  lo, hi = 0.0, 1.0
  while t_cdf(hi, df) < target:
    lo, hi = hi, hi * 2.0
  for _ in range(200):
    mid = 0.5 * (lo + hi)
    if t_cdf(mid, df) < target:
      lo = mid
    else:
      hi = mid
    if hi - lo <= 1e-15 * hi:
      break
  value = 0.5 * (lo + hi)
  return value if upper else -value


class Interval(
  collections.namedtuple("Interval", ["mean", "low", "high", "half_width", "sd", "n", "confidence"])
):
  """A mean with its t confidence interval ``[low, high] = mean -+ half_width`` over ``n`` values.

  ``sd`` is the sample standard deviation (``n - 1`` in the denominator).
  """

  __slots__ = ()

  @property
  def difference_detected(self):
    """Whether the interval excludes 0 (for an interval of differences: a difference is shown)."""
    return not self.low <= 0.0 <= self.high


def _values(name, values):
  try:
    values = [float(v) for v in values]
  except (TypeError, ValueError):
    raise ValueError(f"`{name}` must be a sequence of finite numbers, got {values!r}.") from None
  if len(values) < 2:
    raise ValueError(
      f"`{name}` needs at least 2 values for a t interval (n - 1 >= 1 degrees of "
      f"freedom), got {len(values)}: {values!r}."
    )
  if not all(math.isfinite(v) for v in values):
    raise ValueError(f"`{name}` must be finite numbers, got {values!r}.")
  return values


def _confidence(confidence):
  confidence = checks.check_float("confidence", confidence)
  if not 0.0 < confidence < 1.0:
    raise ValueError(f"`confidence` must be in (0, 1), got {confidence!r}.")
  return confidence


def mean_interval(values, confidence=0.95):
  """The mean of ``values`` with its t confidence interval (see the module docstring).

  Args:
    values: at least 2 finite numbers (one per seed).
    confidence: the coverage of the interval, in ``(0, 1)``.

  Returns:
    An :class:`Interval`.
  """
  values = _values("values", values)
  confidence = _confidence(confidence)
  n = len(values)
  mean = math.fsum(values) / n
  sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
  half = t_ppf(0.5 + confidence / 2.0, n - 1) * sd / math.sqrt(n)
  return Interval(mean, mean - half, mean + half, half, sd, n, confidence)


def paired_difference(values, baseline, confidence=0.95):
  """The paired t interval of ``values[i] - baseline[i]`` (the same seed ``i`` in both).

  Args:
    values: the metric of a configuration, one value per seed.
    baseline: the metric of the baseline configuration for the same seeds, in the same order.
    confidence: the coverage of the interval, in ``(0, 1)``.

  Returns:
    An :class:`Interval` of the differences; ``difference_detected`` is False where it
    includes 0.
  """
  values = _values("values", values)
  baseline = _values("baseline", baseline)
  if len(values) != len(baseline):
    raise ValueError(
      f"`values` and `baseline` must pair up one to one (the same seeds), got "
      f"{len(values)} and {len(baseline)} values."
    )
  return mean_interval([v - b for v, b in zip(values, baseline)], confidence)


def paired_t_test(values, baseline, confidence=0.95):
  """``(interval, p_value)`` of the paired differences ``values[i] - baseline[i]``.

  ``interval`` is :func:`paired_difference`; ``p_value`` is the
  two-sided paired t test's (1.0 when every difference is 0, 0.0 when they are all the same
  non-zero number).

  Example:
    >>> interval, p = paired_t_test([0.71, 0.73, 0.72], [0.70, 0.71, 0.71])
    >>> round(interval.mean, 4), round(p, 4)
    (0.0133, 0.0572)
  """
  interval = paired_difference(values, baseline, confidence)
  return interval, t_test_p_value(interval)


def t_test_p_value(interval):
  """The two-sided p-value of the one-sample t test of mean 0 behind ``interval`` (an
  ``Interval`` of a mean, e.g. of paired differences): 1.0 when every value is 0, 0.0 when
  they are all the same non-zero number.

  Example:
    >>> differences = paired_difference([0.71, 0.73, 0.72], [0.70, 0.71, 0.71])
    >>> round(t_test_p_value(differences), 4)
    0.0572
  """
  if interval.sd == 0.0:
    return 1.0 if interval.mean == 0.0 else 0.0
  t = abs(interval.mean) / (interval.sd / math.sqrt(interval.n))
  return min(1.0, 2.0 * (1.0 - t_cdf(t, interval.n - 1)))


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
  c = t_ppf(1.0 - alpha / 2.0, df)
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
