"""1 - NDCG on blackbox ranks: an O(n log n) alternative to ApproxNDCG for long lists (O(n) with
class ids).

:func:`ndcg_loss_values` is the loss as a pure function, :class:`BlackboxNDCGLoss` the Keras
loss.
"""

import math

from tfrank4class import backend, compat
from tfrank4class.compat import ops
from tfrank4class.losses.rambo import base
from tfrank4class.losses.registry import register
from tfrank4class.ranking.blackbox import blackbox_rank_within


def ndcg_loss_values(scores, labels, *, where=None, lambda_=1.0, margin=0.0):
  """Per-list ``1 - NDCG`` with blackbox ranks (beyond the paper).

      DCG = sum_i (2^{rel_i} - 1) / log2(1 + rk_i),   NDCG = DCG / IDCG

  with ``rk`` the blackbox rank among valid items and IDCG the DCG of the relevance sorted in
  decreasing order. Lists with IDCG = 0 (no relevant item) get loss 0. Arguments as for
  :func:`tfrank4class.losses.rambo.average_precision.average_precision_loss_values`; ``margin``
  separates the items with relevance ``> 0`` from the others.

  Cost: class ids, ``O(n)`` per list forward and backward, no sort (one gain of 1: ``NDCG =
  1 / log2(1 + rk_t)``, :func:`~tfrank4class.losses.rambo.base.true_class_ranks`); dense
  relevance, two sorts forward (the ranks, the gains for IDCG) and one backward,
  ``O(n log n)``.

  Example:
    >>> import numpy as np
    >>> # relevant item at rank 2: NDCG = 1 / log2(3)
    >>> s = np.array([[0.9, 0.5]], np.float32)
    >>> ops.convert_to_numpy(ndcg_loss_values(s, np.array([1]))).round(4)
    array([0.3691], dtype=float32)
  """
  scores, parsed = base.list_labels(scores, labels)
  log2 = math.log(2.0)
  if parsed.is_class_ids:
    # One relevant item, of gain 2^1 - 1 = 1: DCG = 1 / log2(1 + rk_t), IDCG = 1 / log2(2).
    rk, has_true = base.true_class_ranks(scores, parsed.ids, where, lambda_, margin)
    ndcg = (log2 / ops.log1p(rk)) / (log2 / ops.log1p(ops.ones_like(rk)))
    return parsed.mark_invalid(backend.where(has_true, 1.0 - ndcg, ops.zeros_like(ndcg)))
  _, relevance, _ = base.list_relevance(scores, parsed, where)
  shifted, _, valid = base.prepared(scores, relevance, margin)
  rk = ops.cast(blackbox_rank_within(shifted, valid, lambda_, normalized=True), scores.dtype)
  gains = backend.where(
    valid,
    ops.power(2.0, backend.maximum(relevance, 0.0)) - 1.0,
    ops.zeros_like(rk),
  )
  dcg = ops.sum(gains * log2 / ops.log1p(rk), axis=-1)
  ideal = ops.flip(ops.sort(gains, axis=-1), axis=-1)
  positions = ops.cast(ops.arange(1, ops.shape(gains)[-1] + 1), rk.dtype)
  idcg = ops.sum(ideal * log2 / ops.log1p(positions), axis=-1)
  ndcg = backend.divide_no_nan(dcg, idcg)
  return parsed.mark_invalid(backend.where(idcg > 0, 1.0 - ndcg, ops.zeros_like(ndcg)))


@register("blackbox_ndcg_loss")
class BlackboxNDCGLoss(base.BlackboxRankLoss):
  """``1 - NDCG`` with exact ranks in the forward pass and the RaMBO blackbox gradient.

      DCG = sum_i (2^{rel_i} - 1) / log2(1 + rk_i),   L = 1 - DCG / IDCG

  (NDCG: Jarvelin & Kekalainen, 2002; ranks ``rk`` from the blackbox ranker of Rolinek et al.,
  CVPR 2020, Eq. 10 and Algorithm 1, in place of ApproxNDCG's sigmoid-smoothed ranks (Qin et al.,
  2010)). ApproxNDCG compares every pair of items, O(n^2) time and memory per list; this loss
  sorts twice forward (the ranks, and the gains for IDCG) and once backward, O(n log n) time and
  O(n) memory, which matters for long lists such as the 1,000 ImageNet classes. With class ids
  (one true class per list) it sorts nothing: forward and backward are counts, O(n) per list
  (:func:`ndcg_loss_values`). Lists without a relevant item contribute 0.

  Args:
    lambda_: blackbox interpolation strength ``> 0``.
    margin: ``alpha >= 0`` margin of Sec. 4.4, Eq. 14-15 between relevant (rel > 0) and other
      items.

  Example:
    >>> import numpy as np
    >>> loss = BlackboxNDCGLoss(reduction="none")
    >>> s = np.array([[0.9, 0.5]], np.float32)
    >>> ops.convert_to_numpy(loss(np.array([1]), s)).round(4)   # rank 2: 1 - 1/log2(3)
    array([0.3691], dtype=float32)
    >>> import tfrank4class.metrics
    >>> from tfrank4class.compat import keras
    >>> model = keras.Sequential([keras.layers.Dense(2)])
    >>> model.compile(optimizer="adam", loss=BlackboxNDCGLoss(lambda_=4.0),
    ...               metrics=[tfrank4class.metrics.NDCG(5)])
  """

  takes_class_ids = True

  def __init__(
    self, lambda_=1.0, margin=0.0, reduction=compat.DEFAULT_REDUCTION, name="blackbox_ndcg_loss"
  ):
    super().__init__(lambda_=lambda_, margin=margin, memory=0, reduction=reduction, name=name)

  def loss_values(self, scores, relevance):
    return ndcg_loss_values(scores, relevance, lambda_=self.lambda_, margin=self.margin)

  def get_config(self):
    config = super().get_config()
    config.pop("memory")
    return config
