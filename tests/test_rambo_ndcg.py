"""Tests of tfrank4class.losses.rambo.ndcg (``ndcg_loss_values`` and BlackboxNDCGLoss) against
scikit-learn's ndcg_score, with hand-computed cases and bad input, on every backend."""

import backend_testing as bt
import numpy as np
import pytest
from sklearn.metrics import ndcg_score

from tfrank4class import losses
from tfrank4class.compat import keras
from tfrank4class.losses import BlackboxNDCGLoss
from tfrank4class.losses.rambo.ndcg import ndcg_loss_values

#: float64 inputs stay float64 on every backend (JAX: ``jax_enable_x64``, on for each test).
pytestmark = pytest.mark.usefixtures("float64_inputs")


def test_hand_case():
  np.testing.assert_allclose(
    bt.numpy(BlackboxNDCGLoss(reduction="none")([1], [[0.9, 0.5]])), [1 - 1 / np.log2(3)], rtol=1e-6
  )


def test_matches_sklearn_on_graded_relevance():
  rng = np.random.default_rng(0)
  scores = rng.standard_normal((6, 30)).astype(np.float32)
  relevance = rng.integers(0, 4, (6, 30)).astype(np.float32)
  relevance[:, 0] = 2.0
  got = bt.numpy(BlackboxNDCGLoss(reduction="none")(relevance, scores))
  expected = [1 - ndcg_score([2 ** relevance[b] - 1], [scores[b]]) for b in range(6)]
  np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_function_matches_sklearn_with_exponential_gains_in_float64():
  rng = np.random.default_rng(4)
  scores = rng.standard_normal((5, 12))
  relevance = rng.integers(0, 4, (5, 12)).astype(np.float64)
  relevance[:, 0] = 3.0
  got = bt.numpy(ndcg_loss_values(scores, relevance))
  assert got.dtype == np.float64
  expected = [1 - ndcg_score([2 ** relevance[b] - 1], [scores[b]]) for b in range(5)]
  np.testing.assert_allclose(got, expected, rtol=1e-10)


def test_function_hand_case_and_padding():
  got = ndcg_loss_values(
    np.array([[0.9, 0.5, 5.0]], np.float32), np.array([[0.0, 1.0, -1.0]], np.float32)
  )
  np.testing.assert_allclose(bt.numpy(got), [1 - 1 / np.log2(3)], rtol=1e-6)


def test_gradient_raises_ndcg():
  rng = np.random.default_rng(1)
  y = rng.standard_normal((4, 50)).astype(np.float32)
  labels = rng.integers(0, 50, 4)
  # NDCG's rank-gradient is small far down the list (and divided by the batch size), so
  # lambda_ must be large enough for the perturbation to move items past their neighbours.
  loss = BlackboxNDCGLoss(lambda_=5.0)
  before = float(bt.numpy(loss(labels, y)))
  for _ in range(20):
    y = y - 5.0 * bt.value_and_grad(lambda s: loss(labels, s), y)[1][0]
  assert float(bt.numpy(loss(labels, y))) < before - 0.05


def _sorts_in_step(fn):
  """Number of sort ops (TopKV2, what tf.argsort / tf.sort lower to) in a traced forward+backward
  step of ``fn(y)`` on a [2, 5] float32 input, nested function graphs included."""
  import tensorflow as tf  # noqa: PLC0415

  @tf.function
  def step(y):
    with tf.GradientTape() as tape:
      tape.watch(y)
      value = fn(y)
    return tape.gradient(value, y)

  graph_def = step.get_concrete_function(tf.TensorSpec([2, 5], tf.float32)).graph.as_graph_def()
  nodes = list(graph_def.node) + [n for f in graph_def.library.function for n in f.node_def]
  return sum(node.op == "TopKV2" for node in nodes)


@pytest.mark.tensorflow_only
def test_sorts_twice_forward_once_backward():
  """Ranks (forward), IDCG's sorted gains (forward), perturbed ranks (backward): no rank among the
  relevant items, which NDCG does not use."""
  import tensorflow as tf  # noqa: PLC0415

  assert _sorts_in_step(lambda y: tf.reduce_sum(tf.cast(tf.argsort(y), tf.float32) * y)) == 1
  loss, labels = BlackboxNDCGLoss(), [[0.0, 1.0, 2.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0, 0.0]]
  assert _sorts_in_step(lambda y: loss(labels, y)) == 3


def test_compiled_modes():
  rng = np.random.default_rng(2)
  scores = rng.standard_normal((3, 10)).astype(np.float32)
  labels = rng.integers(0, 10, 3)
  loss = BlackboxNDCGLoss(margin=0.1)
  for mode in bt.compile_modes():
    f = bt.compiled(lambda y, s: loss(y, s), mode)
    np.testing.assert_allclose(
      bt.numpy(f(labels, scores)), bt.numpy(loss(labels, scores)), rtol=1e-5
    )


@pytest.mark.tensorflow_only
def test_fit_under_mirrored_strategy(mirrored_strategy):
  rng = np.random.default_rng(3)
  x = rng.standard_normal((32, 6)).astype(np.float32)
  y = rng.integers(0, 10, 32)
  with mirrored_strategy.scope():
    model = keras.Sequential([keras.Input([6]), keras.layers.Dense(10)])
    model.compile("adam", loss=BlackboxNDCGLoss())
  history = model.fit(x, y, batch_size=8, epochs=1, verbose=0)
  assert np.all(np.isfinite(history.history["loss"]))


def test_degenerate_and_bad_input():
  for labels, scores in [([[0.0, 0.0, 0.0]], [[0.1, 0.2, 0.3]]), ([2], [[0.4, 0.4, 0.4]])]:
    labels = np.array(labels)
    value, (grad,) = bt.value_and_grad(
      lambda y, labels=labels: BlackboxNDCGLoss()(labels, y), np.array(scores, np.float32)
    )
    assert np.isfinite(value) and np.all(np.isfinite(grad))
  with pytest.raises(ValueError, match=r"`lambda_` must be a finite number > 0\.0, got 0"):
    BlackboxNDCGLoss(lambda_=0)
  with pytest.raises(ValueError, match=r"`margin` must be a finite number >= 0\.0, got -1"):
    BlackboxNDCGLoss(margin=-1)
  with pytest.raises(ValueError, match="must be finite"):
    BlackboxNDCGLoss()(np.array([0]), np.array([[np.nan, 1.0]], np.float32))


def test_registry_and_save(tmp_path):
  loss = losses.get("blackbox_ndcg_loss", lambda_=3.0)
  assert isinstance(loss, BlackboxNDCGLoss)
  assert BlackboxNDCGLoss.from_config(loss.get_config()).lambda_ == 3.0
  model = keras.Sequential([keras.Input([4]), keras.layers.Dense(3)])
  model.compile("sgd", loss=loss)
  model.save(tmp_path / "m.keras")
  assert keras.models.load_model(tmp_path / "m.keras").loss.lambda_ == 3.0
