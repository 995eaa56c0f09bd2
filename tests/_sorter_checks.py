"""Shared checks for the learned sorter tests (imported by test_*_sorter.py and test_sodeep_*.py;
not a test module). Backend-neutral: numpy inputs, ``keras.ops`` and ``backend_testing``; the
TensorFlow-only checks (strategies, SavedModel serving) import TensorFlow inside themselves and
are called from tests marked ``tensorflow_only``."""

import contextlib
import os
import pathlib
import subprocess
import sys

import backend_testing
import numpy as np
from scipy.stats import rankdata

from tfrank4class.compat import keras, ops
from tfrank4class.ranking import synthetic


def exact_ranks(scores):
  """Ranks 1 = highest, ties by position (scipy's ``ordinal`` on ``-scores``), per row."""
  return np.stack([rankdata(-row, method="ordinal") for row in scores]).astype(np.float32)


def normalised_l1(sorter, n, lists=256, seed=424242):
  """Mean |predicted - exact| normalised ranks on fresh lists, exact ranks from scipy."""
  scores, _ = synthetic.synthetic_batch(lists, n, seed=[seed, n])
  predicted = backend_testing.numpy(sorter(scores))
  exact = exact_ranks(scores)
  assert predicted.shape == exact.shape
  return np.abs(predicted - exact).mean() / (n - 1)


def check_gradient(sorter, n):
  scores, _ = synthetic.synthetic_batch(8, n, seed=[7, n])
  weights = np.random.default_rng(1).normal(size=(8, n)).astype(np.float32)
  _, (grad,) = backend_testing.value_and_grad(
    lambda s: ops.sum(ops.multiply(sorter(s), weights)), scores
  )
  assert np.isfinite(grad).all()
  assert np.abs(grad).max() > 0


def check_modes(sorter, n):
  """The sorter gives its eager ranks in every compile mode of the backend."""
  scores, _ = synthetic.synthetic_batch(4, n, seed=[9, n])
  eager = backend_testing.numpy(sorter(scores))
  for mode in backend_testing.compile_modes():
    got = backend_testing.numpy(backend_testing.compiled(sorter, mode)(scores))
    np.testing.assert_allclose(got, eager, rtol=1e-3, atol=1e-3, err_msg=mode)


def check_mirrored(sorter, n, mirrored_strategy):
  """TensorFlow only: the sorter gives its eager ranks on each replica of ``mirrored_strategy``."""
  import tensorflow as tf  # noqa: PLC0415  (tf.distribute: TensorFlow only)

  scores, _ = synthetic.synthetic_batch(4, n, seed=[9, n])
  eager = backend_testing.numpy(sorter(scores))
  with mirrored_strategy.scope():
    out = mirrored_strategy.run(tf.function(lambda s: sorter(s)), (tf.constant(scores),))
  for value in mirrored_strategy.experimental_local_results(out):
    np.testing.assert_allclose(value.numpy(), eager, rtol=1e-4, atol=1e-4)


def sorter_model(sorter, n, tmp_path):
  """A model ``Dense -> sorter`` trained one epoch (``fit``), saved to ``.keras`` and reloaded
  without ``custom_objects``: returns ``(model, reloaded, scores)`` after checking that both give
  the same outputs."""
  inputs = keras.Input([n])
  model = keras.Model(inputs, sorter(keras.layers.Dense(n)(inputs)))
  scores, _ = synthetic.synthetic_batch(16, n, seed=[11, n])
  model.compile(keras.optimizers.Adam(1e-3), loss="mae")
  history = model.fit(scores, exact_ranks(scores), batch_size=8, epochs=1, verbose=0)
  assert np.isfinite(history.history["loss"]).all()
  before = backend_testing.numpy(model(scores))
  path = str(tmp_path / "sorter.keras")
  model.save(path)
  loaded = keras.models.load_model(path)
  np.testing.assert_allclose(backend_testing.numpy(loaded(scores)), before, rtol=1e-5, atol=1e-5)
  return model, loaded, scores


def check_save_load(sorter, n, tmp_path):
  """``Dense -> sorter`` trains and reloads from ``.keras`` with the same outputs."""
  sorter_model(sorter, n, tmp_path)


def check_savedmodel_export(sorter, n, tmp_path):
  """TensorFlow only: ``model.export`` of a ``Dense -> sorter`` model serves the same outputs in
  a fresh process that never imports tfrank4class."""
  model, _, scores = sorter_model(sorter, n, tmp_path)
  exported = str(tmp_path / "exported")
  model.export(exported)
  before = backend_testing.numpy(model(scores))
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
  scores = np.array([[0.3, -0.2], [-0.1, 0.05]], np.float32)
  _, (grad,) = backend_testing.value_and_grad(lambda s: ops.sum(sorter(s)[:, 0]), scores)
  assert (grad[:, 0] < -1e-4).all() and (grad[:, 1] > 1e-4).all(), grad


@contextlib.contextmanager
def mixed_float16():
  """Runs the body under the global ``mixed_float16`` policy and restores the previous one."""
  previous = keras.mixed_precision.global_policy()
  keras.mixed_precision.set_global_policy("mixed_float16")
  try:
    yield
  finally:
    keras.mixed_precision.set_global_policy(previous)


def check_mixed_float16(make_sorter, n):
  """Under ``mixed_float16``: the sorter takes float16 scores, returns float32 ranks equal to its
  float32 ranks of the same values, and a float16 model trains through it."""
  scores, _ = synthetic.synthetic_batch(8, n, seed=[13, n])
  half = scores.astype(np.float16)
  with mixed_float16():
    sorter = make_sorter()
    out = sorter(half)
    assert backend_testing.numpy(out).dtype == np.float32
    np.testing.assert_allclose(
      backend_testing.numpy(out),
      backend_testing.numpy(sorter(half.astype(np.float32))),
      rtol=1e-6,
    )
    inputs = keras.Input([n])
    dense = keras.layers.Dense(n)
    model = keras.Model(inputs, sorter(dense(inputs)))
    assert dense.compute_dtype == "float16"
    # Push item 0 to the top: minimise its predicted rank.
    model.compile(keras.optimizers.SGD(0.1), loss=lambda y, r: ops.mean(r[:, 0]))
    before = dense.get_weights()[0].copy()
    # 12 steps: the dynamic loss scale skips the first steps while it is too large.
    history = model.fit(scores, np.zeros([8, n], np.float32), batch_size=2, epochs=3, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    assert not np.allclose(before, dense.get_weights()[0])


def separable_blobs(num_classes, n=512, seed=0):
  """Features ``[n, 4]`` of ``num_classes`` well-separated Gaussian blobs and their class ids."""
  rng = np.random.default_rng(seed)
  centres = rng.normal(size=(num_classes, 4)) * 2.0
  y = rng.integers(0, num_classes, size=n)
  return (centres[y] + 0.5 * rng.normal(size=(n, 4))).astype(np.float32), y


def seeded_linear(num_inputs, num_outputs, seed=0):
  """``Dense(num_outputs)`` on ``num_inputs`` features whose kernel is drawn by numpy (the same
  start on every backend, whose own random draws differ), bias 0."""
  kernel = np.random.default_rng(seed).normal(scale=0.5, size=(num_inputs, num_outputs))
  dense = keras.layers.Dense(num_outputs, kernel_initializer=keras.initializers.Constant(kernel))
  return keras.Sequential([keras.Input([num_inputs]), dense])
