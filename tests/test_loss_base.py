"""The base class of the package's losses: raw labels reach ``call``; Keras reduces the values."""

import numpy as np
import pytest
import tensorflow as tf

from tfrank4class import compat, losses
from tfrank4class.compat import keras
from tfrank4class.losses.base import Loss


class _Probe(Loss):
  """Records what ``call`` received and returns ``y_pred[:, 0]`` as the per-list losses."""

  def call(self, y_true, y_pred):
    self.seen = (y_true, y_pred)
    return y_pred[:, 0]


def test_call_receives_the_labels_and_scores_as_given():
  probe = _Probe()
  ids = tf.constant([3, 1], tf.int64)
  scores = tf.constant([[1.0, 2.0], [3.0, 4.0]], tf.float64)
  probe(ids, scores)
  assert probe.seen[0] is ids and probe.seen[1] is scores  # no float cast, no copy
  strings = np.array(["a", "b"])
  probe(strings, scores)
  assert probe.seen[0] is strings


@pytest.mark.parametrize("reduction", ["auto", "sum_over_batch_size", "sum", "none"])
def test_reductions_and_sample_weights_are_keras_rules(reduction):
  scores = np.array([[1.0, 0.0], [3.0, 0.0], [5.0, 0.0]], np.float32)
  weights = np.array([[2.0], [0.0], [1.0]], np.float32)
  probe = _Probe(reduction=reduction)
  assert probe.reduction == compat.loss_reduction(reduction)
  # Hand-computed: per-list losses 1, 3, 5; weighted 2, 0, 5.
  want = {"sum": (9.0, 7.0), "none": ([1.0, 3.0, 5.0], [2.0, 0.0, 5.0])}.get(
    reduction, (3.0, 7.0 / 3)
  )
  np.testing.assert_allclose(probe([0, 0, 0], scores).numpy(), want[0])
  np.testing.assert_allclose(probe([0, 0, 0], scores, weights).numpy(), want[1], rtol=1e-6)


def test_integer_ids_in_fit_reach_the_loss_as_integers():
  seen = []

  class Recording(Loss):
    def call(self, y_true, y_pred):
      seen.append(y_true.dtype)
      return tf.reduce_logsumexp(y_pred, -1) - tf.gather(y_pred, y_true, batch_dims=1)

  x = np.random.default_rng(0).normal(size=(8, 3)).astype(np.float32)
  y = np.arange(8, dtype=np.int64) % 3
  model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(3)])
  model.compile(optimizer="sgd", loss=Recording())
  model.fit(x, y, batch_size=4, epochs=1, verbose=0)
  assert seen and all(dtype.is_integer for dtype in seen)


def test_jit_compiled_training_with_integer_ids():
  """No op that XLA cannot compile: integer ids skip the whole-number check of float ids."""
  x = np.random.default_rng(0).normal(size=(16, 4)).astype(np.float32)
  y = np.arange(16, dtype=np.int64) % 4
  model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(4)])
  model.compile(optimizer="sgd", loss=losses.get("softmax_loss"), jit_compile=True)
  history = model.fit(x, y, batch_size=8, epochs=1, verbose=0)
  assert np.isfinite(history.history["loss"][0])


def test_unnamed_loss_gets_a_name_scope():
  class Unnamed(Loss):
    def call(self, y_true, y_pred):
      return y_pred[:, 0]

  scores = np.array([[2.0, 0.0]], np.float32)
  assert float(Unnamed()([0], scores)) == 2.0
  assert float(tf.function(Unnamed())([0], scores)) == 2.0
  assert float(tf.function(Unnamed(name="first_score"))([0], scores)) == 2.0
