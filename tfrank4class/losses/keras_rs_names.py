"""keras-rs's loss class names, over the TF-Ranking keys that compute the same thing.

A keras-rs user reaches for ``PairwiseHingeLoss``, ``PairwiseLogisticLoss``,
``PairwiseMeanSquaredError``, ``PairwiseSoftZeroOneLoss`` and ``ListMLELoss``. Each class here is
:class:`~tfrank4class.losses.RankingLoss` of one key with the default ``normalization="lists"``,
whose loss of a list is keras-rs's (``tests/test_keras_rs_names.py`` compares with keras-rs's
own values, committed by ``tools/keras_rs_reference.py``):

    pairwise:  l(s, y) = sum_i sum_j 1[y_i > y_j] f((s_i - s_j) / T)
    MSE:       l(s, y) = sum_{i != j} ((y_i - y_j) - (s_i - s_j))^2
    ListMLE:   l(s, y) = sum_i [log sum_{j >= i} exp(s_pi(j) / T) - s_pi(i) / T]

with ``f(x) = max(0, 1 - x)`` (hinge), ``log(1 + exp(-x))`` (logistic), ``1 - sigmoid(x)`` (soft
zero-one), ``pi`` the items sorted by decreasing label and padded items (label ``< 0``, or a
false ``"mask"`` of keras-rs's ``{"labels": ..., "mask": ...}`` dict) left out. They take what
every loss of the package takes besides: integer class ids, sample weights per list or per item,
TF-Ranking's lambda weights. One difference: ListMLE orders items of equal labels at random, so
with tied labels (class ids, for one) keras-rs's value and ours are two draws of one random
variable, not one number.
"""

from tfrank4class import compat
from tfrank4class.losses.tf_ranking import RankingLoss
from tfrank4class.registry import export


class _KeyedRankingLoss(RankingLoss):
  """:class:`RankingLoss` of the fixed key :attr:`KEY`, named as keras-rs names it.

  Args:
    temperature: ``T > 0``, the scores are divided by it.
    lambda_weight: a lambda weight of :mod:`tfrank4class.losses.lambda_weights` the key takes,
      or ``None``.
    reduction: the Keras reduction.
    name: the loss name (defaults to the key).
    normalization: ``"lists"`` (keras-rs's and the package's) or ``"tf_ranking"``.
  """

  KEY = None

  def __init__(
    self,
    temperature=1.0,
    lambda_weight=None,
    reduction=compat.DEFAULT_REDUCTION,
    name=None,
    normalization="lists",
  ):
    super().__init__(
      self.KEY,
      reduction=reduction,
      name=name,
      normalization=normalization,
      temperature=temperature,
      lambda_weight=lambda_weight,
    )

  def get_config(self):
    config = super().get_config()
    del config["key"]
    return config


@export()
class PairwiseHingeLoss(_KeyedRankingLoss):
  """``pairwise_hinge_loss``: ``sum_{y_i > y_j} max(0, 1 - (s_i - s_j) / T)`` per list.

  Example:
    >>> from keras import ops
    >>> loss = PairwiseHingeLoss(reduction="none")
    >>> ops.convert_to_numpy(loss([[1.0, 0.0, 2.0]], [[0.5, 0.0, 0.2]])).round(4)  # 0.5 + 1.3 + 0.8
    array([2.6], dtype=float32)
    >>> from tfrank4class.compat import keras
    >>> model = keras.Sequential([keras.layers.Dense(3)])
    >>> model.compile(optimizer="adam", loss=PairwiseHingeLoss())
  """

  KEY = "pairwise_hinge_loss"


@export()
class PairwiseLogisticLoss(_KeyedRankingLoss):
  """``pairwise_logistic_loss``: ``sum_{y_i > y_j} log(1 + exp(-(s_i - s_j) / T))`` per list.

  Example:
    >>> from keras import ops
    >>> loss = PairwiseLogisticLoss(reduction="none")
    >>> ops.convert_to_numpy(loss([1], [[0.0, 0.0]])).round(4)  # log 2
    array([0.6931], dtype=float32)
    >>> from tfrank4class.compat import keras
    >>> model = keras.Sequential([keras.layers.Dense(3)])
    >>> model.compile(optimizer="adam", loss=PairwiseLogisticLoss())
  """

  KEY = "pairwise_logistic_loss"


@export()
class PairwiseSoftZeroOneLoss(_KeyedRankingLoss):
  """``pairwise_soft_zero_one_loss``: ``sum_{y_i > y_j} (1 - sigmoid((s_i - s_j) / T))`` per list.

  Example:
    >>> from keras import ops
    >>> loss = PairwiseSoftZeroOneLoss(reduction="none")
    >>> ops.convert_to_numpy(loss([1], [[0.0, 0.0]])).round(4)  # 1 - sigmoid(0)
    array([0.5], dtype=float32)
    >>> from tfrank4class.compat import keras
    >>> model = keras.Sequential([keras.layers.Dense(3)])
    >>> model.compile(optimizer="adam", loss=PairwiseSoftZeroOneLoss())
  """

  KEY = "pairwise_soft_zero_one_loss"


@export()
class PairwiseMeanSquaredError(_KeyedRankingLoss):
  """``pairwise_mse_loss``: ``sum_{i != j} ((y_i - y_j) - (s_i - s_j) / T)^2`` per list.

  Example:
    >>> from keras import ops
    >>> loss = PairwiseMeanSquaredError(reduction="none")
    >>> ops.convert_to_numpy(loss([[1.0, 0.0]], [[0.0, 0.0]])).round(4)  # both orders: 1 + 1
    array([2.], dtype=float32)
    >>> from tfrank4class.compat import keras
    >>> model = keras.Sequential([keras.layers.Dense(3)])
    >>> model.compile(optimizer="adam", loss=PairwiseMeanSquaredError())
  """

  KEY = "pairwise_mse_loss"


@export()
class ListMLELoss(_KeyedRankingLoss):
  """``list_mle_loss``: the Plackett-Luce negative log-likelihood of the items sorted by label,
  ``sum_i [log sum_{j >= i} exp(s_pi(j) / T) - s_pi(i) / T]`` per list (ties in a random order).

  Example:
    >>> from keras import ops
    >>> loss = ListMLELoss(reduction="none")
    >>> ops.convert_to_numpy(loss([[2.0, 1.0]], [[0.0, 0.0]])).round(4)  # log 2 + log 1
    array([0.6931], dtype=float32)
    >>> from tfrank4class.compat import keras
    >>> model = keras.Sequential([keras.layers.Dense(3)])
    >>> model.compile(optimizer="adam", loss=ListMLELoss())
  """

  KEY = "list_mle_loss"
