"""SoDeep's mAP loss (Engilberge et al., CVPR 2019, Sec. 3.2.2, Eq. 7) and the per-list
``1 - AP`` (Eq. 5-6) over a rank operator."""

from tfrank4class import backend, compat
from tfrank4class.compat import ops
from tfrank4class.labels import Labels
from tfrank4class.losses.registry import register
from tfrank4class.losses.sodeep.base import RankOperatorLoss
from tfrank4class.ranking.exact import sink
from tfrank4class.ranking.precision import average_precision_from_ranks


@register("sorter_map_loss")
class SorterMAPLoss(RankOperatorLoss):
  """The mAP loss of SoDeep (Sec. 3.2.2, Eq. 7): each class ranked down the batch.

  As in multi-label classification (the paper's VOC 2007 setting), every class ``c`` is a query
  over the ``d`` items of the batch: its column of scores ``y_c`` (``[B, C]`` scores, column
  ``c``) is one list, ranked by the rank operator, and Eq. 7 adds the predicted ranks of the
  column's positives ``P_c`` (relevance > 0; ``N_c`` are its other valid items):

      Eq. 7:  L = sum_c < rk_hat(y_c), y*_c > = sum_c sum_{j in P_c} rk_hat(y_c)_j

  Minimising the positives' ranks is the paper's surrogate for maximising AP (Sec. 3.2.2). We
  compute, over the classes ``C+`` with at least one positive and one negative in the batch,

      L = 1/|C+| * sum_{c in C+} (sum_{j in P_c} rk_hat(y_c)_j - |P_c| (|P_c| + 1) / 2)
                                   / (|P_c| |N_c|)

  i.e. each class's term of Eq. 7 less its best possible value (a constant) and divided by
  ``|P_c| |N_c|``. Deviations, on purpose: (1) this scaling makes the value readable at any
  batch size: with exact ranks and no ties it is the fraction of positive-negative pairs in the
  wrong order, ``1 - ROC AUC`` of the class, averaged over the classes (each class weighs the
  same, as in the mean of mAP) -- it is *not* ``1 - mAP``; the authors' code instead divides the
  ranks by the batch size and adds the classes unweighted. (2) Classes without a positive in the
  batch are left out, as in the authors' code (``MapRankingLoss`` skips a column whose targets
  sum to 0); we also leave out classes without a negative, whose sum of ranks is a constant.
  For the per-list ``1 - AP`` of each row (each input ranking its classes) use
  :class:`SorterAPLoss`.

  The loss is one value per batch (shape ``[1]``): it is not a sum over independent rows. Padded
  entries (relevance < 0) are excluded from their class's list. Sample weights
  (``coupling = "batch"``, see :mod:`tfrank4class.losses.base`): an example of weight 0 is left
  out of every class's list; the loss of the others is scaled by the mean weight. A sorter tied
  to one length (``ConvSorter``) needs batches of exactly its ``list_size``. Adding a constant
  to all scores of one class leaves the loss unchanged, so it learns per-class rankings (mAP),
  not which class wins for an input (top-1); the paper (Sec. 4.2.2) adds it to a per-example loss
  (the multi-label soft margin loss). Its gradient per rank is ``1 / (|C+| |P_c| |N_c|)``, so with
  the blackbox ranker choose a larger interpolation ``lambda`` than for per-list losses.
  Cost: ``C`` lists of ``B`` items, ``O(C B^2)`` time and memory through the pairwise sorters.

  Args:
    ranker: the rank operator (see :mod:`~tfrank4class.losses.sodeep.base`).
    ranker_trainable, ranker_learning_rate: fine-tune the sorter (see
      :mod:`~tfrank4class.losses.sodeep.base`).

  Example:
    >>> loss = SorterMAPLoss(ranker="exact")
    >>> # class 0: positives ranked 1 and 3 of 3 -> 1 of 2 pairs wrong; class 1: no positive.
    >>> value = loss([[1, 0], [0, 0], [1, 0]], [[0.9, 0.1], [0.5, 0.2], [0.1, 0.3]])
    >>> float(ops.convert_to_numpy(value).ravel()[0])
    0.5
    >>> import tfrank4class.metrics
    >>> from tfrank4class.compat import keras
    >>> model = keras.Sequential([keras.layers.Dense(2)])
    >>> model.compile(optimizer="adam", loss=SorterMAPLoss(ranker="attention"),
    ...               metrics=[tfrank4class.metrics.MeanAveragePrecision()])
  """

  coupling = "batch"
  min_list_size = 1

  def __init__(
    self,
    ranker="attention",
    ranker_trainable=False,
    ranker_learning_rate=1e-4,
    reduction=compat.DEFAULT_REDUCTION,
    name="sorter_map_loss",
  ):
    super().__init__(ranker, ranker_trainable, ranker_learning_rate, reduction, name)

  def loss_values(self, scores, relevance):
    batch = scores.shape[0]
    if batch is not None and batch < 2:
      raise ValueError(
        f"SorterMAPLoss ranks each class down the batch (SoDeep Eq. 7) and needs a batch of at "
        f"least 2 items, got `y_pred` of shape {scores.shape}."
      )
    columns = ops.transpose(scores)  # [C, B]: one list per class
    relevance = ops.transpose(relevance)
    valid = relevance >= 0
    positive = relevance > 0
    pos = ops.cast(positive, scores.dtype)
    num_pos = ops.sum(pos, axis=-1)
    num_neg = ops.sum(ops.cast(valid, scores.dtype), axis=-1) - num_pos
    lists = sink(columns, valid)
    rank_sum = ops.sum(self.ranks(lists) * pos, axis=-1)
    wrong = (rank_sum - num_pos * (num_pos + 1.0) / 2.0) / ops.maximum(num_pos * num_neg, 1.0)
    kept = ops.cast(ops.logical_and(num_pos > 0, num_neg > 0), scores.dtype)
    loss = backend.divide_no_nan(ops.sum(wrong * kept), ops.sum(kept))
    return self.with_finetune(ops.reshape(loss, (1,)), lists)


@register("sorter_ap_loss")
class SorterAPLoss(RankOperatorLoss):
  """One minus the average precision of each list through a rank operator (SoDeep Eq. 5-6).

      AP(s) = 1/|P| * sum_{i in P} rk_hat(s_P)_i / rk_hat(s)_i,        L = 1 - AP

  Each row is a list (in classification as ranking: an input ranking its classes), ``P`` its
  relevant items (relevance > 0), ``rk_hat(s)`` their ranks in the whole list and
  ``rk_hat(s_P)`` their ranks among the relevant items only, so ``rk_hat(s_P)_i / rk_hat(s)_i``
  is the precision at item ``i`` (Eq. 6, counting ``i`` itself). The latter ranks are computed
  by the same operator on the list whose irrelevant items are moved below every relevant one.
  The AP is :func:`tfrank4class.ranking.precision.average_precision_from_ranks`, the formula the
  RaMBO AP loss applies to blackbox ranks. With exact ranks this is the exact ``1 - AP``; a list
  without relevant items has loss 0.
  Padded items (relevance < 0) are excluded. This is the per-list AP; the paper's mAP loss,
  which ranks each class down the batch, is :class:`SorterMAPLoss` (Eq. 7).

  Cost: with class ids only the true class's two ranks are needed. Its rank in the list
  (:meth:`~tfrank4class.losses.sodeep.base.RankOperatorLoss.ranks_at`) is ``O(B n)`` for the
  pairwise sorters (their row of comparisons; the attention sorter's steepness reads the row
  once per bandwidth, without a sort), every rank for the LSTM and CNN sorters. Its rank among
  the relevant items is its rank in a list of two values (itself over ``n - 1`` sunk items):
  ``O(B)`` in closed form for the attention sorter
  (:meth:`~tfrank4class.ranking.AttentionSorter.rank_above_ties`), the same cost again for the
  other rankers. With dense relevance every rank is computed, ``O(B n^2)`` through the pairwise
  sorters (docs/sodeep.md, "Cost at many classes").

  Args:
    ranker: the rank operator (see :mod:`~tfrank4class.losses.sodeep.base`).
    ranker_trainable, ranker_learning_rate: fine-tune the sorter (see
      :mod:`~tfrank4class.losses.sodeep.base`).

  Example:
    >>> loss = SorterAPLoss(ranker="exact", reduction="none")
    >>> ops.convert_to_numpy(loss([[1.0, 0.0, 1.0]], [[0.9, 0.5, 0.1]])).round(4)  # (1 + 2/3) / 2
    array([0.1667], dtype=float32)
    >>> import tfrank4class.metrics
    >>> from tfrank4class.compat import keras
    >>> model = keras.Sequential([keras.layers.Dense(3)])
    >>> model.compile(optimizer="adam", loss=SorterAPLoss(ranker="attention"),
    ...               metrics=[tfrank4class.metrics.MeanAveragePrecision()])
  """

  def __init__(
    self,
    ranker="attention",
    ranker_trainable=False,
    ranker_learning_rate=1e-4,
    reduction=compat.DEFAULT_REDUCTION,
    name="sorter_ap_loss",
  ):
    super().__init__(ranker, ranker_trainable, ranker_learning_rate, reduction, name)

  takes_class_ids = True

  def loss_values(self, scores, labels):
    if isinstance(labels, Labels):
      return self._class_id_loss(scores, labels.ids)
    relevance = labels
    positive = relevance > 0
    lists = sink(scores, relevance >= 0)
    relevant_ranks = self.ranks(sink(scores, positive))
    ap = average_precision_from_ranks(self.ranks(lists), relevant_ranks, positive)
    loss = backend.where(ops.any(positive, axis=-1), 1.0 - ap, ops.zeros_like(ap))
    return self.with_finetune(loss, lists)

  def _class_id_loss(self, scores, ids):
    """``1 - rk_hat(s_P)_y / rk_hat(s)_y`` for the one true class ``y`` of each list: the rank
    of ``y`` alone (:meth:`~tfrank4class.losses.sodeep.base.RankOperatorLoss.ranks_at`) in the
    list and in the list whose other items are sunk below it (:func:`sink`: all at
    ``s_y - 1``), the latter in closed form where the ranker has one
    (:meth:`~tfrank4class.ranking.AttentionSorter.rank_above_ties`)."""
    rank = self.ranks_at(scores, ids)
    closed_form = getattr(self.ranker, "rank_above_ties", None)
    if closed_form is None:
      is_true = ops.equal(ops.arange(scores.shape[-1], dtype="int32")[None, :], ids[:, None])
      relevant_rank = self.ranks_at(sink(scores, is_true), ids)
    else:
      top = backend.take_along_axis(scores, ops.cast(ids, "int32")[:, None], axis=-1)[:, 0]
      floor = ops.stop_gradient(top) - 1.0  # sink's floor with one relevant item, a constant
      relevant_rank = ops.cast(closed_form(top, floor, ops.shape(scores)[-1]), scores.dtype)
    return self.with_finetune(1.0 - backend.divide_no_nan(relevant_rank, rank), scores)
