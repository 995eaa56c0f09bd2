"""The base of TF-Ranking's loss cores and its three rules for normalising sample weights."""

from tfrank4class import backend
from tfrank4class.backend import take_along_axis
from tfrank4class.compat import ops


class Core:
  """A loss core: ``get_logits``, ``compute_unreduced_loss`` and ``normalize_weights``.

  ``weights`` are TF-Ranking's: ``None``, ``[B, 1]`` per list or ``[B, n]`` per item.
  """

  #: How the core normalises weights: ``"item"`` (pointwise), ``"pair"`` or ``"list"``.
  weighting = "item"

  def __init__(self, lambda_weight=None, temperature=1.0):
    self.lambda_weight = lambda_weight
    self.temperature = temperature

  def get_logits(self, logits):
    return logits / self.temperature

  def compute_unreduced_loss(self, labels, logits):
    """``(losses, loss_weights)`` of the same shape."""
    raise NotImplementedError

  def compute_per_list_from_ids(self, ids, logits, weights):
    """What the core computes for the one-hot rows of class ids ``ids`` ``[B]``, taken from the
    ids without building the rows, or ``None`` where the core has no such form (the caller then
    builds the rows): the losses and TF-Ranking's weights, in the shapes the rows give them (a
    pairwise core may give the losses of the true class's item alone, ``[B, 1]``, the one item
    that carries a loss). ``logits``: the scores (before :meth:`get_logits`); ``weights``:
    ``None``, ``[B, 1]`` or ``[B, n]``."""
    return None

  def normalize_weights(self, labels, weights):
    """TF-Ranking's weights for the losses: per item (padded items 0; ``[B, n, 1]`` for pairs
    of which the item is the first), or per list the label-weighted mean ``[B, 1]``."""
    if self.weighting == "list":
      if weights is None:
        return 1.0
      labels = backend.where(labels >= 0, labels, 0.0)
      total = ops.sum(labels, axis=1, keepdims=True)
      weighted = ops.sum(weights * labels, axis=1, keepdims=True)
      return backend.where(total == 0, 0.0, weighted / backend.where(total == 0, 1.0, total))
    weights = 1.0 if weights is None else weights
    weights = backend.where(labels >= 0, ops.ones_like(labels) * weights, 0.0)
    return ops.expand_dims(weights, 2) if self.weighting == "pair" else weights


def true_class_mask(ids, like):
  """Where each list's true class is, ``[B, n]`` (bool), for class ids ``ids`` ``[B]`` and lists
  ``like`` ``[B, n]``."""
  return ops.arange(ops.shape(like)[1])[None, :] == ids[:, None]


def at_true_class(is_true, values):
  """The entry of ``values`` ``[B, n]`` at each list's true class (``is_true``), ``[B, 1]``: a
  masked sum rather than a gather, which fuses with the ``[B, n]`` maths that uses it (the
  softmax cores, where nothing on ``[B, n]`` follows, keep a gather but on JAX)."""
  return ops.sum(backend.where(is_true, values, 0.0), axis=1, keepdims=True)


def true_class_row_gradient(is_true, slopes):
  """The gradient ``[B, n]`` of a sum over ``j != y`` of a function of ``s_j - s_y``, from its
  slopes ``d/ds_j`` ``[B, n]`` (any value at the true class, ``is_true``): the slopes at
  ``j != y`` and minus their sum at ``y``."""
  slopes = backend.where(is_true, 0.0, slopes)
  return backend.where(is_true, -ops.sum(slopes, axis=1, keepdims=True), slopes)


def true_class_weight(ids, weights, logits):
  """The sample weight of each list's true class ``[B, 1]`` in the dtype of ``logits`` (ones for
  ``None``): what each of TF-Ranking's rules makes of ``weights`` for a one-hot row (per list,
  per item, or per pair whose first item is the true class)."""
  if weights is None:
    return ops.ones_like(logits[:, :1])
  if weights.shape[1] == 1:
    return weights
  return take_along_axis(weights, ids[:, None], axis=-1)


#: The rows of relevant items that one iteration of :func:`relevant_row_values`'s loop computes
#: (in a traced step, past the one-row cap).
ROWS_PER_BLOCK = 8


def relevant_rows(labels, rows_fn, pairs_fn, blocks_fn):
  """What a loss computes from the rows of pairs of each list's items of relevance ``> 0``.

  With relevance ``labels`` ``[B, n]``, only a pair ``(i, j)`` with ``l_i > l_j >= 0`` carries
  weight in a pairwise loss, and only an item with ``l_i > 0`` has a gain in an approximate
  metric: the ``r`` relevant items of a list, not all ``n``. ``rows_fn(rows)`` computes from the
  indices ``rows`` ``[B, r]`` (int32) of each list's ``r`` largest labels (``O(B n r)``) what
  ``pairs_fn()`` computes from every pair (``[B, n, n]``), and must equal it whenever ``rows``
  holds every relevant item; ``blocks_fn()`` computes the same with memory bounded whatever ``r``
  (:func:`blocks_of_relevant_rows`). ``r`` is the largest count of relevant items of a list where
  the labels are known now (eager). In a traced step ``r`` must be static: ``ops.cond`` takes
  ``rows_fn`` at ``r = 1`` where every list has at most one relevant item when the step runs, else
  ``blocks_fn`` (one ``cond``, not nested, on every backend: TensorFlow's gradient of a ``cond``
  nested around the loop's written-out gradient fails under a tape inside ``tf.function``, as
  Keras's ``fit`` takes it; under XLA, which reserves the memory of every branch, no branch is
  larger than a block). Lists of at most :data:`ROWS_PER_BLOCK` items, or of a length not known
  when the step is traced, take ``pairs_fn`` there (every pair is no larger than a block).
  """
  n = labels.shape[1]
  if n is None:
    return pairs_fn()
  count = ops.max(ops.sum(ops.cast(labels > 0, "int32"), axis=1))
  known = backend.static_value(count)
  if known is not None:
    r = max(int(known), 1)
    return pairs_fn() if r >= n else rows_fn(backend.top_k(labels, r)[1])
  if n <= ROWS_PER_BLOCK:
    return pairs_fn()
  return ops.cond(count <= 1, lambda: rows_fn(backend.top_k(labels, 1)[1]), blocks_fn)


def relevant_row_values(labels, logits, row_fn):
  """The value of each list's row of pairs at each of its items of relevance ``> 0``, ``[B, n]``.

  ``row_fn(labels, logits, rows)`` computes from the relevance ``labels`` and the scores ``logits``
  ``[B, n]`` one value per row of pairs of the items ``rows`` ``[B, r]`` (int32) with every item,
  ``[B, r]``, and with ``rows`` ``None`` every item's, ``[B, n]``; a row may be of an item of
  relevance ``<= 0``. The result equals ``row_fn``'s at every item of relevance ``> 0``; elsewhere
  it is 0 or ``row_fn``'s. It is :func:`relevant_rows`: eagerly the rows of the ``r`` relevant
  items, ``O(B n r)`` (every item's where ``r = n``); in a traced step the rows at the cap ``r <=
  1``, past it a loop over the relevant items (:func:`blocks_of_relevant_rows`),
  :data:`ROWS_PER_BLOCK` at a time (found without a sort: a search of the running count of relevant
  items), whose trip count is read from the labels when the step runs (the largest count of relevant
  items of a list, over the block): time ``O(B n r)``, ``r`` rounded up to whole blocks, memory
  ``O(B n ROWS_PER_BLOCK)``, never every pair (lists of at most ``ROWS_PER_BLOCK`` items excepted,
  where every pair is no larger). Such a loop has no reverse-mode derivative on JAX, so its gradient
  in ``logits`` is written out (:func:`tfrank4class.backend.custom_gradient`): the same loop, each
  block's values recomputed and differentiated by the backend
  (:func:`tfrank4class.backend.vector_jacobian`). ``row_fn`` gets no gradient in ``labels`` and must
  close over no traced tensor (JAX's ``jit`` refuses one in a custom gradient).
  """
  return relevant_rows(
    labels,
    lambda rows: scatter_rows(rows, row_fn(labels, logits, rows), labels.shape[1]),
    lambda: row_fn(labels, logits, None),
    lambda: blocks_of_relevant_rows(labels, logits, placed_rows(row_fn)),
  )


def placed_rows(row_fn):
  """The block function of :func:`blocks_of_relevant_rows` that places the values of
  ``row_fn(relevance, scores, rows)`` ``[B, r]`` at the kept rows' items, 0 elsewhere."""

  def block_fn(relevance, scores, rows, keep):
    values = backend.where(keep, row_fn(relevance, scores, rows), 0.0)
    return scatter_rows(rows, values, relevance.shape[1])

  return block_fn


def blocks_of_relevant_rows(labels, logits, block_fn):
  """:func:`relevant_row_values`'s loop over blocks of relevant rows, taken whatever ``r``: the
  sum over blocks of ``block_fn(relevance, scores, rows, keep)`` ``[B, n]``, ``rows`` ``[B,``
  :data:`ROWS_PER_BLOCK` ``]`` the block's relevant items (int32) and ``keep`` ``[B,``
  :data:`ROWS_PER_BLOCK` ``]`` (bool) false at the slots past a list's relevant items, which
  ``block_fn`` must weigh 0 (:func:`placed_rows`: the values of a row function at the items of
  relevance ``> 0``; also a loss whose ``rows_fn`` and ``pairs_fn`` are not row values, as
  :func:`relevant_rows`'s ``blocks_fn``). ``block_fn`` gets no gradient in ``relevance`` and
  must close over no traced tensor."""
  n = labels.shape[1]

  def block(relevance, scores, seen, index):
    # The items of index * ROWS_PER_BLOCK + t relevant items before them (and themselves).
    at = index * ROWS_PER_BLOCK + ops.arange(ROWS_PER_BLOCK, dtype="int32")
    wanted = ops.zeros_like(seen[:, :1]) + at[None, :] + 1
    rows = ops.minimum(backend.searchsorted(seen, wanted), n - 1)
    keep = wanted <= seen[:, -1:]  # a list's items past its relevant ones: weighed 0
    return block_fn(relevance, scores, rows, keep)

  @backend.custom_gradient
  def values(scores, relevance):
    seen = backend.cumsum(ops.cast(relevance > 0, "int32"), axis=1)
    num_blocks = (ops.max(seen[:, -1]) + ROWS_PER_BLOCK - 1) // ROWS_PER_BLOCK

    def grad(upstream):
      def add_block(index, total):
        (at_block,) = backend.vector_jacobian(
          lambda x: block(relevance, x, seen, index), [scores], upstream
        )
        return total + at_block

      return backend.sequential_fori_loop(0, num_blocks, add_block, ops.zeros_like(scores)), None

    def add_block(index, total):
      return total + block(relevance, scores, seen, index)

    return backend.sequential_fori_loop(0, num_blocks, add_block, ops.zeros_like(scores)), grad

  return values(logits, labels)


def scatter_rows(rows, values, n):
  """``values`` ``[B, r]`` of the items ``rows`` ``[B, r]`` (distinct per list) at their places
  in lists of ``n`` items, 0 elsewhere, ``[B, n]`` (``O(B n r)``, differentiable)."""
  at = ops.expand_dims(ops.arange(n, dtype=rows.dtype), 0)
  placed = backend.where(
    ops.expand_dims(at, 0) == ops.expand_dims(rows, 2), ops.expand_dims(values, 2), 0.0
  )
  return ops.sum(placed, axis=1)
