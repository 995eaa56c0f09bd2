"""Shared checks for the learned sorter tests (imported by test_*_sorter.py; not a test module)."""
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
        tf.function(sorter, jit_compile=True)(scores).numpy(), eager, rtol=1e-3, atol=1e-3)
  with mirrored_strategy.scope():
    out = mirrored_strategy.run(tf.function(lambda s: sorter(s)), (scores,))
  for value in mirrored_strategy.experimental_local_results(out):
    np.testing.assert_allclose(value.numpy(), eager, rtol=1e-4, atol=1e-4)


def check_save_load(sorter, n, tmp_path, savedmodel=True):
  inputs = tf.keras.Input([n])
  model = tf.keras.Model(inputs, sorter(inputs))
  scores, _ = synthetic.synthetic_batch(4, n, seed=[11, n])
  before = model(scores).numpy()
  path = str(tmp_path / "sorter.keras")
  model.save(path)
  loaded = tf.keras.models.load_model(path)
  np.testing.assert_allclose(loaded(scores).numpy(), before, rtol=1e-5, atol=1e-5)
  if not savedmodel:
    return
  saved = str(tmp_path / "savedmodel")
  tf.saved_model.save(model, saved)
  restored = tf.saved_model.load(saved)
  np.testing.assert_allclose(restored(scores).numpy(), before, rtol=1e-5, atol=1e-5)
