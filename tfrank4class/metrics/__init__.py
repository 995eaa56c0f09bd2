"""Ranking metrics for classifiers (Keras classes and plain per-list functions)."""

from tfrank4class.metrics import functional, reference
from tfrank4class.metrics.classification import (
  DCG,
  MRR,
  NDCG,
  MeanAveragePrecision,
  PerListMetric,
  PrecisionAtK,
  RecallAtK,
  Spearman,
  TopKAccuracy,
)
from tfrank4class.metrics.registry import get, names

__all__ = [
  "DCG",
  "functional",
  "get",
  "MeanAveragePrecision",
  "MRR",
  "names",
  "NDCG",
  "PerListMetric",
  "PrecisionAtK",
  "RecallAtK",
  "reference",
  "Spearman",
  "TopKAccuracy",
]
