"""Deprecated alias: the retrieval model builder moved to :mod:`tfrank4class.retrieval.model`.

``RetrievalModel``, ``build_retrieval_model``, ``export_embedding_model`` and the constants
``CROSS_ENTROPY``, ``EMBEDDING_LOSSES``, ``FEATURE_NORMS`` are importable from
``tfrank4class.retrieval.model`` (the first three also from ``tfrank4class.retrieval``). The
builder is a training recipe that picks a loss, so it does not belong among the heads (which come
before the losses in the package's one-way flow). Importing this module emits a
``DeprecationWarning``.
"""

import warnings

from tfrank4class.retrieval.model import (
  CROSS_ENTROPY,
  EMBEDDING_LOSSES,
  FEATURE_NORMS,
  RetrievalModel,
  build_retrieval_model,
  export_embedding_model,
)

__all__ = [
  "CROSS_ENTROPY",
  "EMBEDDING_LOSSES",
  "FEATURE_NORMS",
  "RetrievalModel",
  "build_retrieval_model",
  "export_embedding_model",
]

warnings.warn(
  "tfrank4class.heads.embedding is deprecated: import RetrievalModel, build_retrieval_model "
  "and export_embedding_model from tfrank4class.retrieval.",
  DeprecationWarning,
  stacklevel=2,
)
