"""TF-Ranking's pairwise losses: for every pair ``l_i > l_j`` of valid items the loss of
``s_i - s_j``, weighted by the lambda weight of the pair (ranks by score); ``yeti_logistic_loss``
is the logistic loss on Gumbel samples of the list with :class:`YetiDCGLambdaWeight` by default.

Example:
  >>> import numpy as np
  >>> from keras import ops
  >>> losses, weights = PairwiseHingeLoss().compute_unreduced_loss(
  ...   np.array([[1.0, 0.0]]), np.array([[0.5, 0.0]]))
  >>> ops.convert_to_numpy(losses * weights).tolist()   # only (0, 1): relu(1 - 0.5)
  [[[0.0, 0.5], [0.0, 0.0]]]
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
    valid = labels >= 0
    valid_pairs = pairwise(ops.logical_and, valid)
    weights = ops.cast(ops.logical_and(pairwise(ops.greater, labels), valid_pairs), logits.dtype)
    if self.lambda_weight is not None:
      weights = weights * self.lambda_weight.pair_weights(labels, ranks(logits, valid))
    return self._pair_loss(pairwise(ops.subtract, logits)), ops.stop_gradient(weights)

  def compute_per_list_from_ids(self, ids, logits, weights):
    """The pairs of one-hot rows of class ids ``ids`` ``[B]`` in ``O(n)``: the true class
    against each other class, summed on the true class's item ``[B, n]`` (0 elsewhere), weighted
    by its sample weight ``[B, 1]``; ``None`` with a lambda weight, which ranks the items."""
    if self.lambda_weight is not None:
      return None
    logits = self.get_logits(logits)
    is_true = true_class_mask(ids, logits)
    margins = at_true_class(is_true, logits) - logits
    total = ops.sum(backend.where(is_true, 0.0, self._pair_loss(margins)), axis=1, keepdims=True)
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
    return backend.where(x > 0, 1.0 - ops.sigmoid(x), ops.sigmoid(-x))


class PairwiseMSELoss(Core):
  """``((s_i - s_j) - (l_i - l_j))^2`` over every pair of distinct valid items (so no ``O(n)``
  form for class ids: the pairs without the true class count too)."""

  weighting = "pair"

  def compute_unreduced_loss(self, labels, logits):
    valid = labels >= 0
    losses = ops.square(pairwise(ops.subtract, logits) - pairwise(ops.subtract, labels))
    size = ops.shape(labels)[1]
    distinct = ops.eye(size, dtype=logits.dtype) == 0
    weights = ops.logical_and(pairwise(ops.logical_and, valid), ops.expand_dims(distinct, 0))
    weights = ops.cast(weights, logits.dtype)
    if self.lambda_weight is not None:
      weights = weights * self.lambda_weight.pair_weights(labels, ranks(logits, valid))
    return losses, ops.stop_gradient(weights)
