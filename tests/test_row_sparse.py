"""The row-sparse training step of ``SampledClassifier`` on JAX (``heads/row_sparse.py``): the same
weights as Keras's dense step for plain SGD and Adagrad (the dot head's table; the Rank4Class
heads' class-encoder table under their MLP), and the dense step for other optimizers and heads."""

import numpy as np
import pytest

from tfrank4class import compat
from tfrank4class.compat import keras
from tfrank4class.heads import (
  SampledClassifier,
  SampledDotProduct,
  SampledRank4ClassHead,
  row_sparse,
)

ON_JAX = keras.backend.backend() == "jax"
pytestmark = pytest.mark.skipif(not compat.KERAS_3, reason="SampledClassifier is Keras 3's")


def _model(optimizer, use_bias=False, head=None):
  """The model of ``head()`` (default: a dot head), initialised from seed 0."""
  keras.utils.set_random_seed(0)
  if head is None:
    head = SampledDotProduct(30, 6, "log_uniform", use_bias=use_bias, seed=3)
  else:
    head = head()
  model = SampledClassifier(keras.layers.Dense(4), head)
  model.compile(optimizer=optimizer, loss="softmax_loss")
  model(np.zeros((1, 3), "float32"))  # built: every weight exists
  return model


def _rank4class(interaction, **kwargs):
  return lambda: SampledRank4ClassHead(
    30,
    interaction,
    hidden_units=(5,),
    num_negatives=6,
    distribution="log_uniform",
    seed=3,
    **kwargs,
  )


#: The heads and negatives of the exactness test: the dot table with a bias; the Rank4Class
#: heads' class-encoder table under the MLP (per-example and hard negatives; mixed, whose
#: in-batch part has the batch's repeated class).
HEADS = {
  "dot_bias": lambda: SampledDotProduct(30, 6, "log_uniform", use_bias=True, seed=3),
  "latent_cross_per_example_hard": _rank4class(
    "latent_cross", per_example_negatives=True, num_hard_negatives=4
  ),
  "concat_mixed": _rank4class("concat", negatives="mixed"),
}


def _table(model):
  head = model.head
  return head.class_embeddings if isinstance(head, SampledDotProduct) else head.class_encoder.table


OPTIMIZERS = {
  "sgd": lambda: keras.optimizers.SGD(0.5),
  "adagrad": lambda: keras.optimizers.Adagrad(0.5),
}


@pytest.mark.skipif(not ON_JAX, reason="the row-sparse step is the JAX backend's")
@pytest.mark.parametrize(
  "head, optimizer",
  [
    ("dot_bias", "sgd"),
    ("dot_bias", "adagrad"),
    ("latent_cross_per_example_hard", "sgd"),
    ("concat_mixed", "adagrad"),
  ],
)
def test_a_row_sparse_step_equals_the_dense_step(head, optimizer, monkeypatch):
  # C = 30 classes, S = 6 log-uniform draws (mostly of the low ids): repeated negatives,
  # accidental hits and classes no candidate touches; a batch with a repeated class.
  rng = np.random.default_rng(0)
  x = rng.normal(size=(6, 3)).astype("float32")
  y = np.array([0, 1, 1, 6, 2, 9])
  sparse = _model(OPTIMIZERS[optimizer](), head=HEADS[head])
  assert row_sparse.applies(sparse)
  start = [np.array(w) for w in sparse.weights]
  sparse_history = sparse.fit(x, y, batch_size=3, epochs=1, shuffle=False, verbose=0).history[
    "loss"
  ]
  dense = _model(OPTIMIZERS[optimizer](), head=HEADS[head])
  monkeypatch.setattr(row_sparse, "applies", lambda model: False)  # Keras's own step
  dense_history = dense.fit(x, y, batch_size=3, epochs=1, shuffle=False, verbose=0).history["loss"]
  np.testing.assert_allclose(sparse_history, dense_history, rtol=1e-6)
  trainable = {id(v) for v in sparse.trainable_weights}
  for before, s, d in zip(start, sparse.weights, dense.weights):
    np.testing.assert_allclose(np.array(s), np.array(d), rtol=1e-5, atol=1e-6, err_msg=s.path)
    # Every weight was trained, but the MLP's output bias: a shift of every score leaves the
    # softmax as it is, so its gradient is 0 (and the seed generator's state is not a weight).
    if id(s) in trainable and not s.path.endswith("output/bias"):
      assert not np.array_equal(np.array(s), before), s.path
  table = np.array(_table(sparse))
  table_start = next(w for w, v in zip(start, sparse.weights) if v is _table(sparse))
  untouched = np.all(table == table_start, axis=1)
  assert untouched.any() and not untouched.all()  # rows no candidate of the 2 steps drew
  np.testing.assert_array_equal(table[untouched], np.array(_table(dense))[untouched])


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


def test_a_class_encoder_over_class_features_takes_the_dense_step():
  features = np.random.default_rng(1).normal(size=(30, 4)).astype("float32")
  with_features = _rank4class("concat", class_features=features)
  assert not row_sparse.applies(_model(keras.optimizers.SGD(0.1), head=with_features))
  assert row_sparse.applies(_model(keras.optimizers.SGD(0.1), head=_rank4class("concat"))) == ON_JAX
