"""Deprecated alias of the retrieval metrics' old home; import from the new modules instead.

=====================================================  ===========================================
old (``tfrank4class.metrics.retrieval``)               new
=====================================================  ===========================================
``retrieval_metrics``, ``retrieval_recall_at_k``,      ``tfrank4class.retrieval.evaluation`` (also
``map_at_r``                                           ``tfrank4class.retrieval``)
``block_statistics``                                   ``tfrank4class.retrieval.kernel``
``RetrievalEvaluation``                                ``tfrank4class.train.callbacks``
=====================================================  ===========================================

Importing this module emits a ``DeprecationWarning``.
"""

import warnings

from tfrank4class.retrieval.evaluation import map_at_r, retrieval_metrics, retrieval_recall_at_k
from tfrank4class.retrieval.kernel import block_statistics
from tfrank4class.train.callbacks import RetrievalEvaluation

__all__ = [
  "RetrievalEvaluation",
  "block_statistics",
  "map_at_r",
  "retrieval_metrics",
  "retrieval_recall_at_k",
]

warnings.warn(
  "tfrank4class.metrics.retrieval is deprecated: import retrieval_metrics, "
  "retrieval_recall_at_k and map_at_r from tfrank4class.retrieval, block_statistics from "
  "tfrank4class.retrieval.kernel and RetrievalEvaluation from tfrank4class.train.callbacks.",
  DeprecationWarning,
  stacklevel=2,
)
