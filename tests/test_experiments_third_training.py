"""experiments/third/training.py: one short run on Gaussian features: the checkpoints per
endpoint (the test split scored at each, against the package's metrics), patience on Top-1 and
Top-5, the diagnostics of the test scores."""

import numpy as np
import pytest

from experiments import features, training, true_ranks
from experiments.third import training as third_training


class _Model:
  """Stands for a Keras model in the callback: validation metrics come from a script."""

  stop_training = False

  def get_weights(self):
    return ["w"]


def test_patience_counts_epochs_without_a_new_top1_or_top5(monkeypatch):
  script = iter(
    [
      {"top_1": 0.5, "top_5": 0.8, "ndcg_5": 0.6},
      {"top_1": 0.5, "top_5": 0.9, "ndcg_5": 0.6},  # Top-5 improves: patience starts again
      {"top_1": 0.4, "top_5": 0.8, "ndcg_5": 0.7},  # NDCG@5 alone does not reset it
      {"top_1": 0.5, "top_5": 0.9, "ndcg_5": 0.6},  # a tie is no improvement
    ]
  )
  monkeypatch.setattr(third_training, "validation_metrics", lambda *a: next(script))
  keep = third_training.EndpointCheckpoints(None, None, patience=2)
  keep.set_model(_Model())
  for epoch in range(4):
    if keep.model.stop_training:
      break
    keep.on_epoch_end(epoch)
  assert epoch == 3 and keep.stopped_by_patience
  assert keep.best_epoch == {"top_1": 0, "top_5": 1, "ndcg_5": 2}


def test_a_short_run_scores_the_test_split_at_each_checkpoint():
  arrays, _ = features.smoke_features({"train": 200, "validation": 80, "test": 60}, 8, 6)
  splits = {s: (arrays[f"{s}_x"], arrays[f"{s}_y"]) for s in ("train", "validation", "test")}
  settings = {"max_epochs": 3, "patience": 5, "batch_size": 64}
  result = third_training.train_run(splits, 6, "softmax", "dot", 0.01, None, 0, settings)
  assert result["epochs_run"] == 3 and result["stopped_by"] == "budget"
  assert result["loss"] == "softmax_loss"
  for endpoint, test in result["test"].items():
    rank, ties = true_ranks.decode(test["rank"]), true_ranks.decode(test["ties"])
    assert len(rank) == 60 and test["top_5"] == pytest.approx(
      np.mean(true_ranks.per_example(rank, ties, "top_5"))
    )
    assert result["validation"][endpoint] == pytest.approx(
      max(result["validation_curve"][endpoint]), abs=1e-5
    )
    assert 0.0 < test["top_class_share"] <= 1.0 and test["score_std"] > 0.0


def test_score_checkpoint_against_the_package_and_numpy():
  rng = np.random.default_rng(0)
  scores = rng.normal(size=(30, 5)).astype("float32")
  labels = rng.integers(0, 5, 30)

  class Fixed:
    def __call__(self, x, training=False):
      return scores[: len(x)]

  found = third_training.score_checkpoint(Fixed(), np.zeros((30, 1), "float32"), labels)
  expected = training.evaluate_scores(labels, scores, ("top_1", "top_5", "mrr"))
  for metric, value in expected.items():
    assert found[metric] == pytest.approx(value, abs=1e-6)
  log_p = scores - np.log(np.exp(scores).sum(1, keepdims=True))
  assert found["cross_entropy"] == pytest.approx(-log_p[np.arange(30), labels].mean(), rel=1e-5)
  top = scores.argmax(1)
  assert found["top_class_share"] == pytest.approx(np.bincount(top).max() / 30)
