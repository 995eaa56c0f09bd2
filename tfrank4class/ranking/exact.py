"""Exact ranks of score lists.

    rank(s)_i = 1 + |{j : s_j > s_i}| + |{j < i : s_j == s_i}|

Rank 1 is the highest score. Ties are broken by position: among equal scores the one with the
lower index gets the better (smaller) rank, so the ranks of a list are always a permutation of
1..n and are deterministic. This is the ``rk`` of Rolinek et al. (CVPR 2020), Sec. 3.1, Eq. 1-2
(the paper leaves ties out, "proper rankings"; Eq. 2 alone would give tied items equal ranks).

Cost: one stable argsort (O(n log n), :func:`tfrank4class.backend.stable_argsort`) and an O(n)
inversion of the resulting permutation (:func:`tfrank4class.backend.invert_permutation`), so a
rank costs one sort plus a linear pass; the inversion does not need a second argsort.

Written on ``keras.ops``: it runs on Keras 3's TensorFlow (eager, ``tf.function``,
``jit_compile=True``; also under tf-keras), JAX (eager, ``jax.jit``) and PyTorch backends
(eager; ``torch.compile`` of :func:`rank` was checked once, torch 2.13 on CPU: the same ranks).

:func:`rank_within` ranks every item among the items of its own group (two groups given by a
boolean mask), again with one sort and a linear pass. :func:`sink` moves padded items below every
other item of their list, the one way the losses keep padding out of a ranking.
"""

from tfrank4class import backend, checks
from tfrank4class.compat import ops

_INT32_MAX = 2**31 - 1


def _is_float(x):
  return "float" in backend.dtype_name(x)


def _to_float(scores):
  """Checked scores (any real dtype, kept: integers sort exactly; NaN refused, +-inf allowed) and
  the float dtype of their ranks."""
  scores = checks.check_scores(
    "scores", scores, rank=None, min_length=0, finite="no_nan", cast=None
  )
  return scores, (backend.dtype_name(scores) if _is_float(scores) else "float32")


def move_axis_last(scores, axis):
  """Transposes ``axis`` of ``scores`` to the end; returns the tensor and the permutation.

  The permutation is ``None`` when ``axis`` already is the last one; it is its own inverse, so
  ``ops.transpose(result, perm)`` restores the original layout. Shared by the exact and the
  blackbox rank operators.

  Raises:
    ValueError: ``axis`` is not an integer in ``[-rank, rank)``.

  Example:
    >>> moved, perm = move_axis_last(ops.zeros([2, 3, 4]), 1)
    >>> tuple(moved.shape), perm
    ((2, 4, 3), [0, 2, 1])
  """
  rank_ = len(scores.shape)
  axis = checks.check_int("axis", axis)
  if not -rank_ <= axis < rank_:
    raise ValueError(f"`axis` must be in [{-rank_}, {rank_}), got {axis}.")
  axis %= rank_
  if axis == rank_ - 1:
    return scores, None
  perm = list(range(rank_))
  perm[axis], perm[-1] = perm[-1], perm[axis]
  return ops.transpose(scores, perm), perm


def sort_and_invert(flat):
  """For ``flat`` ``[B, n]``: the descending stable order and its inverse (both 0-based).

  ``inverse[b, i]`` is the 0-based rank of item ``i`` (ties broken by lower index first): one
  stable sort and an O(B n) permutation inversion, the whole cost of a rank.

  Example:
    >>> order, inverse = sort_and_invert(ops.convert_to_tensor([[0.1, 0.9, 0.5]]))
    >>> ops.convert_to_numpy(order).tolist(), ops.convert_to_numpy(inverse).tolist()
    ([[1, 2, 0]], [[2, 0, 1]])
  """
  order = backend.stable_argsort(flat, axis=-1, descending=True)
  size = None if None in flat.shape else flat.shape[0] * flat.shape[1]
  index_dtype = "int64" if (size is not None and size > _INT32_MAX) else "int32"
  order = ops.cast(order, index_dtype)
  return order, backend.invert_permutation(order)


def mark_nan_lists(ranks, flat):
  """``ranks`` ``[B, n]`` with every list whose scores ``flat`` hold a NaN set to NaN, when the
  scores are traced (``jax.jit``, XLA, ``tf.function``), where the NaN check of
  :func:`tfrank4class.checks.check_scores` cannot raise (a NaN has no place in an order: the
  ranks would be silently wrong). Eagerly the check has raised already; nothing is added.

  Example:
    >>> ranks = ops.convert_to_tensor([[1.0, 2.0]])
    >>> ops.convert_to_numpy(mark_nan_lists(ranks, ops.convert_to_tensor([[0.5, 0.1]])))
    array([[1., 2.]], dtype=float32)
  """
  if backend.is_concrete(flat) or not _is_float(flat):
    return ranks
  bad = ops.any(ops.isnan(flat), axis=-1, keepdims=True)
  return backend.where(bad, ops.cast(float("nan"), backend.dtype_name(ranks)), ranks)


def shape_of(t):
  """The static shape of ``t`` as a list if fully known (XLA needs it), else ``ops.shape(t)``.

  Example:
    >>> shape_of(ops.zeros([2, 3]))
    [2, 3]
  """
  return list(t.shape) if None not in t.shape else ops.shape(t)


def check_mask(mask, scores):
  """``mask`` as a boolean tensor of the shape of ``scores`` (``TypeError`` / ``ValueError``
  naming ``mask`` otherwise). Shared by :func:`rank_within` and the blackbox group ranker."""
  mask = ops.convert_to_tensor(mask)
  if backend.dtype_name(mask) != "bool":
    raise TypeError(f"`mask` must be a boolean tensor, got dtype {backend.dtype_name(mask)}.")
  if len(mask.shape) != len(scores.shape) or any(
    a is not None and b is not None and a != b for a, b in zip(mask.shape, scores.shape)
  ):
    raise ValueError(
      f"`mask` must have the shape of `scores` {tuple(scores.shape)}, got {tuple(mask.shape)}."
    )
  return mask


@backend.do_not_convert
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
    ValueError: ``scores`` holds a NaN (a NaN has no place in an order), eagerly on every
      backend (``InvalidArgumentError`` inside ``tf.function``). ``+-inf`` are ranked like any
      number. Where no check can raise (XLA, ``jax.jit``), a list with a NaN score gets NaN
      ranks (:func:`mark_nan_lists`). On PyTorch, also a backward pass through the ranks of
      scores that require a gradient (:data:`NO_GRADIENT`): the exact rank is piecewise
      constant, so it has none (``jax.grad`` gives zeros, TensorFlow's tape ``None``).

  Example:
    >>> ops.convert_to_numpy(rank([[0.1, 0.9, 0.5, 0.9]]))
    array([[4., 1., 3., 2.]], dtype=float32)
  """
  scores, out_dtype = _to_float(scores)
  scores, perm = move_axis_last(scores, axis)
  shape = shape_of(scores)
  flat = ops.reshape(scores, [-1, shape[-1]])
  _, inverse = sort_and_invert(flat)
  ranks = ops.reshape(mark_nan_lists(ops.cast(inverse + 1, out_dtype), flat), shape)
  if perm is not None:
    ranks = ops.transpose(ranks, perm)
  return _refuse_torch_gradient(ranks, scores)


#: The error of a PyTorch backward pass through :func:`rank` or :func:`rank_within`.
NO_GRADIENT = (
  "The exact rank (tfrank4class.ranking.rank, rank_within) has no gradient: it is piecewise "
  "constant in the scores. For ranks used as constants wrap them in keras.ops.stop_gradient; to "
  "learn through a ranking use a differentiable one (ranking.blackbox_rank, ranking.soft_rank, "
  "ranking.neuralsort, a sorter)."
)


def _refuse_torch_gradient(ranks, scores):
  """``ranks``; on PyTorch, where ``scores`` require a gradient, with a backward pass that raises
  :data:`NO_GRADIENT` (else autograd's own error names no operator: "element 0 of tensors does
  not require grad")."""
  if backend.BACKEND != "torch" or not scores.requires_grad:
    return ranks

  @backend.custom_gradient
  def refuse(unused_scores):
    def grad_fn(unused_upstream):
      raise ValueError(NO_GRADIENT)

    return ranks, grad_fn

  return refuse(scores)


@backend.do_not_convert
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
    TypeError: ``mask`` is not boolean. ValueError: its shape differs from that of ``scores``;
      ``scores`` holds a NaN, or a PyTorch backward pass reaches the ranks, as for :func:`rank`.

  Example:
    >>> ops.convert_to_numpy(rank_within([[0.1, 0.9, 0.5, 0.7]], [[True, False, True, False]]))
    array([[2., 1., 1., 2.]], dtype=float32)
  """
  scores, out_dtype = _to_float(scores)
  mask = check_mask(mask, scores)
  scores, perm = move_axis_last(scores, axis)
  if perm is not None:
    mask = ops.transpose(mask, perm)
  shape = shape_of(scores)
  flat = ops.reshape(scores, [-1, shape[-1]])
  flat_mask = ops.reshape(mask, [-1, shape[-1]])
  ranks = ops.reshape(mark_nan_lists(ranks_within(flat, flat_mask, out_dtype), flat), shape)
  if perm is not None:
    ranks = ops.transpose(ranks, perm)
  return _refuse_torch_gradient(ranks, scores)


def ranks_within(flat, flat_mask, dtype=None):
  """The ranks of :func:`rank_within` for checked ``[B, n]`` scores ``flat`` and boolean
  ``flat_mask``, as floats of ``dtype`` (default: that of ``flat``): one sort, two cumulative
  sums and a gather.

  Example:
    >>> t = ops.convert_to_tensor
    >>> r = ranks_within(t([[0.1, 0.9, 0.5]]), t([[True, False, True]]))
    >>> ops.convert_to_numpy(r)
    array([[2., 1., 1.]], dtype=float32)
  """
  dtype = dtype or backend.dtype_name(flat)
  order, inverse = sort_and_invert(flat)
  in_sorted = ops.cast(backend.take_along_axis(flat_mask, order, axis=-1), dtype)
  # Walking down the sorted list, an item's rank in its group is the count of its group so far.
  inside = backend.cumsum(in_sorted, axis=-1)
  outside = backend.cumsum(1.0 - in_sorted, axis=-1)
  sorted_ranks = backend.where(in_sorted > 0, inside, outside)
  return backend.take_along_axis(sorted_ranks, inverse, axis=-1)


def sink(scores, keep):
  """``scores`` with every entry where ``keep`` is False moved below all entries of its list.

  The new value ``lo - (hi - lo) - 1``, with ``lo`` / ``hi`` the smallest / largest kept score,
  is a constant for the gradient, so those items rank last (after every kept item) and pass no
  gradient; their own scores, however large, do not matter.

  Example:
    >>> sunk = sink([[0.5, 9.0, 0.2]], [[True, False, True]])  # 0.2 - (0.5 - 0.2) - 1 = -1.1
    >>> ops.convert_to_numpy(sunk)
    array([[ 0.5, -1.1,  0.2]], dtype=float32)
  """
  scores, keep = ops.convert_to_tensor(scores), ops.convert_to_tensor(keep)
  all_lo = ops.min(scores, axis=-1, keepdims=True)
  all_hi = ops.max(scores, axis=-1, keepdims=True)
  lo = ops.min(backend.where(keep, scores, all_hi), axis=-1, keepdims=True)
  hi = ops.max(backend.where(keep, scores, all_lo), axis=-1, keepdims=True)
  floor = ops.stop_gradient(lo - (hi - lo) - 1.0)
  return backend.where(keep, scores, floor)
