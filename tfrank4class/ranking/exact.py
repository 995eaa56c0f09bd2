"""Exact ranks of score lists.

    rank(s)_i = 1 + |{j : s_j > s_i}| + |{j < i : s_j == s_i}|

Rank 1 is the highest score. Ties are broken by position: among equal scores the one with the
lower index gets the better (smaller) rank, so the ranks of a list are always a permutation of
1..n and are deterministic. This is the ``rk`` of Rolinek et al. (CVPR 2020), Sec. 3.1, Eq. 1-2
(the paper leaves ties out, "proper rankings"; Eq. 2 alone would give tied items equal ranks).

Cost: one stable ``tf.argsort`` (O(n log n)) and an O(n) inversion of the resulting permutation
(``tf.math.invert_permutation`` on the flattened batch), so a rank costs one sort plus a linear
pass; the inversion does not need a second argsort.

:func:`rank_within` ranks every item among the items of its own group (two groups given by a
boolean mask), again with one sort and a linear pass. :func:`sink` moves padded items below every
other item of their list, the one way the losses keep padding out of a ranking.
"""

import tensorflow as tf

from tfrank4class import checks, compat

_INT32_MAX = 2**31 - 1


def _to_float(scores):
  """Checked scores (any real dtype, kept: integers sort exactly; NaN refused, +-inf allowed) and
  the float dtype of their ranks."""
  scores = checks.check_scores(
    "scores", scores, rank=None, min_length=0, finite="no_nan", cast=None
  )
  return scores, (scores.dtype if scores.dtype.is_floating else tf.float32)


def move_axis_last(scores, axis):
  """Transposes ``axis`` of ``scores`` to the end; returns the tensor and the permutation.

  The permutation is ``None`` when ``axis`` already is the last one; it is its own inverse, so
  ``tf.transpose(result, perm)`` restores the original layout. Shared by the exact and the
  blackbox rank operators.

  Raises:
    ValueError: ``axis`` is not an integer in ``[-rank, rank)``.

  Example:
    >>> moved, perm = move_axis_last(tf.zeros([2, 3, 4]), 1)
    >>> moved.shape, perm
    (TensorShape([2, 4, 3]), [0, 2, 1])
  """
  rank_ = scores.shape.rank
  axis = checks.check_int("axis", axis)
  if not -rank_ <= axis < rank_:
    raise ValueError(f"`axis` must be in [{-rank_}, {rank_}), got {axis}.")
  axis %= rank_
  if axis == rank_ - 1:
    return scores, None
  perm = list(range(rank_))
  perm[axis], perm[-1] = perm[-1], perm[axis]
  return tf.transpose(scores, perm), perm


def sort_and_invert(flat):
  """For ``flat`` ``[B, n]``: the descending stable order and its inverse (both 0-based).

  ``inverse[b, i]`` is the 0-based rank of item ``i`` (ties broken by lower index first): one
  stable sort and an O(B n) permutation inversion, the whole cost of a rank.

  Example:
    >>> order, inverse = sort_and_invert(tf.constant([[0.1, 0.9, 0.5]]))
    >>> order.numpy().tolist(), inverse.numpy().tolist()
    ([[1, 2, 0]], [[2, 0, 1]])
  """
  order = tf.argsort(flat, axis=-1, direction="DESCENDING", stable=True)
  size = flat.shape.num_elements()
  index_dtype = tf.int64 if (size is not None and size > _INT32_MAX) else tf.int32
  order = tf.cast(order, index_dtype)
  shape = shape_of(flat)
  offsets = tf.range(shape[0], dtype=index_dtype)[:, None] * tf.cast(shape[1], index_dtype)
  # Invert all B permutations at once in O(B n): shift row b into [b n, (b + 1) n).
  inverse = tf.reshape(_invert_permutation(tf.reshape(order + offsets, [-1])), shape) - offsets
  return order, inverse


def _invert_permutation(perm):
  """Inverse of the 1-D permutation ``perm`` in O(n).

  ``tf.math.invert_permutation`` is the fast CPU kernel (``tf.scatter_nd`` is much slower outside
  XLA: docs/rambo.md, "Inversion under XLA"); under XLA its lowering
  fails when the permutation comes from a gathered tensor, so inside ``jit_compile`` we scatter
  instead (XLA fuses that well).
  """
  if compat.in_xla_context():
    return tf.scatter_nd(
      perm[:, None],
      tf.range(tf.size(perm, out_type=perm.dtype)),
      tf.shape(perm, out_type=perm.dtype),
    )
  return tf.math.invert_permutation(perm)


def shape_of(t):
  """The static shape of ``t`` as a list if fully known (XLA needs it), else ``tf.shape(t)``.

  Example:
    >>> shape_of(tf.zeros([2, 3]))
    [2, 3]
  """
  return t.shape.as_list() if t.shape.is_fully_defined() else tf.shape(t)


@tf.autograph.experimental.do_not_convert
def rank(scores, axis=-1):
  """Exact float ranks of ``scores`` along ``axis``, 1 = highest, ties broken by lower index first.

  ``rank(s)_i = 1 + |{j : s_j > s_i}| + |{j < i : s_j == s_i}|`` (the ``rk`` of Rolinek et al.,
  CVPR 2020, Sec. 3.1, Eq. 2, with ties broken by index).

  Args:
    scores: a real tensor of any rank >= 1 (integer input gives float32 ranks).
    axis: the axis holding the lists; all other axes are batch axes.

  Returns:
    A float tensor of the same shape and float dtype (float32 for integer input). Ranks are exact
    integers stored as floats (exact in float32 up to 2**24 items; use float64 beyond).

  Raises:
    InvalidArgumentError: ``scores`` holds a NaN (a NaN has no place in an order), eagerly and
      inside ``tf.function``. ``+-inf`` are ranked like any number. XLA drops the check: under
      ``jit_compile=True`` NaN scores get unspecified ranks.

  Example:
    >>> rank([[0.1, 0.9, 0.5, 0.9]]).numpy()
    array([[4., 1., 3., 2.]], dtype=float32)
  """
  scores, out_dtype = _to_float(scores)
  scores, perm = move_axis_last(scores, axis)
  shape = shape_of(scores)
  flat = tf.reshape(scores, [-1, shape[-1]])
  _, inverse = sort_and_invert(flat)
  ranks = tf.reshape(tf.cast(inverse + 1, out_dtype), shape)
  if perm is not None:
    ranks = tf.transpose(ranks, perm)
  return ranks


@tf.autograph.experimental.do_not_convert
def rank_within(scores, mask, axis=-1):
  """Exact ranks of each item among the items of its own group, ``mask`` True or False.

  ``rank_within(s, m)_i = 1 + |{j : m_j == m_i, s_j > s_i}| + |{j < i : m_j == m_i, s_j == s_i}|``

  With ``m`` marking the relevant items this is ``rk(y^+)`` of Rolinek et al. (CVPR 2020,
  Sec. 4.5, Eq. 17) for the relevant items (their rank among relevant items only); with ``m``
  marking valid items it is the rank among valid items, ignoring padding. Same tie rule as
  :func:`rank`.

  Args:
    scores: a real tensor of any rank >= 1.
    mask: a boolean tensor of the same shape.
    axis: the list axis.

  Returns:
    Float ranks of the same shape as ``scores``.

  Raises:
    InvalidArgumentError: ``scores`` holds a NaN, as for :func:`rank` (not under XLA).

  Example:
    >>> rank_within([[0.1, 0.9, 0.5, 0.7]], [[True, False, True, False]]).numpy()
    array([[2., 1., 1., 2.]], dtype=float32)
  """
  scores, out_dtype = _to_float(scores)
  mask = tf.convert_to_tensor(mask)
  if mask.dtype != tf.bool:
    raise TypeError(f"`mask` must be a boolean tensor, got dtype {mask.dtype.name}.")
  scores.shape.assert_is_compatible_with(mask.shape)
  scores, perm = move_axis_last(scores, axis)
  if perm is not None:
    mask = tf.transpose(mask, perm)
  shape = shape_of(scores)
  flat = tf.reshape(scores, [-1, shape[-1]])
  flat_mask = tf.reshape(mask, [-1, shape[-1]])
  order, inverse = sort_and_invert(flat)
  in_sorted = tf.cast(tf.gather(flat_mask, order, batch_dims=1), out_dtype)
  # Walking down the sorted list, an item's rank in its group is the count of its group so far.
  inside = tf.cumsum(in_sorted, axis=-1)
  outside = tf.cumsum(1.0 - in_sorted, axis=-1)
  sorted_ranks = tf.where(in_sorted > 0, inside, outside)
  ranks = tf.reshape(tf.gather(sorted_ranks, inverse, batch_dims=1), shape)
  if perm is not None:
    ranks = tf.transpose(ranks, perm)
  return ranks


def sink(scores, keep):
  """``scores`` with every entry where ``keep`` is False moved below all entries of its list.

  The new value ``lo - (hi - lo) - 1``, with ``lo`` / ``hi`` the smallest / largest kept score,
  is a constant for the gradient, so those items rank last (after every kept item) and pass no
  gradient; their own scores, however large, do not matter.

  Example:
    >>> sink([[0.5, 9.0, 0.2]], [[True, False, True]]).numpy()   # 0.2 - (0.5 - 0.2) - 1 = -1.1
    array([[ 0.5, -1.1,  0.2]], dtype=float32)
  """
  all_lo = tf.reduce_min(scores, axis=-1, keepdims=True)
  all_hi = tf.reduce_max(scores, axis=-1, keepdims=True)
  lo = tf.reduce_min(tf.where(keep, scores, tf.broadcast_to(all_hi, tf.shape(scores))), -1, True)
  hi = tf.reduce_max(tf.where(keep, scores, tf.broadcast_to(all_lo, tf.shape(scores))), -1, True)
  floor = tf.stop_gradient(lo - (hi - lo) - 1.0)
  return tf.where(keep, scores, tf.broadcast_to(floor, tf.shape(scores)))
