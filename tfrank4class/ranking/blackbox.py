"""The blackbox differentiable ranker of RaMBO (Rolinek et al., CVPR 2020).

Ranking is a combinatorial solver with a linear objective, ``rk(y) = argmin_pi <y, pi>`` over
permutations ``pi`` of ``1..n`` (rank 1 = highest score; Sec. 4.1, Proposition 1, Eq. 11). Its
true gradient is zero almost everywhere, so RaMBO uses the blackbox differentiation of Vlastelica
et al. (ICLR 2020; Sec. 3.2 of the RaMBO paper):

    forward:   r  = rk(y)                                        (one exact sort)
    backward:  y' = y + lambda * dL/dr                            (Algorithm 1, Sec. 4.1)
               dL/dy = -(rk(y) - rk(y')) / lambda                 (Eq. 10; one more exact sort)

``lambda > 0`` trades the informativeness of the gradient (large ``lambda``: more items swap
places) against its faithfulness (small ``lambda``: closer to the piecewise-constant truth).
The output ``r`` holds the integer ranks ``1..n`` as floats. By default ``lambda`` multiplies the
gradient with respect to these integer ranks; with ``normalized=True`` it is meant for ranks
normalised by the list length (``rk / n``, the convention of the paper's code and of its
hyper-parameters), which amounts to using ``lambda * n`` with the same ``n`` in both directions.

Written on ``keras.ops`` with :func:`tfrank4class.backend.custom_gradient`: it runs on Keras 3's
TensorFlow (eager, ``tf.function``, ``jit_compile=True``; also under tf-keras), JAX (eager,
``jax.jit``) and PyTorch backends. The check that the scores are finite raises eagerly (and inside
``tf.function``); where no check can run (XLA, ``jax.jit``) it is dropped.

:func:`blackbox_rank_within` is the same construction for the rank of each item within its own
group, e.g. among the valid items of a padded list (how the RaMBO losses rank), and
:func:`margin_shift` is the margin of Sec. 4.4 (Eq. 14-15). The rank of a relevant item among the
relevant items only, ``rk(y^+)`` of Sec. 4.5 (Eq. 17, 21), is also a group rank, but RaMBO
differentiates only ``rk(y)`` and treats ``rk(y^+)`` as a constant (one ranker in Algorithm 1, as
in the authors' code): the losses take it from :func:`tfrank4class.ranking.rank_within`, with no
gradient. Where one item per list carries the incoming gradient (class ids), the same values and
gradients come without a sort: :func:`blackbox_item_rank` (one item per row, counts) and
:func:`blackbox_marked_rank` (one item per row of a ``[B, C]`` matrix read as one list, each
entry counted against the ``B`` marked scores).
"""

from tfrank4class import backend, checks
from tfrank4class.compat import keras, ops
from tfrank4class.ranking import exact, marked_counts
from tfrank4class.registry import export


def _check_lambda(lambda_):
  return checks.check_float("lambda_", lambda_, minimum=0.0, strict=True)


def _effective_lambda(lambda_, normalized, length, dtype):
  if not normalized:
    return ops.cast(lambda_, dtype)
  return ops.cast(lambda_, dtype) * ops.cast(length, dtype)


def _as_scores(scores, finite=False):
  """Checked real scores of any rank >= 1, integers as float32, floats kept (and, with
  ``finite``, an assertion that they hold no NaN or +-inf)."""
  return checks.check_scores(
    "scores", scores, rank=None, min_length=0, finite=finite, cast="to_float"
  )


@backend.do_not_convert
def blackbox_rank(scores, lambda_, axis=-1, normalized=False):
  """Exact ranks with the RaMBO blackbox gradient (Rolinek et al., CVPR 2020, Eq. 10, Alg. 1).

  Forward: ``r = rk(y)``, exact ranks (1 = highest, ties broken by lower index first, see
  :func:`tfrank4class.ranking.rank`). Backward, for the incoming gradient ``g = dL/dr``:

      dL/dy = -(rk(y) - rk(y + lambda_ * g)) / lambda_

  Both passes cost one stable sort plus an O(n) permutation inversion, batched over every axis
  but ``axis``; the backward pass reuses the forward ranks. Both passes use the tie rule of
  :func:`tfrank4class.ranking.rank` (equal scores: lower index first).

  Args:
    scores: real tensor of any rank >= 1; must be finite (the error of
      :func:`tfrank4class.checks.check_scores` otherwise).
    lambda_: the interpolation strength, a Python number ``> 0``.
    axis: the axis holding the lists.
    normalized: if True, ``lambda_`` is meant for ranks normalised by the list length ``n``
      (``rk / n``, the convention of the paper's code): the backward pass then uses
      ``lambda_ * n`` in place of ``lambda_``, which is exactly the blackbox gradient of ``rk / n``
      rescaled back to ``rk``. The forward output stays ``rk``.

  Returns:
    Float ranks of the same shape as ``scores``.

  Raises:
    ValueError: ``lambda_ <= 0`` or not finite; a bad ``axis``.

  Example (forward ranks; for ``L = r[0, 1]``, the rank of item 1, ``g = (0, 1, 0)`` and the
  backward pass is Eq. 10 with ``rk(y + g)``, which is what the gradient of ``L`` returns):
    >>> from tfrank4class.ranking import rank
    >>> y = [[0.3, 0.1, 0.2]]
    >>> ops.convert_to_numpy(blackbox_rank(y, lambda_=1.0))
    array([[1., 3., 2.]], dtype=float32)
    >>> ops.convert_to_numpy(-(rank(y) - rank([[0.3, 1.1, 0.2]])) / 1.0)   # dL/dy
    array([[ 1., -2.,  1.]], dtype=float32)
  """
  lambda_ = _check_lambda(lambda_)
  scores = _as_scores(scores, finite=True)

  def ranker(flat, unused_mask):
    return ops.cast(exact.sort_and_invert(flat)[1] + 1, backend.dtype_name(flat))

  return _blackbox(scores, None, ranker, lambda_, axis, normalized)


def _blackbox(scores, mask, ranker, lambda_, axis, normalized):
  """``ranker`` (``[B, n]`` scores and mask -> float ranks) applied along ``axis``, with the
  blackbox gradient ``-(ranker(y) - ranker(y + lam g)) / lam`` (Eq. 10, Algorithm 1).

  ``mask`` (or, when ``None``, a placeholder) is an input of the custom gradient, not a value it
  closes over: under ``jax.grad`` of a ``jax.jit`` function a closed-over traced value fails.
  """
  moved, perm = exact.move_axis_last(scores, axis)  # also validates axis
  shape = exact.shape_of(moved)

  def to_flat(t):
    if perm is not None:
      t = ops.transpose(t, perm)
    return ops.reshape(t, [-1, shape[-1]])

  def from_flat(t):
    t = ops.reshape(t, shape)
    return ops.transpose(t, perm) if perm is not None else t

  @backend.custom_gradient
  def _op(y, m):
    dtype = backend.dtype_name(y)
    flat, flat_mask = to_flat(y), to_flat(m)
    ranks = ranker(flat, flat_mask)

    def grad(g):
      lam = _effective_lambda(lambda_, normalized, shape[-1], dtype)
      perturbed = ranker(flat + lam * to_flat(ops.cast(g, dtype)), flat_mask)
      # -(rk(y) - rk(y')) / lambda; both ranks are whole numbers, their difference exact.
      return from_flat((perturbed - ranks) / lam), None

    return from_flat(exact.mark_nan_lists(ranks, flat)), grad

  return _op(scores, ops.ones_like(scores, dtype="bool") if mask is None else mask)


@backend.do_not_convert
def blackbox_rank_within(scores, mask, lambda_, axis=-1, normalized=False):
  """Ranks within groups (``mask`` True / False) with the RaMBO blackbox gradient.

  Forward: ``r = rank_within(y, m)`` (see :func:`tfrank4class.ranking.rank_within`); with ``m``
  the valid items of a padded list this is ``rk(y)`` of the valid items, padding ignored (how the
  RaMBO losses use it; their ``rk(y^+)`` is a constant, see the module docstring). The group-wise
  ranking is itself ``argmin_pi <y, pi>`` over group-wise permutations (Eq. 11 per group), so the
  same blackbox gradient (Eq. 10, Algorithm 1) applies:

      dL/dy = -(rank_within(y, m) - rank_within(y + lambda_ * g, m)) / lambda_

  ``mask`` receives no gradient; ``normalized`` is as in :func:`blackbox_rank` (``n`` is the
  full list length, both groups together).

  Example:
    >>> r = blackbox_rank_within([[0.1, 0.9, 0.5]], [[True, False, True]], lambda_=1.0)
    >>> ops.convert_to_numpy(r)
    array([[2., 1., 1.]], dtype=float32)
  """
  lambda_ = _check_lambda(lambda_)
  scores = _as_scores(scores, finite=True)
  mask = exact.check_mask(mask, scores)
  return _blackbox(scores, mask, exact.ranks_within, lambda_, axis, normalized)


def _ahead_of_item(scores, item_score, positions, item, others):
  """Bool ``[B, n]``: item ``j`` is in ``others`` and ranks above an item of index ``item``
  (int32 ``[B, 1]``) and score ``item_score`` ``[B, 1]`` under the tie rule of
  :func:`tfrank4class.ranking.rank`: ``s_j > s_item``, or ``s_j == s_item`` and ``j < item``."""
  ahead = backend.where(positions < item, scores >= item_score, scores > item_score)
  return ops.logical_and(ahead, others)


@backend.do_not_convert
def blackbox_item_rank(scores, item, mask, lambda_, normalized=False):
  """The rank of one item per list among the items of ``mask``, with the RaMBO blackbox gradient.

  Forward, for ``[B, n]`` scores ``y`` and the item ``t = item[b]`` of each list:

      r_t = 1 + |{j in m : y_j > y_t}| + |{j in m, j < t : y_j == y_t}|

  the rank :func:`blackbox_rank_within` gives ``t`` among the items of ``mask`` (``t`` counted
  among them whether or not ``mask`` holds it; same tie rule). Backward, for the incoming
  gradient ``g = dL/dr_t`` ``[B]``: the blackbox gradient of Eq. 10 (Algorithm 1) of the ranks of
  the group with ``dL/dr_j = 0`` for every other item, ``dL/dy = -(rk(y) - rk(y')) / lambda_``
  with ``y'`` equal to ``y`` but ``y'_t = y_t + lambda_ g``. Only ``t`` moves, so only the items
  it passes change rank, by one each: item ``j != t`` of the group gets
  ``([j above t in y] - [j above t in y']) / lambda_`` and ``t`` minus their sum. Both passes are
  counts, ``O(n)`` per list, no sort (:func:`blackbox_rank_within` sorts twice), with the same
  values and gradients: what a loss on the rank of one true class per list needs.

  Args:
    scores: real ``[B, n]``; must be finite (the error of
      :func:`tfrank4class.checks.check_scores` otherwise).
    item: integer ``[B]``, the item of each list, in ``[0, n)``.
    mask: boolean ``[B, n]``, the group (e.g. the valid, non-padded items).
    lambda_: the interpolation strength, a Python number ``> 0``.
    normalized: as in :func:`blackbox_rank` (``lambda_ * n`` with ``n`` the row length).

  Returns float ranks ``[B]`` in the scores' float dtype (float32 for integer scores).

  Example:
    >>> ops.convert_to_numpy(blackbox_item_rank([[0.1, 0.9, 0.5]], [2], [[True] * 3], 1.0))
    array([2.], dtype=float32)
  """
  lambda_ = _check_lambda(lambda_)
  scores = _as_scores(scores, finite=True)
  if len(scores.shape) != 2:
    raise ValueError(f"`scores` must have shape [B, n], got {tuple(scores.shape)}.")
  mask = exact.check_mask(mask, scores)
  length = exact.shape_of(scores)[-1]

  @backend.custom_gradient
  def _op(y, t, group):
    dtype = backend.dtype_name(y)
    t = ops.cast(t, "int32")[:, None]
    positions = ops.arange(ops.shape(y)[-1], dtype="int32")[None, :]
    is_t = positions == t
    others = ops.logical_and(group, ops.logical_not(is_t))
    y_t = backend.take_along_axis(y, t, axis=-1)
    ahead = _ahead_of_item(y, y_t, positions, t, others)
    ranks = 1.0 + ops.sum(ops.cast(ahead, dtype), axis=-1)

    def grad(g):
      lam = _effective_lambda(lambda_, normalized, length, dtype)
      moved = _ahead_of_item(y, y_t + lam * ops.cast(g, dtype)[:, None], positions, t, others)
      # rk(y')_j - rk(y)_j for j != t; t gains what the others lose. Whole numbers: exact.
      change = ops.cast(ahead, dtype) - ops.cast(moved, dtype)
      own = -ops.sum(change, axis=-1, keepdims=True)
      return backend.where(is_t, own, change) / lam, None, None

    return exact.mark_nan_lists(ranks[:, None], y)[:, 0], grad

  return _op(scores, ops.convert_to_tensor(item), mask)


def _marks(scores, ids, valid):
  """``(marked, marked_valid)`` ``[B]``: each row's marked score (``+inf`` where the mark is not
  valid, so that it is below no entry) and whether it is valid."""
  marked = backend.take_along_axis(scores, ids[:, None], axis=-1)[:, 0]
  marked_valid = backend.take_along_axis(valid, ids[:, None], axis=-1)[:, 0]
  return backend.where(marked_valid, marked, ops.full_like(marked, float("inf"))), marked_valid


def _above_marks(below, ids, valid, marked_valid):
  """Int32 ``[B]``: the valid entries ranked above each row's marked entry (0 for a row whose mark
  is not valid), from :func:`marked_counts.marked_below` of every entry (``below``). A histogram
  of ``below`` over the valid entries: an entry is above mark ``i`` exactly when more marks are
  below it than below ``i``."""
  batch = exact.shape_of(below)[0]
  counts = backend.segment_sum(
    ops.reshape(ops.cast(valid, "int32"), [-1]), ops.reshape(below, [-1]), batch + 1
  )
  above_count = ops.flip(ops.cumsum(ops.flip(counts, 0), axis=0), 0)  # [p]: entries with > p - 1
  mark_below = backend.take_along_axis(below, ids[:, None], axis=-1)[:, 0]
  above = ops.take(ops.concatenate([above_count, ops.zeros_like(counts[:1])]), mark_below + 1)
  return backend.where(marked_valid, above, ops.zeros_like(above))


def _ranks_of_marked(scores, ids, valid):
  """Int32 ``[B]``: the valid entries ranked above each row's marked entry (:func:`_above_marks`,
  the marked entries that are not valid left out)."""
  marked, marked_valid = _marks(scores, ids, valid)
  return _above_marks(marked_counts.marked_below(scores, marked, ids), ids, valid, marked_valid)


def _rank_change(scores, ids, valid, above, step):
  """Float ``[B, C]``: ``rk(y') - rk(y)`` of every entry, for ``y'`` the scores with each row's
  marked entry moved by ``step`` ``[B]``, from :func:`_ranks_of_marked`'s ``above`` of ``y``. An
  unmarked valid entry drops by the marks that pass it (its count of marks below it in ``y`` less
  in ``y'``, both from :func:`marked_counts.marked_below_moved`), a mark by the entries it
  passes (``above' - above``, 0 for a mark that is not valid: both its counts are). Whole
  numbers: exact."""
  dtype = backend.dtype_name(scores)
  marked, marked_valid = _marks(scores, ids, valid)
  is_mark = ops.arange(exact.shape_of(scores)[1], dtype="int32")[None, :] == ids[:, None]
  moved = backend.where(is_mark, scores + step[:, None], scores)
  # Read back from y': the marks must equal their moved entries, which a recomputed
  # `marked + step` was not always under XLA (the search's tie test missed, at B = 40).
  moved_marks = _marks(moved, ids, valid)[0]
  below, moved_below = marked_counts.marked_below_moved(scores, marked, moved, moved_marks, ids)
  own = ops.cast(_above_marks(moved_below, ids, valid, marked_valid) - above, dtype)
  change = backend.where(valid, ops.cast(below - moved_below, dtype), ops.zeros_like(scores))
  return backend.where(is_mark, own[:, None], change)


# For B <= 32 marks known when traced, both passes in an XLA cluster each on TensorFlow's graphs
# (backend.xla_cluster), where XLA fuses the comparisons; with more, TensorFlow's own kernels run
# the search (XLA's plan of it took 262 MB at B = 256, C = 1,000).
_CLUSTERED = (backend.xla_cluster(_ranks_of_marked), backend.xla_cluster(_rank_change))


@backend.do_not_convert
def blackbox_marked_rank(scores, ids, valid, lambda_, normalized=False):
  """Ranks of one marked entry per row among ALL valid entries of ``[B, C]`` scores read as one
  list (row-major), with the RaMBO blackbox gradient (Eq. 10, Algorithm 1).

  The rank :func:`blackbox_rank_within` gives entry ``(b, ids[b])`` of the flattened ``[1, B C]``
  scores among the valid entries, and the same gradient when ``dL/dr`` is zero at every entry but
  the marked ones: then only the marks move (``y'_i = y_i + lambda_ g_i``), an unmarked entry's
  rank changes by the marks that pass it and a mark's by the entries it passes, all counted by
  :mod:`tfrank4class.ranking.marked_counts` (forward: the marks below each entry of ``y``;
  backward: below each entry of ``y`` and of ``y'``, in one pass) and a histogram of the counts;
  no sort of the ``B C`` scores. Compiled by XLA (JAX, ``jit_compile=True``, and, for a batch of
  ``B <= 32`` known when traced, on TensorFlow's graphs as a cluster of its own:
  :func:`tfrank4class.backend.xla_cluster`) with ``B <= 32``, each pass is one fused loop of
  ``O(B^2 C)`` comparisons; else (eagerly, on PyTorch, larger batches) binary searches per entry,
  ``O(B C log B)`` (one forward, two backward). The forward keeps only the ``[B]`` counts.

  Args:
    scores: real ``[B, C]``; must be finite.
    ids: integer ``[B]`` in ``[0, C)``, the marked entry of each row.
    valid: boolean ``[B, C]``; a row whose mark is not valid has none (rank 1, no gradient).
    lambda_: the interpolation strength, a Python number ``> 0``.
    normalized: as in :func:`blackbox_rank`, with ``n = B C``.

  Returns float ranks ``[B]`` in the scores' float dtype.

  Example:
    >>> r = blackbox_marked_rank([[0.9, 0.2], [0.4, 0.6]], [0, 1], [[True] * 2] * 2, lambda_=1.0)
    >>> ops.convert_to_numpy(r)
    array([1., 2.], dtype=float32)
  """
  lambda_ = _check_lambda(lambda_)
  scores = _as_scores(scores, finite=True)
  if len(scores.shape) != 2:
    raise ValueError(f"`scores` must have shape [B, C], got {tuple(scores.shape)}.")
  valid = exact.check_mask(valid, scores)
  shape = exact.shape_of(scores)

  @backend.custom_gradient
  def _op(y, t, group):
    dtype = backend.dtype_name(y)
    t = ops.cast(t, "int32")
    clustered = isinstance(shape[0], int) and shape[0] <= marked_counts.MOST_MARKS_COMPARED
    count, rank_change = _CLUSTERED if clustered else (_ranks_of_marked, _rank_change)
    above = count(y, t, group)
    ranks = 1.0 + ops.cast(above, dtype)

    def grad(g):
      lam = _effective_lambda(lambda_, normalized, shape[0] * shape[1], dtype)
      change = rank_change(y, t, group, above, lam * ops.cast(g, dtype))
      return change / lam, None, None

    return exact.mark_nan_lists(ranks[None, :], ops.reshape(y, [1, -1]))[0], grad

  return _op(scores, ops.convert_to_tensor(ids), valid)


@backend.do_not_convert
def margin_shift(scores, relevant, margin, valid=None):
  """The RaMBO margin (Rolinek et al., Sec. 4.4, Eq. 14-15), applied to scores before ranking.

      y~_i = y_i - margin / 2   if i is relevant
      y~_i = y_i + margin / 2   if i is irrelevant (and valid)

  so a relevant item only counts as ranked above an irrelevant one when it wins by ``margin``.
  Use it during training only; ranks used for evaluation see the raw scores.

  Args:
    scores: float scores.
    relevant: boolean tensor of the same shape.
    margin: a Python number ``>= 0``.
    valid: optional boolean tensor; invalid (padded) items are not shifted.

  Example:
    >>> ops.convert_to_numpy(margin_shift([[1.0, 2.0]], [[True, False]], margin=0.5))
    array([[0.75, 2.25]], dtype=float32)
  """
  margin = checks.check_float("margin", margin, minimum=0.0)
  scores = _as_scores(scores)
  if margin == 0.0:
    return scores
  half = ops.cast(margin / 2.0, backend.dtype_name(scores))
  shift = backend.where(ops.convert_to_tensor(relevant), -half, half)
  if valid is not None:
    shift = backend.where(ops.convert_to_tensor(valid), shift, ops.zeros_like(shift))
  return scores + shift


@export()
class BlackboxRanker(keras.layers.Layer):
  """Keras layer: scores ``[..., n]`` -> exact ranks ``[..., n]`` (1 = highest) with the RaMBO
  blackbox gradient (Rolinek et al., CVPR 2020, Eq. 10, Algorithm 1).

  ``call(scores, relevance=None, training=None)``: with ``margin > 0``, ``training=True`` and a
  ``relevance`` tensor (``> 0`` = relevant, ``< 0`` = padding), the scores are first shifted by the
  margin of Eq. 14-15 (see :func:`margin_shift`); otherwise the ranks are those of the raw scores.

  Args:
    lambda_: blackbox interpolation strength, ``> 0``.
    margin: the margin ``alpha >= 0`` (training only).
    axis: the list axis.
    normalized: ``lambda_`` for ranks normalised by the list length (see :func:`blackbox_rank`).

  Example:
    >>> ops.convert_to_numpy(BlackboxRanker(lambda_=1.0)(ops.convert_to_tensor([[0.2, 0.7, 0.1]])))
    array([[2., 1., 3.]], dtype=float32)
  """

  def __init__(self, lambda_=1.0, margin=0.0, axis=-1, normalized=False, **kwargs):
    super().__init__(**kwargs)
    self.lambda_ = _check_lambda(lambda_)
    if not isinstance(normalized, bool):
      raise ValueError(f"`normalized` must be True or False, got {normalized!r}.")
    self.normalized = normalized
    self.margin = checks.check_float("margin", margin, minimum=0.0)
    self.axis = checks.check_int("axis", axis)

  @backend.do_not_convert
  def call(self, scores, relevance=None, training=None):
    scores = _as_scores(scores)
    if self.margin > 0 and training and relevance is not None:
      relevance = ops.cast(relevance, backend.dtype_name(scores))
      scores = margin_shift(scores, relevance > 0, self.margin, valid=relevance >= 0)
    return blackbox_rank(scores, self.lambda_, axis=self.axis, normalized=self.normalized)

  def compute_output_shape(self, input_shape):
    return input_shape

  def get_config(self):
    config = super().get_config()
    config.update(
      {
        "lambda_": self.lambda_,
        "margin": self.margin,
        "axis": self.axis,
        "normalized": self.normalized,
      }
    )
    return config
