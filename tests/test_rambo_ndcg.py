"""Tests of tfrank4class.losses.rambo.ndcg.BlackboxNDCGLoss against scikit-learn's ndcg_score
and TF-Ranking's NDCG metric, with hand-computed cases and bad input."""

import _tf_ranking_reference as tf_ranking_reference
import numpy as np
import pytest
import tensorflow as tf
from sklearn.metrics import ndcg_score

from tfrank4class import losses
from tfrank4class.losses import BlackboxNDCGLoss

tfr_metrics = tf_ranking_reference.module("keras.metrics")


def test_hand_case():
  np.testing.assert_allclose(
    BlackboxNDCGLoss(reduction="none")([1], [[0.9, 0.5]]).numpy(), [1 - 1 / np.log2(3)], rtol=1e-6
  )


def test_matches_sklearn_and_tfr_metric_on_graded_relevance():
  rng = np.random.default_rng(0)
  scores = rng.standard_normal((6, 30)).astype(np.float32)
  relevance = rng.integers(0, 4, (6, 30)).astype(np.float32)
  relevance[:, 0] = 2.0
  got = BlackboxNDCGLoss(reduction="none")(relevance, scores).numpy()
  expected = [1 - ndcg_score([2 ** relevance[b] - 1], [scores[b]]) for b in range(6)]
  np.testing.assert_allclose(got, expected, rtol=1e-5)
  tfr_ndcg = tfr_metrics.NDCGMetric()(relevance, scores).numpy()
  np.testing.assert_allclose(np.mean(got), 1 - tfr_ndcg, rtol=1e-5)


def test_gradient_raises_ndcg():
  rng = np.random.default_rng(1)
  y = tf.Variable(rng.standard_normal((4, 50)).astype(np.float32))
  labels = rng.integers(0, 50, 4)
  # NDCG's rank-gradient is small far down the list (and divided by the batch size), so
  # lambda_ must be large enough for the perturbation to move items past their neighbours.
  loss = BlackboxNDCGLoss(lambda_=5.0)
  before = float(loss(labels, y))
  for _ in range(20):
    with tf.GradientTape() as tape:
      value = loss(labels, y)
    y.assign_sub(5.0 * tape.gradient(value, y))
  assert float(loss(labels, y)) < before - 0.05


def _sorts_in_step(fn):
  """Number of sort ops (TopKV2, what tf.argsort / tf.sort lower to) in a traced forward+backward
  step of ``fn(y)`` on a [2, 5] float32 input, nested function graphs included."""

  @tf.function
  def step(y):
    with tf.GradientTape() as tape:
      tape.watch(y)
      value = fn(y)
    return tape.gradient(value, y)

  graph_def = step.get_concrete_function(tf.TensorSpec([2, 5], tf.float32)).graph.as_graph_def()
  nodes = list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]
  return sum(node.op == "TopKV2" for node in nodes)


def test_sorts_twice_forward_once_backward():
  """Ranks (forward), IDCG's sorted gains (forward), perturbed ranks (backward): no rank among the
  relevant items, which NDCG does not use."""
  assert _sorts_in_step(lambda y: tf.reduce_sum(tf.cast(tf.argsort(y), tf.float32) * y)) == 1
  loss, labels = BlackboxNDCGLoss(), [[0.0, 1.0, 2.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0, 0.0]]
  assert _sorts_in_step(lambda y: loss(labels, y)) == 3


@pytest.mark.parametrize("jit", [False, True])
def test_tf_function_and_xla(jit):
  rng = np.random.default_rng(2)
  scores = rng.standard_normal((3, 10)).astype(np.float32)
  labels = rng.integers(0, 10, 3)
  loss = BlackboxNDCGLoss(margin=0.1)
  f = tf.function(lambda y, s: loss(y, s), jit_compile=jit)
  np.testing.assert_allclose(f(labels, scores).numpy(), loss(labels, scores).numpy(), rtol=1e-6)


def test_fit_under_mirrored_strategy(mirrored_strategy):
  rng = np.random.default_rng(3)
  x = rng.standard_normal((32, 6)).astype(np.float32)
  y = rng.integers(0, 10, 32)
  with mirrored_strategy.scope():
    model = tf.keras.Sequential([tf.keras.Input([6]), tf.keras.layers.Dense(10)])
    model.compile("adam", loss=BlackboxNDCGLoss())
  history = model.fit(x, y, batch_size=8, epochs=1, verbose=0)
  assert np.all(np.isfinite(history.history["loss"]))


def test_degenerate_and_bad_input():
  for labels, scores in [([[0.0, 0.0, 0.0]], [[0.1, 0.2, 0.3]]), ([2], [[0.4, 0.4, 0.4]])]:
    y = tf.constant(scores)
    with tf.GradientTape() as tape:
      tape.watch(y)
      value = BlackboxNDCGLoss()(labels, y)
    assert np.isfinite(value.numpy()) and np.all(np.isfinite(tape.gradient(value, y).numpy()))
  with pytest.raises(ValueError, match=r"`lambda_` must be a finite number > 0\.0, got 0"):
    BlackboxNDCGLoss(lambda_=0)
  with pytest.raises(ValueError, match=r"`margin` must be a finite number >= 0\.0, got -1"):
    BlackboxNDCGLoss(margin=-1)
  with pytest.raises(tf.errors.InvalidArgumentError, match="must be finite"):
    BlackboxNDCGLoss()([0], [[np.nan, 1.0]])


def test_registry_and_save(tmp_path):
  loss = losses.get("blackbox_ndcg_loss", lambda_=3.0)
  assert isinstance(loss, BlackboxNDCGLoss)
  assert BlackboxNDCGLoss.from_config(loss.get_config()).lambda_ == 3.0
  model = tf.keras.Sequential([tf.keras.Input([4]), tf.keras.layers.Dense(3)])
  model.compile("sgd", loss=loss)
  model.save(tmp_path / "m.keras")
  assert tf.keras.models.load_model(tmp_path / "m.keras").loss.lambda_ == 3.0
