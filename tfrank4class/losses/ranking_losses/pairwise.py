"""TF-Ranking's pairwise losses: for every pair ``l_i > l_j`` of valid items the loss of
``s_i - s_j``, weighted by the lambda weight of the pair (ranks by score), summed over the second
item of each pair ``[B, n]``; ``yeti_logistic_loss`` is the logistic loss on Gumbel samples of the
list with :class:`YetiDCGLambdaWeight` by default.

What it costs per list: with class ids only the true class's pairs carry weight, ``O(n)`` (the
ranks of a lambda weight: ``O(n log n)``); pairwise MSE without a lambda weight is ``O(n)`` for
any labels. Dense relevance with the other keys, or pairwise MSE with a lambda weight, builds
every pair ``[B, n, n]``, though only the pairs of an item of relevance ``> 0`` carry weight:
how many those are per list is not known when a step is traced (docs/losses.md, "What each key
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
from tfrank4class.compat import ops
from tfrank4class.losses.ranking_losses.base import (
  Core,
  at_true_class,
  true_class_mask,
  true_class_weight,
)
from tfrank4class.losses.ranking_losses.sampling import pairwise, ranks


class _Pairwise(Core):
  weighting = "pair"

  def compute_unreduced_loss(self, labels, logits):
    """The losses of the pairs ``l_i > l_j`` of valid items times their weights, summed over the
    second item ``[B, n]`` (with weights of ones): every pair, ``[B, n, n]`` on the way."""
    valid = labels >= 0
    valid_pairs = pairwise(ops.logical_and, valid)
    weights = ops.cast(ops.logical_and(pairwise(ops.greater, labels), valid_pairs), logits.dtype)
    if self.lambda_weight is not None:
      weights = weights * self.lambda_weight.pair_weights(labels, ranks(logits, valid))
    losses = self._pair_loss(pairwise(ops.subtract, logits)) * ops.stop_gradient(weights)
    losses = ops.sum(losses, axis=2)
    return losses, ops.ones_like(losses)

  def compute_per_list_from_ids(self, ids, logits, weights):
    """The pairs of one-hot rows of class ids ``ids`` ``[B]`` in ``O(n)`` (``O(n log n)`` with a
    lambda weight, which ranks the items): the true class against each other class, times the
    lambda weight of the pair (:func:`~.sampling.pairwise`'s row of the true class), summed on
    the true class's item ``[B, n]`` (0 elsewhere), weighted by its sample weight ``[B, 1]``."""
    logits = self.get_logits(logits)
    is_true = true_class_mask(ids, logits)
    losses = self._pair_loss(at_true_class(is_true, logits) - logits)
    if self.lambda_weight is not None:
      labels = ops.cast(is_true, logits.dtype)
      pair_weights = self.lambda_weight.pair_weights(labels, ranks(logits), first=ids)
      losses = losses * ops.stop_gradient(pair_weights)
    total = ops.sum(backend.where(is_true, 0.0, losses), axis=1, keepdims=True)
    return backend.where(is_true, total, 0.0), true_class_weight(ids, weights, logits)


class PairwiseLogisticLoss(_Pairwise):
  """``log(1 + exp(-(s_i - s_j)))``."""

  def _pair_loss(self, x):
    return ops.relu(-x) + ops.log1p(ops.exp(-ops.abs(x)))


class PairwiseHingeLoss(_Pairwise):
  """``max(0, 1 - (s_i - s_j))``."""

  def _pair_loss(self, x):
    return ops.relu(1.0 - x)


class PairwiseSoftZeroOneLoss(_Pairwise):
  """``sigmoid(-(s_i - s_j))``."""

  def _pair_loss(self, x):
    return ops.sigmoid(-x)  # TF-Ranking's `1 - sigmoid(x)` for x > 0, without its cancellation


class PairwiseMSELoss(Core):
  """``((s_i - s_j) - (l_i - l_j))^2`` over every pair of distinct valid items, summed over the
  second item ``[B, n]``.

  Without a lambda weight that is ``O(n)`` for any labels: with ``d = s - l`` and any ``c``
  (here the mean of ``d`` over the ``m`` valid items, held constant: ``e = d - c``), item ``i``'s
  sum is ``sum_j (e_i - e_j)^2 = m e_i^2 - 2 e_i sum_j e_j + sum_j e_j^2``. A lambda weight
  weighs each pair by the ranks and labels of both items, 0 for equal labels: for class ids only
  the pairs of the true class carry weight, ``O(n log n)`` (the ranks' sort); dense relevance
  builds every pair ``[B, n, n]`` (only those of an item of relevance ``> 0`` carry weight, but
  how many that is per list is not known when a step is traced).
  """

  weighting = "pair"

  def compute_unreduced_loss(self, labels, logits):
    valid = labels >= 0
    if self.lambda_weight is not None:
      losses = ops.square(pairwise(ops.subtract, logits) - pairwise(ops.subtract, labels))
      distinct = ops.eye(ops.shape(labels)[1], dtype=logits.dtype) == 0
      weights = ops.logical_and(pairwise(ops.logical_and, valid), ops.expand_dims(distinct, 0))
      weights = ops.cast(weights, logits.dtype)
      weights = weights * self.lambda_weight.pair_weights(labels, ranks(logits, valid))
      losses = ops.sum(losses * ops.stop_gradient(weights), axis=2)
      return losses, ops.ones_like(losses)
    count = ops.sum(ops.cast(valid, logits.dtype), axis=1, keepdims=True)
    d = backend.where(valid, logits - labels, 0.0)
    centre = ops.stop_gradient(ops.sum(d, axis=1, keepdims=True) / ops.maximum(count, 1.0))
    e = backend.where(valid, d - centre, 0.0)
    total = ops.sum(e, axis=1, keepdims=True)
    squares = ops.sum(ops.square(e), axis=1, keepdims=True)
    losses = backend.where(valid, count * ops.square(e) - 2.0 * e * total + squares, 0.0)
    return losses, ops.ones_like(losses)

  def compute_per_list_from_ids(self, ids, logits, weights):
    """The losses per first item ``[B, n]`` of the pairs of one-hot rows of class ids ``ids``
    ``[B]`` and the items' sample weights (``[B, 1]`` or ``[B, n]``): without a lambda weight
    the ``O(n)`` form of the rows, on the rows' mask of the ids (no padding, none of the rows'
    relevance, weight normalisation or NaN marking of the general path); with one the pairs that
    carry weight, ``(y, j)`` and ``(j, y)`` for the true class ``y`` (the lambda weights are
    symmetric)."""
    logits = self.get_logits(logits)
    is_true = true_class_mask(ids, logits)
    labels = ops.cast(is_true, logits.dtype)
    sample_weights = ops.ones_like(logits[:, :1]) if weights is None else weights
    if self.lambda_weight is None:
      return self.compute_unreduced_loss(labels, logits)[0], sample_weights
    losses = ops.square(at_true_class(is_true, logits) - logits - (1.0 - labels))
    pair_weights = self.lambda_weight.pair_weights(labels, ranks(logits), first=ids)
    losses = backend.where(is_true, 0.0, losses * ops.stop_gradient(pair_weights))
    losses = backend.where(is_true, ops.sum(losses, axis=1, keepdims=True), losses)
    return losses, sample_weights
