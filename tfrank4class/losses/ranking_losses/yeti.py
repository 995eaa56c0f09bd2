"""``yeti_logistic_loss``'s core: the pairwise logistic loss on TF-Ranking's Gumbel samples,
weighted by :class:`~tfrank4class.losses.lambda_weights.YetiDCGLambdaWeight` by default.

With class ids and a Yeti weight only two pairs of a sample carry weight: the true class with
the item just before it and with the item just after it in the order of the sample's logits (the
weight needs ranks exactly 1 apart, and the labels of two other classes are equal). They are
found in ``O(n)`` per sample without a sort (:func:`~.sampling.true_class_neighbours`); any other
lambda weight takes :class:`~.pairwise.PairwiseLogisticLoss`'s class-id form (the ranks' sort).
What it costs per list: ``S`` Gumbel samples of ``n`` items (``S = sample_size``), ``O(S n)``.

Example:
  >>> import numpy as np
  >>> from keras import ops
  >>> from tfrank4class.losses.lambda_weights import YetiDCGLambdaWeight
  >>> core = YetiLogisticLoss(YetiDCGLambdaWeight())
  >>> losses, _ = core.compute_per_list_from_ids(
  ...   ops.convert_to_tensor([1], "int32"), np.array([[2.0, 1.0, 0.0]]), None)
  >>> # 3 (1 - 1 / log2(3)) (log(1 + e) + log(1 + 1 / e)): the pairs (1, 0) and (1, 2)
  >>> [round(float(x), 4) for x in ops.convert_to_numpy(losses)[0]]
  [0.0, 1.8009, 0.0]
"""

from tfrank4class import backend
from tfrank4class.backend import take_along_axis
from tfrank4class.compat import ops
from tfrank4class.losses.lambda_weights import YetiDCGLambdaWeight
from tfrank4class.losses.ranking_losses.base import (
  at_true_class,
  true_class_mask,
  true_class_weight,
)
from tfrank4class.losses.ranking_losses.pairwise import PairwiseLogisticLoss
from tfrank4class.losses.ranking_losses.sampling import true_class_neighbours


class YetiLogisticLoss(PairwiseLogisticLoss):
  """:class:`~.pairwise.PairwiseLogisticLoss` whose class-id form with a
  :class:`YetiDCGLambdaWeight` takes the true class's two neighbours in ``O(n)``."""

  def compute_per_list_from_ids(self, ids, logits, weights):
    """:meth:`PairwiseLogisticLoss.compute_per_list_from_ids`: the true class's pairs with its
    neighbours in the order of the logits, their losses times their Yeti weights summed on the
    true class's item ``[B, n]`` (0 elsewhere), weighted by its sample weight ``[B, 1]``."""
    if not isinstance(self.lambda_weight, YetiDCGLambdaWeight):
      return super().compute_per_list_from_ids(ids, logits, weights)
    logits = self.get_logits(logits)
    is_true = true_class_mask(ids, logits)
    true = at_true_class(is_true, logits)
    rank, before, after = true_class_neighbours(logits, ids)
    size = ops.shape(logits)[1]
    pair_weights = self.lambda_weight.neighbour_weights(rank, size, logits.dtype)
    total = 0.0
    for neighbour, weight in zip((before, after), pair_weights):
      other = take_along_axis(logits, ops.maximum(neighbour, 0), axis=-1)
      weight = ops.stop_gradient(backend.where(neighbour >= 0, weight, 0.0))
      total = total + self._pair_loss(true - other) * weight
    return backend.where(is_true, total, 0.0), true_class_weight(ids, weights, logits)
