"""Ranking metrics for classifiers (Keras classes and plain per-list functions)."""
from tfrank4class.metrics import functional, reference
from tfrank4class.metrics.classification import (MRR, NDCG, MeanAveragePrecision, PrecisionAtK,
                                                 RecallAtK, Spearman, TopKAccuracy)
from tfrank4class.metrics.registry import get
from tfrank4class.metrics.retrieval import (RetrievalEvaluation, map_at_r, retrieval_metrics,
                                            retrieval_recall_at_k)
