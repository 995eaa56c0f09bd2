"""TF-Ranking 0.5.5 as a test oracle: its modules (:func:`module`), its Keras losses (:func:`loss`).

The package itself does not need tensorflow-ranking (its losses are ported to ``keras.ops``);
the tests of the TensorFlow leg compare with it. tensorflow-ranking 0.5.5 pins
``tensorflow<2.16``, so it is installed with ``pip install --no-deps`` (the Makefile does), and
its package ``__init__`` imports the removed ``tf.estimator``: :func:`module` loads the module
asked for without that ``__init__``.

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
import importlib
import importlib.util
import os
import sys
import types

import tensorflow as tf

from tfrank4class import compat

#: The command that installs tensorflow-ranking beside TensorFlow 2.16+.
INSTALL = 'python -m pip install --no-deps "tensorflow-ranking==0.5.5"'
_MODULES = {}


def module(name):
  """A module of tensorflow-ranking 0.5.5, e.g. ``"losses_impl"`` or ``"keras.losses"``.

  The parent packages are stood in for by empty namespace modules just long enough to import
  ``name`` and its own imports, then removed again: a later ``import tensorflow_ranking``
  behaves as it would without this loader.

  Raises:
    ImportError: tensorflow-ranking is not installed; the message gives the command.
  """
  full = f"tensorflow_ranking.python.{name}"
  if full in _MODULES:
    return _MODULES[full]
  spec = importlib.util.find_spec("tensorflow_ranking")
  if spec is None:
    raise ImportError(f"The TF-Ranking oracle needs tensorflow-ranking. Run: {INSTALL}")
  root = os.path.dirname(spec.origin)
  stand_ins = []
  for package in (
    "tensorflow_ranking",
    "tensorflow_ranking.python",
    "tensorflow_ranking.python.keras",
  ):
    if package not in sys.modules:
      stand_in = types.ModuleType(package)
      stand_in.__path__ = [os.path.join(root, *package.split(".")[1:])]
      sys.modules[package] = stand_in
      stand_ins.append(package)
  try:
    loaded = importlib.import_module(full)
  finally:
    for package in stand_ins:
      del sys.modules[package]
  _MODULES[full] = loaded
  return loaded


tfr_losses = module("keras.losses")


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
