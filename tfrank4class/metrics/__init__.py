"""Ranking metrics for classifiers (Keras classes and plain per-list functions)."""

import importlib
import warnings

from tfrank4class.metrics import functional, reference
from tfrank4class.metrics.classification import (
  MRR,
  NDCG,
  MeanAveragePrecision,
  PerListMetric,
  PrecisionAtK,
  RecallAtK,
  Spearman,
  TopKAccuracy,
)
from tfrank4class.metrics.registry import get

__all__ = [
  "functional",
  "get",
  "MeanAveragePrecision",
  "MRR",
  "NDCG",
  "PerListMetric",
  "PrecisionAtK",
  "RecallAtK",
  "reference",
  "Spearman",
  "TopKAccuracy",
]

# Names that lived here before the retrieval metrics moved (deprecated; they warn when used).
_MOVED = {
  "retrieval_metrics": "tfrank4class.retrieval.evaluation",
  "retrieval_recall_at_k": "tfrank4class.retrieval.evaluation",
  "map_at_r": "tfrank4class.retrieval.evaluation",
  "RetrievalEvaluation": "tfrank4class.train.callbacks",
}


def __getattr__(name):
  """Deprecated aliases of the retrieval names that moved out of this package (PEP 562)."""
  if name not in _MOVED:
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
  warnings.warn(
    f"tfrank4class.metrics.{name} is deprecated: import it from {_MOVED[name]}.",
    DeprecationWarning,
    stacklevel=2,
  )
  return getattr(importlib.import_module(_MOVED[name]), name)
