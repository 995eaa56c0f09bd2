"""Keras metric classes: batch accumulation, sample weights, compile/fit, save/load, strategy."""
import numpy as np
import pytest
import tensorflow as tf
from sklearn.metrics import ndcg_score, top_k_accuracy_score

from tfrank4class import losses, metrics

C = 6
RNG = np.random.default_rng(7)


def _case(n=48):
  scores = RNG.normal(size=(n, C)).astype(np.float32)
  labels = RNG.integers(0, C, n)
  return labels, scores


def test_accumulates_over_batches_like_sklearn():
  labels, scores = _case()
  top3, ndcg = metrics.TopKAccuracy(3), metrics.NDCG(5, gain="linear")
  for i in range(0, len(labels), 16):
    top3.update_state(labels[i:i + 16], scores[i:i + 16])
    ndcg.update_state(labels[i:i + 16], scores[i:i + 16])
  assert float(top3.result()) == pytest.approx(top_k_accuracy_score(labels, scores, k=3, labels=range(C)))
  assert float(ndcg.result()) == pytest.approx(ndcg_score(np.eye(C)[labels], scores, k=5), abs=1e-6)


def test_sample_weight_is_per_list():
  labels, scores = np.array([0, 1]), np.array([[1.0, 0.0], [1.0, 0.0]], np.float32)
  m = metrics.TopKAccuracy(1)
  m.update_state(labels, scores, sample_weight=[3.0, 1.0])
  assert float(m.result()) == pytest.approx(0.75)
  m.reset_state()
  m.update_state(labels, scores, sample_weight=[[1.0], [3.0]])
  assert float(m.result()) == pytest.approx(0.25)


def test_names_and_config_round_trip():
  for metric, name in [(metrics.TopKAccuracy(5), "top_5_accuracy"), (metrics.NDCG(5), "ndcg_5"),
                       (metrics.NDCG(), "ndcg"), (metrics.MRR(), "mrr"),
                       (metrics.MeanAveragePrecision(), "map"), (metrics.Spearman(), "spearman")]:
    assert metric.name == name
    restored = tf.keras.utils.deserialize_keras_object(tf.keras.utils.serialize_keras_object(metric))
    assert type(restored) is type(metric) and restored.get_config() == metric.get_config()


def test_in_compile_fit_and_saved_model(tmp_path):
  labels, scores = _case(64)
  x = scores  # identity-initialised model: its outputs are the scores themselves
  inputs = tf.keras.Input((C,))
  outputs = tf.keras.layers.Dense(C, kernel_initializer="identity", bias_initializer="zeros")(inputs)
  model = tf.keras.Model(inputs, outputs)
  model.compile(loss=losses.get("softmax_loss"),
                metrics=[metrics.TopKAccuracy(1), metrics.TopKAccuracy(5), metrics.NDCG(5),
                         metrics.MRR(), metrics.MeanAveragePrecision()])
  result = model.evaluate(x, labels, batch_size=16, verbose=0, return_dict=True)
  assert result["top_1_accuracy"] == pytest.approx(top_k_accuracy_score(labels, scores, k=1, labels=range(C)), abs=1e-6)
  assert result["top_5_accuracy"] == pytest.approx(top_k_accuracy_score(labels, scores, k=5, labels=range(C)), abs=1e-6)
  assert result["ndcg_5"] == pytest.approx(ndcg_score(np.eye(C)[labels], scores, k=5), abs=1e-5)
  model.fit(x, labels, batch_size=16, epochs=1, verbose=0)
  path = str(tmp_path / "m.keras")
  model.save(path)
  loaded = tf.keras.models.load_model(path)
  again = loaded.evaluate(x, labels, batch_size=16, verbose=0, return_dict=True)
  expected = model.evaluate(x, labels, batch_size=16, verbose=0, return_dict=True)
  for key in expected:
    assert again[key] == pytest.approx(expected[key], rel=1e-5)


def test_aggregates_across_replicas(mirrored_strategy):
  labels, scores = _case(32)
  with mirrored_strategy.scope():
    inputs = tf.keras.Input((C,))
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(C, kernel_initializer="identity")(inputs))
    model.compile(loss=losses.get("softmax_loss"), metrics=[metrics.NDCG(5, gain="linear"), metrics.MRR()])
  result = model.evaluate(scores, labels, batch_size=8, verbose=0, return_dict=True)
  assert result["ndcg_5"] == pytest.approx(ndcg_score(np.eye(C)[labels], scores, k=5), abs=1e-5)


def test_bad_arguments():
  for k in (0, -1, 2.5):
    with pytest.raises(ValueError, match=r"`k` must be an integer >= 1"):
      metrics.TopKAccuracy(k)
  with pytest.raises(ValueError, match=r"`k` must be an integer >= 1 or None, got 0"):
    metrics.NDCG(0)
  with pytest.raises(ValueError, match=r"`gain` must be one of \['exp2', 'linear'\], got 'log'"):
    metrics.NDCG(5, gain="log")
  with pytest.raises(tf.errors.InvalidArgumentError, match=r"labels.*\[0, num_classes=6\)"):
    metrics.MRR().update_state([6], np.zeros((1, C), np.float32))


def test_get_by_name():
  from tfrank4class.metrics import get
  assert isinstance(get("top_5"), metrics.TopKAccuracy) and get("top_5").k == 5
  assert get("ndcg_10").k == 10 and get("ndcg").k is None
  assert get("mrr").name == "mrr" and get("mrr_3").k == 3
  assert isinstance(get("map"), metrics.MeanAveragePrecision)
  assert isinstance(get("spearman"), metrics.Spearman)
  for bad in ("top_0", "top5", "ndcg_x", "accuracy"):
    with pytest.raises(ValueError, match=rf"Unknown metric name '{bad}'; known metrics are: top_K"):
      get(bad)
