"""The deprecated aliases left behind by moves: they warn and give the new objects."""

import importlib

import pytest

from tfrank4class import labels
from tfrank4class.retrieval import evaluation, kernel, model
from tfrank4class.train import callbacks


def _import_warns(name):
  """Imports (or re-imports) module ``name`` and returns it, checking its DeprecationWarning."""
  with pytest.warns(DeprecationWarning, match=name.replace(".", r"\.") + " is deprecated"):
    module = importlib.import_module(name)
    module = importlib.reload(module)  # a module imported earlier in the session warns again
  return module


def test_metrics_retrieval_module():
  old = _import_warns("tfrank4class.metrics.retrieval")
  assert old.retrieval_metrics is evaluation.retrieval_metrics
  assert old.retrieval_recall_at_k is evaluation.retrieval_recall_at_k
  assert old.map_at_r is evaluation.map_at_r
  assert old.block_statistics is kernel.block_statistics
  assert old.RetrievalEvaluation is callbacks.RetrievalEvaluation


def test_heads_embedding_module():
  old = _import_warns("tfrank4class.heads.embedding")
  for name in (
    "RetrievalModel",
    "build_retrieval_model",
    "export_embedding_model",
    "CROSS_ENTROPY",
    "EMBEDDING_LOSSES",
    "FEATURE_NORMS",
  ):
    assert getattr(old, name) is getattr(model, name), name


def test_losses_relevance_module():
  old = _import_warns("tfrank4class.losses.relevance")
  assert old.class_ids is labels.class_ids
  assert old.to_relevance is labels.to_relevance
  assert old.num_items is labels.num_items


@pytest.mark.parametrize(
  "name, new",
  [
    ("retrieval_metrics", evaluation.retrieval_metrics),
    ("retrieval_recall_at_k", evaluation.retrieval_recall_at_k),
    ("map_at_r", evaluation.map_at_r),
    ("RetrievalEvaluation", callbacks.RetrievalEvaluation),
  ],
)
def test_metrics_package_names(name, new):
  import tfrank4class.metrics as m

  with pytest.warns(DeprecationWarning, match=rf"tfrank4class\.metrics\.{name} is deprecated"):
    assert getattr(m, name) is new
  with pytest.raises(AttributeError, match="has no attribute 'nope'"):
    _ = m.nope


def test_re_exported_names_are_the_one_implementation():
  from tfrank4class import losses, retrieval
  from tfrank4class.losses import rambo
  from tfrank4class.metrics import functional
  from tfrank4class.ranking import precision

  assert losses.class_ids is labels.class_ids and rambo.class_ids is labels.class_ids
  assert losses.to_relevance is labels.to_relevance
  assert functional.harmonic_difference is precision.harmonic_difference
  assert retrieval.retrieval_recall_at_k is evaluation.retrieval_recall_at_k
  assert retrieval.build_retrieval_model is model.build_retrieval_model


def test_module_exports():
  """The assertion of the former tests/test_retrieval.py, through the deprecated names."""
  import tfrank4class.metrics as m
  from tfrank4class.retrieval.evaluation import retrieval_recall_at_k

  with pytest.warns(DeprecationWarning):
    from tfrank4class.metrics import retrieval  # pylint: disable=g-import-not-at-top

    assert m.retrieval_recall_at_k is retrieval_recall_at_k and m.map_at_r is retrieval.map_at_r
