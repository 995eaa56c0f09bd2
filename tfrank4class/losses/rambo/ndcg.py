"""1 - NDCG on blackbox ranks: an O(n log n) alternative to ApproxNDCG for long lists."""

from tfrank4class import compat
from tfrank4class.losses.rambo import base
from tfrank4class.losses.registry import register


@register("blackbox_ndcg_loss")
class BlackboxNDCGLoss(base.BlackboxRankLoss):
  """``1 - NDCG`` with exact ranks in the forward pass and the RaMBO blackbox gradient.

      DCG = sum_i (2^{rel_i} - 1) / log2(1 + rk_i),   L = 1 - DCG / IDCG

  (NDCG: Jarvelin & Kekalainen, 2002; ranks ``rk`` from the blackbox ranker of Rolinek et al.,
  CVPR 2020, Eq. 10 and Algorithm 1, in place of ApproxNDCG's sigmoid-smoothed ranks (Qin et al.,
  2010)). ApproxNDCG compares every pair of items, O(n^2) time and memory per list; this loss
  sorts twice forward (the ranks, and the gains for IDCG) and once backward, O(n log n) time and
  O(n) memory, which matters for long lists such as the 1,000 ImageNet classes. Lists without a
  relevant item contribute 0.

  Args:
    lambda_: blackbox interpolation strength ``> 0``.
    margin: ``alpha >= 0`` margin of Sec. 4.4, Eq. 14-15 between relevant (rel > 0) and other
      items.

  Example:
    >>> loss = BlackboxNDCGLoss(reduction="none")
    >>> loss([1], [[0.9, 0.5]]).numpy().round(4)   # the true class at rank 2: 1 - 1/log2(3)
    array([0.3691], dtype=float32)
    >>> import tfrank4class.metrics
    >>> from tfrank4class.compat import keras
    >>> model = keras.Sequential([keras.layers.Dense(2)])
    >>> model.compile(optimizer="adam", loss=BlackboxNDCGLoss(lambda_=4.0),
    ...               metrics=[tfrank4class.metrics.NDCG(5)])
  """

  def __init__(
    self, lambda_=1.0, margin=0.0, reduction=compat.DEFAULT_REDUCTION, name="blackbox_ndcg_loss"
  ):
    super().__init__(lambda_=lambda_, margin=margin, memory=0, reduction=reduction, name=name)

  def loss_values(self, scores, relevance):
    return base.ndcg_loss_values(scores, relevance, self.lambda_, self.margin)

  def get_config(self):
    config = super().get_config()
    config.pop("memory")
    return config
