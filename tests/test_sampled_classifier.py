"""Tests of tfrank4class.heads.sampled_classifier: compile/fit/evaluate/predict/save/load of the
sampled classifier on every Keras 3 backend, the loss seeing [B, 1 + S] lists in training, fresh
negatives each step, the blocked top-k against a numpy full top-k with ties (and its SavedModel
on TensorFlow), and its argument checks."""

import os

import numpy as np
import pytest

from tests.backend_testing import numpy
from tfrank4class import compat
from tfrank4class.compat import keras, ops
from tfrank4class.heads import SampledClassifier, SampledDotProduct

pytestmark = pytest.mark.skipif(
  not compat.KERAS_3, reason="tf-keras's compute_loss is not told whether it is training"
)


class ShapeSpy(keras.losses.Loss):
  """Records the score shapes it is given (at trace time); the loss is the mean score."""

  def __init__(self, shapes, **kwargs):
    super().__init__(**kwargs)
    self.shapes = shapes

  def call(self, y_true, y_pred):
    self.shapes.append(tuple(y_pred.shape))
    return ops.mean(y_pred, axis=-1)


def _data(num_classes=40, n=160):
  rng = np.random.default_rng(0)
  y = rng.integers(0, num_classes, size=n)
  x = np.eye(num_classes, dtype="float32")[y] + 0.1 * rng.normal(size=(n, num_classes))
  return x.astype("float32"), y


def test_training_sees_sampled_lists_and_evaluation_every_class():
  x, y = _data()
  shapes = []
  head = SampledDotProduct(40, 7, "log_uniform", use_bias=True, seed=1)
  model = SampledClassifier(keras.layers.Dense(8), head)
  model.compile(optimizer="sgd", loss=ShapeSpy(shapes))
  model.evaluate(x, y, batch_size=32, verbose=0)  # builds the model (JAX, PyTorch: symbolically)
  assert shapes and {s[-1] for s in shapes} == {40}, shapes
  shapes.clear()
  model.fit(x, y, batch_size=32, epochs=1, verbose=0)
  assert shapes and set(shapes) <= {(32, 8), (None, 8)}, shapes  # [B, 1 + S], never [B, C]


def test_fit_learns_evaluate_and_a_keras_file_round_trip(tmp_path):
  x, y = _data()
  state = numpy(SampledDotProduct(40, 10, seed=2).seed_generator.state)
  model = SampledClassifier(keras.layers.Dense(16), SampledDotProduct(40, 10, seed=2))
  model.compile(
    optimizer=keras.optimizers.Adam(0.1),
    loss="softmax_loss",
    metrics=[keras.metrics.SparseTopKCategoricalAccuracy(1, name="top1")],
  )
  model.fit(x, y, batch_size=40, epochs=8, verbose=0)
  # Each step drew fresh negatives: the layer's seed generator moved on (JAX's stateless step
  # included).
  assert not np.array_equal(numpy(model.head.seed_generator.state), state)
  result = model.evaluate(x, y, verbose=0, return_dict=True)
  assert result["top1"] > 0.9 and np.isfinite(result["loss"]), result
  scores = model.predict(x, verbose=0)
  assert scores.shape == (160, 40)
  path = os.path.join(tmp_path, "sampled.keras")
  model.save(path)
  loaded = keras.saving.load_model(path)
  assert isinstance(loaded, SampledClassifier) and loaded.head.num_negatives == 10
  np.testing.assert_allclose(loaded.predict(x, verbose=0), scores, rtol=1e-5, atol=1e-5)


def test_sampled_lists_with_bias_against_numpy():
  head = SampledDotProduct(6, 5, [1.0, 2.0, 3.0, 0.0, 1.0, 1.0], use_bias=True, seed=3)
  h = np.random.default_rng(5).normal(size=(4, 3)).astype("float32")
  head.build(h.shape)
  rng = np.random.default_rng(6)
  table, bias = rng.normal(size=(6, 3)), rng.normal(size=6)
  head.set_weights([table.astype("float32"), bias.astype("float32")])
  np.testing.assert_allclose(numpy(head(h)), h @ table.T + bias, rtol=1e-5, atol=1e-5)
  labels = np.array([0, 2, 4, 5])
  scores, relevance = (numpy(t) for t in head.sampled_lists(h, labels))
  all_scores = h @ table.T + bias
  np.testing.assert_allclose(scores[:, 0], all_scores[np.arange(4), labels], rtol=1e-5)
  # The negatives' ids are recovered from their corrected scores' columns: each column is one
  # class j for every row, offset by log(S q_j); class 3 has q = 0 and is never drawn.
  q = np.array([1.0, 2.0, 3.0, 0.0, 1.0, 1.0]) / 8
  for column in range(1, 6):
    matches = [
      j
      for j in range(6)
      if q[j] > 0 and np.allclose(scores[:, column], all_scores[:, j] - np.log(5 * q[j]), atol=1e-4)
    ]
    assert len(matches) == 1, (column, matches)
    expected = np.where(labels == matches[0], -1.0, 0.0)
    np.testing.assert_array_equal(relevance[:, column], expected)


@pytest.mark.parametrize("use_bias", [False, True])
def test_top_k_in_blocks_equals_a_full_top_k_ties_included(use_bias):
  # Integer weights in {-1, 0, 1}: exact scores with many ties inside each row's top 6.
  rng = np.random.default_rng(7)
  h = rng.integers(-1, 2, size=(5, 3)).astype("float32")
  table = rng.integers(-1, 2, size=(23, 3)).astype("float32")
  bias = rng.integers(-1, 2, size=23).astype("float32")
  head = SampledDotProduct(23, 4, use_bias=use_bias)
  head.build(h.shape)
  head.set_weights([table, bias] if use_bias else [table])
  full = h.astype(np.float64) @ table.T + (bias if use_bias else 0.0)
  want = np.argsort(-full, axis=1, kind="stable")[:, :6]  # ties by the lower class id
  want_scores = np.take_along_axis(full, want, 1)
  assert any(len(set(row)) < 6 for row in want_scores)
  scores, ids = (numpy(t) for t in head.top_k(h, k=6, block_size=4))  # 4 does not divide 23
  np.testing.assert_array_equal(ids, want)
  np.testing.assert_array_equal(scores, want_scores)
  # The full top-k of the head's [B, C] scores: the same scores (its order of ties may differ).
  full_scores, _ = ops.top_k(head(h), 6)
  np.testing.assert_array_equal(numpy(full_scores), scores)


@pytest.mark.tensorflow_only
def test_top_k_saved_model_of_the_dot_head(tmp_path):
  import tensorflow as tf  # noqa: PLC0415

  from tfrank4class.retrieval import export_top_k_model  # noqa: PLC0415

  rng = np.random.default_rng(8)
  encoder = keras.Sequential([keras.Input((6,)), keras.layers.Dense(4)])
  head = SampledDotProduct(30, 5, use_bias=True, seed=0)
  x = rng.normal(size=(3, 6)).astype("float32")
  head.build((None, 4))
  head.bias.assign(rng.normal(size=30).astype("float32"))
  full = numpy(head(encoder(x)))
  export_top_k_model(encoder, head, tmp_path / "export", k=5, block_size=8)
  serve = tf.saved_model.load(str(tmp_path / "export")).signatures["serving_default"]
  out = serve(inputs=tf.constant(x))
  want = np.argsort(-full, axis=1, kind="stable")[:, :5]
  np.testing.assert_array_equal(out["top_k_ids"].numpy(), want)
  np.testing.assert_allclose(
    out["top_k_scores"].numpy(), np.take_along_axis(full, want, 1), rtol=1e-5, atol=1e-5
  )


def test_arguments_are_checked():
  with pytest.raises(ValueError, match="`num_negatives` must be an integer >= 1, got 0"):
    SampledDotProduct(10, 0)
  with pytest.raises(ValueError, match="`num_classes` must be an integer >= 2, got 1"):
    SampledDotProduct(1, 3)
  with pytest.raises(ValueError, match="`distribution` must be one of"):
    SampledDotProduct(10, 3, "zipf")
  with pytest.raises(ValueError, match=r"must have shape \(10,\), got \(3,\)"):
    SampledDotProduct(10, 3, [1.0, 2.0, 3.0])
  with pytest.raises(ValueError, match="`head` must be a SampledDotProduct, got Dense"):
    SampledClassifier(keras.layers.Dense(4), keras.layers.Dense(4))


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("interaction", ["dot", "latent_cross"])
def test_a_mirrored_step_equals_the_one_device_step(interaction, mirrored_strategy):
  """Each replica reads the class table without ``sparse_read`` (a mirrored variable has none)
  and draws the same negatives from the mirrored seed state, so one SGD step on two replicas
  gives the one-device step's loss and weights; the training flavour's ``fit`` finds the
  wrapped encoder's inputs."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  from tfrank4class.heads import SampledRank4ClassHead  # pylint: disable=g-import-not-at-top
  from tfrank4class.train import flavour  # pylint: disable=g-import-not-at-top

  x, y = _data(n=32)

  def step(strategy):
    with strategy.scope():
      if interaction == "dot":
        head = SampledDotProduct(40, 6, seed=3)
      else:
        head = SampledRank4ClassHead(40, interaction, hidden_units=(8,), num_negatives=6, seed=3)
      model = SampledClassifier(
        keras.layers.Dense(8, kernel_initializer=keras.initializers.GlorotUniform(4)), head
      )
      model.compile(optimizer=keras.optimizers.SGD(0.5), loss="softmax_loss")
    model.predict(x[:2], verbose=0)  # builds every weight
    for i, w in enumerate(model.trainable_weights):
      w.assign(np.random.default_rng(i).normal(size=w.shape).astype(w.dtype))
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(32)
    history = flavour.TRAINING.fit(model, strategy, data, epochs=1, verbose=0)
    return history.history["loss"][0], [numpy(w) for w in model.trainable_weights]

  loss, weights = step(tf.distribute.get_strategy())
  mirrored_loss, mirrored_weights = step(mirrored_strategy)
  np.testing.assert_allclose(mirrored_loss, loss, rtol=1e-5)
  for a, b in zip(mirrored_weights, weights):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
