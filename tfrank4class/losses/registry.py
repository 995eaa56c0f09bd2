"""One registry for every loss: all TF-Ranking 0.5.5 Keras losses by their keys, and ours.

``get(name, **kwargs)`` returns a ``tf.keras.losses.Loss`` that accepts integer class ids
(``[B]`` / ``[B, 1]``) as well as dense relevance ``[B, C]`` (see :func:`to_relevance`), works in
``model.compile(loss=...)`` under any distribution strategy, and round-trips through
``model.save`` / ``tf.keras.models.load_model``.

Our own losses register themselves with the :func:`register` decorator, which also makes them
Keras-serializable under the ``tfrank4class`` package name.
"""
import tensorflow as tf
import tensorflow_ranking as tfr
from tensorflow_ranking.python import utils as tfr_utils

from tfrank4class import _validation
from tfrank4class.losses.relevance import num_items, to_relevance

PACKAGE = "tfrank4class"

#: Every Keras loss key of TF-Ranking 0.5.5 (``tfr.keras.losses.RankingLossKey``).
TFR_KEYS = tuple(tfr.keras.losses.RankingLossKey.all_keys())

#: Keys whose TF-Ranking loss wants one logit per item on a trailing axis, [B, C, 1].
_ITEMWISE_LOGITS = ("ordinal_loss",)

_OWN = {}


def register(name):
  """Class decorator: registers a ``tf.keras.losses.Loss`` subclass under ``name``.

  The class becomes Keras-serializable as ``tfrank4class>ClassName`` and reachable through
  :func:`get`. Its ``call(y_true, y_pred)`` receives the raw labels; use :func:`to_relevance`.
  """
  def decorator(cls):
    if name in _OWN or name in TFR_KEYS:
      raise ValueError(f"A loss named {name!r} is already registered.")
    cls = tf.keras.utils.register_keras_serializable(package=PACKAGE)(cls)
    _OWN[name] = cls
    return cls
  return decorator


def names():
  """All names :func:`get` accepts, sorted."""
  return sorted(set(TFR_KEYS) | set(_OWN))


def get(name, **kwargs):
  """Returns the loss registered as ``name``, constructed with ``kwargs``.

  Args:
    name: a TF-Ranking key such as ``"softmax_loss"`` or ``"approx_ndcg_loss"``, or the name of
      one of this package's losses (see :func:`names`). A ``tf.keras.losses.Loss`` instance is
      returned unchanged.
    **kwargs: constructor arguments, e.g. ``temperature=0.1`` or ``lambda_weight=...`` for
      TF-Ranking losses.

  Raises:
    ValueError: for an unknown name, listing the known ones.
  """
  if isinstance(name, tf.keras.losses.Loss):
    return name
  if name in _OWN:
    return _OWN[name](**kwargs)
  if name in TFR_KEYS:
    return RankingLoss(name, **kwargs)
  raise ValueError(f"Unknown loss name {name!r}; known losses are: {', '.join(names())}.")


@tf.keras.utils.register_keras_serializable(package=PACKAGE)
class RankingLoss(tf.keras.losses.Loss):
  """A TF-Ranking Keras loss that also accepts integer class ids.

  ``RankingLoss(key, **kwargs)(y, s) == tfr.keras.losses.get(key, **kwargs)(to_relevance(y, C), s)``

  Args:
    key: a ``tfr.keras.losses.RankingLossKey`` value, e.g. ``"softmax_loss"``.
    reduction: the Keras reduction.
    name: the loss name (defaults to ``key``).
    **loss_kwargs: forwarded to the TF-Ranking loss (``lambda_weight``, ``temperature``,
      ``sample_size``, ``seed``, ...).

  Example:
    >>> loss = RankingLoss("softmax_loss")
    >>> float(loss([2, 0], [[0.0, 1.0, 3.0], [2.0, 0.0, 0.0]])) > 0
    True
  """

  def __init__(self, key, reduction=tf.keras.losses.Reduction.AUTO, name=None, **loss_kwargs):
    _validation.check_choice("key", key, TFR_KEYS)
    name = name or key
    super().__init__(reduction=reduction, name=name)
    self.key = key
    self.loss_kwargs = dict(loss_kwargs)
    try:
      self._inner = tfr.keras.losses.get(key, reduction=reduction, name=name, **loss_kwargs)
    except TypeError as e:
      raise ValueError(f"Invalid keyword arguments {sorted(loss_kwargs)} for loss {key!r}: {e}") from None

  def _inputs(self, y_true, y_pred):
    y_pred = _validation.score_matrix("y_pred", y_pred)
    relevance = to_relevance(y_true, num_items(y_pred), dtype=y_pred.dtype)
    if self.key in _ITEMWISE_LOGITS:
      y_pred = y_pred[..., None]
    return relevance, y_pred

  def __call__(self, y_true, y_pred, sample_weight=None):
    relevance, y_pred = self._inputs(y_true, y_pred)
    # Keras' compile() allows SUM_OVER_BATCH_SIZE under a strategy on the object it was given.
    self._inner._allow_sum_over_batch_size = self._allow_sum_over_batch_size
    return self._inner(relevance, y_pred, sample_weight)

  def call(self, y_true, y_pred):
    return self._inner.call(*self._inputs(y_true, y_pred))

  def get_config(self):
    config = super().get_config()
    kwargs = dict(self.loss_kwargs)
    if kwargs.get("lambda_weight") is not None:
      kwargs["lambda_weight"] = _serialize_lambda_weight(kwargs["lambda_weight"])
    config.update({"key": self.key, **kwargs})
    return config

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    if isinstance(config.get("lambda_weight"), dict):
      config["lambda_weight"] = _deserialize_lambda_weight(config["lambda_weight"])
    return cls(**config)


def _serialize_lambda_weight(lambda_weight):
  """A TF-Ranking lambda weight as JSON-able config (they have ``get_config`` only).

  Their gain and discount functions are TF-Ranking utility functions, stored by name; any other
  function must be Keras-registered to be stored.
  """
  config = {}
  for key, value in lambda_weight.get_config().items():
    if callable(value):
      name = getattr(value, "__name__", "")
      if getattr(tfr_utils, name, None) is value:
        value = {"tfr_utils": name}
      else:
        value = tf.keras.utils.serialize_keras_object(value)
    config[key] = value
  return {"class_name": tf.keras.utils.get_registered_name(type(lambda_weight)), "config": config}


def _deserialize_lambda_weight(spec):
  cls = tf.keras.utils.get_registered_object(spec["class_name"])
  if cls is None:
    raise ValueError(f"Unknown lambda weight class {spec['class_name']!r} in a saved loss config.")
  config = {}
  for key, value in spec["config"].items():
    if isinstance(value, dict) and "tfr_utils" in value:
      value = getattr(tfr_utils, value["tfr_utils"])
    elif isinstance(value, dict):
      value = tf.keras.utils.deserialize_keras_object(value)
    config[key] = value
  return cls(**config)
