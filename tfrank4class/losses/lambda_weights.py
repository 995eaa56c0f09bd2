"""TF-Ranking 0.5.5's lambda weights on ``keras.ops``, as Keras-serializable objects.

A lambda weight (Wang et al. 2018, "The LambdaLoss Framework for Ranking Metric Optimization")
weighs the pairs of a pairwise loss, or the items of a softmax or ListMLE loss, by what swapping
them would change in a ranking metric. These are TF-Ranking's classes, with its maths and
defaults, written for every Keras backend; :class:`~tfrank4class.losses.RankingLoss` takes them
as ``lambda_weight=``:

* pairwise keys: :class:`LabelDiffLambdaWeight`, :class:`DCGLambdaWeight`,
  :class:`NDCGLambdaWeight`, :class:`DCGLambdaWeightV2`, :class:`NDCGLambdaWeightV2`,
  :class:`YetiDCGLambdaWeight`, :class:`PrecisionLambdaWeight` (``pair_weights``);
* ``softmax_loss`` / ``calibrated_softmax_loss``: :class:`DCGLambdaWeight` and
  :class:`NDCGLambdaWeight` (``individual_weights`` replace the labels);
* ``list_mle_loss``: :class:`ListMLELambdaWeight` (a discount per position).

``ranks`` are 1-based ranks by score ``[B, n]``; ``labels`` are relevance ``[B, n]`` with
``< 0`` for padding. ``pair_weights(labels, ranks, first=ids)`` gives one item's row of pairs
``[B, n]`` rather than every pair ``[B, n, n]``: for one-hot rows of class ids, the true class's
pairs, the only ones that carry weight (equal labels weigh 0 in every weight here); with
``first`` ``[B, r]``, the rows of ``r`` items ``[B, r, n]``: for dense relevance, those of the
``r`` items of relevance ``> 0``.
The gain, discount and positive functions are TF-Ranking's (:func:`identity`, :func:`inverse`,
:func:`pow_minus_1`, :func:`log2_inverse`, :func:`is_greater_equal_1`) or any Keras-registered
function of a tensor written in ``keras.ops``.

:func:`get` returns one of these for ``None``, ours, or a TF-Ranking lambda-weight object (it is
converted, so a model built with TF-Ranking's objects trains without TF-Ranking's maths); a name
or another object raises a ``TypeError``.

Example:
  >>> import numpy as np
  >>> from keras import ops
  >>> weight = NDCGLambdaWeightV2(topn=2)
  >>> labels = np.array([[2.0, 0.0, 1.0]])
  >>> ranks = np.array([[1, 2, 3]])
  >>> np.round(ops.convert_to_numpy(weight.pair_weights(labels, ranks)), 4).shape
  (1, 3, 3)
  >>> get(None) is None
  True
"""

import math

import numpy as np

from tfrank4class import backend, checks, compat
from tfrank4class.compat import keras, ops
from tfrank4class.losses.ranking_losses.sampling import pairwise

_register = keras.utils.register_keras_serializable(package=compat.PACKAGE)


@_register
def identity(label):
  """The gain ``g(l) = l``."""
  return label


@_register
def inverse(rank):
  """The discount ``1 / r`` (``0`` for ``r = 0``)."""
  return backend.where(rank == 0, 0.0, 1.0 / backend.where(rank == 0, 1.0, rank))


@_register
def pow_minus_1(label):
  """The gain ``g(l) = 2^l - 1``."""
  return ops.power(2.0, label) - 1.0


@_register
def log2_inverse(rank):
  """The discount ``1 / log2(1 + r)`` (``0`` for ``r = 0``)."""
  denominator = ops.log1p(rank)
  return backend.where(
    denominator == 0, 0.0, math.log(2.0) / backend.where(denominator == 0, 1.0, denominator)
  )


@_register
def is_greater_equal_1(label):
  """Positive items of precision: ``l >= 1``."""
  return label >= 1.0


_FUNCTIONS = {
  fn.__name__: fn for fn in (identity, inverse, pow_minus_1, log2_inverse, is_greater_equal_1)
}


def _clean(labels, first=None):
  """``(valid pairs, labels with padding as 0)``; the pairs as :func:`pairwise` takes ``first``."""
  valid = labels >= 0
  return pairwise(ops.logical_and, valid, first), backend.where(valid, labels, 0.0)


def _as_float(x, like):
  return ops.cast(x, like.dtype)


def inverse_max_dcg(labels, gain_fn=pow_minus_1, rank_discount_fn=None, topn=None):
  """``1 / DCG`` of the ideal ranking of ``labels`` (``>= 0``) at ``topn``, ``[B, 1]`` (0 when
  that DCG is 0); the default discount is ``1 / ln(1 + r)``."""
  ideal = ops.flip(ops.sort(labels, axis=-1), axis=-1)
  rank = ops.cast(ops.arange(1, ops.shape(labels)[-1] + 1), labels.dtype)
  discount = 1.0 / ops.log1p(rank) if rank_discount_fn is None else rank_discount_fn(rank)
  if topn is not None:
    discount = backend.where(rank <= topn, discount, 0.0)
  dcg = ops.sum(_as_float(gain_fn(ideal), labels) * discount, axis=1, keepdims=True)
  return backend.where(dcg > 0, 1.0 / backend.where(dcg > 0, dcg, 1.0), 0.0)


class LambdaWeight:
  """The base of the lambda weights: Keras-serializable through ``get_config``."""

  def pair_weights(self, labels, ranks, first=None):
    """Weights of the pairs: every pair ``[B, n, n]``, or with ``first`` (the index ``[B]`` of
    one item per list, int32) the pairs of that item with each item ``[B, n]`` (row ``first`` of
    every pair's, in ``O(n)``; every weight here is symmetric, so it is also that column), or
    with ``first`` ``[B, r]`` those ``r`` rows ``[B, r, n]`` (``O(n r)``)."""
    raise TypeError(
      f"{type(self).__name__} weighs items, not pairs; a pairwise loss cannot use it."
    )

  def individual_weights(self, labels, ranks):
    """Weights of the items ``[B, n]`` (TF-Ranking's default: the labels)."""
    del ranks
    return labels

  def get_config(self):
    return {}

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    for key, value in config.items():
      if key.endswith("_fn") and isinstance(value, (dict, str)):
        config[key] = keras.utils.deserialize_keras_object(value)
    return cls(**config)

  def __eq__(self, other):
    return type(self) is type(other) and self.get_config() == other.get_config()

  def __hash__(self):
    return hash(type(self))

  def __repr__(self):
    args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
    return f"{type(self).__name__}({args})"


def _fn(name, value, default):
  if value is None:
    return default
  if not callable(value):
    raise TypeError(f"`{name}` must be a function of a tensor (e.g. pow_minus_1), got {value!r}.")
  return value


def _serialize(fn):
  return keras.utils.serialize_keras_object(fn)


@_register
class LabelDiffLambdaWeight(LambdaWeight):
  """The pair weight ``|l_i - l_j|``."""

  def pair_weights(self, labels, ranks, first=None):
    del ranks
    return ops.abs(pairwise(ops.subtract, labels, first))


class _DCGBase(LambdaWeight):
  """What the DCG weights share: gains, optionally normalised by the ideal DCG."""

  def __init__(self, topn=None, gain_fn=None, rank_discount_fn=None, normalized=False):
    self.topn = checks.check_int("topn", topn, minimum=1, allow_none=True)
    self.gain_fn = _fn("gain_fn", gain_fn, self._default_gain)
    self.rank_discount_fn = _fn("rank_discount_fn", rank_discount_fn, self._default_discount)
    if not isinstance(normalized, bool):
      raise TypeError(f"`normalized` must be True or False, got {normalized!r}.")
    self.normalized = normalized

  _default_gain = staticmethod(identity)
  _default_discount = staticmethod(inverse)

  def _gains(self, labels):
    gain = _as_float(self.gain_fn(labels), labels)
    if self.normalized:
      gain = gain * inverse_max_dcg(labels, self.gain_fn, self.rank_discount_fn, self.topn)
    return gain

  def pair_weights(self, labels, ranks, first=None):
    valid_pair, labels = _clean(labels, first)
    gain = self._gains(labels)
    pair_gain = backend.where(valid_pair, pairwise(ops.subtract, gain, first), 0.0)
    size = ops.shape(labels)[1]
    topn = size if self.topn is None else self.topn
    discount = self._pair_rank_discount(ops.cast(ranks, labels.dtype), topn, first)
    return ops.abs(pair_gain) * discount * ops.cast(size, labels.dtype)

  def individual_weights(self, labels, ranks):
    labels = backend.where(labels >= 0, labels, 0.0)
    return self._gains(labels) * self.rank_discount_fn(ops.cast(ranks, labels.dtype))

  def _discount_of_difference(self, ranks, first):
    """``(|r_i - r_j|, |D(|r_i - r_j|) - D(|r_i - r_j| + 1)|)``."""
    difference = ops.abs(pairwise(ops.subtract, ranks, first))
    return difference, ops.abs(
      self.rank_discount_fn(difference) - self.rank_discount_fn(difference + 1.0)
    )

  def get_config(self):
    return {
      "topn": self.topn,
      "gain_fn": _serialize(self.gain_fn),
      "rank_discount_fn": _serialize(self.rank_discount_fn),
      "normalized": self.normalized,
    }


@_register
class DCGLambdaWeight(_DCGBase):
  """TF-Ranking's DCG lambda weight: LambdaLoss's ``u`` mixed with LambdaMART's ``v``.

  ``u = |D(|i-j|) - D(|i-j|+1)|`` and ``v = |D(i) - D(j)|`` for ranks ``i, j`` (one of them in
  the top ``topn``), weighted ``(1 - smooth_fraction) u + smooth_fraction v``, times the gain
  difference ``|g(l_i) - g(l_j)|`` (over the ideal DCG if ``normalized``) and the list size.
  """

  def __init__(
    self, topn=None, gain_fn=None, rank_discount_fn=None, normalized=False, smooth_fraction=0.0
  ):
    super().__init__(topn, gain_fn, rank_discount_fn, normalized)
    self.smooth_fraction = checks.check_float("smooth_fraction", smooth_fraction, minimum=0.0)
    if self.smooth_fraction > 1:
      raise ValueError(
        f"`smooth_fraction` must be a finite number in [0, 1], got {smooth_fraction!r}."
      )

  def _pair_rank_discount(self, ranks, topn, first):
    in_top = pairwise(ops.logical_or, ranks <= topn, first)
    difference, u = self._discount_of_difference(ranks, first)
    u = backend.where(ops.logical_and(difference > 0, in_top), u, 0.0)
    absolute = backend.where(ranks > topn, 0.0, self.rank_discount_fn(ranks))
    v = ops.abs(pairwise(ops.subtract, absolute, first))
    discount = (1.0 - self.smooth_fraction) * u + self.smooth_fraction * v
    return backend.where(in_top, discount, 0.0)

  def get_config(self):
    return {**super().get_config(), "smooth_fraction": self.smooth_fraction}


class _NormalizedDCG:
  """What an NDCG weight adds to its DCG weight: gain ``2^l - 1`` and discount
  ``1 / log2(1 + r)`` by default, always normalised by the ideal DCG (so ``normalized`` is no
  argument and not in the config). Listed before the DCG weight among the bases."""

  _default_gain = staticmethod(pow_minus_1)
  _default_discount = staticmethod(log2_inverse)

  def get_config(self):
    config = super().get_config()
    del config["normalized"]
    return config


@_register
class NDCGLambdaWeight(_NormalizedDCG, DCGLambdaWeight):
  """:class:`DCGLambdaWeight` normalised by the ideal DCG, gain ``2^l - 1``, discount
  ``1 / log2(1 + r)``."""

  def __init__(self, topn=None, gain_fn=None, rank_discount_fn=None, smooth_fraction=0.0):
    super().__init__(topn, gain_fn, rank_discount_fn, True, smooth_fraction)


@_register
class DCGLambdaWeightV2(_DCGBase):
  """LambdaLoss's ``u`` for every pair, and for a pair whose lower rank ``m`` is past ``topn``
  times ``1 / (1 - D(m))`` (TF-Ranking's V2)."""

  def _pair_rank_discount(self, ranks, topn, first):
    difference, u = self._discount_of_difference(ranks, first)
    lower = pairwise(backend.maximum, ranks, first)
    past = lower > topn
    multiplier = backend.where(
      past, 1.0 / (1.0 - self.rank_discount_fn(backend.where(past, lower, 2.0))), 1.0
    )
    return backend.where(difference > 0, u * multiplier, 0.0)


@_register
class NDCGLambdaWeightV2(_NormalizedDCG, DCGLambdaWeightV2):
  """:class:`DCGLambdaWeightV2` normalised by the ideal DCG, gain ``2^l - 1``, discount
  ``1 / log2(1 + r)``: TF-Ranking's ``NDCGLambdaWeightV2``."""

  def __init__(self, topn=None, gain_fn=None, rank_discount_fn=None):
    super().__init__(topn, gain_fn, rank_discount_fn, True)


@_register
class YetiDCGLambdaWeight(DCGLambdaWeightV2):
  """:class:`DCGLambdaWeightV2` on neighbouring ranks only (``|r_i - r_j| = 1``), gain
  ``2^l - 1``, discount ``1 / log2(1 + r)``: the default of ``yeti_logistic_loss``."""

  _default_gain = staticmethod(pow_minus_1)
  _default_discount = staticmethod(log2_inverse)

  def pair_weights(self, labels, ranks, first=None):
    neighbours = ops.abs(pairwise(ops.subtract, ops.cast(ranks, labels.dtype), first)) == 1
    return backend.where(neighbours, super().pair_weights(labels, ranks, first), 0.0)

  def neighbour_weights(self, true_rank, size, dtype):
    """For one-hot rows of class ids, what :meth:`pair_weights` gives the true class's pairs
    with the items just before and just after it (ranks ``r - 1`` and ``r + 1``; every other
    pair weighs 0), ``[B, 1]`` each, from its rank ``true_rank`` ``r`` ``[B, 1]`` and the list
    ``size``: ``n |g(1) - g(0)| |D(1) - D(2)|`` (over the ideal DCG of the row if
    ``normalized``), times ``1 / (1 - D(m))`` where the lower rank ``m`` (``r``, ``r + 1``) is
    past ``topn``. ``O(1)`` per list (``O(n)`` once for the ideal DCG)."""
    rank = ops.cast(true_rank, dtype)
    gains = self.gain_fn(backend.constant(np.array([[1.0, 0.0]]), rank))
    gain = ops.abs(gains[:, :1] - gains[:, 1:])
    if self.normalized:
      ideal = ops.cast(ops.arange(size) == 0, dtype)[None, :]  # a one-hot row, its own ideal
      gain = gain * inverse_max_dcg(ideal, self.gain_fn, self.rank_discount_fn, self.topn)
    one = ops.ones_like(rank)
    u = ops.abs(self.rank_discount_fn(one) - self.rank_discount_fn(one + 1.0))
    topn = size if self.topn is None else self.topn
    scale = gain * u * ops.cast(size, dtype)

    def past_topn(lower):
      past = lower > ops.cast(topn, dtype)
      return backend.where(
        past, 1.0 / (1.0 - self.rank_discount_fn(backend.where(past, lower, 2.0))), 1.0
      )

    return scale * past_topn(rank), scale * past_topn(rank + 1.0)


@_register
class PrecisionLambdaWeight(LambdaWeight):
  """Precision@``topn``: 1 for a positive/negative pair with exactly one item in the top
  ``topn`` (``positive_fn`` marks the positives, default ``l >= 1``)."""

  def __init__(self, topn=None, positive_fn=None):
    self.topn = checks.check_int("topn", topn, minimum=1)
    self.positive_fn = _fn("positive_fn", positive_fn, is_greater_equal_1)

  def pair_weights(self, labels, ranks, first=None):
    valid_pair, labels = _clean(labels, first)
    positive = ops.cast(self.positive_fn(labels), labels.dtype)
    difference = backend.where(valid_pair, ops.abs(pairwise(ops.subtract, positive, first)), 0.0)
    return backend.where(pairwise(ops.logical_xor, ranks <= self.topn, first), difference, 0.0)

  def get_config(self):
    return {"topn": self.topn, "positive_fn": _serialize(self.positive_fn)}


@_register
class ListMLELambdaWeight(LambdaWeight):
  """A discount ``D(p)`` for each position ``p`` of ListMLE's ranking (required)."""

  def __init__(self, rank_discount_fn=None):
    if rank_discount_fn is None:
      raise ValueError(
        "`rank_discount_fn` is required for ListMLELambdaWeight, e.g. log2_inverse; got None."
      )
    self.rank_discount_fn = _fn("rank_discount_fn", rank_discount_fn, None)

  def individual_weights(self, labels, ranks):
    return ops.ones_like(labels) * self.rank_discount_fn(ops.cast(ranks, labels.dtype))

  def get_config(self):
    return {"rank_discount_fn": _serialize(self.rank_discount_fn)}


#: Our classes by TF-Ranking's class names (Keras layer ``tfr.keras.losses`` and ``losses_impl``).
CLASSES = {
  cls.__name__: cls
  for cls in (
    LabelDiffLambdaWeight,
    DCGLambdaWeight,
    NDCGLambdaWeight,
    DCGLambdaWeightV2,
    NDCGLambdaWeightV2,
    YetiDCGLambdaWeight,
    PrecisionLambdaWeight,
    ListMLELambdaWeight,
  )
}
_TFR_ATTRIBUTES = (
  "topn",
  "gain_fn",
  "rank_discount_fn",
  "normalized",
  "smooth_fraction",
  "positive_fn",
)


def _ours(fn):
  """A TF-Ranking gain/discount function as ours (by name); another callable as it is."""
  name = getattr(fn, "__name__", "")
  if getattr(fn, "__module__", "").startswith("tensorflow_ranking") and name in _FUNCTIONS:
    return _FUNCTIONS[name]
  return fn


def from_tf_ranking(lambda_weight):
  """Ours equal to a TF-Ranking 0.5.5 lambda-weight object (its class and its arguments)."""
  cls = CLASSES.get(type(lambda_weight).__name__)
  if cls is None:
    raise TypeError(
      f"`lambda_weight`: TF-Ranking's {type(lambda_weight).__name__} has no counterpart here; "
      f"allowed: {sorted(CLASSES)}."
    )
  kwargs = {}
  for attribute in _TFR_ATTRIBUTES:
    if hasattr(lambda_weight, "_" + attribute):
      value = getattr(lambda_weight, "_" + attribute)
      kwargs[attribute] = _ours(value) if callable(value) else value
  if cls in (NDCGLambdaWeight, NDCGLambdaWeightV2):
    kwargs.pop("normalized")
  return cls(**kwargs)


def get(lambda_weight):
  """``None``, one of ours, or ours converted from a TF-Ranking lambda-weight object.

  Raises:
    TypeError: a name or another object, naming the allowed classes.
  """
  if lambda_weight is None or isinstance(lambda_weight, LambdaWeight):
    return lambda_weight
  if type(lambda_weight).__module__.startswith("tensorflow_ranking"):
    return from_tf_ranking(lambda_weight)
  raise TypeError(
    f"`lambda_weight` must be None or a lambda-weight object of "
    f"tfrank4class.losses.lambda_weights (one of {sorted(CLASSES)}, e.g. "
    f"NDCGLambdaWeightV2()) or of TF-Ranking, got {lambda_weight!r}."
  )


#: How a config saved with TF-Ranking's lambda weight names its class (before the port).
_SAVED_PREFIX = "tensorflow_ranking>"


def _saved_function(value):
  """A gain/discount function as an old config stored it: ``{"tfr_utils": name}``, or a Keras
  serialization (of TF-Ranking's registered functions: taken by name)."""
  if isinstance(value, dict) and "tfr_utils" in value:
    return _FUNCTIONS[value["tfr_utils"]]
  if isinstance(value, dict) and str(value.get("config")) in _FUNCTIONS:
    return _FUNCTIONS[value["config"]]
  return keras.utils.deserialize_keras_object(value) if isinstance(value, dict) else value


def deserialize(config):
  """A lambda weight from a saved loss config: ours (a Keras serialization) or, as configs saved
  before the port have it, ``{"class_name": "tensorflow_ranking>Name", "config": ...}``."""
  class_name = config.get("class_name", "")
  if not class_name.startswith(_SAVED_PREFIX):
    return get(keras.utils.deserialize_keras_object(config))
  cls = CLASSES.get(class_name[len(_SAVED_PREFIX) :])
  if cls is None:
    raise ValueError(
      f"Unknown lambda weight class {class_name!r} in a saved loss config; "
      f"allowed: {sorted(CLASSES)}."
    )
  kwargs = {
    key: _saved_function(value) if key.endswith("_fn") else value
    for key, value in config["config"].items()
  }
  if cls in (NDCGLambdaWeight, NDCGLambdaWeightV2):
    kwargs.pop("normalized", None)
  return cls(**kwargs)
