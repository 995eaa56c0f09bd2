"""Retrieval with embedding models: the metric-learning recipe and the retrieval metrics.

One module per job:

* :mod:`~tfrank4class.retrieval.model`: the embedding model and its training recipe
  (:func:`build_retrieval_model`: cross-entropy of Boudiaf et al., ECCV 2020, or an embedding
  loss such as RaMBO's recall loss) and SavedModel export;
* :mod:`~tfrank4class.retrieval.kernel`: the ``keras.ops`` kernel of Recall@K and MAP@R for one
  block of queries;
* :mod:`~tfrank4class.retrieval.inputs`: host-side checks of embeddings, labels, query and
  gallery selections and cut-offs;
* :mod:`~tfrank4class.retrieval.evaluation`: the host loop over query blocks
  (:func:`retrieval_metrics`, :func:`retrieval_recall_at_k`, :func:`map_at_r`);
* :mod:`~tfrank4class.retrieval.export`: SavedModel export (:func:`export_embedding_model`;
  :func:`export_top_k_model`, a head's blocked top-k),
  TensorFlow by nature: imported when first used, so ``import tfrank4class.retrieval`` and all
  the rest run on Keras 3's TensorFlow, JAX and PyTorch backends.

The Keras callback that evaluates after every epoch is
:class:`tfrank4class.train.callbacks.RetrievalEvaluation`. The package sits beside ``train/``
at the top of the one-way flow (it builds models from encoders and losses); the core (losses,
metrics, heads, rank operators) never imports it.
"""

from tfrank4class.retrieval.evaluation import map_at_r, retrieval_metrics, retrieval_recall_at_k
from tfrank4class.retrieval.kernel import block_statistics
from tfrank4class.retrieval.model import RetrievalModel, build_retrieval_model

__all__ = [
  "RetrievalModel",
  "block_statistics",
  "build_retrieval_model",
  "export_embedding_model",
  "export_top_k_model",
  "map_at_r",
  "retrieval_metrics",
  "retrieval_recall_at_k",
]


def __getattr__(name):
  """``export_embedding_model`` and ``export_top_k_model`` from
  :mod:`tfrank4class.retrieval.export`, imported on first use (TensorFlow only; elsewhere its
  fence raises an ``ImportError`` naming the fix)."""
  if name in ("export_embedding_model", "export_top_k_model"):
    from tfrank4class.retrieval import export  # noqa: PLC0415

    return getattr(export, name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
