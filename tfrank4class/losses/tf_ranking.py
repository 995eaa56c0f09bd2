"""TF-Ranking 0.5.5's sixteen losses as Keras losses that take integer class ids, on any backend.

The maths is a port of TF-Ranking's Keras-free core (``tensorflow_ranking/python/losses_impl.py``)
to ``keras.ops``, one module per family under :mod:`tfrank4class.losses.ranking_losses`, with
TF-Ranking's lambda weights in :mod:`tfrank4class.losses.lambda_weights`; tensorflow-ranking is
not needed (``tests/test_tf_ranking_oracle.py`` compares every key with it, values and gradients,
where it is installed). This module does what TF-Ranking's Keras layer
(``python/keras/losses.py``) does around the core:

* labels: integer class ids ``[B]`` / ``[B, 1]`` or dense relevance ``[B, C]`` become
  relevance with :func:`~tfrank4class.losses.to_relevance` (``< 0`` = padding), except where a
  core's loss of a one-hot row needs no sort by the labels: the true class alone (softmax,
  unique softmax, ApproxNDCG, ApproxMRR), it against each other class (pairwise hinge,
  logistic, soft zero-one, with any lambda weight, and MSE with one: the row of the true class's
  pairs; Yeti's weight: its two neighbours in the order of the scores, found without a sort),
  each item alone (the pointwise keys; pairwise MSE without a lambda weight, its ``O(C)`` form)
  or it first and the others in a random order (ListMLE without a lambda weight); that core
  takes class ids as they are (its ``compute_per_list_from_ids``: the same values in ``O(C)``
  per list, ``O(C log C)`` where it ranks or orders the items, without the rows);
* ``gumbel_approx_ndcg_loss`` and ``yeti_logistic_loss`` first draw TF-Ranking's Gumbel samples
  of the list (of class ids: samples of the scores, whose rows are the same one-hot rows);
  ``calibrated_softmax_loss`` appends a virtual item of score 0 and label ``virtual_label``
  (class ids without a lambda weight: its closed form, without the rows or the item);
  ``ordinal_loss`` gets its trailing logit axis ``[B, C, 1]``;
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

Differences from TF-Ranking, all where TF-Ranking's value is not a number or is arbitrary: the
port computes in the scores' dtype (float64 stays float64; TF-Ranking fails on it), takes every
log-sum-exp with its maximum out (TF-Ranking's ListMLE is ``-inf`` once scores spread by about
90), and breaks ties of scores, when ranking for a lambda weight, by the lower class id
(TF-Ranking: at random). Every constructor argument is checked (a non-positive or NaN
temperature, ``sample_size=0``, a lambda weight given by name or one the key ignores raise).
Random draws (Gumbel keys: ``seed``; ListMLE's and Coupled-RankDistil's random order of tied
labels: seed 37 as TF-Ranking's) come from a ``keras.random.SeedGenerator`` of the loss. It
advances at every call eagerly, under ``tf.function`` and on PyTorch; under ``jax.jit`` (JAX's
``fit``) it is not part of the traced state (Keras tracks the seed generators of layers, not of
losses), so a compiled step draws the same numbers each time it runs, unless the generators
(``RankingLoss.seed_generators``) are assigned to an attribute of the model.
"""

import collections

from keras import random as keras_random

from tfrank4class import backend, checks, compat
from tfrank4class.compat import ops
from tfrank4class.labels import num_items
from tfrank4class.losses import lambda_weights as lw
from tfrank4class.losses.base import ListwiseLoss, batch_size
from tfrank4class.losses.ranking_losses import approx, listwise, pairwise, pointwise, yeti
from tfrank4class.losses.ranking_losses.base import (
  at_true_class,
  true_class_mask,
  true_class_weight,
)
from tfrank4class.losses.ranking_losses.sampling import GumbelSampler
from tfrank4class.registry import export

# impl: the core class (tfrank4class.losses.ranking_losses); shape: "item" ([B, n] per-item
# losses), "pair" (losses of pairs, summed over the second item: [B, n]) or "list" ([B]);
# impl_args: arguments of the core with TF-Ranking's Keras defaults; extra_args: arguments used
# around it.
_Spec = collections.namedtuple("_Spec", "impl shape impl_args extra_args")
_LISTWISE = {"lambda_weight": None, "temperature": 1.0}
_APPROX = {"lambda_weight": None, "temperature": 0.1}
_GUMBEL = {"sample_size": 8, "gumbel_temperature": 1.0, "seed": None}

SPECS = {
  "pairwise_hinge_loss": _Spec(pairwise.PairwiseHingeLoss, "pair", _LISTWISE, {}),
  "pairwise_logistic_loss": _Spec(pairwise.PairwiseLogisticLoss, "pair", _LISTWISE, {}),
  "pairwise_soft_zero_one_loss": _Spec(pairwise.PairwiseSoftZeroOneLoss, "pair", _LISTWISE, {}),
  "pairwise_mse_loss": _Spec(pairwise.PairwiseMSELoss, "pair", _LISTWISE, {}),
  "yeti_logistic_loss": _Spec(yeti.YetiLogisticLoss, "pair", _LISTWISE, _GUMBEL),
  "softmax_loss": _Spec(listwise.SoftmaxLoss, "list", _LISTWISE, {}),
  "calibrated_softmax_loss": _Spec(listwise.SoftmaxLoss, "list", _LISTWISE, {"virtual_label": 0.0}),
  "unique_softmax_loss": _Spec(listwise.UniqueSoftmaxLoss, "item", _LISTWISE, {}),
  "sigmoid_cross_entropy_loss": _Spec(pointwise.SigmoidCrossEntropyLoss, "item", {}, {}),
  "mean_squared_loss": _Spec(pointwise.MeanSquaredLoss, "item", {}, {}),
  "ordinal_loss": _Spec(
    pointwise.OrdinalLoss, "item", {"ordinal_size": 1, "use_fraction_label": False}, {}
  ),
  "list_mle_loss": _Spec(listwise.ListMLELoss, "item", _LISTWISE, {}),
  "approx_ndcg_loss": _Spec(approx.ApproxNDCGLoss, "item", _APPROX, {}),
  "approx_mrr_loss": _Spec(approx.ApproxMRRLoss, "item", _APPROX, {}),
  "gumbel_approx_ndcg_loss": _Spec(approx.ApproxNDCGLoss, "item", _APPROX, _GUMBEL),
  "coupled_rankdistil_loss": _Spec(
    listwise.CoupledRankDistilLoss, "item", {"sample_size": 8, "topk": None, "temperature": 1.0}, {}
  ),
}

#: Every loss key of TF-Ranking 0.5.5 (``tfr.keras.losses.RankingLossKey.all_keys()``, in order).
TFR_KEYS = tuple(SPECS)
#: The values of ``RankingLoss(normalization=...)``: one loss per list (the package's rule), or
#: TF-Ranking's own Keras reduction (see the module docstring).
NORMALIZATIONS = ("lists", "tf_ranking")
#: What a saved config without ``normalization`` (saved before the argument existed) loads as.
SAVED_BEFORE_NORMALIZATION = "tf_ranking"
#: The lambda weights each key uses (TF-Ranking ignores any other; here it raises).
_PAIR_WEIGHTS = tuple(
  lw.CLASSES[name]
  for name in (
    "LabelDiffLambdaWeight",
    "DCGLambdaWeight",
    "DCGLambdaWeightV2",
    "PrecisionLambdaWeight",
  )
)
LAMBDA_WEIGHTS = {
  **{key: _PAIR_WEIGHTS for key, spec in SPECS.items() if spec.shape == "pair"},
  "softmax_loss": (lw.DCGLambdaWeight,),
  "calibrated_softmax_loss": (lw.DCGLambdaWeight,),
  "list_mle_loss": (lw.ListMLELambdaWeight,),
}
#: The seed of the random order of tied labels, TF-Ranking's.
_TIE_SEED = 37


def _check_arguments(key, args):
  """Each argument of ``key`` checked; returns them with the lambda weight converted."""
  args = dict(args)
  for name in ("temperature", "gumbel_temperature"):
    if name in args:
      checks.check_float(name, args[name], minimum=0.0, strict=True)
  if "sample_size" in args:
    checks.check_int("sample_size", args["sample_size"], minimum=1)
  if "seed" in args:
    checks.check_int("seed", args["seed"], allow_none=True)
  if "topk" in args:
    checks.check_int("topk", args["topk"], minimum=1, allow_none=True)
  if "virtual_label" in args:
    checks.check_float("virtual_label", args["virtual_label"], minimum=0.0)
  if "ordinal_size" in args and args["ordinal_size"] != 1:
    raise ValueError(
      f"`ordinal_size` must be 1 (one logit per item: scores [B, C]), got {args['ordinal_size']!r}."
    )
  if not isinstance(args.get("use_fraction_label", False), bool):
    raise ValueError(
      f"`use_fraction_label` must be True or False, got {args['use_fraction_label']!r}."
    )
  if "lambda_weight" in args:
    weight = lw.get(args["lambda_weight"])
    allowed = LAMBDA_WEIGHTS.get(key, ())
    if weight is not None and not isinstance(weight, allowed):
      names = sorted(cls.__name__ for cls in allowed) or "none (TF-Ranking ignores it)"
      raise TypeError(
        f"`lambda_weight` of {key!r} must be None or one of {names} (and their subclasses), "
        f"got {weight!r}."
      )
    args["lambda_weight"] = weight
  return args


def _core(key, args):
  """The core of ``key`` with its arguments (and its seed generator where it draws)."""
  spec = SPECS[key]
  kwargs = {name: args[name] for name in spec.impl_args if name != "ordinal_size"}
  if key in ("list_mle_loss", "coupled_rankdistil_loss"):
    kwargs["seed"] = keras_random.SeedGenerator(_TIE_SEED)
  return spec.impl(**kwargs)


@export()
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
      weights are objects of :mod:`tfrank4class.losses.lambda_weights` (e.g.
      ``NDCGLambdaWeightV2(topn=5)``; :data:`LAMBDA_WEIGHTS` lists which key uses which), or
      TF-Ranking's own objects, converted to ours.

  Sample weights: ``[B]`` or ``[B, 1]`` weigh each list, ``[B, C]`` each item (TF-Ranking's
  item weights, which its listwise losses fold into a per-list weight with the labels); all are
  checked by :func:`tfrank4class.checks.check_sample_weight` (finite, ``>= 0``). They are
  normalised with the labels as TF-Ranking does (and sampled with the list) before they multiply
  the losses, so :meth:`__call__` does not multiply them again as
  :class:`~tfrank4class.losses.base.Loss` does. A list weight ``w_b`` multiplies the list's loss
  under either normalisation.

  ``loss_values(scores, relevance)`` returns the values without sample weights, before the
  Keras reduction: ``[B]`` with ``"lists"``, TF-Ranking's shape with ``"tf_ranking"``.

  Raises:
    ValueError: an unknown key, normalisation or keyword argument, or a bad value of one
      (naming it, the value and what is allowed).
    TypeError: a lambda weight that is not an object of ours or of TF-Ranking (e.g. a name), or
      one the key does not use.

  Example:
    >>> import numpy as np
    >>> from keras import ops
    >>> loss = RankingLoss("softmax_loss")
    >>> round(float(ops.convert_to_numpy(loss([2], [[0.0, 1.0, 3.0]]))), 4)  # -log softmax(s)_2
    0.1698
    >>> scores = np.array([[0.0, 1.0, 3.0], [2.0, 0.0, 0.0]], "float32")
    >>> tuple(RankingLoss("sigmoid_cross_entropy_loss", reduction="none")([2, 0], scores).shape)
    (2,)
    >>> per_item = RankingLoss("sigmoid_cross_entropy_loss", normalization="tf_ranking")
    >>> lists = RankingLoss("sigmoid_cross_entropy_loss")
    >>> ratio = lists([2, 0], scores) / per_item([2, 0], scores)  # C = 3 items a list
    >>> round(float(ops.convert_to_numpy(ratio)), 4)
    3.0
    >>> import tfrank4class.metrics
    >>> from tfrank4class.compat import keras
    >>> from tfrank4class.losses.lambda_weights import NDCGLambdaWeightV2
    >>> model = keras.Sequential([keras.layers.Dense(3)])
    >>> loss = RankingLoss("pairwise_logistic_loss", lambda_weight=NDCGLambdaWeightV2(topn=5))
    >>> model.compile(optimizer="adam", loss=loss, metrics=[tfrank4class.metrics.NDCG(5)])
  """

  item_weights = True

  def __init__(
    self, key, reduction=compat.DEFAULT_REDUCTION, name=None, normalization="lists", **loss_kwargs
  ):
    checks.check_choice("key", key, TFR_KEYS)
    self.normalization = checks.check_choice("normalization", normalization, NORMALIZATIONS)
    spec = SPECS[key]
    allowed = {**spec.impl_args, **spec.extra_args}
    unknown = sorted(set(loss_kwargs) - set(allowed))
    if unknown:
      raise ValueError(
        f"Invalid keyword arguments {unknown} for loss {key!r}; it takes "
        f"{sorted(allowed) or 'none'}."
      )
    args = _check_arguments(key, {**allowed, **loss_kwargs})
    super().__init__(reduction=reduction, name=name or key)
    self.key = key
    self.loss_kwargs = {k: args[k] for k in loss_kwargs}
    if key == "yeti_logistic_loss" and args["lambda_weight"] is None:
      args["lambda_weight"] = lw.YetiDCGLambdaWeight()
    self._virtual_label = args.get("virtual_label")
    self._impl = _core(key, args)
    self._sampler = None
    if spec.extra_args is _GUMBEL:
      self._sample_size = args["sample_size"]
      seed = keras_random.SeedGenerator(args["seed"])
      self._sampler = GumbelSampler(args["sample_size"], args["gumbel_temperature"], seed)

  @property
  def seed_generators(self):
    """The ``keras.random.SeedGenerator`` s this loss draws from (empty if it draws nothing).
    JAX's ``fit`` advances them only when they are assigned to an attribute of the model, as
    Keras's own random layers keep theirs: ``model.loss_seed_generators = loss.seed_generators``
    (docs/backends.md, "Caveats")."""
    found = [self._sampler.seed] if self._sampler is not None else []
    tie_order = getattr(self._impl, "seed", None)
    return found + ([tie_order] if tie_order is not None else [])

  def _sample_weight(self, scores, sample_weight):
    """Checked sample weights as TF-Ranking's loss core takes them: ``None``, ``[B, 1]`` per
    list or ``[B, C]`` per item."""
    if sample_weight is None:
      return None
    sample_weight = checks.check_sample_weight(
      sample_weight, ops.shape(scores)[0], num_items(scores), dtype=scores.dtype
    )
    if len(sample_weight.shape) == 1:
      sample_weight = sample_weight[:, None]  # TF-Ranking's per-list weights are [B, 1]
    return sample_weight

  def _inputs(self, scores, relevance, sample_weight):
    """Relevance, logits and sample weights (checked: :meth:`_sample_weight`) as TF-Ranking's
    loss core takes them."""
    if self._virtual_label is not None:
      column = ops.ones_like(scores[:, :1])
      relevance = ops.concatenate([relevance, column * self._virtual_label], axis=1)
      scores = ops.concatenate([scores, column * 0.0], axis=1)
      if sample_weight is not None and sample_weight.shape[1] != 1:
        sample_weight = ops.concatenate([sample_weight, column], axis=1)
    if self._sampler is not None:
      relevance, scores, sample_weight = self._sampler.sample(relevance, scores, sample_weight)
    return relevance, scores, sample_weight

  def weighted_values(self, scores, relevance, sample_weight=None):
    """Losses times TF-Ranking's weights, before the Keras reduction: one per list ``[B]`` with
    ``normalization="lists"``, else TF-Ranking's ``[B, n]`` (per item), ``[B, 1]`` or ``[B]``;
    NaN for the lists whose relevance has a NaN (how
    :meth:`~tfrank4class.labels.Labels.to_relevance` marks labels that failed a check that could
    not raise, in traced code)."""
    invalid = ops.any(ops.isnan(relevance), axis=1)
    sample_weight = self._sample_weight(scores, sample_weight)
    return self._weighted_values(scores, relevance, sample_weight, invalid)

  def _weighted_values(self, scores, relevance, sample_weight, invalid):
    """:meth:`weighted_values` of checked sample weights, with the bad lists given as
    ``invalid`` (bool ``[B]``, or ``None`` for none)."""
    relevance, logits, sample_weight = self._inputs(scores, relevance, sample_weight)
    if SPECS[self.key].shape == "list":
      values, weights = self._impl.compute_per_list(relevance, logits, sample_weight)
      return self._per_list(values * weights, invalid)
    weights = self._impl.normalize_weights(relevance, sample_weight)
    values, item_weights = self._impl.compute_unreduced_loss(
      relevance, self._impl.get_logits(logits)
    )
    values = values * item_weights
    # As Keras matches a sample weight to the losses: one trailing axis more or less is squeezed
    # or added (pairwise keys normalise weights to [B, n, 1], their losses are summed to [B, n]).
    rank = len(getattr(weights, "shape", ()))
    if rank == len(values.shape) + 1:
      weights = ops.squeeze(weights, axis=-1)
    elif rank == len(values.shape) - 1:
      weights = weights[..., None]
    return self._per_list(values * weights, invalid)

  def _calibrated_softmax_of_ids(self, ids, scores, sample_weight):
    """``calibrated_softmax_loss``'s losses times TF-Ranking's weights ``[B]`` of class ids
    ``ids`` ``[B]`` without their one-hot rows or the appended virtual item (no lambda weight):
    with the logits ``z`` ``[B, n]``, the virtual item's logit 0 and label ``v``, the log-sum-exp
    of the ``n + 1`` logits is ``lse = logaddexp(logsumexp(z), 0)`` and the softmax core's
    cross-entropy times its label sum is ``w_y (lse - z_y) + v w_v lse``: ``w_y`` the true class's
    sample weight, ``w_v`` the virtual item's (the list's weight, or 1 beside item weights, as
    :meth:`_inputs` appends it). The rows' form kept two or three ``[B, n + 1]`` tensors."""
    logits = self._impl.get_logits(scores)
    top = ops.logsumexp(logits, axis=1, keepdims=True)
    lse = backend.logaddexp(top, ops.zeros_like(top))
    true = at_true_class(true_class_mask(ids, logits), logits)
    true_weight = true_class_weight(ids, sample_weight, logits)
    virtual_weight = true_weight if sample_weight is None or sample_weight.shape[1] == 1 else 1.0
    return (true_weight * (lse - true) + self._virtual_label * virtual_weight * lse)[:, 0]

  def _on_items(self, values, ids, logits):
    """TF-Ranking's per-item values ``[B, n]`` of the one-hot rows of class ids ``ids`` (lists
    ``logits`` ``[B, n]``) where a pairwise core gives the true class's item's alone ``[B, 1]``
    (the other items carry no loss) and ``normalization="tf_ranking"`` keeps TF-Ranking's shape;
    else ``values`` (a list's sum is the same)."""
    if self.normalization == "lists" or SPECS[self.key].shape != "pair" or values.shape[1] != 1:
      return values
    return backend.where(true_class_mask(ids, logits), values, 0.0)

  def _per_list(self, values, invalid):
    """``"lists"``: the sum over a list's items ``[B * S, n] -> [B * S]``, then the mean over
    the ``S`` Gumbel samples of each list ``-> [B]``; ``"tf_ranking"``: ``values`` as they are.
    The values of ``invalid`` lists ``[B]`` (of their samples) are NaN (``None``: no list)."""
    if self.normalization == "lists":
      if len(values.shape) == 2:
        values = ops.sum(values, axis=1)
      if self._sampler is not None:
        values = backend.mean(ops.reshape(values, (-1, self._sample_size)), axis=1)
    elif self._sampler is not None and invalid is not None:
      invalid = ops.repeat(invalid, self._sample_size)
    if invalid is None:
      return values
    invalid = ops.reshape(invalid, (-1,) + (1,) * (len(values.shape) - 1))
    return backend.where(invalid, float("nan"), values)

  def __call__(self, y_true, y_pred, sample_weight=None):
    # TF-Ranking normalises the sample weights with the labels (and samples them with the list).
    # The parser's own mask of bad lists rather than the NaN it would write into their relevance
    # (in traced code, three ops over [B, C] fewer: the marking, the NaN test and its `any`).
    if batch_size(y_pred) == 0:
      return self.empty_batch(y_true, y_pred, sample_weight)
    scores, labels = self.parse(y_true, y_pred)
    weights = self._sample_weight(scores, sample_weight)
    if labels.is_class_ids and self._virtual_label is not None and self._impl.lambda_weight is None:
      values = self._calibrated_softmax_of_ids(labels.ids, scores, weights)
      return self.reduce(self._per_list(values, labels.invalid))
    if labels.is_class_ids and self._virtual_label is None:
      # A core with a form for class ids takes them without one-hot rows (see the module doc);
      # Gumbel samples of one-hot rows are one-hot rows of the same ids (both Gumbel cores have
      # a form for class ids with any lambda weight, so nothing is drawn twice).
      ids, logits, ids_weights = labels.ids, scores, weights
      if self._sampler is not None:
        ids, logits, ids_weights = self._sampler.sample(ids, scores, weights)
      per_list = self._impl.compute_per_list_from_ids(ids, logits, ids_weights)
      if per_list is not None:
        values = self._on_items(per_list[0] * per_list[1], ids, logits)
        return self.reduce(self._per_list(values, labels.invalid))
    relevance = labels._replace(invalid=None).to_relevance(num_items(scores), scores.dtype)
    if self.shows_non_finite:  # [B] values that show their bad lists (Loss.mark_invalid)
      values = self._weighted_values(*self.extend(scores, relevance), weights, None)
      return self.reduce(self.mark_invalid(labels, values))
    values = self._weighted_values(*self.extend(scores, relevance), weights, labels.invalid)
    return self.reduce(values)

  @property
  def shows_non_finite(self):
    """Whether the core's values show non-finite inputs themselves (``Loss.shows_non_finite``):
    its own ``shows_non_finite``, and no Gumbel draw."""
    return getattr(self._impl, "shows_non_finite", False) and self._sampler is None

  def loss_values(self, scores, relevance):
    return self.weighted_values(scores, relevance)

  def get_config(self):
    config = super().get_config()
    kwargs = dict(self.loss_kwargs)
    if kwargs.get("lambda_weight") is not None:
      kwargs["lambda_weight"] = compat.keras.utils.serialize_keras_object(kwargs["lambda_weight"])
    config.update({"key": self.key, "normalization": self.normalization, **kwargs})
    return config

  @classmethod
  def from_config(cls, config):
    config = {"normalization": SAVED_BEFORE_NORMALIZATION, **config}
    if isinstance(config.get("lambda_weight"), dict):
      config["lambda_weight"] = lw.deserialize(config["lambda_weight"])
    return cls(**config)
