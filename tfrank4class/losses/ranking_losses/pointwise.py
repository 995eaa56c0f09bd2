"""TF-Ranking's pointwise losses: ``sigmoid_cross_entropy_loss``, ``mean_squared_loss``,
``ordinal_loss``, one loss per item ``[B, n]`` weighted 0 for padded items; ``O(n)`` per list, and
class ids take one pass over ``[B, n]`` without building the rows.

Example:
  >>> import numpy as np
  >>> from keras import ops
  >>> losses, weights = MeanSquaredLoss().compute_unreduced_loss(
  ...   np.array([[1.0, 0.0, -1.0]]), np.array([[0.5, 0.0, 9.0]]))
  >>> ops.convert_to_numpy(losses).tolist(), ops.convert_to_numpy(weights).tolist()
  ([[0.25, 0.0, 0.0]], [[1.0, 1.0, 0.0]])
"""

from tfrank4class import backend
from tfrank4class.compat import ops
from tfrank4class.losses.ranking_losses.base import Core, true_class_mask


def sigmoid_cross_entropy(labels, logits):
  """``-z log(sigmoid(x)) - (1 - z) log(1 - sigmoid(x)) = softplus(x) - z x``, finite at any
  ``x``, with the gradient ``sigmoid(x) - z`` everywhere (``0.5 - z`` at ``x = 0``, as
  TensorFlow's ``sigmoid_cross_entropy_with_logits``, which TF-Ranking calls; the form
  ``relu(x) - z x + log1p(exp(-|x|))`` gave ``-z`` there, and kept four ``[B, n]`` tensors for
  the gradient where this keeps two)."""
  return backend.softplus(logits) - logits * labels


def sigmoid_cross_entropy_of_one_hot(is_true, logits):
  """:func:`sigmoid_cross_entropy` of one-hot labels (bool ``is_true``): ``softplus(-x)`` at the
  true class, ``softplus(x)`` elsewhere, one expression of ``x`` (the general form's difference
  of two terms had XLA's CPU reduction read both as ``[B, n]`` tensors, each held at once)."""
  return backend.softplus(backend.where(is_true, -logits, logits))


class _Pointwise(Core):
  def compute_unreduced_loss(self, labels, logits):
    valid = labels >= 0
    labels = backend.where(valid, labels, 0.0)
    logits = backend.where(valid, logits, 0.0)
    return self._losses(labels, logits), ops.cast(valid, logits.dtype)

  def compute_per_list_from_ids(self, ids, logits, weights):
    """The item losses of one-hot rows of class ids ``ids`` ``[B]`` ``[B, n]`` (no item is
    padded, so no mask), with the sample weights as TF-Ranking's per-item rule leaves them
    (ones ``[B, 1]`` for ``None``): one pass over ``[B, n]``."""
    logits = self.get_logits(logits)
    losses = self._losses_of_one_hot(true_class_mask(ids, logits), logits)
    return losses, ops.ones_like(logits[:, :1]) if weights is None else weights

  def _losses_of_one_hot(self, is_true, logits):
    """The item losses of one-hot labels (bool ``is_true``)."""
    return self._losses(ops.cast(is_true, logits.dtype), logits)


class SigmoidCrossEntropyLoss(_Pointwise):
  """Binary cross-entropy of each item's relevance and score."""

  def _losses(self, labels, logits):
    return sigmoid_cross_entropy(labels, logits)

  def _losses_of_one_hot(self, is_true, logits):
    return sigmoid_cross_entropy_of_one_hot(is_true, logits)


class MeanSquaredLoss(_Pointwise):
  """``(l - s)^2`` per item."""

  def _losses(self, labels, logits):
    return ops.square(labels - logits)


class OrdinalLoss(_Pointwise):
  """The cross-entropy of the ordinal ``l >= 1`` (plus the fraction of a label in ``(0, 1)``
  with ``use_fraction_label``) and the item's one logit (``ordinal_size`` is 1 for scores
  ``[B, C]``, the only ordinal size :class:`~tfrank4class.losses.RankingLoss` takes)."""

  def __init__(self, use_fraction_label=False, temperature=1.0):
    super().__init__(None, temperature)
    self.use_fraction_label = use_fraction_label

  def _losses(self, labels, logits):
    ordinal = ops.cast(labels >= 1.0, labels.dtype)
    if self.use_fraction_label:
      ordinal = ordinal + backend.where(ops.logical_and(labels > 0, labels < 1), labels, 0.0)
    return sigmoid_cross_entropy(ordinal, logits)

  def _losses_of_one_hot(self, is_true, logits):
    return sigmoid_cross_entropy_of_one_hot(is_true, logits)  # the ordinal of 0 and 1 is itself
