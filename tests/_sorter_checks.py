"""Shared checks for the learned sorter tests (imported by test_*_sorter.py and test_sodeep_*.py;
not a test module)."""

import contextlib
import os
import pathlib
import subprocess
import sys

import numpy as np
import tensorflow as tf
from scipy.stats import rankdata

from tfrank4class.ranking import synthetic


def normalised_l1(sorter, n, lists=256, seed=424242):
  """Mean |predicted - exact| normalised ranks on fresh lists, exact ranks from scipy."""
  scores, _ = synthetic.synthetic_batch(lists, n, seed=[seed, n])
  exact = np.stack([rankdata(-row, method="ordinal") for row in scores.numpy()])
  predicted = sorter(scores).numpy()
  assert predicted.shape == exact.shape
  return np.abs(predicted - exact).mean() / (n - 1)


def check_gradient(sorter, n):
  scores, _ = synthetic.synthetic_batch(8, n, seed=[7, n])
  weights = tf.random.stateless_normal([8, n], [1, 1])
  with tf.GradientTape() as tape:
    tape.watch(scores)
    loss = tf.reduce_sum(sorter(scores) * weights)
  grad = tape.gradient(loss, scores).numpy()
  assert np.isfinite(grad).all()
  assert np.abs(grad).max() > 0


def check_modes(sorter, n, mirrored_strategy, jit=True):
  scores, _ = synthetic.synthetic_batch(4, n, seed=[9, n])
  eager = sorter(scores).numpy()
  np.testing.assert_allclose(tf.function(sorter)(scores).numpy(), eager, rtol=1e-4, atol=1e-4)
  if jit:
    np.testing.assert_allclose(
      tf.function(sorter, jit_compile=True)(scores).numpy(), eager, rtol=1e-3, atol=1e-3
    )
  with mirrored_strategy.scope():
    out = mirrored_strategy.run(tf.function(lambda s: sorter(s)), (scores,))
  for value in mirrored_strategy.experimental_local_results(out):
    np.testing.assert_allclose(value.numpy(), eager, rtol=1e-4, atol=1e-4)


def check_save_load(sorter, n, tmp_path, savedmodel=True):
  """A model ``Dense -> sorter`` trains (``fit``), reloads from ``.keras`` without
  ``custom_objects`` with the same outputs, and (``savedmodel``) its ``model.export`` SavedModel
  serves the same outputs in a fresh process that never imports tfrank4class."""
  inputs = tf.keras.Input([n])
  model = tf.keras.Model(inputs, sorter(tf.keras.layers.Dense(n)(inputs)))
  scores, _ = synthetic.synthetic_batch(16, n, seed=[11, n])
  target = np.stack([rankdata(-row, method="ordinal") for row in scores.numpy()]).astype("float32")
  model.compile(tf.keras.optimizers.Adam(1e-3), loss="mae")
  history = model.fit(scores, target, batch_size=8, epochs=1, verbose=0)
  assert np.isfinite(history.history["loss"]).all()
  before = model(scores).numpy()
  path = str(tmp_path / "sorter.keras")
  model.save(path)
  loaded = tf.keras.models.load_model(path)
  np.testing.assert_allclose(loaded(scores).numpy(), before, rtol=1e-5, atol=1e-5)
  if not savedmodel:
    return
  exported = str(tmp_path / "exported")
  model.export(exported)
  np.testing.assert_allclose(serve_in_fresh_process(exported, scores), before, rtol=1e-5, atol=1e-5)


_SERVE = """
import sys
import numpy as np
import tensorflow as tf
served = tf.saved_model.load(sys.argv[1])
np.save(sys.argv[3], served.serve(tf.constant(np.load(sys.argv[2]))).numpy())
assert not any(name.split(".")[0] == "tfrank4class" for name in sys.modules), "imported"
"""


def serve_in_fresh_process(exported, inputs):
  """Outputs of the ``serve`` signature of the SavedModel at ``exported`` on ``inputs``, computed
  by a new Python process that has only TensorFlow (tfrank4class is not on its path)."""
  folder = pathlib.Path(exported).parent
  np.save(folder / "serve_in.npy", np.asarray(inputs))
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  subprocess.run(
    [sys.executable, "-c", _SERVE, exported, folder / "serve_in.npy", folder / "serve_out.npy"],
    check=True,
    cwd=folder,
    env=env,
    timeout=300,
  )
  return np.load(folder / "serve_out.npy")


def check_two_item_gradient(sorter):
  """A 2-item list passes rank gradient: raising s_0 lowers (improves) its rank, raising s_1 raises
  it. (The standardisation maps every 2-item list to (+-1, -+1); with its scale differentiated
  the gradient was exactly 0 and a 2-class problem could not be trained.)"""
  scores = tf.constant([[0.3, -0.2], [-0.1, 0.05]])
  with tf.GradientTape() as tape:
    tape.watch(scores)
    first = tf.reduce_sum(sorter(scores)[:, 0])
  grad = tape.gradient(first, scores).numpy()
  assert (grad[:, 0] < -1e-4).all() and (grad[:, 1] > 1e-4).all(), grad


@contextlib.contextmanager
def mixed_float16():
  """Runs the body under the global ``mixed_float16`` policy and restores the previous one."""
  previous = tf.keras.mixed_precision.global_policy()
  tf.keras.mixed_precision.set_global_policy("mixed_float16")
  try:
    yield
  finally:
    tf.keras.mixed_precision.set_global_policy(previous)


def check_mixed_float16(make_sorter, n):
  """Under ``mixed_float16``: the sorter takes float16 scores, returns float32 ranks equal to its
  float32 ranks of the same values, and a float16 model trains through it."""
  scores, _ = synthetic.synthetic_batch(8, n, seed=[13, n])
  half = tf.cast(scores, tf.float16)
  with mixed_float16():
    sorter = make_sorter()
    out = sorter(half)
    assert out.dtype == tf.float32
    np.testing.assert_allclose(out.numpy(), sorter(tf.cast(half, tf.float32)).numpy(), rtol=1e-6)
    inputs = tf.keras.Input([n])
    dense = tf.keras.layers.Dense(n)
    model = tf.keras.Model(inputs, sorter(dense(inputs)))
    assert dense.compute_dtype == "float16"
    # Push item 0 to the top: minimise its predicted rank.
    model.compile(tf.keras.optimizers.SGD(0.1), loss=lambda y, r: tf.reduce_mean(r[:, 0]))
    before = dense.get_weights()[0].copy()
    # 12 steps: the dynamic loss scale skips the first steps while it is too large.
    history = model.fit(
      scores.numpy(), np.zeros([8, n], np.float32), batch_size=2, epochs=3, verbose=0
    )
    assert np.isfinite(history.history["loss"]).all()
    assert not np.allclose(before, dense.get_weights()[0])


def separable_blobs(num_classes, n=512, seed=0):
  """Features ``[n, 4]`` of ``num_classes`` well-separated Gaussian blobs and their class ids."""
  rng = np.random.default_rng(seed)
  centres = rng.normal(size=(num_classes, 4)) * 2.0
  y = rng.integers(0, num_classes, size=n)
  return (centres[y] + 0.5 * rng.normal(size=(n, 4))).astype(np.float32), y
