"""Rank-based losses of SoDeep (Engilberge et al., CVPR 2019, Sec. 3.2) over any rank operator.

Every loss here takes a *rank operator* ``ranker`` mapping scores ``[B, n]`` to ranks ``[B, n]``
on the scale of :func:`tfrank4class.ranking.rank` (``1..n``, 1 = highest score):

* ``"attention"``, ``"lstm"``, ``"conv"``: the sorter shipped with the package
  (:class:`~tfrank4class.ranking.AttentionSorter` etc., ``.pretrained()``);
* ``"pairwise_sigmoid"``: the handcrafted sorter of Sec. 4.1.2, Eq. 11-12 (the paper's
  ``lambda = 10``);
* ``"exact"`` (or ``None``): :func:`~tfrank4class.ranking.rank`, exact and without gradient
  (useful for evaluation and hand-checked values);
* any Keras layer mapping ``[B, n] -> [B, n]`` ranks, e.g. a sorter instance or the blackbox
  ranker ``tfrank4class.ranking.BlackboxRanker``.

So sorters, the blackbox ranker and exact ranks are interchangeable.

Fine-tuning the sorter on real scores (SoDeep Sec. 3.2.1, "optionally, the block can be
fine-tuned"): with ``ranker_trainable=True`` each call of the loss also takes one Adam step
(``ranker_learning_rate``) that moves the sorter towards the exact ranks of the lists it is
currently fed (the L1 loss of Eq. 1, ``tf.stop_gradient`` on the scores); with ``False`` (the
default) the sorter is frozen. Fine-tuning is not available under a distribution strategy (a
clear error is raised).

Padding: as everywhere in the package, relevance below 0 marks a padded item. Padded items are
excluded: before ranking they are moved below every valid item of their list (to
``lo - (hi - lo) - 1`` with ``lo`` / ``hi`` the smallest / largest valid score, a constant for
the gradient), so the valid items' ranks are their ranks among the valid items, and they take no
part in the loss.

Precision: scores in float16 / bfloat16 (e.g. under the ``mixed_float16`` policy) are cast to
float32 first, and ranks are float32 (float16 holds whole numbers exactly only up to 2,048).

Serialization: ``get_config`` stores a named ranker by its name (the shipped weights are reloaded)
and a layer with ``keras.utils.serialize_keras_object``; a sorter layer's *learned weights* are
not part of a Keras loss config, so pass pretrained sorters by name when the model must be saved.
"""

import tensorflow as tf

from tfrank4class import _validation, compat
from tfrank4class.compat import keras
from tfrank4class.losses.base import ListwiseLoss
from tfrank4class.losses.registry import register
from tfrank4class.ranking import sorter_base
from tfrank4class.ranking.exact import rank
from tfrank4class.ranking.pairwise_sigmoid_sorter import PairwiseSigmoidSorter
from tfrank4class.ranking.precision import average_precision_from_ranks
from tfrank4class.ranking.sorters import PRETRAINED_SORTERS
from tfrank4class.ranking.ties import tie_statistics

_NAMES = ("exact", "pairwise_sigmoid") + PRETRAINED_SORTERS.names()


def resolve_ranker(ranker, trainable=False):
  """Returns ``(config_value, callable)`` for a ranker given by name, config dict or layer."""
  if ranker is None or ranker == "exact":
    return "exact", rank
  if isinstance(ranker, str):
    if ranker in PRETRAINED_SORTERS:
      return ranker, PRETRAINED_SORTERS.get(ranker, trainable=trainable)
    if ranker == "pairwise_sigmoid":
      return ranker, PairwiseSigmoidSorter()
    raise ValueError(
      f"`ranker` must be one of {list(_NAMES)}, a rank layer or a callable, got {ranker!r}."
    )
  if isinstance(ranker, dict):
    layer = keras.utils.deserialize_keras_object(ranker)
    return ranker, layer
  if callable(ranker):
    return ranker, ranker
  raise ValueError(
    f"`ranker` must be one of {list(_NAMES)}, a rank layer or a callable, got {ranker!r}."
  )


class _RankLoss(ListwiseLoss):
  """Shared plumbing: the rank operator, its optional fine-tuning, and serialization."""

  min_list_size = 2

  def __init__(self, ranker, ranker_trainable, ranker_learning_rate, reduction, name):
    super().__init__(reduction=reduction, name=name)
    if not isinstance(ranker_trainable, bool):
      raise ValueError(f"`ranker_trainable` must be a bool, got {ranker_trainable!r}.")
    self.ranker_trainable = ranker_trainable
    self.ranker_learning_rate = _validation.check_float(
      "ranker_learning_rate", ranker_learning_rate, minimum=0.0, strict=True
    )
    self._ranker_config, self.ranker = resolve_ranker(ranker, trainable=ranker_trainable)
    self._ranker_optimizer = None
    if ranker_trainable:
      if not isinstance(self.ranker, sorter_base.Sorter) or not self.ranker.trainable_weights:
        raise ValueError(
          f"`ranker_trainable=True` needs a learned sorter layer (e.g. 'attention', 'lstm', "
          f"'conv'), got ranker={ranker!r}."
        )
      self.ranker.trainable = True
      self._ranker_optimizer = keras.optimizers.Adam(self.ranker_learning_rate)
      self._ranker_optimizer.build(self.ranker.trainable_variables)

  def _rank(self, scores):
    if isinstance(self.ranker, keras.layers.Layer):
      return self.ranker(scores, training=False)
    return self.ranker(scores)

  def _finetune(self, scores):
    """One Adam step of the sorter towards the exact ranks of the lists ``scores`` it ranked
    (Eq. 1); returns a dependency to attach to the loss."""
    if tf.distribute.has_strategy():
      raise ValueError(
        "`ranker_trainable=True` (fine-tuning the sorter inside the loss) is not supported "
        "under a tf.distribute strategy; pretrain or fine-tune the sorter separately."
      )
    scores = tf.stop_gradient(scores)
    target = rank(scores)
    n = tf.cast(tf.shape(scores)[-1], scores.dtype)
    with tf.GradientTape() as tape:
      fit = tf.reduce_mean(tf.abs(self.ranker(scores, training=True) - target)) / (n - 1.0)
    variables = self.ranker.trainable_variables
    grads = tape.gradient(fit, variables)
    return self._ranker_optimizer.apply_gradients(zip(grads, variables))

  def _with_finetune(self, loss, lists):
    if not self.ranker_trainable:
      return loss
    op = self._finetune(lists)
    with tf.control_dependencies([op] if op is not None else []):
      return tf.identity(loss)

  def get_config(self):
    config = super().get_config()
    ranker = self._ranker_config
    kind = getattr(ranker, "pretrained_kind", None)
    if kind in PRETRAINED_SORTERS and not self.ranker_trainable:
      ranker = kind  # the shipped weights are reloaded by name
    if not isinstance(ranker, (str, dict)):
      if isinstance(ranker, keras.layers.Layer):
        ranker = keras.utils.serialize_keras_object(ranker)
      else:
        raise ValueError(
          f"{type(self).__name__} with ranker={ranker!r} cannot be serialized: pass a name "
          f"({list(_NAMES)}) or a Keras layer."
        )
    config.update(
      {
        "ranker": ranker,
        "ranker_trainable": self.ranker_trainable,
        "ranker_learning_rate": self.ranker_learning_rate,
      }
    )
    return config


def _sink(scores, keep):
  """``scores`` with every entry where ``keep`` is False moved below all entries of its list.

  The new value ``lo - (hi - lo) - 1``, with ``lo`` / ``hi`` the smallest / largest kept score,
  is a constant for the gradient, so those items rank last (after every kept item) and pass no
  gradient; their own scores, however large, do not matter.
  """
  all_lo = tf.reduce_min(scores, axis=-1, keepdims=True)
  all_hi = tf.reduce_max(scores, axis=-1, keepdims=True)
  lo = tf.reduce_min(tf.where(keep, scores, tf.broadcast_to(all_hi, tf.shape(scores))), -1, True)
  hi = tf.reduce_max(tf.where(keep, scores, tf.broadcast_to(all_lo, tf.shape(scores))), -1, True)
  floor = tf.stop_gradient(lo - (hi - lo) - 1.0)
  return tf.where(keep, scores, tf.broadcast_to(floor, tf.shape(scores)))


@register("spearman_loss")
class SpearmanLoss(_RankLoss):
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
  items are excluded (see the module docstring) and ``m`` counts the others. A list with fewer
  than 2 valid items has loss 0. With ``over_batch=True`` the targets are regression values and
  every value, negative ones included, is a target.

  Args:
    ranker: the rank operator (see the module docstring).
    l1_weight: weight of the L1 term on raw scores (0 disables it).
    over_batch: if True, the whole batch is one list: ``y_pred`` / ``y_true`` of shape ``[B]``
      or ``[B, 1]`` (regression outputs), ranked across the batch, as in the paper's Sec.
      4.2.1. Otherwise each row of ``[B, n]`` is a list and ``y_true`` is dense targets
      ``[B, n]`` or class ids.
    ranker_trainable, ranker_learning_rate: fine-tune the sorter on the real scores (see the
      module docstring).

  Example:
    >>> loss = SpearmanLoss(ranker="exact", reduction="none")
    >>> loss([[3.0, 2.0, 1.0]], [[0.9, 0.5, 0.1]]).numpy()
    array([0.], dtype=float32)
    >>> loss([[3.0, -1.0, 2.0, 1.0]], [[0.9, 5.0, 0.1, 0.5]]).numpy()   # item 1 is padding
    array([0.5], dtype=float32)
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
    self.l1_weight = _validation.check_float("l1_weight", l1_weight, minimum=0.0)
    if not isinstance(over_batch, bool):
      raise ValueError(f"`over_batch` must be a bool, got {over_batch!r}.")
    self.over_batch = over_batch

  def call(self, y_true, y_pred):
    if not self.over_batch:
      return super().call(y_true, y_pred)
    y_pred = tf.convert_to_tensor(y_pred)
    if y_pred.shape.rank not in (1, 2) or (y_pred.shape.rank == 2 and y_pred.shape[-1] != 1):
      raise ValueError(
        f"With over_batch=True `y_pred` must have shape [B] or [B, 1], got shape {y_pred.shape}."
      )
    scores = _validation.check_scores(
      "y_pred", tf.reshape(y_pred, [1, -1]), min_length=2, finite=False
    )
    target = tf.reshape(tf.cast(y_true, scores.dtype), [1, -1])
    return self._loss(scores, target, tf.ones_like(scores, tf.bool))

  def loss_values(self, scores, relevance):
    return self._loss(scores, relevance, relevance >= 0)

  def _loss(self, scores, target, valid):
    stats = tie_statistics(target, mask=valid)
    target_ranks = stats["above"] + (stats["tied"] + 1.0) / 2.0
    m = tf.reduce_sum(tf.cast(valid, scores.dtype), axis=-1)
    lists = _sink(scores, valid)
    zeros = tf.zeros_like(scores)
    sq = tf.reduce_sum(tf.where(valid, tf.square(self._rank(lists) - target_ranks), zeros), -1)
    loss = tf.math.divide_no_nan(6.0 * sq, m * (m * m - 1.0))
    if self.l1_weight:
      l1 = tf.reduce_sum(tf.where(valid, tf.abs(scores - target), zeros), axis=-1)
      loss += self.l1_weight * tf.math.divide_no_nan(l1, m)
    return self._with_finetune(loss, lists)

  def get_config(self):
    config = super().get_config()
    config.update({"l1_weight": self.l1_weight, "over_batch": self.over_batch})
    return config


@register("sorter_map_loss")
class SorterMAPLoss(_RankLoss):
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

  Args:
    ranker: the rank operator (see the module docstring).
    ranker_trainable, ranker_learning_rate: fine-tune the sorter (see the module docstring).

  Example:
    >>> loss = SorterMAPLoss(ranker="exact")
    >>> # class 0: positives ranked 1 and 3 of 3 -> 1 of 2 pairs wrong; class 1: no positive.
    >>> float(loss([[1, 0], [0, 0], [1, 0]], [[0.9, 0.1], [0.5, 0.2], [0.1, 0.3]]))
    0.5
    >>> import tfrank4class.metrics
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
    columns = tf.transpose(scores)  # [C, B]: one list per class
    relevance = tf.transpose(relevance)
    valid = relevance >= 0
    positive = relevance > 0
    pos = tf.cast(positive, scores.dtype)
    num_pos = tf.reduce_sum(pos, axis=-1)
    num_neg = tf.reduce_sum(tf.cast(valid, scores.dtype), axis=-1) - num_pos
    lists = _sink(columns, valid)
    rank_sum = tf.reduce_sum(self._rank(lists) * pos, axis=-1)
    wrong = (rank_sum - num_pos * (num_pos + 1.0) / 2.0) / tf.maximum(num_pos * num_neg, 1.0)
    kept = tf.cast(tf.logical_and(num_pos > 0, num_neg > 0), scores.dtype)
    loss = tf.math.divide_no_nan(tf.reduce_sum(wrong * kept), tf.reduce_sum(kept))
    return self._with_finetune(tf.reshape(loss, [1]), lists)


@register("sorter_ap_loss")
class SorterAPLoss(_RankLoss):
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

  Args:
    ranker: the rank operator (see the module docstring).
    ranker_trainable, ranker_learning_rate: fine-tune the sorter (see the module docstring).

  Example:
    >>> loss = SorterAPLoss(ranker="exact", reduction="none")
    >>> loss([[1.0, 0.0, 1.0]], [[0.9, 0.5, 0.1]]).numpy().round(4)   # AP = (1/1 + 2/3) / 2
    array([0.1667], dtype=float32)
    >>> import tfrank4class.metrics
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

  def loss_values(self, scores, relevance):
    positive = relevance > 0
    lists = _sink(scores, relevance >= 0)
    relevant_ranks = self._rank(_sink(scores, positive))
    ap = average_precision_from_ranks(self._rank(lists), relevant_ranks, positive)
    loss = tf.where(tf.reduce_any(positive, axis=-1), 1.0 - ap, tf.zeros_like(ap))
    return self._with_finetune(loss, lists)


@register("rank_triplet_loss")
class RankTripletLoss(_RankLoss):
  """Hardest-negative triplet loss on predicted ranks, for retrieval (SoDeep Sec. 3.2.3, Eq. 9-10).

  Each row is a query, its items the candidates, relevance > 0 the matching ones. With the
  normalised ranks ``r_i = (rk_hat(s)_i - 1) / (m - 1)`` in ``[0, 1]`` (0 = top, ``m`` valid
  items), every relevant item ``p`` must be ranked ahead of the hardest (best-ranked) irrelevant
  item by ``alpha``:

      L = 1/|P| * sum_{p in P} max(0, alpha + r_p - min_{q not in P} r_q)

  the rank analogue of the hardest-negative triplet loss ``max(0, alpha - s_p + max_q s_q)``.
  Eq. 9-10 assume one positive per query and take the mean over the queries of a batch; we
  average over the positives of a row so that several matches are allowed. A row without
  relevant or without irrelevant items has loss 0; padded items (relevance < 0) are excluded.
  For the paper's cross-modal setting (a square query x item score matrix ``S`` with the matches
  on the diagonal), add the two directions: ``loss(eye, S) + loss(eye, transpose(S))``.

  Args:
    ranker: the rank operator (see the module docstring).
    alpha: the margin, in normalised ranks (``>= 0``; the paper gives no value, the authors'
      code uses one rank position, ``1 / n``).
    ranker_trainable, ranker_learning_rate: fine-tune the sorter (see the module docstring).

  Example:
    >>> loss = RankTripletLoss(ranker="exact", alpha=0.5, reduction="none")
    >>> loss([[0.0, 1.0, 0.0]], [[0.9, 0.5, 0.1]]).numpy()   # r_p = 0.5, hardest r_q = 0
    array([1.], dtype=float32)
    >>> scorer = keras.Sequential([keras.layers.Dense(3)])   # a query's scores of 3 candidates
    >>> scorer.compile(optimizer="adam", loss=RankTripletLoss(ranker="attention", alpha=0.1))
  """

  def __init__(
    self,
    ranker="attention",
    alpha=0.1,
    ranker_trainable=False,
    ranker_learning_rate=1e-4,
    reduction=compat.DEFAULT_REDUCTION,
    name="rank_triplet_loss",
  ):
    super().__init__(ranker, ranker_trainable, ranker_learning_rate, reduction, name)
    self.alpha = _validation.check_float("alpha", alpha, minimum=0.0)

  def loss_values(self, scores, relevance):
    valid = relevance >= 0
    positive = relevance > 0
    negative = tf.logical_and(valid, tf.logical_not(positive))
    pos = tf.cast(positive, scores.dtype)
    m = tf.reduce_sum(tf.cast(valid, scores.dtype), axis=-1, keepdims=True)
    lists = _sink(scores, valid)
    r = tf.math.divide_no_nan(self._rank(lists) - 1.0, m - 1.0)
    hardest = tf.reduce_min(tf.where(negative, r, tf.ones_like(r) * 2.0), axis=-1, keepdims=True)
    hinge = tf.nn.relu(self.alpha + r - hardest) * pos
    num_pos = tf.reduce_sum(pos, axis=-1)
    has_both = tf.logical_and(num_pos > 0, tf.reduce_any(negative, axis=-1))
    loss = tf.where(
      has_both, tf.math.divide_no_nan(tf.reduce_sum(hinge, -1), num_pos), tf.zeros_like(num_pos)
    )
    return self._with_finetune(loss, lists)

  def get_config(self):
    config = super().get_config()
    config["alpha"] = self.alpha
    return config
