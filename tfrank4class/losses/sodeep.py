"""Rank-based losses of SoDeep (Engilberge et al., CVPR 2019) over any rank operator.

Every loss here takes a *rank operator* ``ranker`` mapping scores ``[B, n]`` to ranks ``[B, n]``
on the scale of :func:`tfrank4class.ranking.rank` (``1..n``, 1 = highest score):

* ``"attention"``, ``"lstm"``, ``"conv"``: the sorter shipped with the package
  (:class:`~tfrank4class.ranking.AttentionSorter` etc., ``.pretrained()``);
* ``"pairwise_sigmoid"``: the handcrafted sorter of Eq. 11-12 (steepness 20);
* ``"exact"`` (or ``None``): :func:`~tfrank4class.ranking.rank`, exact and without gradient
  (useful for evaluation and hand-checked values);
* any Keras layer mapping ``[B, n] -> [B, n]`` ranks, e.g. a sorter instance or the blackbox
  ranker ``tfrank4class.ranking.BlackboxRanker``.

So sorters, the blackbox ranker and exact ranks are interchangeable.

Fine-tuning the sorter on real scores (SoDeep Sec. 3.1): with ``ranker_trainable=True`` each call
of the loss also takes one Adam step (``ranker_learning_rate``) that moves the sorter towards the
exact ranks of the scores it is currently fed (Eq. 1, ``tf.stop_gradient`` on the scores); with
``False`` (the default) the sorter is frozen. Fine-tuning is not available under a distribution
strategy (a clear error is raised).

Serialization: ``get_config`` stores a named ranker by its name (the shipped weights are reloaded)
and a layer with ``keras.utils.serialize_keras_object``; a sorter layer's *learned weights* are
not part of a Keras loss config, so pass pretrained sorters by name when the model must be saved.
Padded items (relevance < 0) are not supported by these losses and raise an error.
"""
import tensorflow as tf

from tfrank4class import _validation
from tfrank4class.compat import keras
from tfrank4class.losses.registry import register
from tfrank4class.losses.relevance import num_items, to_relevance
from tfrank4class.ranking import sorter_base
from tfrank4class.ranking.attention_sorter import AttentionSorter
from tfrank4class.ranking.conv_sorter import ConvSorter
from tfrank4class.ranking.exact import rank
from tfrank4class.ranking.lstm_sorter import LSTMSorter
from tfrank4class.ranking.pairwise_sigmoid_sorter import PairwiseSigmoidSorter
from tfrank4class.ranking.ties import tie_statistics

_PRETRAINED = {"attention": AttentionSorter, "lstm": LSTMSorter, "conv": ConvSorter}
_NAMES = ("exact", "pairwise_sigmoid") + tuple(_PRETRAINED)


def resolve_ranker(ranker, trainable=False):
  """Returns ``(config_value, callable)`` for a ranker given by name, config dict or layer."""
  if ranker is None or ranker == "exact":
    return "exact", rank
  if isinstance(ranker, str):
    if ranker in _PRETRAINED:
      return ranker, _PRETRAINED[ranker].pretrained(trainable=trainable)
    if ranker == "pairwise_sigmoid":
      return ranker, PairwiseSigmoidSorter()
    raise ValueError(f"`ranker` must be one of {list(_NAMES)}, a rank layer or a callable, "
                     f"got {ranker!r}.")
  if isinstance(ranker, dict):
    layer = keras.utils.deserialize_keras_object(ranker)
    return ranker, layer
  if callable(ranker):
    return ranker, ranker
  raise ValueError(f"`ranker` must be one of {list(_NAMES)}, a rank layer or a callable, "
                   f"got {ranker!r}.")


class _RankLoss(keras.losses.Loss):
  """Shared plumbing: the rank operator, its optional fine-tuning, and serialization."""

  def __init__(self, ranker, ranker_trainable, ranker_learning_rate, reduction, name):
    super().__init__(reduction=reduction, name=name)
    if not isinstance(ranker_trainable, bool):
      raise ValueError(f"`ranker_trainable` must be a bool, got {ranker_trainable!r}.")
    self.ranker_trainable = ranker_trainable
    self.ranker_learning_rate = _validation.check_float(
        "ranker_learning_rate", ranker_learning_rate, minimum=0.0, strict=True)
    self._ranker_config, self.ranker = resolve_ranker(ranker, trainable=ranker_trainable)
    self._ranker_optimizer = None
    if ranker_trainable:
      if not isinstance(self.ranker, sorter_base.Sorter) or not self.ranker.trainable_weights:
        raise ValueError(
            f"`ranker_trainable=True` needs a learned sorter layer (e.g. 'attention', 'lstm', "
            f"'conv'), got ranker={ranker!r}.")
      self.ranker.trainable = True
      self._ranker_optimizer = keras.optimizers.Adam(self.ranker_learning_rate)
      self._ranker_optimizer.build(self.ranker.trainable_variables)

  def _rank(self, scores):
    if isinstance(self.ranker, keras.layers.Layer):
      return self.ranker(scores, training=False)
    return self.ranker(scores)

  def _finetune(self, scores):
    """One Adam step of the sorter towards the exact ranks of ``scores`` (Eq. 1); returns a
    dependency to attach to the loss."""
    if tf.distribute.has_strategy():
      raise ValueError(
          "`ranker_trainable=True` (fine-tuning the sorter inside the loss) is not supported "
          "under a tf.distribute strategy; pretrain or fine-tune the sorter separately.")
    scores = tf.stop_gradient(scores)
    target = rank(scores)
    n = tf.cast(tf.shape(scores)[-1], scores.dtype)
    with tf.GradientTape() as tape:
      fit = tf.reduce_mean(tf.abs(self.ranker(scores, training=True) - target)) / (n - 1.0)
    variables = self.ranker.trainable_variables
    grads = tape.gradient(fit, variables)
    return self._ranker_optimizer.apply_gradients(zip(grads, variables))

  def _with_finetune(self, loss, scores):
    if not self.ranker_trainable:
      return loss
    op = self._finetune(scores)
    with tf.control_dependencies([op] if op is not None else []):
      return tf.identity(loss)

  def get_config(self):
    config = super().get_config()
    ranker = self._ranker_config
    kind = getattr(ranker, "pretrained_kind", None)
    if kind in _PRETRAINED and not self.ranker_trainable:
      ranker = kind   # the shipped weights are reloaded by name
    if not isinstance(ranker, (str, dict)):
      if isinstance(ranker, keras.layers.Layer):
        ranker = keras.utils.serialize_keras_object(ranker)
      else:
        raise ValueError(
            f"{type(self).__name__} with ranker={ranker!r} cannot be serialized: pass a name "
            f"({list(_NAMES)}) or a Keras layer.")
    config.update({"ranker": ranker, "ranker_trainable": self.ranker_trainable,
                   "ranker_learning_rate": self.ranker_learning_rate})
    return config


def _scores(y_pred, min_length=2):
  return sorter_base.check_scores(y_pred, min_length=min_length)


def _no_padding(relevance):
  check = tf.debugging.assert_greater_equal(
      relevance, tf.zeros((), relevance.dtype),
      message="relevance < 0 (padding) is not supported by the SoDeep losses")
  with tf.control_dependencies([check]):
    return tf.identity(relevance)


@register("spearman_loss")
class SpearmanLoss(_RankLoss):
  """One minus Spearman's correlation through a rank operator (SoDeep Eq. 4).

      L(y, s) = 6 * sum_i (rk_hat(s)_i - rk(y)_i)^2 / (n (n^2 - 1))  +  l1_weight * mean_i |s_i - y_i|

  ``rk_hat`` is the rank operator (a sorter); ``rk(y)`` the exact ranks of the targets (ties get
  their average rank). With exact ranks and no ties the first term is ``1 - rho`` (Spearman's
  rho). The optional L1 term on the raw scores is the warm-up the authors used.

  Args:
    ranker: the rank operator (see the module docstring).
    l1_weight: weight of the L1 term on raw scores (0 disables it).
    over_batch: if True, the whole batch is one list: ``y_pred`` / ``y_true`` of shape ``[B]``
      or ``[B, 1]`` (regression outputs), ranked across the batch. Otherwise each row of
      ``[B, n]`` is a list and ``y_true`` is dense targets ``[B, n]`` or class ids.
    ranker_trainable, ranker_learning_rate: fine-tune the sorter on the real scores (see the
      module docstring).

  Example:
    >>> loss = SpearmanLoss(ranker="exact", reduction="none")
    >>> loss([[3.0, 2.0, 1.0]], [[0.9, 0.5, 0.1]]).numpy()
    array([0.], dtype=float32)
  """

  def __init__(self, ranker="attention", l1_weight=0.0, over_batch=False, ranker_trainable=False,
               ranker_learning_rate=1e-4, reduction=keras.losses.Reduction.AUTO,
               name="spearman_loss"):
    super().__init__(ranker, ranker_trainable, ranker_learning_rate, reduction, name)
    self.l1_weight = _validation.check_float("l1_weight", l1_weight, minimum=0.0)
    if not isinstance(over_batch, bool):
      raise ValueError(f"`over_batch` must be a bool, got {over_batch!r}.")
    self.over_batch = over_batch

  def call(self, y_true, y_pred):
    if self.over_batch:
      y_pred = tf.convert_to_tensor(y_pred)
      if y_pred.shape.rank not in (1, 2) or (y_pred.shape.rank == 2 and y_pred.shape[-1] != 1):
        raise ValueError(f"With over_batch=True `y_pred` must have shape [B] or [B, 1], got "
                         f"shape {y_pred.shape}.")
      y_pred = tf.reshape(y_pred, [1, -1])
      scores = _scores(tf.cast(y_pred, tf.float32) if not y_pred.dtype.is_floating else y_pred)
      target = tf.reshape(tf.cast(y_true, scores.dtype), [1, -1])
    else:
      scores = _scores(y_pred)
      target = to_relevance(y_true, num_items(scores), dtype=scores.dtype)
    stats = tie_statistics(target)
    target_ranks = stats["above"] + (stats["tied"] + 1.0) / 2.0
    n = tf.cast(tf.shape(scores)[-1], scores.dtype)
    sq = tf.reduce_sum(tf.square(self._rank(scores) - target_ranks), axis=-1)
    loss = 6.0 * sq / (n * (n * n - 1.0))
    if self.l1_weight:
      loss += self.l1_weight * tf.reduce_mean(tf.abs(scores - target), axis=-1)
    return self._with_finetune(loss, scores)

  def get_config(self):
    config = super().get_config()
    config.update({"l1_weight": self.l1_weight, "over_batch": self.over_batch})
    return config


@register("sorter_map_loss")
class SorterMAPLoss(_RankLoss):
  """One minus mean average precision through a rank operator (SoDeep Eq. 7).

      AP(s) = 1/|P| * sum_{i in P} rk_hat(s_P)_i / rk_hat(s)_i,        L = 1 - AP

  ``P`` are the relevant items (relevance > 0), ``rk_hat(s)`` their ranks in the whole list and
  ``rk_hat(s_P)`` their ranks among the relevant items only. The latter is computed by the same
  operator on the list whose irrelevant items are moved below every relevant one (to
  ``min(s) - (max(s) - min(s)) - 1``, a constant for the gradient). With exact ranks this is the
  exact AP; a list without relevant items has loss 0.

  Args:
    ranker: the rank operator (see the module docstring).
    ranker_trainable, ranker_learning_rate: fine-tune the sorter (see the module docstring).

  Example:
    >>> loss = SorterMAPLoss(ranker="exact", reduction="none")
    >>> loss([[1.0, 0.0, 1.0]], [[0.9, 0.5, 0.1]]).numpy().round(4)   # AP = (1/1 + 2/3) / 2
    array([0.1667], dtype=float32)
  """

  def __init__(self, ranker="attention", ranker_trainable=False, ranker_learning_rate=1e-4,
               reduction=keras.losses.Reduction.AUTO, name="sorter_map_loss"):
    super().__init__(ranker, ranker_trainable, ranker_learning_rate, reduction, name)

  def call(self, y_true, y_pred):
    scores = _scores(y_pred)
    relevance = _no_padding(to_relevance(y_true, num_items(scores), dtype=scores.dtype))
    positive = relevance > 0
    pos = tf.cast(positive, scores.dtype)
    lo = tf.reduce_min(scores, axis=-1, keepdims=True)
    hi = tf.reduce_max(scores, axis=-1, keepdims=True)
    floor = tf.stop_gradient(lo - (hi - lo) - 1.0)
    only_positive = tf.where(positive, scores, tf.broadcast_to(floor, tf.shape(scores)))
    ratio = self._rank(only_positive) / self._rank(scores)
    num_pos = tf.reduce_sum(pos, axis=-1)
    ap = tf.math.divide_no_nan(tf.reduce_sum(ratio * pos, axis=-1), num_pos)
    loss = tf.where(num_pos > 0, 1.0 - ap, tf.zeros_like(ap))
    return self._with_finetune(loss, scores)


@register("rank_triplet_loss")
class RankTripletLoss(_RankLoss):
  """Hardest-negative triplet loss on predicted ranks, for retrieval (SoDeep Eq. 9-10).

  Each row is a query, its items the candidates, relevance > 0 the matching ones. With the
  normalised ranks ``r_i = (rk_hat(s)_i - 1) / (n - 1)`` in ``[0, 1]`` (0 = top), every relevant
  item ``p`` must be ranked ahead of the hardest (best-ranked) irrelevant item by ``alpha``:

      L = 1/|P| * sum_{p in P} max(0, alpha + r_p - min_{q not in P} r_q)

  the rank analogue of the hardest-negative triplet loss ``max(0, alpha - s_p + max_q s_q)``.
  A row without relevant or without irrelevant items has loss 0. For the paper's cross-modal
  setting (a square query x item score matrix ``S`` with the matches on the diagonal), add the
  two directions: ``loss(eye, S) + loss(eye, transpose(S))``.

  Args:
    ranker: the rank operator (see the module docstring).
    alpha: the margin, in normalised ranks (``>= 0``).
    ranker_trainable, ranker_learning_rate: fine-tune the sorter (see the module docstring).

  Example:
    >>> loss = RankTripletLoss(ranker="exact", alpha=0.5, reduction="none")
    >>> loss([[0.0, 1.0, 0.0]], [[0.9, 0.5, 0.1]]).numpy()   # r_p = 0.5, hardest r_q = 0
    array([1.], dtype=float32)
  """

  def __init__(self, ranker="attention", alpha=0.1, ranker_trainable=False,
               ranker_learning_rate=1e-4, reduction=keras.losses.Reduction.AUTO,
               name="rank_triplet_loss"):
    super().__init__(ranker, ranker_trainable, ranker_learning_rate, reduction, name)
    self.alpha = _validation.check_float("alpha", alpha, minimum=0.0)

  def call(self, y_true, y_pred):
    scores = _scores(y_pred)
    relevance = _no_padding(to_relevance(y_true, num_items(scores), dtype=scores.dtype))
    positive = relevance > 0
    pos = tf.cast(positive, scores.dtype)
    n = tf.cast(tf.shape(scores)[-1], scores.dtype)
    r = (self._rank(scores) - 1.0) / (n - 1.0)
    hardest = tf.reduce_min(tf.where(positive, tf.ones_like(r) * 2.0, r), axis=-1, keepdims=True)
    hinge = tf.nn.relu(self.alpha + r - hardest) * pos
    num_pos = tf.reduce_sum(pos, axis=-1)
    has_both = tf.logical_and(num_pos > 0, num_pos < n)
    loss = tf.where(has_both, tf.math.divide_no_nan(tf.reduce_sum(hinge, -1), num_pos),
                    tf.zeros_like(num_pos))
    return self._with_finetune(loss, scores)

  def get_config(self):
    config = super().get_config()
    config["alpha"] = self.alpha
    return config
