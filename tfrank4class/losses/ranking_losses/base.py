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
    builds the rows): the losses and TF-Ranking's weights, in the shapes the rows give them.
    ``logits``: the scores (before :meth:`get_logits`); ``weights``: ``None``, ``[B, 1]`` or
    ``[B, n]``."""
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


def true_class_weight(ids, weights, logits):
  """The sample weight of each list's true class ``[B, 1]`` in the dtype of ``logits`` (ones for
  ``None``): what each of TF-Ranking's rules makes of ``weights`` for a one-hot row (per list,
  per item, or per pair whose first item is the true class)."""
  if weights is None:
    return ops.ones_like(logits[:, :1])
  if weights.shape[1] == 1:
    return weights
  return take_along_axis(weights, ids[:, None], axis=-1)
