"""Metric-learning losses: contrastive and triplet with in-batch mining, and smoothed cross-entropy.

The contrastive and triplet losses are pairwise-distance losses of the kind that Boudiaf et al.,
"A unifying mutual information view of metric learning: cross-entropy vs. pairwise losses" (ECCV
2020), relate to the cross-entropy; :class:`SmoothedCrossEntropy` is the loss of their recipe.
The pairwise losses take class (identity) ids ``y_true`` ``[B]`` / ``[B, 1]`` and embeddings
``y_pred`` ``[B, D]``, and mine pairs or triplets inside the batch, so a batch must hold several
items of each class: use :class:`tfrank4class.data.sampling.ClassBalancedSampler` (P classes x K
items per batch). Ids must be whole numbers ``>= 0`` (:func:`tfrank4class.labels.parse_labels`,
the package's one label parser): others raise a ``ValueError`` eagerly; in compiled code, where
nothing can raise, the loss of the whole batch is NaN (the pairs of every anchor depend on every
label).

Distances are Euclidean, by default between L2-normalised embeddings (``normalize=True``), where
``d(a, b)^2 = 2 - 2 cos(a, b)`` lies in ``[0, 4]``. ``P(i)`` are the other items of ``i``'s class
in the batch, ``N(i)`` the items of other classes, ``[x]_+ = max(x, 0)``.

The pairwise losses sit on :class:`EmbeddingLoss`, the public base of a loss over embeddings:
it computes the distances and pair masks of the batch, and a subclass implements one method,
``anchor_values(distances, positives, negatives)``. Each loss returns one value per anchor
``[B]`` and lets Keras reduce them: ``sample_weight``
``[B]`` / ``[B, 1]`` weighs the anchors (``coupling = "anchor"``, see
:mod:`tfrank4class.losses.base`); an item of weight 0 is no anchor but still a positive or
negative of the others. An anchor without a positive or without a negative in the batch
contributes 0.
Under ``tf.distribute`` each replica mines inside its own share of the global batch.
"""

import numpy as np

from tfrank4class import backend, checks, compat
from tfrank4class.compat import ops
from tfrank4class.labels import check_batch_size, check_list_scores, num_items, parse_labels
from tfrank4class.losses.base import ListwiseLoss, Loss
from tfrank4class.losses.ranking_losses.base import at_true_class, true_class_mask
from tfrank4class.losses.registry import register
from tfrank4class.registry import export

_EPS = 1e-12


def _labels_and_embeddings(y_true, y_pred):
  """The parsed class ids (a :class:`~tfrank4class.labels.Labels`) and float embeddings
  ``[B, D]``."""
  y_pred = checks.check_scores("y_pred", y_pred, finite=False)
  try:
    labels = parse_labels(y_true, name="y_true", dense=False)
  except ValueError as e:
    raise ValueError(f"{e} The embedding losses take class ids, not dense relevance.") from None
  check_batch_size(labels.ids, y_pred, name="y_true", other_name="y_pred", items="embeddings")
  y_pred, labels = check_list_scores(labels, y_pred)
  return labels, y_pred


def l2_normalize(x):
  """``x / max(|x|, 1e-6)`` along the last axis, in ``x``'s dtype (``keras.ops.normalize``
  computes float64 in float32 on PyTorch, Keras 3.15; :func:`tfrank4class.backend.maximum` keeps
  it).

  Example:
    >>> [round(float(v), 4) for v in ops.convert_to_numpy(l2_normalize(np.array([[3.0, 4.0]])))[0]]
    [0.6, 0.8]
  """
  x = ops.convert_to_tensor(x)
  squares = ops.sum(ops.square(x), axis=-1, keepdims=True)
  return x * ops.rsqrt(backend.maximum(squares, 1e-12))


def pairwise_distances(embeddings, normalize=True):
  """Euclidean distances ``[B, B]`` between the rows of ``embeddings`` ``[B, D]``.

  ``d_ij = sqrt(max(|e_i|^2 + |e_j|^2 - 2 e_i.e_j, 1e-12))`` (the floor keeps the gradient finite
  for identical rows), after ``e <- e / |e|`` when ``normalize``.

  Example:
    >>> d = pairwise_distances(np.array([[1.0, 0.0], [0.0, 1.0]], np.float32))
    >>> round(float(d[0, 1]) ** 2, 6)
    2.0
  """
  e = ops.convert_to_tensor(embeddings)
  if normalize:
    e = l2_normalize(e)
  sq = ops.sum(ops.square(e), axis=-1)
  d2 = sq[:, None] + sq[None, :] - 2.0 * backend.matmul(e, ops.transpose(e))
  return ops.sqrt(backend.maximum(d2, _EPS))


def _pair_masks(labels):
  """Boolean ``[B, B]`` masks of positive pairs (same class, i != j) and negative pairs."""
  same = ops.equal(labels[:, None], labels[None, :])
  index = ops.arange(ops.shape(labels)[0])
  not_self = ops.not_equal(index[:, None], index[None, :])
  return ops.logical_and(same, not_self), ops.logical_not(same)


def _masked_mean(values, mask, axis):
  mask = ops.cast(mask, values.dtype)
  return backend.divide_no_nan(ops.sum(values * mask, axis), ops.sum(mask, axis))


@export()
class EmbeddingLoss(Loss):
  """The base of a metric-learning loss over embeddings: implement ``anchor_values``.

  ``y_true`` are class (identity) ids ``[B]`` / ``[B, 1]``, ``y_pred`` embeddings ``[B, D]``
  (checked as the module docstring says). The base turns them into the batch's Euclidean
  distances and pair masks,

      D_ij = |e_i - e_j|             (e <- e / |e| first when ``normalize``;
                                      see :func:`pairwise_distances`)
      P_ij = y_i == y_j and i != j   (the positives of anchor i)
      N_ij = y_i != y_j              (its negatives)

  and ``anchor_values(distances, positives, negatives)`` returns one loss per anchor ``[B]``:

      loss(y, e, w) = reduce_K(anchor_values(D, P, N) * w)

  with the bound Keras's reduction ``reduce_K`` and sample weights ``w`` ``[B]`` / ``[B, 1]``
  weighing the anchors (``coupling = "anchor"``: an item of weight 0 is no anchor but still a
  positive or negative of the others; see :mod:`tfrank4class.losses.base`). An anchor without
  a positive or a negative in the batch should get 0. Register a subclass with
  :func:`tfrank4class.losses.register` (or ``keras.utils.register_keras_serializable``) so that
  it loads from ``.keras`` files; a subclass with arguments of its own adds them to
  ``get_config``.

  Args:
    normalize: L2-normalise the embeddings before the distances.
    reduction, name: as for every Keras loss.

  Example (the mean distance of an anchor to its positives):
    >>> class PositiveDistance(EmbeddingLoss):
    ...   def anchor_values(self, distances, positives, negatives):
    ...     mask = ops.cast(positives, distances.dtype)
    ...     return backend.divide_no_nan(ops.sum(distances * mask, 1), ops.sum(mask, 1))
    >>> loss = PositiveDistance(reduction="none")
    >>> e = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 0.0]], np.float32)
    >>> ops.convert_to_numpy(loss(np.array([0, 0, 1]), e)).round(4)  # sqrt(2), none
    array([1.4142, 1.4142, 0.    ], dtype=float32)
    >>> from tfrank4class.compat import keras
    >>> embedder = keras.Sequential([keras.layers.Dense(8)])
    >>> embedder.compile(optimizer="adam", loss=PositiveDistance())
  """

  coupling = "anchor"
  predictions = "embeddings"

  def __init__(self, normalize=True, reduction=compat.DEFAULT_REDUCTION, name=None):
    super().__init__(reduction=reduction, name=name)
    self.normalize = checks.check_bool("normalize", normalize)

  def pairs(self, y_true, y_pred):
    """Distances ``D`` ``[B, B]`` and the positive and negative pair masks ``P``, ``N``."""
    labels, e = _labels_and_embeddings(y_true, y_pred)
    return (pairwise_distances(e, self.normalize), *_pair_masks(labels.ids))

  def anchor_values(self, distances, positives, negatives):
    """One loss per anchor ``[B]`` from ``D``, ``P`` and ``N`` ``[B, B]``; subclasses implement
    it."""
    raise NotImplementedError(
      f"{type(self).__name__} must implement anchor_values(distances, positives, negatives)."
    )

  def call(self, y_true, y_pred):
    labels, e = _labels_and_embeddings(y_true, y_pred)
    pairs = (pairwise_distances(e, self.normalize), *_pair_masks(labels.ids))
    return self.mark_invalid(labels, self.anchor_values(*pairs))

  def get_config(self):
    config = super().get_config()
    config["normalize"] = self.normalize
    return config


def _margin_and_mining(margin, mining, choices):
  """The checked margin (``>= 0``) and mining (one of ``choices``) of the pairwise losses."""
  return (
    checks.check_float("margin", margin, minimum=0.0),
    checks.check_choice("mining", mining, choices),
  )


def _hardest(d, pos, neg, margin):
  """Per anchor, the farthest positive and the closest negative distance (batch-hard mining).

  Anchors without positives get 0, anchors without negatives a distance beyond any hinge.
  """
  hardest_pos = ops.max(backend.where(pos, d, ops.zeros_like(d)), axis=1)
  beyond = ops.max(d) + margin + 1.0
  hardest_neg = ops.min(backend.where(neg, d, beyond + ops.zeros_like(d)), axis=1)
  return hardest_pos, hardest_neg


@register("contrastive_loss")
class ContrastiveLoss(EmbeddingLoss):
  """Contrastive loss (Hadsell, Chopra & LeCun, CVPR 2006, Eq. 4) over all pairs in the batch.

  Per anchor ``i`` with margin ``m``:

      mining="all":   l_i = mean_{j in P(i)} d_ij^2 / 2
                            + mean_{j in N(i), d_ij < m} [m - d_ij]_+^2 / 2
      mining="hard":  l_i = max_{j in P(i)} d_ij^2 / 2   +  [m - min_{j in N(i)} d_ij]_+^2 / 2

  With ``"all"`` the negative term averages over the *active* negatives (those inside the
  margin), so that the many easy negatives of a batch do not dilute it (the averaging of
  Musgrave et al., ECCV 2020); it is 0 when no negative is inside the margin.

  Args:
    margin: ``m >= 0``, in distance units (``d`` is in ``[0, 2]`` for normalised embeddings).
    normalize: L2-normalise embeddings first.
    mining: ``"all"`` pairs or the ``"hard"``-est positive and negative per anchor.
    reduction, name: as for any Keras loss.

  Example:
    >>> loss = ContrastiveLoss(margin=1.0)
    >>> round(float(loss([0, 0, 1], [[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])), 4)
    0.0
    >>> from tfrank4class.compat import keras
    >>> embedder = keras.Sequential([keras.layers.Dense(8)])
    >>> embedder.compile(optimizer="adam", loss=ContrastiveLoss(margin=0.5, mining="hard"))
  """

  MINING = ("all", "hard")

  def __init__(
    self,
    margin=1.0,
    normalize=True,
    mining="all",
    reduction=compat.DEFAULT_REDUCTION,
    name="contrastive_loss",
  ):
    super().__init__(normalize=normalize, reduction=reduction, name=name)
    self.margin, self.mining = _margin_and_mining(margin, mining, self.MINING)

  def anchor_values(self, distances, positives, negatives):
    d, pos, neg, m = distances, positives, negatives, self.margin
    if self.mining == "all":
      pos_term = _masked_mean(0.5 * ops.square(d), pos, axis=1)
      active = ops.logical_and(neg, d < m)
      neg_term = _masked_mean(0.5 * ops.square(ops.relu(m - d)), active, axis=1)
    else:
      has_pos = ops.any(pos, axis=1)
      has_neg = ops.any(neg, axis=1)
      hardest_pos, hardest_neg = _hardest(d, pos, neg, m)
      pos_term = backend.where(has_pos, 0.5 * ops.square(hardest_pos), ops.zeros_like(hardest_pos))
      neg_term = backend.where(
        has_neg, 0.5 * ops.square(ops.relu(m - hardest_neg)), ops.zeros_like(hardest_neg)
      )
    return pos_term + neg_term

  def get_config(self):
    config = super().get_config()
    config.update({"margin": self.margin, "mining": self.mining})
    return config


@register("triplet_loss")
class TripletLoss(EmbeddingLoss):
  """Triplet loss (Weinberger & Saul, JMLR 2009; Schroff et al., FaceNet, CVPR 2015, Eq. 2) with
  in-batch mining.

  For anchor ``i``, positive ``p`` and negative ``n`` the hinge is ``[m + d_ip - d_in]_+``.

      mining="batch_hard": l_i = [m + max_{p in P(i)} d_ip - min_{n in N(i)} d_in]_+
                           (Hermans, Beyer & Leibe, "In Defense of the Triplet Loss", 2017, Eq. 5)
      mining="batch_all":  l_i = sum_{p, n} [m + d_ip - d_in]_+ / #{(p, n) with a positive hinge}
                           (Hermans et al. 2017, the "BA != 0" variant, averaged per anchor)
      mining="semi_hard":  l_i = mean_{p in P(i)} [m + d_ip - d_in*(p)]_+, with n*(p) the closest
                           negative farther than p (FaceNet Eq. 4 selection), or the farthest
                           negative if none is farther than p.

  Args:
    margin: ``m >= 0`` (distance units).
    normalize: L2-normalise embeddings first.
    mining: ``"batch_hard"``, ``"batch_all"`` or ``"semi_hard"``.
    reduction, name: as for any Keras loss.

  Example:
    >>> loss = TripletLoss(margin=0.2)
    >>> round(float(loss([0, 0, 1, 1], [[1.0, 0.0], [1.0, 0.1], [0.0, 1.0], [0.1, 1.0]])), 4)
    0.0
    >>> from tfrank4class.compat import keras
    >>> embedder = keras.Sequential([keras.layers.Dense(8)])
    >>> embedder.compile(optimizer="adam", loss=TripletLoss(margin=0.2, mining="semi_hard"))
  """

  MINING = ("batch_hard", "batch_all", "semi_hard")

  def __init__(
    self,
    margin=0.2,
    normalize=True,
    mining="batch_hard",
    reduction=compat.DEFAULT_REDUCTION,
    name="triplet_loss",
  ):
    super().__init__(normalize=normalize, reduction=reduction, name=name)
    self.margin, self.mining = _margin_and_mining(margin, mining, self.MINING)

  def anchor_values(self, distances, positives, negatives):
    d, pos, neg, m = distances, positives, negatives, self.margin
    has_pos = ops.any(pos, axis=1)
    has_neg = ops.any(neg, axis=1)
    valid = ops.logical_and(has_pos, has_neg)
    if self.mining == "batch_hard":
      hardest_pos, hardest_neg = _hardest(d, pos, neg, m)
      loss = ops.relu(m + hardest_pos - hardest_neg)
    elif self.mining == "batch_all":
      # hinge[i, p, n] = [m + d_ip - d_in]_+ on valid (i, p, n).
      hinge = ops.relu(m + d[:, :, None] - d[:, None, :])
      mask = ops.cast(ops.logical_and(pos[:, :, None], neg[:, None, :]), d.dtype)
      hinge = hinge * mask
      active = ops.sum(ops.cast(hinge > 0, d.dtype), axis=[1, 2])
      loss = backend.divide_no_nan(ops.sum(hinge, axis=[1, 2]), active)
    else:
      # For each (i, p): negatives farther than p; take the closest such, else the farthest.
      big = ops.max(d) + m + 1.0
      d_in = d[:, None, :] + ops.zeros_like(d)[:, :, None]  # [i, p, n] -> d_in
      outside = ops.logical_and(neg[:, None, :], d_in > d[:, :, None])
      closest_outside = ops.min(backend.where(outside, d_in, big), axis=2)
      farthest = ops.max(backend.where(neg, d, ops.zeros_like(d)), axis=1, keepdims=True)
      d_neg = backend.where(ops.any(outside, axis=2), closest_outside, farthest)
      loss = _masked_mean(ops.relu(m + d - d_neg), pos, axis=1)
    return backend.where(valid, loss, ops.zeros_like(loss))

  def get_config(self):
    config = super().get_config()
    config.update({"margin": self.margin, "mining": self.mining})
    return config


SPREADS = ("other_classes", "all_classes")


def _check_smoothing(label_smoothing):
  label_smoothing = checks.check_float("label_smoothing", label_smoothing, minimum=0.0)
  if label_smoothing >= 1.0:
    raise ValueError(
      f"`label_smoothing` must be a finite number in [0, 1), got {label_smoothing!r}."
    )
  return label_smoothing


def smoothed_cross_entropy(
  scores, labels, *, where=None, label_smoothing=0.1, spread="other_classes"
):
  """Per-list softmax cross-entropy against a smoothed target (see
  :class:`SmoothedCrossEntropy` for the targets of ``spread``, dense labels and padding).

  Args:
    scores: logits ``[B, C]``.
    labels: class ids ``[B]`` / ``[B, 1]`` or dense relevance ``[B, C]`` (``< 0``: padding).
    where: optional bool ``[B, C]``; items where it is False are padding.
    label_smoothing: ``eps`` in ``[0, 1)``.
    spread: ``"other_classes"`` or ``"all_classes"``.

  Returns:
    ``[B]`` losses in the scores' dtype.

  Example:
    >>> s = np.array([[0.0, 0.0, 0.0]], np.float32)
    >>> ops.convert_to_numpy(smoothed_cross_entropy(s, np.array([0]))).round(4)   # log 3
    array([1.0986], dtype=float32)
  """
  eps = _check_smoothing(label_smoothing)
  checks.check_choice("spread", spread, SPREADS)
  logits = checks.check_scores("scores", scores)
  parsed = parse_labels(labels, num_items(logits), name="labels", dtype=logits.dtype)
  check_batch_size(parsed, logits, name="labels", other_name="scores")
  if parsed.is_class_ids and where is None:
    return parsed.mark_invalid(_smoothed_cross_entropy_of_ids(logits, parsed.ids, eps, spread))
  relevance = parsed.to_relevance(num_items(logits), logits.dtype)
  if where is not None:
    relevance = backend.where(where, relevance, -ops.ones_like(relevance))
  valid = relevance >= 0
  gains = backend.where(valid, relevance, ops.zeros_like(relevance))
  mass = ops.sum(gains, axis=-1, keepdims=True)
  p = backend.divide_no_nan(gains, mass)
  if spread == "all_classes":
    receivers = ops.cast(valid, logits.dtype)
  else:
    receivers = ops.cast(ops.logical_and(valid, ops.equal(relevance, 0.0)), logits.dtype)
  count = ops.sum(receivers, axis=-1, keepdims=True)
  eps = backend.where(count > 0, ops.full_like(count, eps), ops.zeros_like(count))
  targets = (1.0 - eps) * p + eps * backend.divide_no_nan(receivers, count)
  # Padded items leave the softmax (their logit becomes the dtype's lowest value).
  masked = backend.where(valid, logits, ops.full_like(logits, np.finfo(ops.dtype(logits)).min))
  log_p = backend.where(valid, ops.log_softmax(masked, axis=-1), ops.zeros_like(masked))
  loss = -ops.sum(targets * log_p, axis=-1)
  return parsed.mark_invalid(backend.where(mass[:, 0] > 0, loss, ops.zeros_like(loss)))


def _smoothed_cross_entropy_of_ids(logits, ids, eps, spread):
  """:func:`smoothed_cross_entropy` of class ids ``ids`` ``[B]`` without their one-hot rows:
  the target is ``q = a e_y + b`` (``b`` on every class), so the loss is ``logsumexp(z) - a z_y -
  b sum_j z_j`` ``[B]``, three reductions over ``[B, C]`` and a gradient ``softmax(z) - q`` that
  needs no ``[B, C]`` tensor kept from the forward but the softmax's (the rows' form kept three
  or four). ``"other_classes"``: ``b = eps / (C - 1)``, ``a = 1 - eps - b``; ``"all_classes"``:
  ``b = eps / C``, ``a = 1 - eps``; no smoothing where no class receives it (``C = 1``)."""
  size = ops.cast(num_items(logits), logits.dtype)
  receivers = size - 1.0 if spread == "other_classes" else size
  eps = ops.cast(receivers > 0, logits.dtype) * eps
  spread_mass = eps / ops.maximum(receivers, 1.0)
  true_mass = 1.0 - eps - (spread_mass if spread == "other_classes" else 0.0)
  true = at_true_class(true_class_mask(ids, logits), logits)[:, 0]
  total = ops.sum(logits, axis=-1)
  return ops.logsumexp(logits, axis=-1) - true_mass * true - spread_mass * total


@register("smoothed_cross_entropy")
class SmoothedCrossEntropy(ListwiseLoss):
  """Softmax cross-entropy with label smoothing: the classifier loss of Boudiaf et al.'s recipe.

  With logits ``z`` ``[B, C]``, class ids ``y`` and smoothing ``eps``, the loss of a list is
  ``l = - sum_c q_c log softmax(z)_c`` against one of two smoothed targets ``q``:

      spread="other_classes" (default): q_c = 1 - eps if c == y, else eps / (C - 1)
      spread="all_classes":             q_c = (1 - eps) 1[c == y] + eps / C

  ``"other_classes"`` is the target of Boudiaf et al.'s released code (``jeromerony/
  dml_cross_entropy``, ``utils/utils.py``, ``SmoothCrossEntropy``; ``eps = 0.1`` in their
  ``experiment.py``), the default because this loss is the one of their recipe (see
  :func:`tfrank4class.retrieval.build_retrieval_model`). ``"all_classes"`` is the label
  smoothing of Szegedy et al. ("Rethinking the Inception Architecture", CVPR 2016, Sec. 7) and
  of ``keras.losses.CategoricalCrossentropy(label_smoothing=eps)``. For class ids the two
  targets coincide when ``eps_all = eps_other C / (C - 1)``. Their code returns the
  Kullback-Leibler divergence ``KL(q || softmax(z)) = l - H(q)``; we return the cross-entropy
  ``l``, which differs by the constant entropy ``H(q)`` of the target and has the same gradient.
  A config saved before ``spread`` existed (when the loss was always ``"all_classes"``) loads as
  ``"all_classes"``, so a restored model keeps the loss it was trained with.

  Boudiaf et al. (ECCV 2020, abstract) show that minimising the cross-entropy maximises the
  mutual information between embeddings and labels, like the pairwise losses above, without pair
  mining or class-balanced batches.

  Dense relevance ``[B, C]`` (see :func:`tfrank4class.losses.to_relevance`) generalises ``y``:
  the relevance of the valid items is normalised to a distribution ``p`` (``p = e_y`` for a class
  id), ``q = (1 - eps) p`` plus ``eps`` spread evenly over the valid items (``"all_classes"``) or
  over the valid items of relevance 0 (``"other_classes"``; ``q = p`` if there is none). Padded
  items (relevance ``< 0``) are excluded: they get no target mass and leave the softmax. A list
  without any relevant item (only padding or zeros) contributes 0, as in TF-Ranking's softmax
  loss. Class ids outside ``[0, C)`` raise a ``ValueError`` eagerly and give the list a NaN loss
  in compiled code.

  A :class:`~tfrank4class.losses.ListwiseLoss`: ``loss_values(scores, relevance)`` is the loss of
  each list, :func:`smoothed_cross_entropy`.

  Args:
    label_smoothing: ``eps`` in ``[0, 1)``.
    spread: ``"other_classes"`` or ``"all_classes"``: where the smoothing mass ``eps`` goes.
    reduction, name: as for any Keras loss.

  Example:
    >>> loss = SmoothedCrossEntropy(label_smoothing=0.0)
    >>> round(float(loss(np.array([0]), np.zeros([1, 2], np.float32))), 4)   # log 2
    0.6931
    >>> round(float(SmoothedCrossEntropy(0.5)(np.array([0]), np.zeros([1, 3], np.float32))), 4)
    1.0986
    >>> import tfrank4class.metrics
    >>> from tfrank4class.compat import keras
    >>> model = keras.Sequential([keras.layers.Dense(3)])
    >>> model.compile(optimizer="adam", loss=SmoothedCrossEntropy(0.1),
    ...               metrics=[tfrank4class.metrics.TopKAccuracy(1)])
  """

  SPREADS = SPREADS
  takes_class_ids = True  # smoothed_cross_entropy's form of class ids, without one-hot rows

  def __init__(
    self,
    label_smoothing=0.1,
    spread="other_classes",
    reduction=compat.DEFAULT_REDUCTION,
    name="smoothed_cross_entropy",
  ):
    super().__init__(reduction=reduction, name=name)
    self.label_smoothing = _check_smoothing(label_smoothing)
    self.spread = checks.check_choice("spread", spread, self.SPREADS)

  def loss_values(self, scores, relevance):
    return smoothed_cross_entropy(
      scores, relevance, label_smoothing=self.label_smoothing, spread=self.spread
    )

  def get_config(self):
    config = super().get_config()
    config.update({"label_smoothing": self.label_smoothing, "spread": self.spread})
    return config

  @classmethod
  def from_config(cls, config):
    # Configs saved before `spread` existed were trained with the "all_classes" target.
    return cls(**{"spread": "all_classes", **config})
