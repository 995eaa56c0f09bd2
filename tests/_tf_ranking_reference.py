"""TF-Ranking 0.5.5's own Keras losses as a reference, in the Keras bound in this process.

TF-Ranking's Keras losses (``python/keras/losses.py``) subclass ``tf.keras.losses.Loss``: tf-keras
runs them as written. Under Keras 3 two things in them are Keras-2-only, and
:func:`loss` works around exactly those, leaving TF-Ranking's maths and weight normalisation and
Keras's own reduction as they are:

* their constructors pass ``(reduction, name)`` positionally to a base class that takes
  ``(name, reduction)``: the two attributes are set after construction;
* the listwise losses (softmax, calibrated softmax) reduce with tf-keras's
  ``tf.keras.__internal__.losses.compute_weighted_loss(losses, w, reduction=...)`` and its
  ``Loss._get_reduction()``: during the call a stand-in with Keras 2's rule written out
  (``l * w``; summed; divided by the number of lists for ``sum_over_batch_size``) takes its place.
"""

import contextlib
import types

import tensorflow as tf

from tfrank4class import compat

tfr_losses = compat.tf_ranking_module("keras.losses")


def _weighted_loss(losses, sample_weight, reduction):
  weighted = tf.reshape(losses, [-1]) * tf.reshape(sample_weight, [-1])
  if reduction == "none":
    return tf.reshape(weighted, tf.shape(losses))
  total = tf.reduce_sum(weighted)
  return total if reduction == "sum" else total / tf.cast(tf.size(weighted), total.dtype)


@contextlib.contextmanager
def _keras2_reduction():
  internal = types.SimpleNamespace(
    losses=types.SimpleNamespace(compute_weighted_loss=_weighted_loss)
  )
  tf.keras.__internal__ = internal
  try:
    yield
  finally:
    del tf.keras.__internal__


def loss(key, reduction="auto", **kwargs):
  """``tfr.keras.losses.get(key, reduction=reduction, **kwargs)``, callable in this process."""
  theirs = tfr_losses.get(key, reduction=reduction, **kwargs)
  if not compat.KERAS_3:
    return theirs
  theirs.reduction, theirs.name = compat.loss_reduction(reduction), key
  theirs._get_reduction = lambda: theirs.reduction

  def call(y_true, y_pred, sample_weight=None):
    with _keras2_reduction():
      return theirs(y_true, y_pred, sample_weight)

  return call
