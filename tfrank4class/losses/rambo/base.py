"""RaMBO: rank-based losses on the blackbox ranker (Rolinek et al., CVPR 2020), as pure functions.

Every function here takes scores ``[B, n]`` (each row one list) and relevance ``[B, n]``
(``> 0`` relevant, ``0`` irrelevant, ``< 0`` padding / excluded) and returns one loss per list.
Ranks come from :func:`tfrank4class.ranking.blackbox_rank_within` (exact forward, blackbox
backward: Eq. 10 of Sec. 3.2, Algorithm 1 of Sec. 4.1):

    rk_i   = rank of item i among the valid items of its list       (rk(y), Sec. 3.1, Eq. 2)
    rk+_i  = rank of relevant item i among the relevant items only (rk(y^+), Sec. 4.5, Eq. 17)
    r_i    = rk_i - rk+_i = number of irrelevant items ranked above i              (Eq. 17)

Only ``rk`` is differentiated; ``rk+`` enters the losses as a constant. This is the paper's
procedure (Algorithm 1 has one ranker and one incoming gradient ``dL/drk``) and the authors' code,
which ranks the positives without a gradient. The backward pass thus shifts the score of each
relevant item ``i`` up by ``lambda_ * n * dL/drk_i`` (irrelevant items have ``dL/drk = 0``) and
re-ranks the whole list; the gradient of an item counts the items, relevant or not, that it
passes or that pass it.

Ranks enter the formulas as integers ``1..n``. ``lambda_`` follows the paper's convention of ranks
normalised by the list length ``n`` (of the list actually ranked: the row length, the batch plus
memory for per-class lists, ``B * C`` for APC), applied with the same ``n`` in the forward and
backward direction (``blackbox_rank_within(..., normalized=True)``). The authors' recall code
normalises ranks by the row length and de-normalises them by the number of rows, which is only
right for square score matrices; here the tests cover non-square matrices and lists lengthened by
a :class:`~tfrank4class.losses.ScoreMemory`.

The classes in ``recall.py``, ``average_precision.py`` and ``ndcg.py`` of this package wrap
these as Keras losses.
"""

import tensorflow as tf

from tfrank4class import checks, compat
from tfrank4class.losses.base import ListwiseLoss
from tfrank4class.losses.rambo.score_memory import ScoreMemory
from tfrank4class.ranking.blackbox import blackbox_rank_within, margin_shift
from tfrank4class.ranking.exact import rank_within
from tfrank4class.ranking.precision import average_precision_from_ranks

WEIGHTINGS = ("log", "loglog")


def _prepared(scores, relevance, margin):
  """Scores ready for ranking (padding zeroed, margin applied) and the relevant / valid masks."""
  scores = tf.convert_to_tensor(scores)
  relevance = tf.cast(relevance, scores.dtype)
  valid = relevance >= 0
  relevant = tf.logical_and(relevance > 0, valid)
  # Padded scores are never compared with valid ones; zero them so that they cannot trip the
  # finiteness check of the ranker.
  scores = tf.where(valid, scores, tf.zeros_like(scores))
  return margin_shift(scores, relevant, margin, valid=valid), relevant, valid


@tf.autograph.experimental.do_not_convert
def list_ranks(scores, relevance, lambda_, margin=0.0):
  """Ranks of every list: blackbox ``rk`` among valid items, constant ``rk+`` among relevant ones.

      rk   = rk_alpha(y)     with the blackbox gradient (Eq. 10, Algorithm 1)
      rk+  = rk_alpha(y^+)   exact, no gradient (Sec. 4.5, Eq. 17; the authors' code does the same)

  Args:
    scores: float ``[B, n]``.
    relevance: float ``[B, n]``; ``> 0`` relevant, ``< 0`` padding (ignored entirely).
    lambda_: blackbox interpolation strength ``> 0``, for ranks normalised by the list length
      ``n`` as in the paper (the blackbox op runs with ``normalized=True``, i.e. ``lambda_ * n``
      on integer ranks; the same ``n`` in both directions).
    margin: ``alpha >= 0``; relevant scores move by ``-alpha/2`` and irrelevant ones by
      ``+alpha/2`` before ranking (Sec. 4.4, Eq. 14-15).

  Returns:
    ``(rk, rk_plus, relevant, valid)``: float ranks ``[B, n]`` and boolean masks ``[B, n]``.
    ``rk`` is meaningful at valid items and ``rk_plus`` at relevant items.

  Example:
    >>> rk, rkp, rel, _ = list_ranks([[0.9, 0.5, 0.7]], [[0.0, 1.0, 1.0]], lambda_=1.0)
    >>> rk.numpy(), rkp.numpy()
    (array([[1., 3., 2.]], dtype=float32), array([[1., 2., 1.]], dtype=float32))
  """
  scores, relevant, valid = _prepared(scores, relevance, margin)
  rk = blackbox_rank_within(scores, valid, lambda_, normalized=True)
  rk_plus = tf.stop_gradient(rank_within(scores, relevant))
  return rk, rk_plus, relevant, valid


def _mean_over(values, mask, axis=-1):
  """Mean of ``values`` over ``mask`` along ``axis``; 0 where the mask is empty."""
  mask = tf.cast(mask, values.dtype)
  total = tf.reduce_sum(values * mask, axis=axis)
  count = tf.reduce_sum(mask, axis=axis)
  return tf.math.divide_no_nan(total, count)


@tf.autograph.experimental.do_not_convert
def recall_loss_values(scores, relevance, lambda_, margin=0.0, weighting="log"):
  """Per-list recall loss (Rolinek et al., Sec. 4.5, Eq. 16-20).

  With ``r_i = rk_i - rk+_i`` the number of irrelevant items ranked above relevant item ``i``
  (Eq. 17; ``rk+`` a constant, see :func:`list_ranks`):

      weighting="log":     L = E_{i relevant} [ log(1 + r_i) ]                (Eq. 20, w_K ~ 1/K)
      weighting="loglog":  L = E_{i relevant} [ log(1 + log(1 + r_i)) ]  (Eq. 20, w_K ~ 1/(K log K))

  ``log(1 + r_i) = sum_{K >= 1} log(1 + 1/K) * 1[r_i >= K]`` (Proposition 2 and the proof of
  Eq. 20, supplementary Sec. B): the log weighting is the sum over K of the losses ``L@K`` of
  Eq. 18 with weights ``w_K = log(1 + 1/K)`` (Eq. 19). Lists without a relevant item get loss 0.

  Example:
    >>> # relevant items at ranks 1 and 3 with one irrelevant item between: r = (0, 1)
    >>> recall_loss_values([[0.9, 0.5, 0.7]], [[1.0, 1.0, 0.0]], lambda_=1.0).numpy()  # log(2)/2
    array([0.3465736], dtype=float32)
  """
  checks.check_choice("weighting", weighting, WEIGHTINGS)
  rk, rk_plus, relevant, _ = list_ranks(scores, relevance, lambda_, margin)
  above = tf.where(relevant, rk - rk_plus, tf.zeros_like(rk))
  per_item = tf.math.log1p(above)
  if weighting == "loglog":
    per_item = tf.math.log1p(per_item)
  return _mean_over(per_item, relevant)


@tf.autograph.experimental.do_not_convert
def average_precision_loss_values(scores, relevance, lambda_, margin=0.0):
  """Per-list ``1 - AP`` (Rolinek et al., Sec. 4.6, Eq. 21-22).

      L_AP = 1 - 1/|P| sum_{i in P} Prec(i),   Prec(i) = rk+_i / rk_i

  (``rk+_i`` relevant items at or above ``i`` over all items at or above ``i``; ``rk+`` is a
  constant, see :func:`list_ranks`; the AP is
  :func:`tfrank4class.ranking.precision.average_precision_from_ranks`). Lists without a relevant
  item get loss 0.

  Example:
    >>> # relevant at ranks 1 and 3: AP = (1/1 + 2/3) / 2 = 5/6
    >>> average_precision_loss_values([[0.9, 0.5, 0.7]], [[1.0, 1.0, 0.0]], 1.0).numpy().round(4)
    array([0.1667], dtype=float32)
  """
  rk, rk_plus, relevant, _ = list_ranks(scores, relevance, lambda_, margin)
  ap = average_precision_from_ranks(rk, rk_plus, relevant)
  has_relevant = tf.reduce_any(relevant, axis=-1)
  return tf.where(has_relevant, 1.0 - ap, tf.zeros_like(ap))


@tf.autograph.experimental.do_not_convert
def mean_average_precision_loss_value(scores, relevance, lambda_, margin=0.0):
  """``1 - mAP`` with one list per class down the batch (Rolinek et al., Sec. 4.6; mAP: Eq. 6).

  Column ``c`` of ``scores`` ``[B, C]`` is the list of the batch's scores for class ``c``; its
  loss is Eq. 22 and ``L_mAP`` their mean over the classes (Sec. 4.6); classes without a relevant
  item in the batch are left out of the mean. Returns a scalar (0 if no class has a relevant item).
  """
  scores_t = tf.transpose(scores)
  relevance_t = tf.transpose(tf.cast(relevance, scores.dtype))
  per_class = average_precision_loss_values(scores_t, relevance_t, lambda_, margin)
  present = tf.reduce_any(relevance_t > 0, axis=-1)
  return _mean_over(per_class, present, axis=0)


@tf.autograph.experimental.do_not_convert
def apc_loss_value(scores, relevance, lambda_, margin=0.0):
  """``1 - AP`` of all classes of all examples as ONE list (Rolinek et al., Sec. 4.6, Eq. 23).

  Scores ``[B, C]`` are flattened to a single list of ``B * C`` items, so a relevant
  (example, class) pair must outscore every irrelevant pair of every other example too: this
  calibrates scores across classes. Returns a scalar.
  """
  flat_scores = tf.reshape(scores, [1, -1])
  flat_relevance = tf.reshape(tf.cast(relevance, scores.dtype), [1, -1])
  return average_precision_loss_values(flat_scores, flat_relevance, lambda_, margin)[0]


@tf.autograph.experimental.do_not_convert
def ndcg_loss_values(scores, relevance, lambda_, margin=0.0):
  """Per-list ``1 - NDCG`` with blackbox ranks (beyond the paper; O(n log n) per list).

      DCG = sum_i (2^{rel_i} - 1) / log2(1 + rk_i),   NDCG = DCG / IDCG

  with ``rk`` the blackbox rank among valid items and IDCG the DCG of the relevance sorted in
  decreasing order. Lists with IDCG = 0 (no relevant item) get loss 0.

  Example:
    >>> # relevant item at rank 2: NDCG = 1 / log2(3)
    >>> ndcg_loss_values([[0.9, 0.5]], [[0.0, 1.0]], lambda_=1.0).numpy().round(4)
    array([0.3691], dtype=float32)
  """
  shifted, _, valid = _prepared(scores, relevance, margin)
  rk = blackbox_rank_within(shifted, valid, lambda_, normalized=True)
  relevance = tf.cast(relevance, rk.dtype)
  gains = tf.where(valid, tf.pow(2.0, tf.maximum(relevance, 0.0)) - 1.0, tf.zeros_like(rk))
  log2 = tf.math.log(tf.constant(2.0, rk.dtype))
  dcg = tf.reduce_sum(gains * log2 / tf.math.log1p(rk), axis=-1)
  ideal = tf.sort(gains, axis=-1, direction="DESCENDING")
  positions = tf.range(1, tf.shape(gains)[-1] + 1, dtype=rk.dtype)
  idcg = tf.reduce_sum(ideal * log2 / tf.math.log1p(positions), axis=-1)
  ndcg = tf.math.divide_no_nan(dcg, idcg)
  return tf.where(idcg > 0, 1.0 - ndcg, tf.zeros_like(ndcg))


@tf.autograph.experimental.do_not_convert
def similarity_lists(
  embeddings, labels, gallery_embeddings=None, gallery_labels=None, similarity="cosine"
):
  """Retrieval lists from embeddings: queries = the batch, gallery = the batch (+ memory).

      S[i, j] = <e_i, g_j> / (|e_i| |g_j|)   ("cosine")   or   <e_i, g_j>   ("dot")
      R[i, j] = 1[label_i == glabel_j], and R[i, i] = -1 (each item's similarity with itself
                is excluded; the first B gallery rows are the batch itself)

  Args:
    embeddings: float ``[B, d]``.
    labels: integer class ids ``[B]``.
    gallery_embeddings, gallery_labels: ``[G, d]`` and ``[G]`` whose first ``B`` rows are
      ``embeddings`` / ``labels`` (defaults to them).
    similarity: ``"cosine"`` or ``"dot"``.

  Returns:
    ``(S, R)``, both float ``[B, G]``.
  """
  checks.check_choice("similarity", similarity, ("cosine", "dot"))
  if gallery_embeddings is None:
    gallery_embeddings, gallery_labels = embeddings, labels
  if similarity == "cosine":
    embeddings = tf.math.l2_normalize(embeddings, axis=-1)
    gallery_embeddings = tf.math.l2_normalize(gallery_embeddings, axis=-1)
  sims = tf.matmul(embeddings, gallery_embeddings, transpose_b=True)
  same = tf.cast(tf.equal(labels[:, None], gallery_labels[None, :]), sims.dtype)
  b = tf.shape(embeddings)[0]
  g = tf.shape(gallery_embeddings)[0]
  is_self = tf.equal(tf.range(b)[:, None], tf.range(g)[None, :])
  relevance = tf.where(is_self, -tf.ones_like(same), same)
  return sims, relevance


class BlackboxRankLoss(ListwiseLoss):
  """Base of the RaMBO Keras losses: validates ``lambda_``, ``margin``, ``memory``; serialises.

  A :class:`~tfrank4class.losses.base.ListwiseLoss`: subclasses implement
  ``loss_values(scores, relevance)`` returning per-list losses ``[B]`` or a batch-level scalar.
  The lists are the parsed labels and checked scores, with the score memory (Sec. 4.3) prepended
  if one is configured (``memory`` batches, concatenated down the batch axis).

  Example (a loss on the mean blackbox rank of the relevant items):
    >>> class RelevantRankLoss(BlackboxRankLoss):
    ...   def loss_values(self, scores, relevance):
    ...     rk, _, relevant, _ = list_ranks(scores, relevance, self.lambda_, self.margin)
    ...     return tf.reduce_sum(tf.where(relevant, rk, 0.0), -1)
    >>> loss = RelevantRankLoss(reduction="none")
    >>> loss([2, 0], [[0.1, 0.2, 0.7], [0.1, 0.8, 0.3]]).numpy()   # the true classes rank 1, 3
    array([1., 3.], dtype=float32)
    >>> from tfrank4class.compat import keras
    >>> model = keras.Sequential([keras.layers.Dense(3)])
    >>> model.compile(optimizer="adam", loss=RelevantRankLoss(lambda_=4.0))
  """

  supports_memory = False

  def __init__(
    self, lambda_=1.0, margin=0.0, memory=0, reduction=compat.DEFAULT_REDUCTION, name=None
  ):
    super().__init__(reduction=reduction, name=name)
    self.lambda_ = checks.check_float("lambda_", lambda_, minimum=0.0, strict=True)
    self.margin = checks.check_float("margin", margin, minimum=0.0)
    self.memory = checks.check_int("memory", memory, minimum=0)
    if self.memory and not self.supports_memory:
      raise ValueError(
        f"`memory` must be 0 for {type(self).__name__}, got {memory!r}: its lists are the rows "
        "of y_pred, which past batches do not lengthen (use memory with "
        "MeanAveragePrecisionLoss, APCLoss, MapApcLoss or RecallLoss(from_embeddings=True))."
      )
    self._memory = ScoreMemory(self.memory) if self.memory else None

  def lists(self, y_true, y_pred):
    scores, relevance = super().lists(y_true, y_pred)
    if self._memory is not None:
      scores, relevance = self._memory(scores, relevance)
    return scores, relevance

  def get_config(self):
    config = super().get_config()
    config.update({"lambda_": self.lambda_, "margin": self.margin, "memory": self.memory})
    return config
