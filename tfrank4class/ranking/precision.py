"""Average precision from ranks and from tie statistics: the one AP core of the package.

Two formulas, each written once here:

* **From ranks** (the RaMBO and SoDeep AP losses, whatever produced the ranks: the blackbox
  ranker, a sorter or exact ranks). With ``rk_i`` the rank of relevant item ``i`` among all valid
  items and ``rk+_i`` its rank among the relevant items (Rolinek et al., CVPR 2020, Sec. 4.6,
  Eq. 21-22; Engilberge et al., CVPR 2019, Eq. 5-6):

        AP = 1/|P| sum_{i in P} rk+_i / rk_i                      (average_precision_from_ranks)

* **From tie statistics** (the metrics and the retrieval evaluation: the exact expectation over
  uniformly random orderings of tied scores, McSherry & Najork, ECIR 2008). A relevant item ``i``
  with ``a`` items and ``R`` relevant items strictly ahead, in a tie group of ``t`` items of which
  ``r`` are relevant, sits uniformly on positions ``a + 1 .. a + t``; at position ``a + m`` the
  expected number of relevant items at or above it is ``R + 1 + (m - 1)(r - 1)/(t - 1)``, so with
  the positions counted up to a cut-off ``a + M`` (``M = t`` without one, ``M = clip(R_q - a, 0,
  t)`` for AP@R):

        E[prec_i 1[pos_i <= a + M]] = 1/t sum_{m=1}^{M} (c0 + (m - 1) c1) / (a + m)
                                    = (c0 - c1) h / t + c1 (M - a h) / t  (expected_precision)

  with ``c0 = R + 1``, ``c1 = (r - 1)/(t - 1)`` and ``h = H(a + M) - H(a)``
  (:func:`harmonic_difference`). He et al. (CVPR 2018, Eq. 9) write the ``M = t`` case as
  ``c1 + (c0 - (a + 1) c1) h / t``; the form above avoids its cancellation in float32. Without
  ties (``t = 1``) it is ``(R + 1)/(a + 1) = rk+_i / rk_i``, the formula from ranks.

The per-list AP is the mean of these over the relevant items; :mod:`tfrank4class.metrics.reference`
keeps an independent float64 implementation to test them against. Written on ``keras.ops``
(TensorFlow, JAX and PyTorch backends; ``digamma`` from :mod:`tfrank4class.backend`).
"""

from tfrank4class import backend
from tfrank4class.compat import ops

# H(a + t) - H(a) in float32: terms 1/q for q <= EXACT_TERMS are added one by one, the rest of the
# range comes from the asymptotic expansion of H, whose first dropped term is below 3e-8 relative.
EXACT_TERMS = 10


def harmonic_difference(a, t):
  """``H(a + t) - H(a) = sum_{q=a+1}^{a+t} 1/q`` for whole ``a, t >= 0``, float32 or float64.

  float32 (and any non-float64 input, computed in float32): terms with ``q <= 10`` are added
  exactly; the rest is ``H(y1) - H(y0)`` for ``y0 = max(a, 10)``, ``y1 = max(a + t, 10)``,
  ``d = y1 - y0``, ``u = d / (y0 y1)``, from the asymptotic expansion
  ``H(n) = ln n + gamma + 1/(2n) - 1/(12 n^2) + 1/(120 n^4) - ...`` written without cancellation:

      log1p(d / y0) - u/2 + u (1/y0 + 1/y1) / 12 - u (1/y0 + 1/y1)(1/y0^2 + 1/y1^2) / 120,

  relative error below ``5e-7`` (the dropped ``n^-6`` term is below ``3e-8`` relative for
  ``y0 >= 10``); a float32 ``digamma`` difference loses about ``a * 1.5e-7`` relative
  instead (measured: 1.5e-3 at ``a = 10,000``, ``t = 1``). float64: the difference
  ``digamma(a + t + 1) - digamma(a + 1)``, whose error (about ``1e-16 * ln a`` absolute) is far
  below float32 resolution.

  Example:
    >>> round(float(harmonic_difference(2.0, 2.0)), 6)  # 1/3 + 1/4
    0.583333
  """
  a = ops.convert_to_tensor(a)
  t = ops.convert_to_tensor(t)
  if backend.dtype_name(a) == "float64" and backend.dtype_name(t) == "float64":
    return backend.digamma(a + t + 1.0) - backend.digamma(a + 1.0)
  a = ops.cast(a, "float32")
  t = ops.cast(t, "float32")
  end = a + t
  q = ops.arange(1, EXACT_TERMS + 1, dtype="float32")
  inside = ops.logical_and(q > a[..., None], q <= end[..., None])
  exact = ops.sum(backend.where(inside, 1.0 / q, ops.zeros_like(q)), axis=-1)
  y0 = ops.maximum(a, float(EXACT_TERMS))
  y1 = ops.maximum(end, float(EXACT_TERMS))
  d = y1 - y0
  u = d / (y0 * y1)
  v0, v1 = 1.0 / y0, 1.0 / y1
  tail = (
    ops.log1p(d / y0) - u / 2.0 + u * (v0 + v1) / 12.0 - u * (v0 + v1) * (v0 * v0 + v1 * v1) / 120.0
  )
  return exact + tail


def expected_precision(above, tied, rel_above, rel_tied, cutoff=None):
  """Expected precision of a relevant item in a tie group, counted up to an optional cut-off.

      E[prec_i 1[pos_i <= a + M]] = (c0 - c1) h / t + c1 (M - a h) / t

  with ``a = above``, ``t = tied``, ``c0 = rel_above + 1``, ``c1 = (rel_tied - 1)/(t - 1)``
  (0 for ``t = 1``), ``M = t`` without a cut-off or ``clip(cutoff - a, 0, t)`` with one, and
  ``h = H(a + M) - H(a)`` (see the module docstring for the derivation). The arguments are the
  fields of :func:`tfrank4class.ranking.tie_statistics` (``above``, ``tied``, ``rel_above``,
  ``rel_tied``) at the item, all of one float dtype (float32: :func:`harmonic_difference`'s
  float32 form; float64: digamma).

  Args:
    above, tied, rel_above, rel_tied: float tensors of one shape.
    cutoff: ``None``, or the number of leading positions that count (broadcast against the
      others): AP@R of the retrieval metrics counts the first ``R`` positions.

  Example:
    >>> # relevant items at ranks 1 and 3 of 3, no ties: AP = (1/1 + 2/3) / 2
    >>> t = ops.convert_to_tensor
    >>> p = expected_precision(t([0.0, 2.0]), t([1.0, 1.0]), t([0.0, 1.0]), t([1.0, 1.0]))
    >>> round(float(ops.mean(p)), 6)
    0.833333
  """
  a, t = ops.convert_to_tensor(above), ops.convert_to_tensor(tied)
  c0 = rel_above + 1.0
  c1 = backend.divide_no_nan(rel_tied - 1.0, t - 1.0)
  if cutoff is None:
    h_over_t = harmonic_difference(a, t) / backend.maximum(t, 1.0)
    return (c0 - c1) * h_over_t + c1 * (1.0 - a * h_over_t)
  m = backend.minimum(backend.maximum(cutoff - a, 0.0), backend.maximum(t, 0.0))
  size = backend.maximum(t, 1.0)
  h_over_t = harmonic_difference(a, m) / size
  return (c0 - c1) * h_over_t + c1 * (m / size - a * h_over_t)


def average_precision_from_ranks(ranks, relevant_ranks, relevant):
  """Per-list average precision from ranks: ``AP = 1/|P| sum_{i in P} rk+_i / rk_i``.

  (Rolinek et al., CVPR 2020, Sec. 4.6, Eq. 21-22; Engilberge et al., CVPR 2019, Eq. 5-6.) The
  ranks may carry a gradient (blackbox ranks, a sorter's estimates); lists without a relevant
  item get 0.

  Args:
    ranks: float ``[..., n]``, ``rk_i``: the rank (1 = first) of each item among the valid items.
    relevant_ranks: float ``[..., n]``, ``rk+_i``: the rank of each relevant item among the
      relevant items (values at other items are ignored).
    relevant: boolean or 0/1 ``[..., n]``, the relevant items.

  Returns:
    AP per list, ``[...]``.

  Example:
    >>> ap = average_precision_from_ranks([[1.0, 3.0, 2.0]], [[1.0, 2.0, 1.0]],
    ...                                   [[True, True, False]])
    >>> round(float(ap[0]), 6)   # (1/1 + 2/3) / 2
    0.833333
  """
  ranks = ops.convert_to_tensor(ranks)
  dtype = backend.dtype_name(ranks)
  relevant = ops.cast(relevant, dtype)
  precision = backend.divide_no_nan(ops.cast(relevant_ranks, dtype), ranks)
  total = ops.sum(precision * relevant, axis=-1)
  return backend.divide_no_nan(total, ops.sum(relevant, axis=-1))
