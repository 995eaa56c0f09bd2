"""TF-Ranking's approximate metric losses: ``approx_ndcg_loss``, ``approx_mrr_loss`` and
``gumbel_approx_ndcg_loss`` (ApproxNDCG on Gumbel samples of the list; ``tf_ranking.py`` samples).

Qin et al. 2010: the rank of an item is ``1/2 + sum_j sigmoid(s_j - s_i)`` (scores over the
temperature, 0.1 by default), and the loss is minus the metric at those ranks; a list without
relevance weighs 0. Padded items get the score ``min(s) - 1000``. Only the items of relevance
``> 0`` have a gain, so only their ranks are computed: with class ids the true class's, ``O(n)``;
with dense relevance the ``r`` relevant items', ``O(n r)`` (:func:`~.base.relevant_rows`; in a
traced step past the cap ``r <= 1`` :func:`~.base.blocks_of_relevant_rows`, a block of relevant
items at a time, never every item's ``[B, n, n]``, and then the metric over the whole list, NDCG's
ideal order a sort, ``O(n log n)``).

Example:
  >>> import numpy as np
  >>> from keras import ops
  >>> losses, weights = ApproxMRRLoss().compute_unreduced_loss(
  ...   np.array([[1.0, 0.0]]), np.array([[50.0, 0.0]]))
  >>> round(float(ops.convert_to_numpy(losses)[0, 0]), 4)   # the relevant item is first
  -1.0
"""

from tfrank4class import backend
from tfrank4class.backend import take_along_axis
from tfrank4class.compat import ops
from tfrank4class.losses.lambda_weights import inverse_max_dcg
from tfrank4class.losses.ranking_losses.base import (
  Core,
  at_true_class,
  blocks_of_relevant_rows,
  placed_rows,
  relevant_rows,
  true_class_mask,
  true_class_row_gradient,
  true_class_weight,
)
from tfrank4class.losses.ranking_losses.sampling import pairwise


def approx_ranks(logits, rows=None):
  """``1/2 + sum_j sigmoid(s_j - s_i)``, ``[B, n]``; of the items ``rows`` ``[B, r]`` only,
  ``[B, r]`` (``O(n r)``)."""
  return ops.sum(ops.sigmoid(pairwise(lambda a, b: b - a, logits, rows)), axis=-1) + 0.5


def _safe_gains(labels):
  """TF-Ranking's ``2^(l - max l) - 2^(-max l)``: ``2^l - 1`` scaled, for any label size."""
  top = ops.max(labels, axis=-1, keepdims=True)
  return ops.power(2.0, labels - top) - ops.power(2.0, -top)


class _Approx(Core):
  weighting = "list"

  def __init__(self, lambda_weight=None, temperature=0.1):
    super().__init__(lambda_weight, temperature)

  def compute_unreduced_loss(self, labels, logits):
    valid = labels >= 0
    labels = backend.where(valid, labels, 0.0)
    lowest = ops.min(logits, axis=-1, keepdims=True) - 1e3
    logits = backend.where(valid, logits, lowest)
    has_relevance = ops.sum(labels, axis=1, keepdims=True) > 0
    gains = backend.where(has_relevance, labels, 1e-10)
    metric = relevant_rows(
      labels,
      lambda rows: self._metric(take_along_axis(gains, rows), approx_ranks(logits, rows)),
      lambda: self._metric(gains, approx_ranks(logits)),
      lambda: self._metric(gains, self._relevant_ranks(labels, logits)),
    )
    return -metric, ops.cast(has_relevance, logits.dtype)

  @staticmethod
  def _relevant_ranks(labels, logits):
    """The approximate ranks of the items of relevance ``> 0`` a block at a time
    (:func:`~.base.blocks_of_relevant_rows`), 1 elsewhere (no gain: the rank does not count)."""
    ranks = blocks_of_relevant_rows(
      labels, logits, placed_rows(lambda _, scores, rows: approx_ranks(scores, rows))
    )
    return backend.where(labels > 0, ranks, 1.0)

  def compute_per_list_from_ids(self, ids, logits, weights):
    """The loss of one-hot rows of class ids ``ids`` ``[B]`` in ``O(n)``: only the true class
    has a gain, so the metric is that of a one-item list at the true class's approximate rank
    ``1/2 + sum_j sigmoid(s_j - s_y)`` ``[B, 1]``, weighted by its sample weight ``[B, 1]``."""
    rank = self._true_class_rank(logits, ids)
    return -self._metric(ops.ones_like(rank), rank), true_class_weight(ids, weights, logits)

  def _true_class_rank(self, scores, ids):
    """The approximate rank ``1/2 + sum_j sigmoid(s_j - s_y)`` ``[B, 1]`` of the class ids ``y``
    ``[B]`` among the logits of ``scores`` ``[B, n]``, with its gradient written out: the forward
    keeps only the true scores ``[B, 1]``, the backward writes the ``[B, n]`` gradient from the
    scores again, ``sigmoid'(s_j - s_y)`` at ``j != y`` and minus their sum at ``y`` (autodiff
    kept two ``[B, n]`` tensors from the forward for it)."""

    @backend.custom_gradient
    def rank(scores, ids):
      logits = self.get_logits(scores)
      true = at_true_class(true_class_mask(ids, logits), logits)
      ranks = ops.sum(ops.sigmoid(logits - true), axis=-1, keepdims=True) + 0.5

      def gradient(upstream):
        logits = self.get_logits(scores)
        is_true = true_class_mask(ids, logits)
        scale = upstream / self.temperature  # on [B, 1], not on [B, n]
        slopes = ops.sigmoid(logits - true) * ops.sigmoid(true - logits) * scale
        return true_class_row_gradient(is_true, slopes), None

      return ranks, gradient

    return rank(scores, ids)


class ApproxNDCGLoss(_Approx):
  """Minus NDCG at the approximate ranks (TF-Ranking's scaled gains, discount ``1/ln(1+r)``)."""

  def _metric(self, labels, item_ranks):
    dcg = ops.sum(_safe_gains(labels) / ops.log1p(item_ranks), axis=-1, keepdims=True)
    return dcg * inverse_max_dcg(labels, gain_fn=_safe_gains)


class ApproxMRRLoss(_Approx):
  """Minus the label-weighted mean reciprocal approximate rank."""

  def _metric(self, labels, item_ranks):
    reciprocal = ops.sum(labels / item_ranks, axis=-1, keepdims=True)
    return reciprocal / ops.sum(labels, axis=-1, keepdims=True)
