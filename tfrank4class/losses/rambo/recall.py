"""The RaMBO recall loss (Rolinek et al., CVPR 2020, Sec. 4.5, Eq. 16-20).

:func:`recall_loss_values` is the loss as a pure function, :func:`similarity_lists` the retrieval
lists of a batch of embeddings, :class:`RecallLoss` the Keras loss over them.
"""

from tfrank4class import backend, checks, compat
from tfrank4class.compat import ops
from tfrank4class.labels import check_list_scores, parse_labels
from tfrank4class.losses.metric_learning import l2_normalize
from tfrank4class.losses.rambo import base
from tfrank4class.losses.registry import register

WEIGHTINGS = ("log", "loglog")
SIMILARITIES = ("cosine", "dot")


def recall_loss_values(scores, labels, *, where=None, lambda_=1.0, margin=0.0, weighting="log"):
  """Per-list recall loss (Rolinek et al., Sec. 4.5, Eq. 16-20).

  With ``r_i = rk_i - rk+_i`` the number of irrelevant items ranked above relevant item ``i``
  (Eq. 17; ``rk+`` a constant, see :func:`tfrank4class.losses.rambo.base.list_ranks`):

      weighting="log":     L = E_{i relevant} [ log(1 + r_i) ]                (Eq. 20, w_K ~ 1/K)
      weighting="loglog":  L = E_{i relevant} [ log(1 + log(1 + r_i)) ]  (Eq. 20, w_K ~ 1/(K log K))

  ``log(1 + r_i) = sum_{K >= 1} log(1 + 1/K) * 1[r_i >= K]`` (Proposition 2 and the proof of
  Eq. 20, supplementary Sec. B): the log weighting is the sum over K of the losses ``L@K`` of
  Eq. 18 with weights ``w_K = log(1 + 1/K)`` (Eq. 19). Lists without a relevant item get loss 0.

  Cost: class ids, ``O(n)`` per list forward and backward, no sort
  (:func:`~tfrank4class.losses.rambo.base.true_class_ranks`); dense relevance, two sorts
  forward (``rk`` and ``rk+``) and one backward, ``O(n log n)``.

  Args:
    scores: ``[B, n]``, one list per row.
    labels: class ids ``[B]`` / ``[B, 1]`` or dense relevance ``[B, n]`` (``< 0``: padding).
    where: optional bool ``[B, n]``; items where it is False are left out (padding).
    lambda_: blackbox interpolation strength ``> 0`` (Eq. 10), for ranks normalised by the
      list length.
    margin: ``alpha >= 0`` (Sec. 4.4, Eq. 14-15).
    weighting: ``"log"`` or ``"loglog"``.

  Returns:
    ``[B]`` losses in the scores' dtype.

  Example:
    >>> import numpy as np
    >>> # relevant items at ranks 1 and 3 with one irrelevant item between: r = (0, 1)
    >>> s, r = np.array([[0.9, 0.5, 0.7]], np.float32), np.array([[1.0, 1.0, 0.0]], np.float32)
    >>> ops.convert_to_numpy(recall_loss_values(s, r))  # log(2)/2
    array([0.3465736], dtype=float32)
  """
  checks.check_choice("weighting", weighting, WEIGHTINGS)
  scores, parsed = base.list_labels(scores, labels)
  if parsed.is_class_ids:
    rk, has_true = base.true_class_ranks(scores, parsed.ids, where, lambda_, margin)
    # One relevant item: r = rk - 1 and the mean over the relevant items is its own value.
    loss = _weighted(ops.log1p(rk - 1.0), weighting)
    return parsed.mark_invalid(backend.where(has_true, loss, ops.zeros_like(loss)))
  _, relevance, _ = base.list_relevance(scores, parsed, where)
  return parsed.mark_invalid(_recall(scores, relevance, lambda_, margin, weighting))


def _weighted(log_r, weighting):
  """``log(1 + r)`` as ``weighting`` says: itself (``"log"``) or ``log(1 + log(1 + r))``."""
  return ops.log1p(log_r) if weighting == "loglog" else log_r


def _recall(scores, relevance, lambda_, margin, weighting):
  """The recall loss of checked scores and dense relevance ``[B, n]`` (``n`` may be unknown)."""
  rk, rk_plus, relevant, _ = base.list_ranks(scores, relevance, lambda_, margin)
  per_item = ops.log1p(backend.where(relevant, rk - rk_plus, ops.zeros_like(rk)))
  return base.mean_over(_weighted(per_item, weighting), relevant)


def similarity_lists(
  embeddings, labels, gallery_embeddings=None, gallery_labels=None, similarity="cosine"
):
  """Retrieval lists from embeddings: queries = the batch, gallery = the batch (+ memory).

      S[i, j] = <e_i, g_j> / (|e_i| |g_j|)   ("cosine")   or   <e_i, g_j>   ("dot")
      R[i, j] = 1[label_i == glabel_j], and R[i, i] = -1 (each item's similarity with itself
                is excluded; the first B gallery rows are the batch itself); R[:, j] = -1
                (padding) where glabel_j < 0

  Args:
    embeddings: float ``[B, d]``.
    labels: integer class ids ``[B]``.
    gallery_embeddings, gallery_labels: ``[G, d]`` and ``[G]`` whose first ``B`` rows are
      ``embeddings`` / ``labels`` (defaults to them).
    similarity: ``"cosine"`` or ``"dot"``.

  Returns:
    ``(S, R)``, both float ``[B, G]``.

  Example:
    >>> import numpy as np
    >>> s, r = similarity_lists(np.array([[1.0, 0.0], [0.0, 2.0]], np.float32), np.array([0, 0]))
    >>> ops.convert_to_numpy(s), ops.convert_to_numpy(r)
    (array([[1., 0.],
           [0., 1.]], dtype=float32), array([[-1.,  1.],
           [ 1., -1.]], dtype=float32))
  """
  checks.check_choice("similarity", similarity, SIMILARITIES)
  embeddings = ops.convert_to_tensor(embeddings)
  labels = ops.convert_to_tensor(labels)
  if gallery_embeddings is None:
    gallery_embeddings, gallery_labels = embeddings, labels
  if similarity == "cosine":
    embeddings = l2_normalize(embeddings)
    gallery_embeddings = l2_normalize(gallery_embeddings)
  sims = backend.matmul(embeddings, ops.transpose(gallery_embeddings))
  same = ops.cast(ops.equal(labels[:, None], gallery_labels[None, :]), sims.dtype)
  rows = ops.arange(ops.shape(embeddings)[0])
  columns = ops.arange(ops.shape(gallery_embeddings)[0])
  is_self = ops.equal(rows[:, None], columns[None, :])
  # Gallery labels < 0 are padding (a score memory's slots not yet filled).
  padding = ops.logical_or(is_self, ops.less(gallery_labels, 0)[None, :])
  relevance = backend.where(padding, -ops.ones_like(same), same)
  return sims, relevance


@register("recall_loss")
class RecallLoss(base.BlackboxRankLoss):
  """Recall loss on blackbox ranks (Rolinek et al., CVPR 2020, Sec. 4.5, Eq. 16-20).

  For each list, with ``r_i = rk_i - rk+_i`` the number of irrelevant items ranked above relevant
  item ``i`` (Eq. 17; ``rk+`` is a constant, only ``rk`` gets the blackbox gradient, see
  :func:`tfrank4class.losses.rambo.base.list_ranks`):

      weighting="log":     L = E_{i relevant} [ log(1 + r_i) ]          (Eq. 20, w_K ~ 1/K)
      weighting="loglog":  L = E_{i relevant} [ log(1 + log(1 + r_i)) ] (Eq. 20, w_K ~ 1/(K log K))

  ``log(1 + r_i)`` equals the sum over K of the losses ``L@K`` (Eq. 18, per item ``1[r_i >= K]``)
  weighted by ``w_K = log(1 + 1/K)`` (Eq. 19 and Proposition 2, supplementary Sec. B). Lists
  without a relevant item contribute 0. Cost per list: ``O(n)`` with class ids (no sort),
  ``O(n log n)`` with dense relevance and in embedding mode (:func:`recall_loss_values`).

  Two input modes:

  * ``from_embeddings=False`` (default): ``y_pred`` are scores ``[B, n]``, one list per row
    (a classifier's class scores, or a precomputed retrieval similarity matrix queries x gallery);
    ``y_true`` are class ids ``[B]`` / ``[B, 1]`` or dense relevance ``[B, n]`` where ``-1`` marks
    items to ignore (padding, or a query's own entry in a similarity matrix).
  * ``from_embeddings=True``: ``y_pred`` are embeddings ``[B, d]`` and ``y_true`` integer class ids
    ``[B]`` / ``[B, 1]``. Each row ``i`` of the batch is a query; the gallery is the batch (plus
    the ``memory`` past batches); the list of query ``i`` holds its similarities
    (``similarity="cosine"`` or ``"dot"``) to every gallery item except itself, and the relevant
    items are those with the same class id. Returns one loss per query; a sample weight weighs
    the queries, and a query of weight 0 stays in the others' galleries (``coupling`` is
    ``"anchor"``, see :mod:`tfrank4class.losses.base`).

  Args:
    weighting: ``"log"`` or ``"loglog"``.
    lambda_: blackbox interpolation strength ``> 0`` (Eq. 10), for ranks normalised by the list
      length (see :mod:`tfrank4class.losses.rambo.base`).
    margin: ``alpha >= 0``, the margin of Sec. 4.4, Eq. 14-15 (applied inside the loss, i.e. in
      training).
    memory: number of past batches kept as extra gallery (score memory, Sec. 4.3);
      only with ``from_embeddings=True``.
    from_embeddings: see above.
    similarity: ``"cosine"`` or ``"dot"`` (embedding mode only).

  Example:
    >>> import numpy as np
    >>> loss = RecallLoss(reduction="none")
    >>> y, s = np.array([[1.0, 1.0, 0.0]], np.float32), np.array([[0.9, 0.5, 0.7]], np.float32)
    >>> ops.convert_to_numpy(loss(y, s))  # r = (0, 1): (log 1 + log 2) / 2
    array([0.3465736], dtype=float32)
    >>> emb_loss = RecallLoss(from_embeddings=True, lambda_=0.5)
    >>> e = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]], np.float32)
    >>> float(emb_loss(np.array([0, 0, 1, 1]), e))
    0.0
    >>> import tfrank4class.metrics
    >>> from tfrank4class.compat import keras
    >>> model = keras.Sequential([keras.layers.Dense(3)])
    >>> model.compile(optimizer="adam", loss=RecallLoss(lambda_=4.0),
    ...               metrics=[tfrank4class.metrics.TopKAccuracy(1)])
    >>> embedder = keras.Sequential([keras.layers.Dense(8)])   # embeddings for retrieval
    >>> embedder.compile(optimizer="adam", loss=RecallLoss(from_embeddings=True, memory=2))
  """

  supports_memory = True
  takes_class_ids = True

  def __init__(
    self,
    weighting="log",
    lambda_=1.0,
    margin=0.0,
    memory=0,
    from_embeddings=False,
    similarity="cosine",
    reduction=compat.DEFAULT_REDUCTION,
    name="recall_loss",
  ):
    self.weighting = checks.check_choice("weighting", weighting, WEIGHTINGS)
    if not isinstance(from_embeddings, bool):
      raise ValueError(f"`from_embeddings` must be True or False, got {from_embeddings!r}.")
    self.from_embeddings = from_embeddings
    self.similarity = checks.check_choice("similarity", similarity, SIMILARITIES)
    if memory and not from_embeddings:
      checks.check_int("memory", memory, minimum=0)
      raise ValueError(
        f"`memory` must be 0 unless from_embeddings=True, got {memory!r}: the rows of a score "
        "matrix are independent lists that past batches do not lengthen."
      )
    super().__init__(lambda_=lambda_, margin=margin, memory=memory, reduction=reduction, name=name)

  @property
  def coupling(self):
    """``"anchor"`` with ``from_embeddings=True`` (the batch is the gallery), else ``"example"``."""
    return "anchor" if self.from_embeddings else "example"

  def loss_values(self, scores, relevance):
    return recall_loss_values(
      scores, relevance, lambda_=self.lambda_, margin=self.margin, weighting=self.weighting
    )

  def call(self, y_true, y_pred):
    if not self.from_embeddings:
      return super().call(y_true, y_pred)
    embeddings = checks.check_scores("y_pred", y_pred, finite=False)
    parsed = parse_labels(y_true, name="y_true", dense=False)
    embeddings, parsed = check_list_scores(parsed, embeddings)
    labels = parsed.ids
    gallery, gallery_labels = embeddings, labels
    if self._memory is not None:
      gallery, gallery_labels = self._memory(embeddings, labels)
    sims, relevance = similarity_lists(embeddings, labels, gallery, gallery_labels, self.similarity)
    # The gallery's length may be unknown when traced (the memory grows): no label parser here.
    values = _recall(sims, relevance, self.lambda_, self.margin, self.weighting)
    return self.mark_invalid(parsed, values)

  def get_config(self):
    config = super().get_config()
    config.update(
      {
        "weighting": self.weighting,
        "from_embeddings": self.from_embeddings,
        "similarity": self.similarity,
      }
    )
    return config
