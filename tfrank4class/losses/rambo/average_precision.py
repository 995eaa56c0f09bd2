"""The RaMBO average-precision losses (Rolinek et al., CVPR 2020, Sec. 4.6, Eq. 21-23).

* :class:`AveragePrecisionLoss`: ``1 - AP`` of every row of ``y_pred`` (Eq. 21-22).
* :class:`MeanAveragePrecisionLoss`: ``1 - mAP``, one list per class down the batch (Eq. 22
  averaged over the classes, Sec. 4.6; mAP is Eq. 6).
* :class:`APCLoss`: ``1 - AP`` of all (example, class) scores as one list (Eq. 23).
* :class:`MapApcLoss`: the weighted combination of the last two (the paper used 2:1, Sec. 5.2).

In all of them ``rk+`` (the rank among the relevant items) is a constant and only ``rk`` gets the
blackbox gradient (see :func:`tfrank4class.losses.rambo.base.list_ranks`). The formulas are the
pure functions :func:`average_precision_loss_values` (one value per list) and the batch-level
:func:`mean_average_precision_loss_value` and :func:`apc_loss_value`.
"""

from tfrank4class import backend, checks, compat
from tfrank4class.compat import ops
from tfrank4class.losses.rambo import base
from tfrank4class.losses.registry import register
from tfrank4class.ranking.precision import average_precision_from_ranks


def _ap_loss(scores, relevance, lambda_, margin):
  """``1 - AP`` per list of checked scores and dense relevance (0 without a relevant item)."""
  rk, rk_plus, relevant, _ = base.list_ranks(scores, relevance, lambda_, margin)
  ap = average_precision_from_ranks(rk, rk_plus, relevant)
  return backend.where(ops.any(relevant, axis=-1), 1.0 - ap, ops.zeros_like(ap))


def average_precision_loss_values(scores, labels, *, where=None, lambda_=1.0, margin=0.0):
  """Per-list ``1 - AP`` (Rolinek et al., Sec. 4.6, Eq. 21-22).

      L_AP = 1 - 1/|P| sum_{i in P} Prec(i),   Prec(i) = rk+_i / rk_i

  (``rk+_i`` relevant items at or above ``i`` over all items at or above ``i``; ``rk+`` is a
  constant, see :func:`~tfrank4class.losses.rambo.base.list_ranks`; the AP is
  :func:`tfrank4class.ranking.precision.average_precision_from_ranks`). Lists without a relevant
  item get loss 0.

  Cost: class ids, ``O(n)`` per list forward and backward, no sort (AP is ``1 / rk_t``,
  :func:`~tfrank4class.losses.rambo.base.true_class_ranks`); dense relevance, two sorts forward
  and one backward, ``O(n log n)``.

  Args:
    scores: ``[B, n]``, one list per row.
    labels: class ids ``[B]`` / ``[B, 1]`` or dense relevance ``[B, n]`` (``< 0``: padding).
    where: optional bool ``[B, n]``; items where it is False are left out (padding).
    lambda_: blackbox interpolation strength ``> 0``; margin: ``alpha >= 0`` (Eq. 14-15).

  Returns:
    ``[B]`` losses in the scores' dtype.

  Example:
    >>> import numpy as np
    >>> # relevant at ranks 1 and 3: AP = (1/1 + 2/3) / 2 = 5/6
    >>> s, r = np.array([[0.9, 0.5, 0.7]], np.float32), np.array([[1.0, 1.0, 0.0]], np.float32)
    >>> ops.convert_to_numpy(average_precision_loss_values(s, r)).round(4)
    array([0.1667], dtype=float32)
  """
  scores, parsed = base.list_labels(scores, labels)
  if parsed.is_class_ids:
    # One relevant item: AP = rk+_t / rk_t = 1 / rk_t.
    rk, has_true = base.true_class_ranks(scores, parsed.ids, where, lambda_, margin)
    loss = 1.0 - 1.0 / rk
    return parsed.mark_invalid(backend.where(has_true, loss, ops.zeros_like(loss)))
  _, relevance, _ = base.list_relevance(scores, parsed, where)
  return parsed.mark_invalid(_ap_loss(scores, relevance, lambda_, margin))


def mean_average_precision_loss_value(scores, labels, *, where=None, lambda_=1.0, margin=0.0):
  """``1 - mAP`` with one list per class down the batch (Rolinek et al., Sec. 4.6; mAP: Eq. 6).

  Column ``c`` of ``scores`` ``[B, C]`` is the list of the batch's scores for class ``c``; its
  loss is Eq. 22 and ``L_mAP`` their mean over the classes (Sec. 4.6); classes without a relevant
  item in the batch are left out of the mean. Arguments as for
  :func:`average_precision_loss_values`. Returns a scalar (0 if no class has a relevant item).

  Cost: class ids, only the lists of the batch's own classes (at most ``B``; a class without a
  relevant example has no loss and no gradient): a gather of ``B`` columns, then ``B`` lists of
  ``B`` items, two sorts forward and one backward, ``O(B^2 log B)``, and ``O(B C)`` for the
  gather's gradient; dense relevance, all ``C`` lists, ``O(C B log B)``.

  Example:
    >>> import numpy as np
    >>> # class 0: relevant rows 0, 1 ranked 1st and 3rd -> AP 5/6; class 1: row 2 first -> AP 1
    >>> s = np.array([[0.9, 0.0], [0.5, 0.1], [0.7, 0.8]], np.float32)
    >>> round(float(mean_average_precision_loss_value(s, np.array([0, 0, 1]))), 4)
    0.0833
  """
  scores, parsed = base.list_labels(scores, labels)
  if parsed.is_class_ids:
    scores_t, relevance_t, first = _true_class_columns(scores, parsed.ids, where)
  else:
    _, relevance, _ = base.list_relevance(scores, parsed, where)
    scores_t, relevance_t, first = ops.transpose(scores), ops.transpose(relevance), None
  per_class = _ap_loss(scores_t, relevance_t, lambda_, margin)
  present = ops.any(relevance_t > 0, axis=-1)
  if first is not None:
    present = ops.logical_and(present, first)
  return base.mark_batch(parsed, base.mean_over(per_class, present, axis=0))


def _true_class_columns(scores, ids, where):
  """Class ids: the per-class lists of :func:`mean_average_precision_loss_value` that can count.

  A class without a relevant example in the batch is left out of the mean and its list gets no
  gradient (``dL/drk = 0`` at every item, so the blackbox step moves nothing), so only the
  columns of the batch's own classes matter: list ``j`` is column ``ids[j]`` ``[B]``, with the
  examples of class ``ids[j]`` relevant. Returns ``(scores [B, B], relevance [B, B], first [B])``
  with list ``j`` in row ``j``; ``first[j]`` is False when an earlier example has the same class
  (its list is a copy, left out of the mean and of the gradient).
  """
  ids = ops.cast(ids, "int32")
  columns = ops.transpose(ops.take(scores, ids, axis=1))
  same = ids[:, None] == ids[None, :]  # [j, k]: example k is relevant in list j
  relevance = ops.cast(same, scores.dtype)
  if where is not None:
    valid = ops.transpose(ops.take(base.where_mask(where), ids, axis=1))
    relevance = backend.where(valid, relevance, -ops.ones_like(relevance))
  earlier = ops.arange(ops.shape(ids)[0], dtype="int32")
  repeated = ops.logical_and(same, earlier[None, :] < earlier[:, None])
  return columns, relevance, ops.logical_not(ops.any(repeated, axis=-1))


def apc_loss_value(scores, labels, *, where=None, lambda_=1.0, margin=0.0):
  """``1 - AP`` of all classes of all examples as ONE list (Rolinek et al., Sec. 4.6, Eq. 23).

  Scores ``[B, C]`` are flattened to a single list of ``B * C`` items, so a relevant
  (example, class) pair must outscore every irrelevant pair of every other example too: this
  calibrates scores across classes. Arguments as for :func:`average_precision_loss_values`.
  Returns a scalar.

  Cost: class ids, only the ``B`` true classes carry weight: their ranks in the list from the
  count of true scores below every score, forward and backward
  (:func:`~tfrank4class.ranking.blackbox.blackbox_marked_rank`: compiled by XLA, as on JAX and in
  TensorFlow's graphs, ``O(B^2 C)`` comparisons in one fused pass each for ``B <= 32``, elsewhere
  a binary search per score, ``O(B C log B)``), and their
  ``rk+`` among themselves, ``O(B^2)``; dense relevance, the ``B C`` list sorted twice forward and
  once backward, ``O(B C log(B C))``.

  Example:
    >>> import numpy as np
    >>> # one list [0.9, 0.2, 0.4, 0.6], relevant 0.9 (rank 1) and 0.6 (rank 2): AP = 1
    >>> float(apc_loss_value(np.array([[0.9, 0.2], [0.4, 0.6]], np.float32), np.array([0, 1])))
    0.0
  """
  scores, parsed = base.list_labels(scores, labels)
  if parsed.is_class_ids:
    return base.mark_batch(parsed, _apc_of_class_ids(scores, parsed.ids, where, lambda_, margin))
  _, relevance, _ = base.list_relevance(scores, parsed, where)
  flat_scores = ops.reshape(scores, [1, -1])
  flat_relevance = ops.reshape(relevance, [1, -1])
  return base.mark_batch(parsed, _ap_loss(flat_scores, flat_relevance, lambda_, margin)[0])


def _apc_of_class_ids(scores, ids, where, lambda_, margin):
  """:func:`apc_loss_value` of class ids: ``rk_i`` of the ``B`` true classes in the one list
  (:func:`~tfrank4class.losses.rambo.base.true_class_ranks` with ``one_list=True``) and their
  constant ``rk+_i`` among themselves, from the ``B`` true scores (row order breaks ties, as the
  flat index does)."""
  rk, has_true = base.true_class_ranks(scores, ids, where, lambda_, margin, one_list=True)
  ids = ops.cast(ids, "int32")
  true = ops.stop_gradient(backend.take_along_axis(scores, ids[:, None], axis=-1)[:, 0])
  if margin > 0:  # every true class moves by the same -margin / 2: their order is kept
    true = true - ops.cast(margin / 2.0, backend.dtype_name(true))
  rows = ops.arange(ops.shape(ids)[0], dtype="int32")
  ahead = ops.logical_or(
    true[None, :] > true[:, None],
    ops.logical_and(true[None, :] == true[:, None], rows[None, :] < rows[:, None]),
  )
  ahead = ops.logical_and(ahead, has_true[None, :])
  rk_plus = 1.0 + ops.sum(ops.cast(ahead, rk.dtype), axis=-1)
  ap = base.mean_over(rk_plus / rk, has_true, axis=-1)
  return backend.where(ops.any(has_true), 1.0 - ap, ops.zeros_like(ap))


@register("average_precision_loss")
class AveragePrecisionLoss(base.BlackboxRankLoss):
  """``1 - AP`` of each row of ``y_pred`` on blackbox ranks (Rolinek et al., Sec. 4.6, Eq. 21-22).

      L_AP = 1 - 1/|P| sum_{i in P} rk+_i / rk_i

  with ``rk_i`` the rank of relevant item ``i`` among all valid items and ``rk+_i`` its rank among
  the relevant items. Lists without a relevant item contribute 0. Cost: ``O(C)`` per list with
  class ids (no sort), ``O(C log C)`` with dense relevance (:func:`average_precision_loss_values`).

  Args:
    lambda_: blackbox interpolation strength ``> 0`` (Eq. 10), for ranks normalised by the list
      length.
    margin: ``alpha >= 0``, the margin of Sec. 4.4, Eq. 14-15.

  Example:
    >>> import numpy as np
    >>> loss = AveragePrecisionLoss(reduction="none")
    >>> y, s = np.array([[1.0, 1.0, 0.0]], np.float32), np.array([[0.9, 0.5, 0.7]], np.float32)
    >>> ops.convert_to_numpy(loss(y, s)).round(4)   # AP = (1/1 + 2/3) / 2
    array([0.1667], dtype=float32)
    >>> import tfrank4class.metrics
    >>> from tfrank4class.compat import keras
    >>> model = keras.Sequential([keras.layers.Dense(4)])
    >>> model.compile(optimizer="adam", loss=AveragePrecisionLoss(lambda_=4.0),
    ...               metrics=[tfrank4class.metrics.MeanAveragePrecision()])
  """

  takes_class_ids = True

  def __init__(
    self,
    lambda_=1.0,
    margin=0.0,
    reduction=compat.DEFAULT_REDUCTION,
    name="average_precision_loss",
  ):
    super().__init__(lambda_=lambda_, margin=margin, memory=0, reduction=reduction, name=name)

  def loss_values(self, scores, relevance):
    return average_precision_loss_values(
      scores, relevance, lambda_=self.lambda_, margin=self.margin
    )

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
  Cost: with class ids, only the batch's own classes are ranked, ``O(B^2 log B + B C)``; with
  dense relevance or a memory (which keeps dense rows) every column, ``O(C B log B)``
  (:func:`mean_average_precision_loss_value`).

  Sample weights (``coupling = "batch"``, see :mod:`tfrank4class.losses.base`): an example of
  weight 0 is left out of every list; the loss of the others is scaled by the mean weight.

  Args:
    lambda_: blackbox interpolation strength ``> 0``.
    margin: ``alpha >= 0`` (Eq. 14-15).
    memory: ``tau >= 0`` past batches of scores and labels kept in a :class:`ScoreMemory`.

  Example:
    >>> import numpy as np
    >>> loss = MeanAveragePrecisionLoss()
    >>> # class 0: relevant rows 0, 1 ranked 1st and 3rd -> AP 5/6; class 1: row 2 first -> AP 1
    >>> s = np.array([[0.9, 0.0], [0.5, 0.1], [0.7, 0.8]], np.float32)
    >>> round(float(loss(np.array([0, 0, 1]), s)), 6)   # 1 - (5/6 + 1) / 2
    0.083333
    >>> import tfrank4class.metrics
    >>> from tfrank4class.compat import keras
    >>> model = keras.Sequential([keras.layers.Dense(2)])
    >>> model.compile(optimizer="adam", loss=MeanAveragePrecisionLoss(memory=2),
    ...               metrics=[tfrank4class.metrics.TopKAccuracy(1)])
  """

  supports_memory = True
  coupling = "batch"
  takes_class_ids = True

  def __init__(
    self,
    lambda_=1.0,
    margin=0.0,
    memory=0,
    reduction=compat.DEFAULT_REDUCTION,
    name="mean_average_precision_loss",
  ):
    super().__init__(lambda_=lambda_, margin=margin, memory=memory, reduction=reduction, name=name)

  def loss_values(self, scores, relevance, where=None):
    return mean_average_precision_loss_value(
      scores, relevance, where=where, lambda_=self.lambda_, margin=self.margin
    )


@register("apc_loss")
class APCLoss(base.BlackboxRankLoss):
  """``1 - AP`` of all classes of all examples as one list (Rolinek et al., Sec. 4.6, Eq. 23).

  The ``B x C`` scores (plus the ``memory`` past batches) form a single list whose relevant items
  are the (example, true class) pairs, which favours scores comparable across classes.
  A batch-level loss: returns a scalar. Cost with class ids: every score counted against the
  true classes' scores, no sort of the list (``O(B C log B)``; compiled by XLA with ``B <= 32``,
  ``O(B^2 C)`` comparisons in fused passes); ``O(B C log(B C))`` with dense relevance or a memory
  (:func:`apc_loss_value`).

  Sample weights (``coupling = "batch"``, see :mod:`tfrank4class.losses.base`): an example of
  weight 0 is left out of every list; the loss of the others is scaled by the mean weight.

  Example:
    >>> import numpy as np
    >>> loss = APCLoss()
    >>> # one list [0.9, 0.2, 0.4, 0.6], relevant 0.9 (rank 1) and 0.6 (rank 2): AP = 1
    >>> float(loss(np.array([0, 1]), np.array([[0.9, 0.2], [0.4, 0.6]], np.float32)))
    0.0
    >>> import tfrank4class.metrics
    >>> from tfrank4class.compat import keras
    >>> model = keras.Sequential([keras.layers.Dense(2)])
    >>> model.compile(optimizer="adam", loss=APCLoss(memory=2),
    ...               metrics=[tfrank4class.metrics.TopKAccuracy(1)])
  """

  supports_memory = True
  coupling = "batch"
  takes_class_ids = True

  def __init__(
    self, lambda_=1.0, margin=0.0, memory=0, reduction=compat.DEFAULT_REDUCTION, name="apc_loss"
  ):
    super().__init__(lambda_=lambda_, margin=margin, memory=memory, reduction=reduction, name=name)

  def loss_values(self, scores, relevance, where=None):
    return apc_loss_value(scores, relevance, where=where, lambda_=self.lambda_, margin=self.margin)


@register("map_apc_loss")
class MapApcLoss(base.BlackboxRankLoss):
  """Weighted mAP + APC loss (Rolinek et al., Sec. 5.2; the paper weighted them 2:1).

      L = (map_weight * L_mAP + apc_weight * L_APC) / (map_weight + apc_weight)

  Both terms see the same lists (current batch plus ``memory`` past batches), as Sec. 4.3 describes
  the memory for the loss as a whole; the authors' code computes its APC term on the current batch
  only. Cost: the sum of the two terms' (:class:`MeanAveragePrecisionLoss`, :class:`APCLoss`).

  Sample weights (``coupling = "batch"``, see :mod:`tfrank4class.losses.base`): an example of
  weight 0 is left out of every list; the loss of the others is scaled by the mean weight.

  Args:
    map_weight, apc_weight: non-negative weights, not both 0.
    lambda_, margin, memory: as in :class:`MeanAveragePrecisionLoss`.

  Example:
    >>> import numpy as np
    >>> loss = MapApcLoss(map_weight=2.0, apc_weight=1.0)
    >>> # 1 - mAP = 1/12 (see MeanAveragePrecisionLoss); the single list 0.9 0.8 0.7 0.5 0.1 0.0
    >>> # has relevant items at ranks 1, 2, 4: 1 - APC = 1 - (1 + 1 + 3/4) / 3 = 1/12
    >>> s = np.array([[0.9, 0.0], [0.5, 0.1], [0.7, 0.8]], np.float32)
    >>> round(float(loss(np.array([0, 0, 1]), s)), 4)
    0.0833
    >>> import tfrank4class.metrics
    >>> from tfrank4class.compat import keras
    >>> model = keras.Sequential([keras.layers.Dense(2)])
    >>> model.compile(optimizer="adam", loss=MapApcLoss(memory=2),
    ...               metrics=[tfrank4class.metrics.TopKAccuracy(1)])
  """

  supports_memory = True
  coupling = "batch"
  takes_class_ids = True

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

  def loss_values(self, scores, relevance, where=None):
    total = self.map_weight + self.apc_weight
    kwargs = {"where": where, "lambda_": self.lambda_, "margin": self.margin}
    loss_map = mean_average_precision_loss_value(scores, relevance, **kwargs)
    loss_apc = apc_loss_value(scores, relevance, **kwargs)
    return (self.map_weight * loss_map + self.apc_weight * loss_apc) / total

  def get_config(self):
    config = super().get_config()
    config.update({"map_weight": self.map_weight, "apc_weight": self.apc_weight})
    return config
