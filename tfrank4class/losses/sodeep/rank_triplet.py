"""SoDeep's rank triplet loss (Engilberge et al., CVPR 2019, Sec. 3.2.3, Eq. 9-10) over a rank
operator, for retrieval."""

from tfrank4class import backend, checks, compat
from tfrank4class.compat import ops
from tfrank4class.losses.registry import register
from tfrank4class.losses.sodeep.base import RankOperatorLoss
from tfrank4class.ranking.exact import sink


@register("rank_triplet_loss")
class RankTripletLoss(RankOperatorLoss):
  """Hardest-negative triplet loss on predicted ranks, for retrieval (SoDeep Sec. 3.2.3, Eq. 9-10).

  Each row is a query, its items the candidates, relevance > 0 the matching ones. With the
  normalised ranks ``r_i = (rk_hat(s)_i - 1) / (m - 1)`` in ``[0, 1]`` (0 = top, ``m`` valid
  items), every relevant item ``p`` must be ranked ahead of the hardest (best-ranked) irrelevant
  item by ``alpha``:

      L = 1/|P| * sum_{p in P} max(0, alpha + r_p - min_{q not in P} r_q)

  the rank analogue of the hardest-negative triplet loss ``max(0, alpha - s_p + max_q s_q)``.
  Eq. 9-10 assume one positive per query and take the mean over the queries of a batch; we
  average over the positives of a row so that several matches are allowed. A row without
  relevant or without irrelevant items has loss 0; padded items (relevance < 0) are excluded.
  For the paper's cross-modal setting (a square query x item score matrix ``S`` with the matches
  on the diagonal), add the two directions: ``loss(eye, S) + loss(eye, transpose(S))``.

  Cost: every rank is needed (the hardest negative), so through the pairwise sorters time is
  ``O(B n^2)``, all pairs, with memory bounded at any ``n``
  (:func:`~tfrank4class.ranking.sigmoid_comparisons.pairwise_sigmoid_sum`; docs/sodeep.md, "Cost
  at many classes").

  Args:
    ranker: the rank operator (see :mod:`~tfrank4class.losses.sodeep.base`).
    alpha: the margin, in normalised ranks (``>= 0``; the paper gives no value, the authors'
      code uses one rank position, ``1 / n``).
    ranker_trainable, ranker_learning_rate: fine-tune the sorter (see
      :mod:`~tfrank4class.losses.sodeep.base`).

  Example:
    >>> loss = RankTripletLoss(ranker="exact", alpha=0.5, reduction="none")
    >>> ops.convert_to_numpy(loss([[0.0, 1.0, 0.0]], [[0.9, 0.5, 0.1]]))  # r_p = .5, r_q = 0
    array([1.], dtype=float32)
    >>> from tfrank4class.compat import keras
    >>> scorer = keras.Sequential([keras.layers.Dense(3)])   # a query's scores of 3 candidates
    >>> scorer.compile(optimizer="adam", loss=RankTripletLoss(ranker="attention", alpha=0.1))
  """

  def __init__(
    self,
    ranker="attention",
    alpha=0.1,
    ranker_trainable=False,
    ranker_learning_rate=1e-4,
    reduction=compat.DEFAULT_REDUCTION,
    name="rank_triplet_loss",
  ):
    super().__init__(ranker, ranker_trainable, ranker_learning_rate, reduction, name)
    self.alpha = checks.check_float("alpha", alpha, minimum=0.0)

  def loss_values(self, scores, relevance):
    valid = relevance >= 0
    positive = relevance > 0
    negative = ops.logical_and(valid, ops.logical_not(positive))
    pos = ops.cast(positive, scores.dtype)
    m = ops.sum(ops.cast(valid, scores.dtype), axis=-1, keepdims=True)
    lists = sink(scores, valid)
    r = backend.divide_no_nan(self.ranks(lists) - 1.0, m - 1.0)
    hardest = ops.min(backend.where(negative, r, ops.ones_like(r) * 2.0), axis=-1, keepdims=True)
    hinge = ops.relu(self.alpha + r - hardest) * pos
    num_pos = ops.sum(pos, axis=-1)
    has_both = ops.logical_and(num_pos > 0, ops.any(negative, axis=-1))
    loss = backend.where(
      has_both, backend.divide_no_nan(ops.sum(hinge, -1), num_pos), ops.zeros_like(num_pos)
    )
    return self.with_finetune(loss, lists)

  def get_config(self):
    config = super().get_config()
    config["alpha"] = self.alpha
    return config
