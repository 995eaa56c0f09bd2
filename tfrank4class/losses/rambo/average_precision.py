"""The RaMBO average-precision losses (Rolinek et al., CVPR 2020, Sec. 4.6, Eq. 21-23).

* :class:`AveragePrecisionLoss`: ``1 - AP`` of every row of ``y_pred`` (Eq. 21-22).
* :class:`MeanAveragePrecisionLoss`: ``1 - mAP``, one list per class down the batch (Eq. 22
  averaged over the classes, Sec. 4.6; mAP is Eq. 6).
* :class:`APCLoss`: ``1 - AP`` of all (example, class) scores as one list (Eq. 23).
* :class:`MapApcLoss`: the weighted combination of the last two (the paper used 2:1, Sec. 5.2).

In all of them ``rk+`` (the rank among the relevant items) is a constant and only ``rk`` gets the
blackbox gradient (see :func:`tfrank4class.losses.rambo.base.list_ranks`).
"""

from tfrank4class import checks, compat
from tfrank4class.losses.rambo import base
from tfrank4class.losses.registry import register


@register("average_precision_loss")
class AveragePrecisionLoss(base.BlackboxRankLoss):
  """``1 - AP`` of each row of ``y_pred`` on blackbox ranks (Rolinek et al., Sec. 4.6, Eq. 21-22).

      L_AP = 1 - 1/|P| sum_{i in P} rk+_i / rk_i

  with ``rk_i`` the rank of relevant item ``i`` among all valid items and ``rk+_i`` its rank among
  the relevant items. Lists without a relevant item contribute 0.

  Args:
    lambda_: blackbox interpolation strength ``> 0`` (Eq. 10), for ranks normalised by the list
      length.
    margin: ``alpha >= 0``, the margin of Sec. 4.4, Eq. 14-15.

  Example:
    >>> loss = AveragePrecisionLoss(reduction="none")
    >>> loss([[1.0, 1.0, 0.0]], [[0.9, 0.5, 0.7]]).numpy().round(4)   # AP = (1/1 + 2/3) / 2
    array([0.1667], dtype=float32)
    >>> import tfrank4class.metrics
    >>> from tfrank4class.compat import keras
    >>> model = keras.Sequential([keras.layers.Dense(4)])
    >>> model.compile(optimizer="adam", loss=AveragePrecisionLoss(lambda_=4.0),
    ...               metrics=[tfrank4class.metrics.MeanAveragePrecision()])
  """

  def __init__(
    self,
    lambda_=1.0,
    margin=0.0,
    reduction=compat.DEFAULT_REDUCTION,
    name="average_precision_loss",
  ):
    super().__init__(lambda_=lambda_, margin=margin, memory=0, reduction=reduction, name=name)

  def loss_values(self, scores, relevance):
    return base.average_precision_loss_values(scores, relevance, self.lambda_, self.margin)

  def get_config(self):
    config = super().get_config()
    config.pop("memory")
    return config


@register("mean_average_precision_loss")
class MeanAveragePrecisionLoss(base.BlackboxRankLoss):
  """``1 - mAP`` with the classes as queries and the batch as the list (Rolinek et al., Sec. 4.6).

  Column ``c`` of ``y_pred`` ``[B, C]`` is ranked down the batch (plus the ``memory`` past
  batches, Sec. 4.3); its loss is Eq. 22 and ``L_mAP`` their mean over the classes; classes
  without a relevant example are left out of the mean. A batch-level loss: returns a scalar.

  Sample weights (``coupling = "batch"``, see :mod:`tfrank4class.losses.base`): an example of
  weight 0 is left out of every list; the loss of the others is scaled by the mean weight.

  Args:
    lambda_: blackbox interpolation strength ``> 0``.
    margin: ``alpha >= 0`` (Eq. 14-15).
    memory: ``tau >= 0`` past batches of scores and labels kept in a :class:`ScoreMemory`.

  Example:
    >>> loss = MeanAveragePrecisionLoss()
    >>> # class 0: relevant rows 0, 1 ranked 1st and 3rd -> AP 5/6; class 1: row 2 first -> AP 1
    >>> float(loss([0, 0, 1], [[0.9, 0.0], [0.5, 0.1], [0.7, 0.8]]))   # 1 - (5/6 + 1) / 2
    0.08333331346511841
    >>> import tfrank4class.metrics
    >>> from tfrank4class.compat import keras
    >>> model = keras.Sequential([keras.layers.Dense(2)])
    >>> model.compile(optimizer="adam", loss=MeanAveragePrecisionLoss(memory=2),
    ...               metrics=[tfrank4class.metrics.TopKAccuracy(1)])
  """

  supports_memory = True
  coupling = "batch"

  def __init__(
    self,
    lambda_=1.0,
    margin=0.0,
    memory=0,
    reduction=compat.DEFAULT_REDUCTION,
    name="mean_average_precision_loss",
  ):
    super().__init__(lambda_=lambda_, margin=margin, memory=memory, reduction=reduction, name=name)

  def loss_values(self, scores, relevance):
    return base.mean_average_precision_loss_value(scores, relevance, self.lambda_, self.margin)


@register("apc_loss")
class APCLoss(base.BlackboxRankLoss):
  """``1 - AP`` of all classes of all examples as one list (Rolinek et al., Sec. 4.6, Eq. 23).

  The ``B x C`` scores (plus the ``memory`` past batches) form a single list whose relevant items
  are the (example, true class) pairs, which favours scores comparable across classes.
  A batch-level loss: returns a scalar.

  Sample weights (``coupling = "batch"``, see :mod:`tfrank4class.losses.base`): an example of
  weight 0 is left out of every list; the loss of the others is scaled by the mean weight.

  Example:
    >>> loss = APCLoss()
    >>> # one list [0.9, 0.2, 0.4, 0.6], relevant 0.9 (rank 1) and 0.6 (rank 2): AP = 1
    >>> float(loss([0, 1], [[0.9, 0.2], [0.4, 0.6]]))
    0.0
    >>> import tfrank4class.metrics
    >>> from tfrank4class.compat import keras
    >>> model = keras.Sequential([keras.layers.Dense(2)])
    >>> model.compile(optimizer="adam", loss=APCLoss(memory=2),
    ...               metrics=[tfrank4class.metrics.TopKAccuracy(1)])
  """

  supports_memory = True
  coupling = "batch"

  def __init__(
    self, lambda_=1.0, margin=0.0, memory=0, reduction=compat.DEFAULT_REDUCTION, name="apc_loss"
  ):
    super().__init__(lambda_=lambda_, margin=margin, memory=memory, reduction=reduction, name=name)

  def loss_values(self, scores, relevance):
    return base.apc_loss_value(scores, relevance, self.lambda_, self.margin)


@register("map_apc_loss")
class MapApcLoss(base.BlackboxRankLoss):
  """Weighted mAP + APC loss (Rolinek et al., Sec. 5.2; the paper weighted them 2:1).

      L = (map_weight * L_mAP + apc_weight * L_APC) / (map_weight + apc_weight)

  Both terms see the same lists (current batch plus ``memory`` past batches), as Sec. 4.3 describes
  the memory for the loss as a whole; the authors' code computes its APC term on the current batch
  only.

  Sample weights (``coupling = "batch"``, see :mod:`tfrank4class.losses.base`): an example of
  weight 0 is left out of every list; the loss of the others is scaled by the mean weight.

  Args:
    map_weight, apc_weight: non-negative weights, not both 0.
    lambda_, margin, memory: as in :class:`MeanAveragePrecisionLoss`.

  Example:
    >>> loss = MapApcLoss(map_weight=2.0, apc_weight=1.0)
    >>> # 1 - mAP = 1/12 (see MeanAveragePrecisionLoss); the single list 0.9 0.8 0.7 0.5 0.1 0.0
    >>> # has relevant items at ranks 1, 2, 4: 1 - APC = 1 - (1 + 1 + 3/4) / 3 = 1/12
    >>> round(float(loss([0, 0, 1], [[0.9, 0.0], [0.5, 0.1], [0.7, 0.8]])), 4)
    0.0833
    >>> import tfrank4class.metrics
    >>> from tfrank4class.compat import keras
    >>> model = keras.Sequential([keras.layers.Dense(2)])
    >>> model.compile(optimizer="adam", loss=MapApcLoss(memory=2),
    ...               metrics=[tfrank4class.metrics.TopKAccuracy(1)])
  """

  supports_memory = True
  coupling = "batch"

  def __init__(
    self,
    map_weight=2.0,
    apc_weight=1.0,
    lambda_=1.0,
    margin=0.0,
    memory=0,
    reduction=compat.DEFAULT_REDUCTION,
    name="map_apc_loss",
  ):
    self.map_weight = checks.check_float("map_weight", map_weight, minimum=0.0)
    self.apc_weight = checks.check_float("apc_weight", apc_weight, minimum=0.0)
    if self.map_weight + self.apc_weight == 0.0:
      raise ValueError("`map_weight` and `apc_weight` must not both be 0, got 0 and 0.")
    super().__init__(lambda_=lambda_, margin=margin, memory=memory, reduction=reduction, name=name)

  def loss_values(self, scores, relevance):
    total = self.map_weight + self.apc_weight
    loss_map = base.mean_average_precision_loss_value(scores, relevance, self.lambda_, self.margin)
    loss_apc = base.apc_loss_value(scores, relevance, self.lambda_, self.margin)
    return (self.map_weight * loss_map + self.apc_weight * loss_apc) / total

  def get_config(self):
    config = super().get_config()
    config.update({"map_weight": self.map_weight, "apc_weight": self.apc_weight})
    return config
