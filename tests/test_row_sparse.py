"""The row-sparse training step of ``SampledClassifier`` on JAX (``heads/row_sparse.py``): the same
weights as Keras's dense step for plain SGD and Adagrad, and the dense step for other optimizers."""

import numpy as np
import pytest

from tfrank4class import compat
from tfrank4class.compat import keras
from tfrank4class.heads import SampledClassifier, SampledDotProduct, row_sparse

ON_JAX = keras.backend.backend() == "jax"
pytestmark = pytest.mark.skipif(not compat.KERAS_3, reason="SampledClassifier is Keras 3's")


def _model(optimizer, use_bias):
  keras.utils.set_random_seed(0)
  model = SampledClassifier(
    keras.layers.Dense(4),
    SampledDotProduct(30, 6, "log_uniform", use_bias=use_bias, seed=3),
  )
  model.compile(optimizer=optimizer, loss="softmax_loss")
  model(np.zeros((1, 3), "float32"))  # built: every weight exists
  return model


@pytest.mark.skipif(not ON_JAX, reason="the row-sparse step is the JAX backend's")
@pytest.mark.parametrize(
  "optimizer", [lambda: keras.optimizers.SGD(0.5), lambda: keras.optimizers.Adagrad(0.5)]
)
def test_a_row_sparse_step_equals_the_dense_step(optimizer, monkeypatch):
  # C = 30 classes, S = 6 log-uniform draws (mostly of the low ids): repeated negatives,
  # accidental hits and classes no candidate touches; a batch with a repeated class; a bias.
  use_bias = True
  rng = np.random.default_rng(0)
  x = rng.normal(size=(6, 3)).astype("float32")
  y = np.array([0, 1, 1, 6, 2, 9])
  sparse = _model(optimizer(), use_bias)
  assert row_sparse.applies(sparse)
  start = [np.array(w) for w in sparse.weights]
  assert len(start) == 3 + use_bias  # the encoder's kernel and bias, the table (and the bias)
  sparse_history = sparse.fit(x, y, batch_size=3, epochs=1, shuffle=False, verbose=0).history[
    "loss"
  ]
  dense = _model(optimizer(), use_bias)
  monkeypatch.setattr(row_sparse, "applies", lambda model: False)  # Keras's own step
  dense_history = dense.fit(x, y, batch_size=3, epochs=1, shuffle=False, verbose=0).history["loss"]
  np.testing.assert_allclose(sparse_history, dense_history, rtol=1e-6)
  for before, s, d in zip(start, sparse.weights, dense.weights):
    np.testing.assert_allclose(np.array(s), np.array(d), rtol=1e-6, atol=1e-7, err_msg=s.path)
    assert not np.array_equal(np.array(s), before), s.path  # every weight was trained
  table = np.array(sparse.head.class_embeddings)
  table_start = next(w for w, v in zip(start, sparse.weights) if v is sparse.head.class_embeddings)
  untouched = np.all(table == table_start, axis=1)
  assert untouched.any() and not untouched.all()  # rows no candidate of the 2 steps drew
  np.testing.assert_array_equal(table[untouched], np.array(dense.head.class_embeddings)[untouched])


@pytest.mark.parametrize(
  "optimizer",
  [
    lambda: keras.optimizers.SGD(0.1, momentum=0.9),
    lambda: keras.optimizers.SGD(0.1, clipnorm=1.0),
    lambda: keras.optimizers.Adam(),
    lambda: keras.optimizers.Adagrad(weight_decay=0.1),
  ],
)
def test_other_optimizers_and_backends_take_the_dense_step(optimizer):
  assert not row_sparse.applies(_model(optimizer(), use_bias=False))
  assert row_sparse.applies(_model(keras.optimizers.SGD(0.1), use_bias=False)) == ON_JAX


def test_a_frozen_table_takes_the_dense_step():
  model = _model(keras.optimizers.SGD(0.1), use_bias=False)
  model.head.trainable = False
  assert not row_sparse.applies(model)
