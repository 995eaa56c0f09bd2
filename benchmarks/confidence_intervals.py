"""Confidence intervals for a metric measured over repeated runs (seeds), in pure Python.

A configuration trained with ``n`` seeds gives ``n`` values ``x_1..x_n`` of a metric. Their mean
and its 95 % confidence interval from Student's t distribution with ``n - 1`` degrees of freedom
(Student, 1908) are

    mean = sum_i x_i / n,     sd = sqrt(sum_i (x_i - mean)^2 / (n - 1)),
    mean +- t_{(1 + confidence) / 2, n - 1} * sd / sqrt(n).

Two configurations trained with the same seeds are compared *paired* (the usual paired t
interval): the interval of the per-seed differences ``d_i = x_i - b_i`` as above. When that
interval contains 0 the data do not show a difference at that confidence ("no difference
detected"); it does not show that there is none.

The t quantile is computed here rather than taken from scipy, which the library does not depend
on: the degrees of freedom of a seed count are whole numbers, for which the t distribution
function has a finite closed form (Abramowitz & Stegun, 1964, 26.7.3-26.7.4), inverted by
bisection to double precision. ``tests/test_confidence_intervals.py`` checks both against
``scipy.stats``.

Example:
  >>> round(t_ppf(0.975, 4), 4)
  2.7764
  >>> interval = mean_interval([0.70, 0.72, 0.71])
  >>> round(interval.mean, 4), round(interval.half_width, 4)
  (0.71, 0.0248)
  >>> paired_difference([0.71, 0.73, 0.72], [0.70, 0.72, 0.71]).difference_detected
  True
"""

import collections
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
