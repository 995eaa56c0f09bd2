"""Metric-learning losses: contrastive and triplet with in-batch mining, and smoothed cross-entropy.

The contrastive and triplet losses are pairwise-distance losses of the kind that Boudiaf et al.,
"A unifying mutual information view of metric learning: cross-entropy vs. pairwise losses" (ECCV
2020), relate to the cross-entropy; :class:`SmoothedCrossEntropy` is the loss of their recipe.
The pairwise losses take class (identity) ids ``y_true`` ``[B]`` / ``[B, 1]`` and embeddings
``y_pred`` ``[B, D]``, and mine pairs or triplets inside the batch, so a batch must hold several
items of each class: use :class:`tfrank4class.data.sampling.ClassBalancedSampler` (P classes x K
items per batch). Ids must be whole numbers ``>= 0`` (:func:`tfrank4class.labels.parse_labels`,
the package's one label parser): others raise ``InvalidArgumentError`` eagerly and inside
``tf.function``; under ``jit_compile=True`` XLA drops that check, and a fractional id is
truncated towards zero.

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

import tensorflow as tf

from tfrank4class import checks, compat
from tfrank4class.labels import check_batch_size, parse_labels
from tfrank4class.losses.base import ListwiseLoss, Loss
from tfrank4class.losses.registry import register

_EPS = 1e-12


def _labels_and_embeddings(y_true, y_pred):
  """Validated int64 class ids ``[B]`` and float embeddings ``[B, D]``."""
  y_pred = checks.check_scores("y_pred", y_pred)
  try:
    y_true = parse_labels(y_true, name="y_true", dense=False).ids
  except ValueError as e:
    raise ValueError(f"{e} The embedding losses take class ids, not dense relevance.") from None
  check_batch_size(y_true, y_pred, name="y_true", other_name="y_pred", items="embeddings")
  return y_true, y_pred


def pairwise_distances(embeddings, normalize=True):
  """Euclidean distances ``[B, B]`` between the rows of ``embeddings`` ``[B, D]``.

  ``d_ij = sqrt(max(|e_i|^2 + |e_j|^2 - 2 e_i.e_j, 1e-12))`` (the floor keeps the gradient finite
  for identical rows), after ``e <- e / |e|`` when ``normalize``.

  Example:
    >>> d = pairwise_distances([[1.0, 0.0], [0.0, 1.0]])
    >>> round(float(d[0, 1]) ** 2, 6)
    2.0
  """
  e = tf.convert_to_tensor(embeddings)
  if normalize:
    e = tf.math.l2_normalize(e, axis=-1)
  sq = tf.reduce_sum(tf.square(e), axis=-1)
  d2 = sq[:, None] + sq[None, :] - 2.0 * tf.matmul(e, e, transpose_b=True)
  return tf.sqrt(tf.maximum(d2, _EPS))


def _pair_masks(labels):
  """Boolean ``[B, B]`` masks of positive pairs (same class, i != j) and negative pairs."""
  same = tf.equal(labels[:, None], labels[None, :])
  not_self = tf.logical_not(tf.eye(tf.shape(labels)[0], dtype=tf.bool))
  return tf.logical_and(same, not_self), tf.logical_not(same)


def _masked_mean(values, mask, axis):
  mask = tf.cast(mask, values.dtype)
  return tf.math.divide_no_nan(tf.reduce_sum(values * mask, axis), tf.reduce_sum(mask, axis))


@compat.register_serializable
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
    ...     mask = tf.cast(positives, distances.dtype)
    ...     return tf.math.divide_no_nan(tf.reduce_sum(distances * mask, 1),
    ...                                  tf.reduce_sum(mask, 1))
    >>> loss = PositiveDistance(reduction="none")
    >>> loss([0, 0, 1], [[1.0, 0.0], [0.0, 2.0], [1.0, 0.0]]).numpy().round(4)  # sqrt(2), none
    array([1.4142, 1.4142, 0.    ], dtype=float32)
    >>> from tfrank4class.compat import keras
    >>> embedder = keras.Sequential([keras.layers.Dense(8)])
    >>> embedder.compile(optimizer="adam", loss=PositiveDistance())
  """

  coupling = "anchor"
  predictions = "embeddings"

  def __init__(self, normalize=True, reduction=compat.DEFAULT_REDUCTION, name=None):
    super().__init__(reduction=reduction, name=name)
    self.normalize = bool(normalize)

  def pairs(self, y_true, y_pred):
    """Distances ``D`` ``[B, B]`` and the positive and negative pair masks ``P``, ``N``."""
    labels, e = _labels_and_embeddings(y_true, y_pred)
    return (pairwise_distances(e, self.normalize), *_pair_masks(labels))

  def anchor_values(self, distances, positives, negatives):
    """One loss per anchor ``[B]`` from ``D``, ``P`` and ``N`` ``[B, B]``; subclasses implement
    it."""
    raise NotImplementedError(
      f"{type(self).__name__} must implement anchor_values(distances, positives, negatives)."
    )

  def call(self, y_true, y_pred):
    return self.anchor_values(*self.pairs(y_true, y_pred))

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
  hardest_pos = tf.reduce_max(tf.where(pos, d, tf.zeros_like(d)), axis=1)
  beyond = tf.reduce_max(d) + margin + 1.0
  hardest_neg = tf.reduce_min(tf.where(neg, d, beyond + tf.zeros_like(d)), axis=1)
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
    d, pos, neg, m = distances, positives, negatives, tf.cast(self.margin, distances.dtype)
    if self.mining == "all":
      pos_term = _masked_mean(0.5 * tf.square(d), pos, axis=1)
      active = tf.logical_and(neg, d < m)
      neg_term = _masked_mean(0.5 * tf.square(tf.nn.relu(m - d)), active, axis=1)
    else:
      has_pos = tf.reduce_any(pos, axis=1)
      has_neg = tf.reduce_any(neg, axis=1)
      hardest_pos, hardest_neg = _hardest(d, pos, neg, m)
      pos_term = tf.where(has_pos, 0.5 * tf.square(hardest_pos), tf.zeros_like(hardest_pos))
      neg_term = tf.where(
        has_neg, 0.5 * tf.square(tf.nn.relu(m - hardest_neg)), tf.zeros_like(hardest_neg)
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
    d, pos, neg, m = distances, positives, negatives, tf.cast(self.margin, distances.dtype)
    has_pos = tf.reduce_any(pos, axis=1)
    has_neg = tf.reduce_any(neg, axis=1)
    valid = tf.logical_and(has_pos, has_neg)
    if self.mining == "batch_hard":
      hardest_pos, hardest_neg = _hardest(d, pos, neg, m)
      loss = tf.nn.relu(m + hardest_pos - hardest_neg)
    elif self.mining == "batch_all":
      # hinge[i, p, n] = [m + d_ip - d_in]_+ on valid (i, p, n).
      hinge = tf.nn.relu(m + d[:, :, None] - d[:, None, :])
      mask = tf.cast(tf.logical_and(pos[:, :, None], neg[:, None, :]), d.dtype)
      hinge = hinge * mask
      active = tf.reduce_sum(tf.cast(hinge > 0, d.dtype), axis=[1, 2])
      loss = tf.math.divide_no_nan(tf.reduce_sum(hinge, axis=[1, 2]), active)
    else:
      # For each (i, p): negatives farther than p; take the closest such, else the farthest.
      b = tf.shape(d)[0]
      big = tf.reduce_max(d) + m + 1.0
      d_in = tf.broadcast_to(d[:, None, :], tf.stack([b, b, b]))  # [i, p, n] -> d_in
      outside = tf.logical_and(neg[:, None, :], d_in > d[:, :, None])
      closest_outside = tf.reduce_min(tf.where(outside, d_in, big), axis=2)
      farthest = tf.reduce_max(tf.where(neg, d, tf.zeros_like(d)), axis=1, keepdims=True)
      d_neg = tf.where(tf.reduce_any(outside, axis=2), closest_outside, farthest)
      loss = _masked_mean(tf.nn.relu(m + d - d_neg), pos, axis=1)
    return tf.where(valid, loss, tf.zeros_like(loss))

  def get_config(self):
    config = super().get_config()
    config.update({"margin": self.margin, "mining": self.mining})
    return config


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
  loss. Class ids outside ``[0, C)`` raise ``InvalidArgumentError``, except under
  ``jit_compile=True``, where XLA drops the check and such an id gives an all-zero row, so the
  list contributes 0.

  A :class:`~tfrank4class.losses.ListwiseLoss`: ``loss_values(scores, relevance)`` is the loss of
  each list.

  Args:
    label_smoothing: ``eps`` in ``[0, 1)``.
    spread: ``"other_classes"`` or ``"all_classes"``: where the smoothing mass ``eps`` goes.
    reduction, name: as for any Keras loss.

  Example:
    >>> loss = SmoothedCrossEntropy(label_smoothing=0.0)
    >>> round(float(loss([0], [[0.0, 0.0]])), 4)   # log 2
    0.6931
    >>> round(float(SmoothedCrossEntropy(0.5)([0], [[0.0, 0.0, 0.0]])), 4)   # log 3, any q
    1.0986
    >>> import tfrank4class.metrics
    >>> from tfrank4class.compat import keras
    >>> model = keras.Sequential([keras.layers.Dense(3)])
    >>> model.compile(optimizer="adam", loss=SmoothedCrossEntropy(0.1),
    ...               metrics=[tfrank4class.metrics.TopKAccuracy(1)])
  """

  SPREADS = ("other_classes", "all_classes")

  def __init__(
    self,
    label_smoothing=0.1,
    spread="other_classes",
    reduction=compat.DEFAULT_REDUCTION,
    name="smoothed_cross_entropy",
  ):
    super().__init__(reduction=reduction, name=name)
    self.label_smoothing = checks.check_float("label_smoothing", label_smoothing, minimum=0.0)
    if self.label_smoothing >= 1.0:
      raise ValueError(
        f"`label_smoothing` must be a finite number in [0, 1), got {label_smoothing!r}."
      )
    self.spread = checks.check_choice("spread", spread, self.SPREADS)

  def loss_values(self, scores, relevance):
    logits = checks.check_scores("y_pred", scores)
    valid = relevance >= 0
    gains = tf.where(valid, relevance, tf.zeros_like(relevance))
    mass = tf.reduce_sum(gains, axis=-1, keepdims=True)
    p = tf.math.divide_no_nan(gains, mass)
    if self.spread == "all_classes":
      receivers = tf.cast(valid, logits.dtype)
    else:
      receivers = tf.cast(tf.logical_and(valid, tf.equal(relevance, 0.0)), logits.dtype)
    count = tf.reduce_sum(receivers, axis=-1, keepdims=True)
    eps = tf.where(count > 0, tf.cast(self.label_smoothing, logits.dtype), tf.zeros_like(count))
    targets = (1.0 - eps) * p + eps * tf.math.divide_no_nan(receivers, count)
    # Padded items leave the softmax (their logit becomes the dtype's lowest value).
    masked = tf.where(valid, logits, tf.fill(tf.shape(logits), logits.dtype.min))
    log_p = tf.where(valid, tf.nn.log_softmax(masked, axis=-1), tf.zeros_like(masked))
    loss = -tf.reduce_sum(targets * log_p, axis=-1)
    return tf.where(mass[:, 0] > 0, loss, tf.zeros_like(loss))

  def get_config(self):
    config = super().get_config()
    config.update({"label_smoothing": self.label_smoothing, "spread": self.spread})
    return config

  @classmethod
  def from_config(cls, config):
    # Configs saved before `spread` existed were trained with the "all_classes" target.
    return cls(**{"spread": "all_classes", **config})
