"""TF-Ranking's pairwise losses: for every pair ``l_i > l_j`` of valid items the loss of
``s_i - s_j``, weighted by the lambda weight of the pair (ranks by score), summed over the second
item of each pair ``[B, n]``; ``yeti_logistic_loss`` is the logistic loss on Gumbel samples of the
list with :class:`YetiDCGLambdaWeight` by default.

What it costs per list: only the pairs whose first item has relevance ``> 0`` carry weight
(``l_i > l_j >= 0``; the lambda weights are 0 on equal labels), so only the rows of the ``r``
relevant items are computed, ``O(n r)`` (:func:`~.base.relevant_row_values`: ``r`` read from
eager labels; in a traced step the one row of a list with ``r <= 1``, else a loop over blocks of
``ROWS_PER_BLOCK`` relevant rows, memory ``O(n ROWS_PER_BLOCK)``; plus
``O(n log n)`` for the ranks of a lambda weight, in each block in the loop). With class ids that
is the true class's row, ``O(n)``; pairwise MSE without a lambda weight is ``O(n)`` for any
labels; with one it takes the rows of its relevant items and their columns, in a traced step
in the same loop over blocks. No key's maths needs every pair (docs/losses.md, "What each key
costs in the number of classes").

Example:
  >>> import numpy as np
  >>> from keras import ops
  >>> losses, weights = PairwiseHingeLoss().compute_unreduced_loss(
  ...   np.array([[1.0, 0.0]]), np.array([[0.5, 0.0]]))
  >>> ops.convert_to_numpy(losses * weights).tolist()   # only (0, 1): relu(1 - 0.5)
  [[0.5, 0.0]]
"""

from tfrank4class import backend
from tfrank4class.backend import take_along_axis
from tfrank4class.compat import ops
from tfrank4class.losses.ranking_losses.base import (
  Core,
  at_true_class,
  blocks_of_relevant_rows,
  relevant_row_values,
  relevant_rows,
  scatter_rows,
  true_class_mask,
  true_class_row_gradient,
  true_class_weight,
)
from tfrank4class.losses.ranking_losses.sampling import pairwise, ranks


class _Pairwise(Core):
  weighting = "pair"

  def compute_unreduced_loss(self, labels, logits):
    """The losses of the pairs ``l_i > l_j`` of valid items times their weights, summed over the
    second item ``[B, n]`` (with weights of ones). The first item of such a pair has ``l_i > 0``:
    only the rows of the ``r`` relevant items of a list are computed, ``O(n r)``
    (:func:`~.base.relevant_row_values`: at a cap, or a block at a time where ``r`` is not known
    to be below a cap; ``O(n log n)`` more with a lambda weight, which ranks the items)."""
    losses = relevant_row_values(labels, logits, self._pair_losses)
    return losses, ops.ones_like(losses)

  def _pair_losses(self, labels, logits, rows=None):
    """The weighted losses of the pairs of the items ``rows`` ``[B, r]`` with every item, summed
    over the second item ``[B, r]`` (``None``: of every item, ``[B, n]``)."""
    valid = labels >= 0
    weights = ops.logical_and(
      pairwise(ops.greater, labels, rows), pairwise(ops.logical_and, valid, rows)
    )
    weights = ops.cast(weights, logits.dtype)
    if self.lambda_weight is not None:
      weights = weights * self.lambda_weight.pair_weights(labels, ranks(logits, valid), first=rows)
    losses = self._pair_loss(pairwise(ops.subtract, logits, rows)) * ops.stop_gradient(weights)
    return ops.sum(losses, axis=2)

  def compute_per_list_from_ids(self, ids, logits, weights):
    """The pairs of one-hot rows of class ids ``ids`` ``[B]`` in ``O(n)`` (``O(n log n)`` with a
    lambda weight, which ranks the items): the true class against each other class, times the
    lambda weight of the pair (:func:`~.sampling.pairwise`'s row of the true class), summed on
    the true class's item, weighted by its sample weight ``[B, 1]``. Without a lambda weight
    that item's loss alone ``[B, 1]`` (:meth:`_true_class_sums`; the other items carry none, and
    :class:`~tfrank4class.losses.RankingLoss` places it in TF-Ranking's ``[B, n]`` where it keeps
    that shape), with one TF-Ranking's ``[B, n]`` (0 elsewhere)."""
    weight = true_class_weight(ids, weights, logits)
    if self.lambda_weight is None:
      return self._true_class_sums(logits, ids), weight
    logits = self.get_logits(logits)
    is_true = true_class_mask(ids, logits)
    losses = self._pair_loss(at_true_class(is_true, logits) - logits)
    labels = ops.cast(is_true, logits.dtype)
    pair_weights = self.lambda_weight.pair_weights(labels, ranks(logits), first=ids)
    losses = losses * ops.stop_gradient(pair_weights)
    total = ops.sum(backend.where(is_true, 0.0, losses), axis=1, keepdims=True)
    return backend.where(is_true, total, 0.0), weight

  def _true_class_sums(self, scores, ids):
    """``sum_{j != y} loss(s_y - s_j)`` ``[B, 1]`` of the logits of ``scores`` ``[B, n]`` and
    class ids ``y`` ``[B]``, with its gradient written out (:meth:`_pair_slope`): the forward
    keeps only the true logits ``[B, 1]`` (a gather: a masked sum's subtraction from the logits
    became one more ``[B, n]`` tensor under XLA), the backward writes the ``[B, n]`` gradient from
    the scores again, after the forward's sum (:func:`~tfrank4class.backend.materialized`);
    autodiff kept one to three ``[B, n]`` tensors from the forward for it."""

    @backend.custom_gradient
    def sums(scores, ids):
      logits = self.get_logits(scores)
      is_true = true_class_mask(ids, logits)
      true = take_along_axis(logits, ids[:, None], axis=1)
      losses = backend.where(is_true, 0.0, self._pair_loss(true - logits))
      total = ops.sum(losses, axis=1, keepdims=True)

      def gradient(upstream):
        logits = self.get_logits(backend.materialized([scores, total])[0])
        is_true = true_class_mask(ids, logits)
        # d/ds_j = -slope_j / T (j != y), d/ds_y = sum_{j != y} slope_j / T: 1/T and the sign
        # on [B, 1], not on [B, n] (TensorFlow's graph writes each op's [B, n] tensor).
        slopes = self._pair_slope(true - logits) * (upstream / -self.temperature)
        return true_class_row_gradient(is_true, slopes), None

      return total, gradient

    return sums(scores, ids)


class PairwiseLogisticLoss(_Pairwise):
  """``log(1 + exp(-(s_i - s_j)))``, as ``softplus(-x)``: TF-Ranking's form,
  ``relu(-x) + log1p(exp(-|x|))``, has the same values but a zero gradient at a tie (``x = 0``,
  where ``relu`` and ``|x|`` take the subgradient 0), so tied scores (a model's first step from
  constant scores) would not move; the derivative there is ``-1/2``."""

  def _pair_loss(self, x):
    return backend.softplus(-x)

  def _pair_slope(self, x):
    return -ops.sigmoid(-x)


class PairwiseHingeLoss(_Pairwise):
  """``max(0, 1 - (s_i - s_j))``."""

  def _pair_loss(self, x):
    return ops.relu(1.0 - x)

  def _pair_slope(self, x):
    return -ops.cast(x < 1.0, x.dtype)  # 0 at the kink, as relu's gradient


class PairwiseSoftZeroOneLoss(_Pairwise):
  """``sigmoid(-(s_i - s_j))``."""

  def _pair_loss(self, x):
    # TF-Ranking's `where(x > 0, 1 - sigmoid(x), sigmoid(-x))` is sigmoid(-x); the select's
    # [B, n, n] mask, kept for its gradient, became a [B, n, n] zero-filled output of the rows'
    # branch of TensorFlow's `cond` (1.1 GB at C = 2,000, B = 32 in a traced step).
    return ops.sigmoid(-x)

  def _pair_slope(self, x):
    return -ops.sigmoid(x) * ops.sigmoid(-x)


class PairwiseMSELoss(Core):
  """``((s_i - s_j) - (l_i - l_j))^2`` over every pair of distinct valid items, summed over the
  second item ``[B, n]``.

  Without a lambda weight that is ``O(n)`` for any labels: with ``d = s - l`` and any ``c``
  (here the mean of ``d`` over the ``m`` valid items, held constant: ``e = d - c``), item ``i``'s
  sum is ``sum_j (e_i - e_j)^2 = m e_i^2 - 2 e_i sum_j e_j + sum_j e_j^2``. A lambda weight
  weighs each pair by the ranks and labels of both items, symmetrically, 0 for equal labels: only
  the pairs of an item of relevance ``> 0`` carry weight, so the rows of the ``r`` relevant items
  ``[B, r, n]`` give every item's sum (a relevant item's: its row; another's: its column),
  ``O(n r)`` (:func:`~.base.relevant_rows`; in a traced step past the cap ``r <= 1`` a loop over
  blocks of relevant rows, each block's rows and columns, memory ``O(n ROWS_PER_BLOCK)``) after
  the ranks' sort, in each block; for class ids that is the true class's row.
  """

  weighting = "pair"

  def compute_unreduced_loss(self, labels, logits):
    valid = labels >= 0
    if self.lambda_weight is not None:
      losses = relevant_rows(
        labels,
        lambda rows: self._rows_and_columns(labels, logits, rows),
        lambda: ops.sum(self._weighted_pairs(labels, logits), axis=2),
        lambda: blocks_of_relevant_rows(labels, logits, self._block_of_rows_and_columns),
      )
      return losses, ops.ones_like(losses)
    count = ops.sum(ops.cast(valid, logits.dtype), axis=1, keepdims=True)
    d = backend.where(valid, logits - labels, 0.0)
    centre = ops.stop_gradient(ops.sum(d, axis=1, keepdims=True) / ops.maximum(count, 1.0))
    e = backend.where(valid, d - centre, 0.0)
    total = ops.sum(e, axis=1, keepdims=True)
    squares = ops.sum(ops.square(e), axis=1, keepdims=True)
    losses = backend.where(valid, count * ops.square(e) - 2.0 * e * total + squares, 0.0)
    return losses, ops.ones_like(losses)

  def _weighted_pairs(self, labels, logits, rows=None):
    """The lambda-weighted losses of the pairs of distinct valid items: of the items ``rows``
    ``[B, r]`` with every item ``[B, r, n]`` (``None``: every pair ``[B, n, n]``)."""
    valid = labels >= 0
    losses = ops.square(pairwise(ops.subtract, logits, rows) - pairwise(ops.subtract, labels, rows))
    items = ops.zeros_like(labels, dtype="int32") + ops.arange(ops.shape(labels)[1], dtype="int32")
    weights = ops.logical_and(
      pairwise(ops.logical_and, valid, rows), pairwise(ops.not_equal, items, rows)
    )
    weights = ops.cast(weights, logits.dtype)
    weights = weights * self.lambda_weight.pair_weights(labels, ranks(logits, valid), first=rows)
    return losses * ops.stop_gradient(weights)

  def _rows_and_columns(self, labels, logits, rows):
    """Each item's sum over its pairs ``[B, n]`` from the rows of the items ``rows`` ``[B, r]``
    that hold every relevant item: a row's item its row's sum, another item its column's (the
    pairs and their weights are symmetric; a pair of two items outside ``rows`` weighs 0)."""
    pairs = self._weighted_pairs(labels, logits, rows)
    n = labels.shape[1]
    in_rows = scatter_rows(rows, ops.ones_like(ops.cast(rows, logits.dtype)), n) > 0
    return backend.where(
      in_rows, scatter_rows(rows, ops.sum(pairs, axis=2), n), ops.sum(pairs, axis=1)
    )

  def _block_of_rows_and_columns(self, labels, logits, rows, keep):
    """A block of :func:`~.base.blocks_of_relevant_rows` (``rows`` ``[B, r]`` relevant items,
    ``keep`` false past a list's relevant items): each relevant item of the block its row's sum,
    each item of relevance ``<= 0`` its column's sum over the block's rows; summed over the blocks,
    every item's sum over its pairs (a pair of two items of relevance ``<= 0`` weighs 0)."""
    pairs = self._weighted_pairs(labels, logits, rows)
    pairs = backend.where(ops.expand_dims(keep, 2), pairs, 0.0)
    rows_sums = scatter_rows(rows, ops.sum(pairs, axis=2), labels.shape[1])
    return backend.where(labels > 0, rows_sums, ops.sum(pairs, axis=1))

  def compute_per_list_from_ids(self, ids, logits, weights):
    """The losses per first item ``[B, n]`` of the pairs of one-hot rows of class ids ``ids``
    ``[B]`` and the items' sample weights (``[B, 1]`` or ``[B, n]``): without a lambda weight
    the ``O(n)`` form of the rows with its own gradient (:func:`_pair_sums_of_ids`: no padding,
    none of the rows' relevance, weight normalisation or NaN marking of the general path, one
    ``[B, n]`` tensor kept for the gradient where autodiff kept six); with one the pairs that
    carry weight, ``(y, j)`` and ``(j, y)`` for the true class ``y`` (the lambda weights are
    symmetric)."""
    logits = self.get_logits(logits)
    sample_weights = ops.ones_like(logits[:, :1]) if weights is None else weights
    if self.lambda_weight is None:
      return _pair_sums_of_ids(logits, ids), sample_weights
    is_true = true_class_mask(ids, logits)
    labels = ops.cast(is_true, logits.dtype)
    losses = ops.square(at_true_class(is_true, logits) - logits - (1.0 - labels))
    pair_weights = self.lambda_weight.pair_weights(labels, ranks(logits), first=ids)
    losses = backend.where(is_true, 0.0, losses * ops.stop_gradient(pair_weights))
    losses = backend.where(is_true, ops.sum(losses, axis=1, keepdims=True), losses)
    return losses, sample_weights


@backend.custom_gradient
def _pair_sums_of_ids(logits, ids):
  """``sum_j ((s_i - s_j) - (l_i - l_j))^2`` for each item ``i`` ``[B, n]`` of the one-hot rows
  ``l`` of class ids ``ids`` ``[B]``, in ``O(n)`` with one ``[B, n]`` tensor kept for the
  gradient.

  With ``d = s - l`` centred by its mean, ``e = d - mean(d)`` (so ``sum_j e_j = 0``), item ``i``'s
  sum is ``n e_i^2 + sum_j e_j^2``. Its gradient for upstream ``g`` ``[B, n]`` is
  ``P(2 e (n g + sum_j g_j))``, ``P`` the centring ``x - mean(x)`` (the map from ``d`` to ``e``).
  """
  n = ops.shape(logits)[1]
  size = ops.cast(n, logits.dtype)
  is_true = true_class_mask(ids, logits)
  centred = logits - (backend.mean(logits, axis=1, keepdims=True) - 1.0 / size)
  e = backend.where(is_true, centred - 1.0, centred)
  squares = ops.square(e)
  sums = squares * size + ops.sum(squares, axis=1, keepdims=True)

  def gradient(upstream):
    scaled = e * (upstream * (2.0 * size) + 2.0 * ops.sum(upstream, axis=1, keepdims=True))
    return scaled - backend.mean(scaled, axis=1, keepdims=True), None

  return sums, gradient
