"""The RaMBO recall loss (Rolinek et al., CVPR 2020, Sec. 4.5, Eq. 16-20) as a Keras loss."""

import tensorflow as tf

from tfrank4class import checks, compat
from tfrank4class.labels import class_ids
from tfrank4class.losses.rambo import base
from tfrank4class.losses.registry import register


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
  without a relevant item contribute 0.

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
    >>> loss = RecallLoss(reduction="none")
    >>> loss([[1.0, 1.0, 0.0]], [[0.9, 0.5, 0.7]]).numpy()  # r = (0, 1): (log 1 + log 2) / 2
    array([0.3465736], dtype=float32)
    >>> emb_loss = RecallLoss(from_embeddings=True, lambda_=0.5)
    >>> float(emb_loss([0, 0, 1, 1], [[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]]))
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
    self.weighting = checks.check_choice("weighting", weighting, base.WEIGHTINGS)
    if not isinstance(from_embeddings, bool):
      raise ValueError(f"`from_embeddings` must be True or False, got {from_embeddings!r}.")
    self.from_embeddings = from_embeddings
    self.similarity = checks.check_choice("similarity", similarity, ("cosine", "dot"))
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
    return base.recall_loss_values(scores, relevance, self.lambda_, self.margin, self.weighting)

  @tf.autograph.experimental.do_not_convert
  def call(self, y_true, y_pred):
    if not self.from_embeddings:
      return super().call(y_true, y_pred)
    embeddings = checks.check_scores("y_pred", y_pred, finite=False)
    labels = class_ids(y_true, name="y_true")
    gallery, gallery_labels = embeddings, labels
    if self._memory is not None:
      gallery, gallery_labels = self._memory(embeddings, labels)
    sims, relevance = base.similarity_lists(
      embeddings, labels, gallery, gallery_labels, self.similarity
    )
    return self.loss_values(sims, relevance)

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
