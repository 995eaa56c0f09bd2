"""experiments/training.py: one run of the grid, its metrics, its early stopping."""

import numpy as np
import pytest
import tensorflow as tf

from experiments import training
from experiments.second import plan, protocol
from tfrank4class import losses


def _blobs(n, seed):
  rng = np.random.default_rng(seed)
  centers = np.random.default_rng(99).normal(size=(4, 6)) * 2.0
  y = rng.integers(0, 4, n)
  return (centers[y] + rng.normal(size=(n, 6))).astype("float32"), y


def _settings(**changes):
  """The grid's smoke settings of ``clean``, with ``changes``."""
  return {**plan.grid_settings(losses.names(), smoke=True), **changes}


def test_evaluate_scores_matches_numpy():
  rng = np.random.default_rng(5)
  scores = rng.normal(size=(300, 7)).astype("float32")  # continuous: no ties
  labels = rng.integers(0, 7, 300)
  got = training.evaluate_scores(labels, scores, batch_size=64)
  ranks = 1 + np.sum(scores > scores[np.arange(300), labels][:, None], axis=1)
  assert got["top_1"] == pytest.approx(np.mean(ranks == 1), abs=1e-6)
  assert got["top_5"] == pytest.approx(np.mean(ranks <= 5), abs=1e-6)
  assert got["mrr"] == pytest.approx(np.mean(1.0 / ranks), abs=1e-6)
  assert got["ndcg_5"] == pytest.approx(
    np.mean(np.where(ranks <= 5, 1 / np.log2(1 + ranks), 0)), abs=1e-6
  )


def test_train_run_restores_the_best_validation_epoch():
  splits = {"train": _blobs(400, 0), "validation": _blobs(200, 1), "test": _blobs(200, 2)}
  settings = _settings(max_epochs=4, patience=4, hidden_units=[8], batch_size=64)
  result = training.train_run(splits, 4, "softmax_loss", "latent_cross", 0.02, 0, settings)
  curve = result["validation_curve"]
  assert len(curve) == result["epochs_run"] == 4
  assert result["best_epoch"] == int(np.argmax(curve)) + 1
  assert result["validation"]["ndcg_5"] == pytest.approx(max(curve), abs=1e-6)
  assert result["top_1"] > 0.8 and result["train_seconds"] > 0 and result["test_scores_finite"]
  assert result["bruch_slack"] >= 0  # CE >= -log MRR for any scores (experiments/bounds.py)
  assert result["loss_config"] == training.loss_config("softmax_loss", {})


def test_keep_best_restores_the_best_epochs_weights():
  """After training, the model holds the best validation epoch's weights: scoring the validation
  split again gives the best value of the curve, not the last."""
  train, validation = _blobs(400, 0), _blobs(200, 1)
  tf.keras.utils.set_random_seed(0)
  model = training.head_model(6, 4, "latent_cross", (8,))
  model.compile(
    optimizer=tf.keras.optimizers.Adam(1.0), loss=training.build_loss("softmax_loss", {})
  )
  keep = training.KeepBest(*validation)
  model.fit(training.arrays_dataset(*train, 64, 0), epochs=6, callbacks=[keep], verbose=0)
  assert len(keep.curve) == 6 and keep.best == max(keep.curve)
  assert keep.curve[-1] < keep.best - 0.01  # a rate this large overshoots: the last is not best
  scores = training.predict(model, validation[0])
  again = training.evaluate_scores(validation[1], scores, ("ndcg_5",))["ndcg_5"]
  assert again == pytest.approx(max(keep.curve), abs=1e-6)


def test_keep_best_stops_patience_epochs_after_the_best():
  """A learning rate of 0 never changes the model: every epoch ties with the first, which stays
  the best, so a patience of 2 stops training after 3 epochs."""
  splits = {"train": _blobs(64, 0), "validation": _blobs(32, 1), "test": _blobs(32, 2)}
  tf.keras.utils.set_random_seed(0)
  model = training.head_model(6, 4)
  model.compile(
    optimizer=tf.keras.optimizers.SGD(0.0), loss=training.build_loss("softmax_loss", {})
  )
  keep = training.KeepBest(*splits["validation"], patience=2)
  model.fit(
    training.arrays_dataset(*splits["train"], 32, 0), epochs=10, callbacks=[keep], verbose=0
  )
  assert (keep.best_epoch, len(keep.curve)) == (0, 3)
  assert keep.curve == [keep.curve[0]] * 3


def test_keep_best_refuses_an_unknown_monitor_and_a_bad_patience():
  with pytest.raises(ValueError, match="Unknown metric name 'auc'"):
    training.KeepBest(np.zeros((2, 3)), np.zeros(2), monitor="auc")
  with pytest.raises(ValueError, match="`patience` must be an integer >= 1"):
    training.KeepBest(np.zeros((2, 3)), np.zeros(2), patience=0)


def test_train_run_checks_the_learning_rate():
  splits = {"train": _blobs(8, 0), "validation": _blobs(4, 1), "test": _blobs(4, 2)}
  with pytest.raises(ValueError, match="`learning_rate` must be a finite number > 0.0"):
    training.train_run(splits, 4, "softmax_loss", "dot", 0.0, 0, _settings())


def test_build_loss_takes_the_protocols_arguments():
  loss = training.build_loss("blackbox_ndcg_loss", protocol.LOSS_KWARGS["blackbox_ndcg_loss"])
  assert loss.get_config()["lambda_"] == 4.0
  config = training.loss_config("sorter_ap_loss", protocol.LOSS_KWARGS["sorter_ap_loss"])
  assert config["ranker"] == "lstm"


def test_the_grids_losses_keep_tf_rankings_normalisation():
  """The records were made with TF-Ranking's own normalisation: the pairwise logistic loss of a
  list of C = 4 classes is the sum of its per-item losses over B * C, not over B; their configs
  are recorded without the argument (what configs saved before it hold)."""
  loss = training.build_loss("pairwise_logistic_loss", {})
  assert loss.normalization == "tf_ranking"
  labels = np.array([0, 2])
  scores = np.array([[1.0, 0.0, 2.0, 0.0], [0.0, 1.0, 3.0, 2.0]], np.float32)
  # pairs (true class above each other class): log(1 + exp(-(s_y - s_j))) summed over j != y.
  pairs = [np.log1p(np.exp(-(s[y] - np.delete(s, y)))).sum() for y, s in zip(labels, scores)]
  assert float(loss(labels, scores)) == pytest.approx(sum(pairs) / 8, rel=1e-5)
  assert training.build_loss("softmax_loss", {"normalization": "lists"}).normalization == "lists"
  config = training.loss_config("approx_ndcg_loss", {})
  assert "normalization" not in config and config["key"] == "approx_ndcg_loss"
  assert "normalization" not in training.loss_config("blackbox_ndcg_loss", {"lambda_": 4.0})
