"""Tie statistics of score lists, the basis of every tie-aware metric.

For item ``i`` of a list with scores ``s`` (padded items excluded by ``mask``) and a relevance
indicator ``r``, this module computes in O(n log n) with one sort:

    above_i     = |{j valid : s_j >  s_i}|          (items strictly ahead of i)
    tied_i      = |{j valid : s_j == s_i}|          (its tie group, i included)
    rel_above_i = sum_{j valid : s_j >  s_i} r_j
    rel_tied_i  = sum_{j valid : s_j == s_i} r_j

Under uniformly random tie-breaking item ``i`` lands uniformly on one of the positions
``above_i + 1, ..., above_i + tied_i`` (McSherry & Najork, "Computing Information Retrieval
Performance Measures Efficiently in the Presence of Tied Scores", ECIR 2008). The metrics in
:mod:`tfrank4class.metrics.functional` are the exact expectations over that tie-breaking
(average precision: :func:`tfrank4class.ranking.precision.expected_precision`);
:func:`log_binomial` gives the binomial ratios behind the hit probabilities of a tie group.

Written on ``keras.ops`` (TensorFlow, JAX and PyTorch backends); the batched ``searchsorted`` and
``lgamma`` come from :mod:`tfrank4class.backend`.
"""

from tfrank4class import backend
from tfrank4class.compat import ops


def tie_statistics(scores, relevant=None, mask=None):
  """Per-item tie statistics of ``scores`` ``[B, n]``.

  Args:
    scores: float ``[B, n]``, finite.
    relevant: optional float ``[B, n]`` weights summed into ``rel_above`` / ``rel_tied``.
    mask: optional bool ``[B, n]``; ``False`` marks padding, which is ignored entirely.

  Returns:
    A dict of float ``[B, n]`` tensors ``above``, ``tied`` (and ``rel_above``, ``rel_tied`` if
    ``relevant`` is given). Values at padded positions are meaningless.

  Example:
    >>> out = tie_statistics([[1.0, 3.0, 3.0, 2.0]], relevant=[[1.0, 1.0, 0.0, 1.0]])
    >>> [ops.convert_to_numpy(out[k]).tolist() for k in ("above", "tied", "rel_above")]
    [[[3.0, 0.0, 0.0, 2.0]], [[1.0, 2.0, 2.0, 1.0]], [[2.0, 0.0, 0.0, 1.0]]]
  """
  scores = ops.convert_to_tensor(scores)
  dtype = backend.dtype_name(scores)
  if mask is not None:
    # Padded items sink below every valid one and are never counted.
    scores = backend.where(mask, scores, ops.cast(-float("inf"), dtype))
  n = ops.shape(scores)[-1]
  if relevant is None:
    ascending = ops.sort(scores, axis=-1)
  else:
    # One sort serves both: the permutation orders the relevance, the gathered values are searched.
    order = backend.stable_argsort(scores, axis=-1)
    ascending = backend.take_along_axis(scores, order, axis=-1)
  # Positions in the ascending sort: items <= s_i and items < s_i.
  n_le = ops.cast(backend.searchsorted(ascending, scores, side="right"), "int32")
  n_lt = ops.cast(backend.searchsorted(ascending, scores, side="left"), "int32")
  above = ops.cast(n - n_le, dtype)
  tied = ops.cast(n_le - n_lt, dtype)
  out = {"above": above, "tied": tied}
  if relevant is not None:
    relevant = ops.cast(relevant, dtype)
    if mask is not None:
      relevant = backend.where(mask, relevant, ops.zeros_like(relevant))
    rel_sorted = backend.take_along_axis(relevant, order, axis=-1)
    # cum[k] = relevance of the k smallest items; prepend 0 so cum[0] = 0.
    cum = ops.concatenate(
      [ops.zeros_like(rel_sorted[:, :1]), backend.cumsum(rel_sorted, axis=-1)], axis=-1
    )
    total = cum[:, -1:]
    rel_le = backend.take_along_axis(cum, n_le, axis=-1)
    rel_lt = backend.take_along_axis(cum, n_lt, axis=-1)
    out["rel_above"] = total - rel_le
    out["rel_tied"] = rel_le - rel_lt
  return out


def log_binomial(n, k):
  """``log C(n, k) = lgamma(n + 1) - lgamma(k + 1) - lgamma(n - k + 1)`` for real ``0 <= k <= n``.

  The tie-aware metrics draw from tie groups: the probability that the first ``m`` places of a
  group of ``t`` items holding ``r`` relevant ones are all irrelevant is
  ``C(t - r, m) / C(t, m) = exp(log_binomial(t - r, m) - log_binomial(t, m))``.

  Example:
    >>> round(float(ops.exp(log_binomial(5.0, 2.0))), 6)
    10.0
  """
  n = ops.convert_to_tensor(n)
  k = ops.convert_to_tensor(k)
  return backend.lgamma(n + 1.0) - backend.lgamma(k + 1.0) - backend.lgamma(n - k + 1.0)
