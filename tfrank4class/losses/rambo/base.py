"""RaMBO's ranks and the base of its Keras losses (Rolinek et al., CVPR 2020).

The losses of the family are pure functions ``f(scores, labels, *, where=None, lambda_=1.0,
margin=0.0, ...)``, each in the module of its class: ``recall.recall_loss_values``,
``average_precision.average_precision_loss_values`` (and the batch-level
``mean_average_precision_loss_value``, ``apc_loss_value``), ``ndcg.ndcg_loss_values``. They take
scores ``[B, n]`` (each row one list) and labels in the package's forms (class ids ``[B]`` /
``[B, 1]`` or dense relevance ``[B, n]``: ``> 0`` relevant, ``0`` irrelevant, ``< 0`` padding;
:func:`list_relevance`); ``where`` (bool ``[B, n]``, optional) leaves the items where it is False
out, as padding. This module holds what they share: :func:`list_ranks` and
:class:`BlackboxRankLoss`. Ranks come from :func:`tfrank4class.ranking.blackbox_rank_within`
(exact forward, blackbox backward: Eq. 10 of Sec. 3.2, Algorithm 1 of Sec. 4.1):

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

Written on ``keras.ops``: runs on every Keras 3 backend (and tf-keras), eagerly and compiled;
the blackbox gradient is :func:`tfrank4class.ranking.blackbox_rank_within`'s.
"""

import math

from tfrank4class import backend, checks, compat
from tfrank4class.compat import ops
from tfrank4class.labels import check_batch_size, num_items, parse_labels
from tfrank4class.losses.base import ListwiseLoss
from tfrank4class.losses.rambo.score_memory import ScoreMemory
from tfrank4class.ranking.blackbox import (
  blackbox_item_rank,
  blackbox_marked_rank,
  blackbox_rank_within,
  margin_shift,
)
from tfrank4class.ranking.exact import rank_within


def list_labels(scores, labels):
  """``(scores, parsed)``: the checked scores (a float tensor ``[B, n]``, float64 kept) and the
  :class:`~tfrank4class.labels.Labels` of ``labels`` (class ids ``[B]`` / ``[B, 1]`` or dense
  relevance ``[B, n]``) parsed by :func:`tfrank4class.labels.parse_labels`, dense relevance in
  the scores' dtype (``parsed.mark_invalid`` turns the values of lists with bad labels into NaN
  in compiled code)."""
  scores = checks.check_scores("scores", scores, finite=False)
  parsed = parse_labels(labels, num_items(scores), name="labels", dtype=scores.dtype)
  check_batch_size(parsed, scores, name="labels", other_name="scores")
  return scores, parsed


def where_mask(where):
  """``where`` as a boolean tensor (``TypeError`` naming it otherwise)."""
  where = ops.convert_to_tensor(where)
  if backend.dtype_name(where) != "bool":
    raise TypeError(f"`where` must be a boolean tensor, got dtype {backend.dtype_name(where)}.")
  return where


def list_relevance(scores, labels, where=None):
  """``(scores, relevance, parsed)`` of a pure RaMBO function's arguments.

  ``scores`` and ``parsed`` as :func:`list_labels` gives them; ``relevance`` ``[B, n]`` in the
  scores' dtype (one-hot rows for class ids), with ``-1`` (padding) where ``where`` is False.
  """
  scores, parsed = list_labels(scores, labels)
  relevance = parsed.to_relevance(num_items(scores), scores.dtype)
  if where is not None:
    relevance = backend.where(where_mask(where), relevance, -ops.ones_like(relevance))
  return scores, relevance, parsed


def true_class_ranks(scores, ids, where=None, lambda_=1.0, margin=0.0, one_list=False):
  """Class ids: the blackbox rank ``rk_t`` of each list's true class among its valid items.

  The :func:`list_ranks` of one-hot relevance read at the true class ``t`` (``rk+_t = 1``, the
  only relevant item), with the same margin and ``lambda_`` and the same value and gradient, but
  from :func:`tfrank4class.ranking.blackbox.blackbox_item_rank`: counts in both directions,
  ``O(n)`` per list, no sort (the dense path sorts each list three times).

  With ``one_list=True`` the ``[B, n]`` scores are ONE list of ``B n`` items (APC, Eq. 23) and
  ``rk_t`` is the rank of ``(b, t_b)`` among all its valid items, the :func:`list_ranks` of the
  flattened one-hot rows, from :func:`tfrank4class.ranking.blackbox.blackbox_marked_rank`
  (every item counted against the ``B`` true classes' scores, no sort of the list).

  Args:
    scores: checked float ``[B, n]``.
    ids: int32 class ids ``[B]`` in ``[0, n)``.
    where: optional bool ``[B, n]``; False marks padding.
    lambda_, margin: as in :func:`list_ranks`.
    one_list: rank in the whole ``[B, n]`` matrix read as one list (row-major) if True.

  Returns:
    ``(rk_t, has_true)``, float ``[B]`` and bool ``[B]``: whether the true class is valid (a
    list whose true class is padded has no relevant item; its ``rk_t`` is meaningless).

  Example:
    >>> import numpy as np
    >>> rk, has_true = true_class_ranks(np.array([[0.9, 0.5, 0.7]], np.float32), np.array([2]))
    >>> ops.convert_to_numpy(rk), ops.convert_to_numpy(has_true)
    (array([2.], dtype=float32), array([ True]))
  """
  margin = checks.check_float("margin", margin, minimum=0.0)
  scores = ops.convert_to_tensor(scores)
  ids = ops.cast(ids, "int32")
  if where is None:
    valid = ops.ones_like(scores, dtype="bool")
  else:
    valid = where_mask(where)
    scores = backend.where(valid, scores, ops.zeros_like(scores))
  has_true = backend.take_along_axis(valid, ids[:, None], axis=-1)[:, 0]
  if margin > 0:
    is_true = ops.arange(ops.shape(scores)[-1], dtype="int32")[None, :] == ids[:, None]
    scores = margin_shift(scores, ops.logical_and(is_true, valid), margin, valid=valid)
  if one_list:
    rk = blackbox_marked_rank(scores, ids, valid, lambda_, normalized=True)
  else:
    rk = blackbox_item_rank(scores, ids, valid, lambda_, normalized=True)
  return ops.cast(rk, scores.dtype), has_true


def mark_batch(parsed, value):
  """A batch-level ``value`` as NaN when any list's labels were bad (compiled code only)."""
  if parsed.invalid is None:
    return value
  return backend.where(ops.any(parsed.invalid), ops.full_like(value, math.nan), value)


def prepared(scores, relevance, margin):
  """Scores ready for ranking (padding zeroed, margin applied) and the relevant / valid masks."""
  valid = relevance >= 0
  relevant = ops.logical_and(relevance > 0, valid)
  # Padded scores are never compared with valid ones; zero them so that they cannot trip the
  # finiteness check of the ranker.
  scores = backend.where(valid, scores, ops.zeros_like(scores))
  return margin_shift(scores, relevant, margin, valid=valid), relevant, valid


def list_ranks(scores, relevance, lambda_=1.0, margin=0.0):
  """Ranks of every list: blackbox ``rk`` among valid items, constant ``rk+`` among relevant ones.

      rk   = rk_alpha(y)     with the blackbox gradient (Eq. 10, Algorithm 1)
      rk+  = rk_alpha(y^+)   exact, no gradient (Sec. 4.5, Eq. 17; the authors' code does the same)

  Args:
    scores: float ``[B, n]``.
    relevance: dense relevance ``[B, n]`` in the scores' dtype; ``> 0`` relevant, ``< 0``
      padding (ignored entirely).
    lambda_: blackbox interpolation strength ``> 0``, for ranks normalised by the list length
      ``n`` as in the paper (the blackbox op runs with ``normalized=True``, i.e. ``lambda_ * n``
      on integer ranks; the same ``n`` in both directions).
    margin: ``alpha >= 0``; relevant scores move by ``-alpha/2`` and irrelevant ones by
      ``+alpha/2`` before ranking (Sec. 4.4, Eq. 14-15).

  Returns:
    ``(rk, rk_plus, relevant, valid)``: float ranks ``[B, n]`` and boolean masks ``[B, n]``.
    ``rk`` is meaningful at valid items and ``rk_plus`` at relevant items.

  Example:
    >>> import numpy as np
    >>> s, r = np.array([[0.9, 0.5, 0.7]], np.float32), np.array([[0.0, 1.0, 1.0]], np.float32)
    >>> rk, rkp, rel, _ = list_ranks(s, r, lambda_=1.0)
    >>> ops.convert_to_numpy(rk), ops.convert_to_numpy(rkp)
    (array([[1., 3., 2.]], dtype=float32), array([[1., 2., 1.]], dtype=float32))
  """
  scores = ops.convert_to_tensor(scores)
  relevance = ops.cast(relevance, scores.dtype)
  scores, relevant, valid = prepared(scores, relevance, margin)
  # The ranks in the scores' dtype (on PyTorch the rank operators return float32 ranks).
  rk = ops.cast(blackbox_rank_within(scores, valid, lambda_, normalized=True), scores.dtype)
  rk_plus = ops.stop_gradient(ops.cast(rank_within(scores, relevant), scores.dtype))
  return rk, rk_plus, relevant, valid


def mean_over(values, mask, axis=-1):
  """Mean of ``values`` over ``mask`` along ``axis``; 0 where the mask is empty."""
  mask = ops.cast(mask, values.dtype)
  return backend.divide_no_nan(ops.sum(values * mask, axis=axis), ops.sum(mask, axis=axis))


class BlackboxRankLoss(ListwiseLoss):
  """Base of the RaMBO Keras losses: validates ``lambda_``, ``margin``, ``memory``; serialises.

  A :class:`~tfrank4class.losses.base.ListwiseLoss`: subclasses implement
  ``loss_values(scores, relevance)`` returning per-list losses ``[B]`` or a batch-level scalar.
  The lists are the parsed labels and checked scores, with the score memory (Sec. 4.3) prepended
  if one is configured (``memory`` batches, concatenated down the batch axis).

  Example (a loss on the mean blackbox rank of the relevant items):
    >>> import numpy as np
    >>> class RelevantRankLoss(BlackboxRankLoss):
    ...   def loss_values(self, scores, relevance):
    ...     rk, _, relevant, _ = list_ranks(scores, relevance, self.lambda_, self.margin)
    ...     return ops.sum(ops.where(relevant, rk, 0.0), -1)
    >>> loss = RelevantRankLoss(reduction="none")
    >>> s = np.array([[0.1, 0.2, 0.7], [0.1, 0.8, 0.3]], np.float32)
    >>> ops.convert_to_numpy(loss(np.array([2, 0]), s))   # the true classes rank 1, 3
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
    if self._memory is not None:  # the memory keeps the lists' dense rows: one-hot class ids
      self.takes_class_ids = False

  def call_without(self, y_true, y_pred, kept):
    """:meth:`~tfrank4class.losses.base.Loss.call_without` of class ids without a memory: the ids
    as they are, the examples left out as ``where`` (``kept`` down each row) of the batch's
    :meth:`loss_values` (those of ``coupling = "batch"`` take ``where``), no one-hot rows."""
    scores, labels = self.parse(y_true, y_pred)
    if not (self.takes_class_ids and labels.is_class_ids):
      return super().call_without(y_true, y_pred, kept)
    where = ops.broadcast_to(kept[:, None], ops.shape(scores))
    return self.mark_invalid(labels, self.loss_values(scores, labels, where=where))

  def extend(self, scores, relevance):
    """The batch's lists with the score memory's past batches appended (Sec. 4.3), if any."""
    if self._memory is not None:
      return self._memory(scores, relevance)
    return scores, relevance

  @property
  def state_variables(self):
    """The score memory's state variables on JAX (``[]`` without a memory, on other backends).

    Keras's JAX trainer traces the loss and carries only the model's variables between steps;
    assign these to the model so that ``fit`` carries the memory::

        loss.build_state(y[:batch_size], model(x[:batch_size]))   # creates them (eagerly)
        model.loss_state_variables = loss.state_variables

    Raises:
      ValueError: on JAX, with a memory whose variables are not created yet.
    """
    if self._memory is None or compat.BACKEND != "jax":
      return []
    if not self._memory.variables:
      raise ValueError(
        f"{type(self).__name__}(memory={self.memory}) has no state variables yet on the jax "
        "backend: they are created with the batch size of a first eager call; call "
        "`loss.build_state(y_true, y_pred)` on one training batch first."
      )
    return self._memory.variables

  def build_state(self, y_true, y_pred):
    """Creates the score memory's state (on JAX: variables sized by this batch) by one eager
    call, then empties the memory again. Returns :attr:`state_variables`."""
    if self._memory is not None:
      self(y_true, y_pred)
      self._memory.reset()
    return self.state_variables

  def get_config(self):
    config = super().get_config()
    config.update({"lambda_": self.lambda_, "margin": self.margin, "memory": self.memory})
    return config
