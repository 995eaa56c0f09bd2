"""TF-Ranking 0.5.5's sixteen losses as Keras losses that accept integer class ids.

The maths is TF-Ranking's own Keras-free core (``tensorflow_ranking/python/losses_impl.py``,
reached through :func:`tfrank4class.compat.tf_ranking_module`); this module only does what
TF-Ranking's Keras layer (``python/keras/losses.py``) does around it, so that the values are
TF-Ranking's on every stack, including TensorFlow 2.16+ where TF-Ranking's own Keras classes
cannot be used with tf-keras:

* labels: integer class ids ``[B]`` / ``[B, 1]`` or dense relevance ``[B, C]`` become
  relevance with :func:`~tfrank4class.losses.to_relevance` (``< 0`` = padding);
* ``gumbel_approx_ndcg_loss`` and ``yeti_logistic_loss`` first draw TF-Ranking's Gumbel samples
  of the list; ``calibrated_softmax_loss`` appends a virtual item of score 0 and label
  ``virtual_label``; ``ordinal_loss`` gets its trailing logit axis ``[B, C, 1]``;
* TF-Ranking's weighted losses ``l * w``: per item ``[B, C]`` (pointwise keys; pairwise keys
  summed over the second item of each pair), per list ``[B, 1]`` (listwise keys) or ``[B]``
  (the two softmax keys), with ``w`` TF-Ranking's normalised weights (padded items weigh 0);
* the reduction, by :data:`NORMALIZATIONS`:

  - ``normalization="lists"`` (the default): one loss per list, the sum of its weighted item
    losses (a Gumbel key: their mean over the list's ``sample_size`` samples); then Keras's
    reduction over the ``B`` lists, as every loss of the package: ``"none"`` gives ``[B]``,
    ``"sum_over_batch_size"`` the mean over lists, ``"sum"`` their sum;
  - ``normalization="tf_ranking"``: TF-Ranking's own Keras reduction of ``l * w`` as it is:
    ``"none"`` keeps its shape, ``"sum_over_batch_size"`` divides ``sum(l * w)`` by its number
    of elements (``B * C`` for the per-item keys, ``B * sample_size * ...`` for the Gumbel ones),
    ``"sum"`` is ``sum(l * w)``.

  So for every key but the Gumbel ones ``"sum"`` is the same number in both, and
  ``"sum_over_batch_size"`` with ``"lists"`` is TF-Ranking's ``"sum"`` divided by ``B``.

``tests/test_tf_ranking.py`` checks every key against TF-Ranking's own Keras losses.
"""

import collections

import tensorflow as tf

from tfrank4class import checks, compat
from tfrank4class.compat import keras
from tfrank4class.labels import num_items
from tfrank4class.losses.base import ListwiseLoss

# impl: the losses_impl class; shape: "item" ([B, n] per-item losses), "pair" ([B, n, n] summed
# over the last axis) or "list" ([B] per-list losses); impl_args: constructor arguments of the
# impl class with TF-Ranking's Keras defaults; extra_args: arguments used around it.
_Spec = collections.namedtuple("_Spec", "impl shape impl_args extra_args")
_LISTWISE = {"lambda_weight": None, "temperature": 1.0}
_APPROX = {"lambda_weight": None, "temperature": 0.1}
_GUMBEL = {"sample_size": 8, "gumbel_temperature": 1.0, "seed": None}

SPECS = {
  "pairwise_hinge_loss": _Spec("PairwiseHingeLoss", "pair", _LISTWISE, {}),
  "pairwise_logistic_loss": _Spec("PairwiseLogisticLoss", "pair", _LISTWISE, {}),
  "pairwise_soft_zero_one_loss": _Spec("PairwiseSoftZeroOneLoss", "pair", _LISTWISE, {}),
  "pairwise_mse_loss": _Spec("PairwiseMSELoss", "pair", _LISTWISE, {}),
  "yeti_logistic_loss": _Spec("PairwiseLogisticLoss", "pair", _LISTWISE, _GUMBEL),
  "softmax_loss": _Spec("SoftmaxLoss", "list", _LISTWISE, {}),
  "calibrated_softmax_loss": _Spec("SoftmaxLoss", "list", _LISTWISE, {"virtual_label": 0.0}),
  "unique_softmax_loss": _Spec("UniqueSoftmaxLoss", "item", _LISTWISE, {}),
  "sigmoid_cross_entropy_loss": _Spec("SigmoidCrossEntropyLoss", "item", {}, {}),
  "mean_squared_loss": _Spec("MeanSquaredLoss", "item", {}, {}),
  "ordinal_loss": _Spec(
    "OrdinalLoss", "item", {"ordinal_size": 1, "use_fraction_label": False}, {}
  ),
  "list_mle_loss": _Spec("ListMLELoss", "item", _LISTWISE, {}),
  "approx_ndcg_loss": _Spec("ApproxNDCGLoss", "item", _APPROX, {}),
  "approx_mrr_loss": _Spec("ApproxMRRLoss", "item", _APPROX, {}),
  "gumbel_approx_ndcg_loss": _Spec("ApproxNDCGLoss", "item", _APPROX, _GUMBEL),
  "coupled_rankdistil_loss": _Spec(
    "CoupledRankDistilLoss", "item", {"sample_size": 8, "topk": None, "temperature": 1.0}, {}
  ),
}

#: Every loss key of TF-Ranking 0.5.5 (``tfr.keras.losses.RankingLossKey.all_keys()``, in order).
TFR_KEYS = tuple(SPECS)
#: The values of ``RankingLoss(normalization=...)``: one loss per list (the package's rule), or
#: TF-Ranking's own Keras reduction (see the module docstring).
NORMALIZATIONS = ("lists", "tf_ranking")
#: What a saved config without ``normalization`` (saved before the argument existed) loads as.
SAVED_BEFORE_NORMALIZATION = "tf_ranking"


def _tfr_keras_losses():
  return compat.tf_ranking_module("keras.losses")


@compat.register_serializable
class RankingLoss(ListwiseLoss):
  """A TF-Ranking loss, by its key, that also accepts integer class ids.

  With ``normalization="tf_ranking"``, ``RankingLoss(key, **kw)(y, s)`` equals TF-Ranking's
  ``tfr.keras.losses.get(key, **kw)`` applied to ``to_relevance(y, C)`` and ``s``. With the
  default ``normalization="lists"`` the loss of a list is the sum of TF-Ranking's weighted losses
  of its items (the mean over its Gumbel samples for the two Gumbel keys), and the Keras reduction
  runs over the lists, as for every loss of the package: ``reduction="none"`` returns ``[B]``
  and ``"sum_over_batch_size"`` is the mean over lists, whatever the key and the number of
  classes (the module docstring has both rules).

  Args:
    key: one of :data:`TFR_KEYS`, e.g. ``"softmax_loss"`` or ``"approx_ndcg_loss"``.
    reduction: the Keras reduction.
    name: the loss name (defaults to ``key``).
    normalization: ``"lists"`` (one loss per list) or ``"tf_ranking"`` (TF-Ranking's own
      reduction, per item for most keys); see :data:`NORMALIZATIONS`. A config saved before
      this argument existed loads as ``"tf_ranking"``, the numbers it was trained with.
    **loss_kwargs: the arguments TF-Ranking's loss of that key takes (``lambda_weight``,
      ``temperature``, ``sample_size``, ``gumbel_temperature``, ``seed``, ``virtual_label``,
      ``ordinal_size``, ``use_fraction_label``, ``topk``), with TF-Ranking's defaults. Lambda
      weights are TF-Ranking's Keras lambda-weight classes, e.g.
      ``compat.tf_ranking_module("keras.losses").NDCGLambdaWeightV2()``.

  Sample weights: ``[B]`` or ``[B, 1]`` weigh each list, ``[B, C]`` each item (TF-Ranking's
  item weights, which its listwise losses fold into a per-list weight with the labels); all are
  checked by :func:`tfrank4class.checks.check_sample_weight` (finite, ``>= 0``). They reach
  TF-Ranking's core, which normalises them with the labels (and samples them with the list)
  before they multiply the losses, so :meth:`__call__` does not multiply them again as
  :class:`~tfrank4class.losses.base.Loss` does. A list weight ``w_b`` multiplies the list's loss
  under either normalisation.

  ``loss_values(scores, relevance)`` returns the values without sample weights, before the
  Keras reduction: ``[B]`` with ``"lists"``, TF-Ranking's shape with ``"tf_ranking"``.

  Raises:
    ValueError: an unknown key, normalisation or keyword argument, naming the allowed ones.
    ImportError: tensorflow-ranking is not installed (the message gives the command).

  Example:
    >>> loss = RankingLoss("softmax_loss")
    >>> round(float(loss([2], [[0.0, 1.0, 3.0]])), 4)  # -log softmax(s)_2
    0.1698
    >>> scores = [[0.0, 1.0, 3.0], [2.0, 0.0, 0.0]]
    >>> RankingLoss("sigmoid_cross_entropy_loss", reduction="none")([2, 0], scores).shape
    TensorShape([2])
    >>> per_item = RankingLoss("sigmoid_cross_entropy_loss", normalization="tf_ranking")
    >>> lists = RankingLoss("sigmoid_cross_entropy_loss")
    >>> round(float(lists([2, 0], scores) / per_item([2, 0], scores)), 4)  # C = 3 items a list
    3.0
    >>> import tfrank4class.metrics
    >>> model = keras.Sequential([keras.layers.Dense(3)])
    >>> model.compile(optimizer="adam", loss=RankingLoss("approx_ndcg_loss"),
    ...               metrics=[tfrank4class.metrics.NDCG(5)])
  """

  item_weights = True

  def __init__(
    self, key, reduction=compat.DEFAULT_REDUCTION, name=None, normalization="lists", **loss_kwargs
  ):
    checks.check_choice("key", key, TFR_KEYS)
    self.normalization = checks.check_choice("normalization", normalization, NORMALIZATIONS)
    name = name or key
    super().__init__(reduction=reduction, name=name)
    self.key = key
    self.loss_kwargs = dict(loss_kwargs)
    spec = SPECS[key]
    allowed = {**spec.impl_args, **spec.extra_args}
    unknown = sorted(set(loss_kwargs) - set(allowed))
    if unknown:
      raise ValueError(
        f"Invalid keyword arguments {unknown} for loss {key!r}; it takes "
        f"{sorted(allowed) or 'none'}."
      )
    args = {**allowed, **loss_kwargs}
    if key == "yeti_logistic_loss" and args["lambda_weight"] is None:
      args["lambda_weight"] = _tfr_keras_losses().YetiDCGLambdaWeight()
    if "virtual_label" in args:
      checks.check_float("virtual_label", args["virtual_label"], minimum=0.0)
    self._virtual_label = args.get("virtual_label")
    impl = getattr(compat.tf_ranking_module("losses_impl"), spec.impl)
    self._impl = impl(name=f"{name}_impl", **{k: args[k] for k in spec.impl_args})
    self._sampler = None
    if spec.extra_args is _GUMBEL:
      self._sample_size = args["sample_size"]
      self._sampler = compat.tf_ranking_module("losses_impl").GumbelSampler(
        name=name,
        sample_size=args["sample_size"],
        temperature=args["gumbel_temperature"],
        seed=args["seed"],
      )

  def _inputs(self, scores, relevance, sample_weight):
    """Relevance, logits and sample weights as TF-Ranking's loss core takes them."""
    if sample_weight is not None:
      sample_weight = checks.check_sample_weight(
        sample_weight, tf.shape(scores)[0], num_items(scores), dtype=scores.dtype
      )
      if sample_weight.shape.rank == 1:
        sample_weight = sample_weight[:, None]  # TF-Ranking's per-list weights are [B, 1]
    if self._virtual_label is not None:
      batch = tf.shape(relevance)[0]
      relevance = tf.concat(
        [relevance, tf.fill([batch, 1], tf.cast(self._virtual_label, relevance.dtype))], 1
      )
      scores = tf.concat([scores, tf.zeros([batch, 1], scores.dtype)], axis=1)
      if sample_weight is not None and sample_weight.shape.rank == 2 and sample_weight.shape[1] > 1:
        sample_weight = tf.concat([sample_weight, tf.ones([batch, 1], sample_weight.dtype)], 1)
    if self._sampler is not None:
      relevance, scores, sample_weight = self._sampler.sample(
        relevance, scores, weights=sample_weight
      )
    if self.key == "ordinal_loss":
      scores = scores[..., None]
    return relevance, scores, sample_weight

  def weighted_values(self, scores, relevance, sample_weight=None):
    """Losses times TF-Ranking's weights, before the Keras reduction: one per list ``[B]`` with
    ``normalization="lists"``, else TF-Ranking's ``[B, n]`` (per item), ``[B, 1]`` or ``[B]``."""
    relevance, logits, sample_weight = self._inputs(scores, relevance, sample_weight)
    if SPECS[self.key].shape == "list":
      values, weights = self._impl.compute_per_list(relevance, logits, sample_weight)
      return self._per_list(values * weights)
    weights = tf.cast(self._impl.normalize_weights(relevance, sample_weight), logits.dtype)
    values, item_weights = self._impl.compute_unreduced_loss(
      labels=relevance, logits=self._impl.get_logits(logits)
    )
    values = values * item_weights
    if SPECS[self.key].shape == "pair":
      values = tf.reduce_sum(values, axis=2)
    # As Keras matches a sample weight to the losses: one trailing axis more or less is squeezed
    # or added (pairwise keys normalise weights to [B, n, 1]).
    if weights.shape.rank == values.shape.rank + 1:
      weights = tf.squeeze(weights, axis=-1)
    elif weights.shape.rank == values.shape.rank - 1:
      weights = weights[..., None]
    return self._per_list(values * weights)

  def _per_list(self, values):
    """``"lists"``: the sum over a list's items ``[B * S, n] -> [B * S]``, then the mean over
    the ``S`` Gumbel samples of each list ``-> [B]``; ``"tf_ranking"``: ``values`` as they are."""
    if self.normalization == "tf_ranking":
      return values
    if values.shape.rank == 2:
      values = tf.reduce_sum(values, axis=1)
    if self._sampler is not None:
      values = tf.reduce_mean(tf.reshape(values, [-1, self._sample_size]), axis=1)
    return values

  def __call__(self, y_true, y_pred, sample_weight=None):
    # TF-Ranking normalises the sample weights with the labels (and samples them with the list).
    return self.reduce(self.weighted_values(*self.lists(y_true, y_pred), sample_weight))

  def loss_values(self, scores, relevance):
    return self.weighted_values(scores, relevance)

  def get_config(self):
    config = super().get_config()
    kwargs = dict(self.loss_kwargs)
    if kwargs.get("lambda_weight") is not None:
      kwargs["lambda_weight"] = _serialize_lambda_weight(kwargs["lambda_weight"])
    config.update({"key": self.key, "normalization": self.normalization, **kwargs})
    return config

  @classmethod
  def from_config(cls, config):
    config = {"normalization": SAVED_BEFORE_NORMALIZATION, **config}
    if isinstance(config.get("lambda_weight"), dict):
      config["lambda_weight"] = _deserialize_lambda_weight(config["lambda_weight"])
    return cls(**config)


_LAMBDA_PREFIX = "tensorflow_ranking>"


def _serialize_lambda_weight(lambda_weight):
  """A TF-Ranking Keras lambda weight as JSON-able config (they have ``get_config`` only).

  Stored as ``{"class_name": "tensorflow_ranking>Name", "config": ...}``; TF-Ranking's gain and
  discount functions are stored by name, any other function must be Keras-registered.
  """
  utils = compat.tf_ranking_module("utils")
  config = {}
  for key, value in lambda_weight.get_config().items():
    if callable(value):
      name = getattr(value, "__name__", "")
      if getattr(utils, name, None) is value:
        value = {"tfr_utils": name}
      else:
        value = keras.utils.serialize_keras_object(value)
    config[key] = value
  return {"class_name": _LAMBDA_PREFIX + type(lambda_weight).__name__, "config": config}


def _deserialize_lambda_weight(spec):
  class_name = spec["class_name"]
  cls = None
  if class_name.startswith(_LAMBDA_PREFIX):
    cls = getattr(_tfr_keras_losses(), class_name[len(_LAMBDA_PREFIX) :], None)
  if cls is None:
    raise ValueError(f"Unknown lambda weight class {class_name!r} in a saved loss config.")
  utils = compat.tf_ranking_module("utils")
  config = {}
  for key, value in spec["config"].items():
    if isinstance(value, dict) and "tfr_utils" in value:
      value = getattr(utils, value["tfr_utils"])
    elif isinstance(value, dict):
      value = keras.utils.deserialize_keras_object(value)
    config[key] = value
  return cls(**config)
