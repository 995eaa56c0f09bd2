"""The RaMBO family: rank-based losses on the blackbox ranker.

Rolinek et al., "Optimizing Rank-based Metrics with Blackbox Differentiation" (CVPR 2020). The
ranks ``rk`` are exact in the forward pass; the backward pass is the blackbox gradient of
Sec. 3.2, Eq. 10, as in Algorithm 1 (Sec. 4.1), computed by
:func:`tfrank4class.ranking.blackbox_rank_within`. On these ranks:

* score memory over the last batches (Sec. 4.3);
* the margin between relevant and irrelevant scores (Sec. 4.4, Eq. 14-15);
* the recall loss (Sec. 4.5, Eq. 16-20), with ``rk+`` the ranks among the relevant items
  (Eq. 17);
* the AP losses: per-list AP (Sec. 4.6, Eq. 21-22), mAP with one list per class down the batch,
  and APC with all (example, class) pairs as one list (Eq. 23).

Each module holds one loss, its formula as a pure function ``f(scores, labels, *, where=None,
lambda_=1.0, margin=0.0, ...)`` beside its Keras class:

* ``base``: what the losses share: :func:`~tfrank4class.losses.rambo.base.list_ranks` (its
  docstring states the rank conventions ``rk``, ``rk+`` and the normalisation of ``lambda_``),
  the label parsing of the pure functions, and :class:`BlackboxRankLoss`, the base of the Keras
  losses.
* ``recall``: ``recall_loss_values``, ``similarity_lists`` and :class:`RecallLoss` (Sec. 4.5), on
  score rows or on embeddings.
* ``average_precision``: ``average_precision_loss_values``, ``mean_average_precision_loss_value``,
  ``apc_loss_value`` and :class:`AveragePrecisionLoss`, :class:`MeanAveragePrecisionLoss`,
  :class:`APCLoss`, :class:`MapApcLoss` (Sec. 4.6).
* ``ndcg``: ``ndcg_loss_values`` and :class:`BlackboxNDCGLoss`, ``1 - NDCG`` on blackbox ranks
  (beyond the paper).
* ``score_memory``: :class:`ScoreMemory` (Sec. 4.3).

The AP of ranks, ``1/|P| sum_{i in P} rk+_i / rk_i``, is not here: it is
:func:`tfrank4class.ranking.precision.average_precision_from_ranks`, a rank-operator helper of
:mod:`tfrank4class.ranking` shared with SoDeep's ``SorterAPLoss``, and the module of
``expected_precision``, which the metrics (:mod:`tfrank4class.metrics.functional`) and the
retrieval evaluation (:mod:`tfrank4class.retrieval.kernel`) use.

Notes on the implementation and its tests: ``docs/rambo.md``.
"""

from tfrank4class.losses.rambo.average_precision import (
  APCLoss,
  AveragePrecisionLoss,
  MapApcLoss,
  MeanAveragePrecisionLoss,
)
from tfrank4class.losses.rambo.base import BlackboxRankLoss
from tfrank4class.losses.rambo.ndcg import BlackboxNDCGLoss
from tfrank4class.losses.rambo.recall import RecallLoss
from tfrank4class.losses.rambo.score_memory import ScoreMemory

__all__ = [
  "APCLoss",
  "AveragePrecisionLoss",
  "BlackboxNDCGLoss",
  "BlackboxRankLoss",
  "MapApcLoss",
  "MeanAveragePrecisionLoss",
  "RecallLoss",
  "ScoreMemory",
]
