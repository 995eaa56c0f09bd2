"""Losses: the registry (every TF-Ranking loss plus ours) and label-to-relevance adapters.

``class_ids`` and ``to_relevance`` are the package's one label parser,
:mod:`tfrank4class.labels`, re-exported here.
"""

from tfrank4class.labels import class_ids, to_relevance
from tfrank4class.losses.average_precision import (
  APCLoss,
  AveragePrecisionLoss,
  MapApcLoss,
  MeanAveragePrecisionLoss,
)
from tfrank4class.losses.blackbox_ndcg import BlackboxNDCGLoss
from tfrank4class.losses.metric_learning import ContrastiveLoss, SmoothedCrossEntropy, TripletLoss
from tfrank4class.losses.rambo import BlackboxRankLoss
from tfrank4class.losses.recall import RecallLoss
from tfrank4class.losses.registry import RankingLoss, get, names, register
from tfrank4class.losses.score_memory import ScoreMemory
from tfrank4class.losses.sodeep import RankTripletLoss, SorterAPLoss, SorterMAPLoss, SpearmanLoss
from tfrank4class.losses.topk.cross_entropy import TopKCrossEntropyLoss, topk_cross_entropy
from tfrank4class.losses.topk.smooth_svm import SmoothTopKSVMLoss
from tfrank4class.losses.topk.soft_rank import SoftRankTopKLoss

__all__ = [
  "APCLoss",
  "AveragePrecisionLoss",
  "BlackboxNDCGLoss",
  "BlackboxRankLoss",
  "class_ids",
  "ContrastiveLoss",
  "get",
  "MapApcLoss",
  "MeanAveragePrecisionLoss",
  "names",
  "RankingLoss",
  "RankTripletLoss",
  "RecallLoss",
  "register",
  "ScoreMemory",
  "SmoothedCrossEntropy",
  "SmoothTopKSVMLoss",
  "SoftRankTopKLoss",
  "SorterAPLoss",
  "SorterMAPLoss",
  "SpearmanLoss",
  "to_relevance",
  "topk_cross_entropy",
  "TopKCrossEntropyLoss",
  "TripletLoss",
]
