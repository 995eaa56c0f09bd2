"""The heads of the third edition, with the score scale of the MLP head made one parameter.

:class:`ScaleControl` standardises each list of scores and multiplies it by a learned
temperature, ``s' = exp(t) (s - mean(s)) / (std(s) + 1e-6)`` with ``t`` a scalar initialised at
0 (the protocol's head-scale experiment): the scale of the scores is then ``exp(t)`` alone,
not a by-product of the MLP's weights. :func:`head_model` builds a head of
``experiments.third.protocol.HEADS`` on frozen features. The layer lives here, not in
``tfrank4class.heads``: it is the experiment's control, not a head the package offers; like the
rest of ``experiments/`` it runs on TensorFlow (Keras 3's TensorFlow backend or tf-keras).

Example:
  >>> layer = ScaleControl()
  >>> out = np.asarray(layer(np.array([[1.0, 2.0, 3.0]], "float32")))
  >>> out.round(4)  # (s - 2) / std([1, 2, 3]) = (s - 2) / 0.8165
  array([[-1.2247,  0.    ,  1.2247]], dtype=float32)
"""

import numpy as np
import tensorflow as tf

from experiments.third import protocol
from tfrank4class import checks, heads
from tfrank4class.compat import keras

EPSILON = 1e-6


class ScaleControl(keras.layers.Layer):
  """Scores ``[B, C]`` standardised per row, times ``exp(t)`` (``t`` learned, initially 0)."""

  def build(self, input_shape):
    self.log_temperature = self.add_weight(
      name="log_temperature", shape=(), initializer="zeros", trainable=True
    )

  def call(self, scores):
    mean = tf.reduce_mean(scores, axis=-1, keepdims=True)
    std = tf.math.reduce_std(scores, axis=-1, keepdims=True)
    return tf.exp(self.log_temperature) * (scores - mean) / (std + EPSILON)


def head_model(feature_dim, num_classes, head):
  """A model from embeddings ``[B, feature_dim]`` to scores ``[B, num_classes]``: the
  ``Rank4ClassHead`` of ``protocol.HEADS[head]``, followed by :class:`ScaleControl` for
  the scaled head."""
  feature_dim = checks.check_int("feature_dim", feature_dim, minimum=1)
  checks.check_choice("head", head, tuple(protocol.HEADS))
  interaction, hidden, scaled = protocol.HEADS[head]
  inputs = keras.Input(shape=(feature_dim,), dtype="float32", name="embeddings")
  scores = heads.Rank4ClassHead(
    num_classes, interaction=interaction, hidden_units=tuple(hidden), name="rank4class_head"
  )(inputs)
  if scaled:
    scores = ScaleControl(name="scale_control")(scores)
  return keras.Model(inputs, scores, name=f"head_{head}")


def score_scale(scores):
  """The mean over rows of the standard deviation of each row of ``scores`` ``[N, C]``."""
  return float(np.mean(np.std(np.asarray(scores, np.float64), axis=-1)))
