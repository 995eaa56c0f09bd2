"""Exact ranks of score lists.

    rank(s)_i = 1 + |{j : s_j > s_i}| + |{j < i : s_j == s_i}|

Rank 1 is the highest score. Ties are broken by position: among equal scores the one with the
lower index gets the better (smaller) rank, so the ranks of a list are always a permutation of
1..n and are deterministic. This is the ``rk`` of Rolinek et al. (CVPR 2020), Sec. 3.
"""
import tensorflow as tf

from tfrank4class import _validation


def rank(scores, axis=-1):
  """Exact float ranks of ``scores`` along ``axis``, 1 = highest, ties broken by lower index first.

  Args:
    scores: a real tensor of any rank >= 1.
    axis: the axis holding the lists; all other axes are batch axes.

  Returns:
    A float tensor of the same shape and float dtype (float32 for integer input).

  Example:
    >>> rank([[0.1, 0.9, 0.5, 0.9]]).numpy()
    array([[4., 1., 3., 2.]], dtype=float32)
  """
  scores = tf.convert_to_tensor(scores)
  if not (scores.dtype.is_floating or scores.dtype.is_integer):
    raise TypeError(f"`scores` must be a real tensor, got dtype {scores.dtype.name}.")
  if scores.shape.rank == 0:
    raise ValueError(f"`scores` must have rank >= 1, got a scalar.")
  out_dtype = scores.dtype if scores.dtype.is_floating else tf.float32
  rank_ = scores.shape.rank
  axis = _validation.check_int("axis", axis)
  if not -rank_ <= axis < rank_:
    raise ValueError(f"`axis` must be in [{-rank_}, {rank_}), got {axis}.")
  axis %= rank_
  perm = list(range(rank_))
  if axis != rank_ - 1:
    perm[axis], perm[-1] = perm[-1], perm[axis]
    scores = tf.transpose(scores, perm)
  shape = tf.shape(scores)
  flat = tf.reshape(scores, [-1, shape[-1]])
  order = tf.argsort(flat, axis=-1, direction="DESCENDING", stable=True)
  n = tf.shape(flat)[-1]
  positions = tf.broadcast_to(tf.range(1, n + 1, dtype=out_dtype), tf.shape(flat))
  # Invert the permutation in O(n): the item at sorted position p gets rank p + 1.
  batch_idx = tf.broadcast_to(tf.range(tf.shape(flat)[0])[:, None], tf.shape(flat))
  ranks = tf.scatter_nd(tf.stack([batch_idx, order], axis=-1), positions, tf.shape(flat))
  ranks = tf.reshape(ranks, shape)
  if axis != rank_ - 1:
    ranks = tf.transpose(ranks, perm)
  return ranks
