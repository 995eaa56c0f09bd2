"""SoDeep's Spearman loss (Engilberge et al., CVPR 2019, Sec. 3.2.1, Eq. 2-4) over a rank
operator."""

from tfrank4class import backend, checks, compat
from tfrank4class.compat import ops
from tfrank4class.losses.registry import register
from tfrank4class.losses.sodeep.base import RankOperatorLoss
from tfrank4class.ranking.exact import sink
from tfrank4class.ranking.ties import tie_statistics


@register("spearman_loss")
class SpearmanLoss(RankOperatorLoss):
  """One minus Spearman's correlation through a rank operator (SoDeep Sec. 3.2.1, Eq. 2-4).

      L(y, s) = 6 * sum_i (rk_hat(s)_i - rk(y)_i)^2 / (m (m^2 - 1))
                + l1_weight * mean_i |s_i - y_i|

  over the ``m`` valid items of a list. ``rk_hat`` is the rank operator (a sorter); ``rk(y)`` the
  exact ranks of the targets (ties get their average rank). Eq. 4 is the squared distance
  ``||rk_hat(s) - rk(y)||^2``; the factor ``6 / (m (m^2 - 1))`` of Eq. 2 makes the first term
  ``1 - rho`` (Spearman's rho) with exact ranks and no ties, whatever the list length. The
  optional L1 term on the raw scores is the warm-up of Sec. 4.2.1 (the paper adds an L1 loss
  during the first epoch; the authors' code calls its weight ``lbd``).

  Padding (``over_batch=False``): targets below 0 mark padded items, as everywhere in the
  package (shift real-valued targets to be >= 0, which leaves their ranks unchanged); padded
  items are excluded (see :mod:`~tfrank4class.losses.sodeep.base`) and ``m`` counts the others. A
  list with fewer than 2 valid items has loss 0. With ``over_batch=True`` the targets are
  regression values and every value, negative ones included, is a target.

  Cost: every rank is needed, so through the pairwise sorters (``"attention"``, the default, and
  ``"pairwise_sigmoid"``) time is ``O(B n^2)``, all pairs, with memory bounded at any ``n``
  (:func:`~tfrank4class.ranking.sigmoid_comparisons.pairwise_sigmoid_sum`; docs/sodeep.md, "Cost
  at many classes").

  Args:
    ranker: the rank operator (see :mod:`~tfrank4class.losses.sodeep.base`).
    l1_weight: weight of the L1 term on raw scores (0 disables it).
    over_batch: if True, the whole batch is one list: ``y_pred`` / ``y_true`` of shape ``[B]``
      or ``[B, 1]`` (regression outputs), ranked across the batch, as in the paper's Sec.
      4.2.1. Otherwise each row of ``[B, n]`` is a list and ``y_true`` is dense targets
      ``[B, n]`` or class ids.
    ranker_trainable, ranker_learning_rate: fine-tune the sorter on the real scores (see
      :mod:`~tfrank4class.losses.sodeep.base`).

  Example:
    >>> loss = SpearmanLoss(ranker="exact", reduction="none")
    >>> ops.convert_to_numpy(loss([[3.0, 2.0, 1.0]], [[0.9, 0.5, 0.1]]))
    array([0.], dtype=float32)
    >>> ops.convert_to_numpy(loss([[3.0, -1.0, 2.0, 1.0]], [[0.9, 5.0, 0.1, 0.5]]))  # 1 is padding
    array([0.5], dtype=float32)
    >>> from tfrank4class.compat import keras
    >>> regressor = keras.Sequential([keras.layers.Dense(1)])   # one score per example
    >>> regressor.compile(optimizer="adam",
    ...                   loss=SpearmanLoss(ranker="attention", over_batch=True, l1_weight=1.0))
  """

  def __init__(
    self,
    ranker="attention",
    l1_weight=0.0,
    over_batch=False,
    ranker_trainable=False,
    ranker_learning_rate=1e-4,
    reduction=compat.DEFAULT_REDUCTION,
    name="spearman_loss",
  ):
    super().__init__(ranker, ranker_trainable, ranker_learning_rate, reduction, name)
    self.l1_weight = checks.check_float("l1_weight", l1_weight, minimum=0.0)
    if not isinstance(over_batch, bool):
      raise ValueError(f"`over_batch` must be a bool, got {over_batch!r}.")
    self.over_batch = over_batch

  def call(self, y_true, y_pred):
    if not self.over_batch:
      return super().call(y_true, y_pred)
    y_pred = ops.convert_to_tensor(y_pred)
    ndim = len(y_pred.shape)
    if ndim not in (1, 2) or (ndim == 2 and y_pred.shape[-1] != 1):
      raise ValueError(
        f"With over_batch=True `y_pred` must have shape [B] or [B, 1], got shape {y_pred.shape}."
      )
    scores = checks.check_scores("y_pred", ops.reshape(y_pred, (1, -1)), min_length=2, finite=False)
    scores, invalid = checks.check_item_scores("y_pred", scores)
    target = ops.reshape(ops.cast(y_true, scores.dtype), (1, -1))
    loss = self._loss(scores, target, ops.ones_like(scores, "bool"))
    return loss if invalid is None else backend.where(invalid, float("nan"), loss)

  def loss_values(self, scores, relevance):
    return self._loss(scores, relevance, relevance >= 0)

  def _loss(self, scores, target, valid):
    stats = tie_statistics(target, mask=valid)
    target_ranks = stats["above"] + (stats["tied"] + 1.0) / 2.0
    m = ops.sum(ops.cast(valid, scores.dtype), axis=-1)
    lists = sink(scores, valid)
    zeros = ops.zeros_like(scores)
    sq = ops.sum(backend.where(valid, ops.square(self.ranks(lists) - target_ranks), zeros), -1)
    loss = backend.divide_no_nan(6.0 * sq, m * (m * m - 1.0))
    if self.l1_weight:
      l1 = ops.sum(backend.where(valid, ops.abs(scores - target), zeros), axis=-1)
      loss += self.l1_weight * backend.divide_no_nan(l1, m)
    return self.with_finetune(loss, lists)

  def get_config(self):
    config = super().get_config()
    config.update({"l1_weight": self.l1_weight, "over_batch": self.over_batch})
    return config
