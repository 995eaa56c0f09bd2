"""Losses: the registry (every TF-Ranking loss plus ours) and label-to-relevance adapters.

One place per loss family: the package folders ``rambo/`` (RaMBO, blackbox ranks),
``sodeep/`` (SoDeep, sorters and other rank operators) and ``topk/`` (top-k classification), and
the modules ``tf_ranking`` (TF-Ranking's losses) and ``metric_learning``.

``class_ids`` and ``to_relevance`` are the package's one label parser,
:mod:`tfrank4class.labels`, re-exported here.
"""

from tfrank4class.labels import class_ids, to_relevance
from tfrank4class.losses.base import ListwiseLoss, Loss
from tfrank4class.losses.keras_rs_names import (
  ListMLELoss,
  PairwiseHingeLoss,
  PairwiseLogisticLoss,
  PairwiseMeanSquaredError,
  PairwiseSoftZeroOneLoss,
)
from tfrank4class.losses.metric_learning import (
  ContrastiveLoss,
  EmbeddingLoss,
  SmoothedCrossEntropy,
  TripletLoss,
)
from tfrank4class.losses.rambo import (
  APCLoss,
  AveragePrecisionLoss,
  BlackboxNDCGLoss,
  BlackboxRankLoss,
  MapApcLoss,
  MeanAveragePrecisionLoss,
  RecallLoss,
  ScoreMemory,
)
from tfrank4class.losses.registry import RankingLoss, get, names, register
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
  "EmbeddingLoss",
  "get",
  "ListMLELoss",
  "ListwiseLoss",
  "Loss",
  "MapApcLoss",
  "MeanAveragePrecisionLoss",
  "names",
  "PairwiseHingeLoss",
  "PairwiseLogisticLoss",
  "PairwiseMeanSquaredError",
  "PairwiseSoftZeroOneLoss",
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
