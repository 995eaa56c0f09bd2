"""experiments/third/scaled_head.py: the standardised scores times exp(t) against numpy, the learned
temperature's gradient against finite differences, the heads' shapes."""

import numpy as np
import pytest
import tensorflow as tf

from experiments.third import scaled_head


def test_scale_control_against_numpy():
  x = np.random.default_rng(0).normal(size=(4, 7)).astype("float32")
  layer = scaled_head.ScaleControl()
  layer(x)  # builds the weight (a direct build() call does not mark tf-keras layers built)
  layer.log_temperature.assign(0.7)
  expected = np.exp(0.7) * (x - x.mean(1, keepdims=True)) / (x.std(1, keepdims=True) + 1e-6)
  np.testing.assert_allclose(np.asarray(layer(x)), expected, rtol=1e-5, atol=1e-5)
  assert scaled_head.score_scale(np.asarray(layer(x))) == pytest.approx(np.exp(0.7), rel=1e-4)


def test_temperature_gradient_against_finite_differences():
  x = np.random.default_rng(1).normal(size=(3, 5)).astype("float32")
  weights = np.random.default_rng(2).normal(size=(3, 5)).astype("float32")
  layer = scaled_head.ScaleControl()
  layer(x)  # builds the weight (a direct build() call does not mark tf-keras layers built)

  def objective(t):
    layer.log_temperature.assign(t)
    return float(tf.reduce_sum(layer(x) * weights))

  with tf.GradientTape() as tape:
    value = tf.reduce_sum(layer(x) * weights)
  grad = float(tape.gradient(value, layer.log_temperature))
  eps = 1e-2
  assert grad == pytest.approx((objective(eps) - objective(-eps)) / (2 * eps), rel=1e-3)


@pytest.mark.parametrize("head, weights", [("dot", 1), ("concat", None), ("concat_scaled", None)])
def test_heads_shapes(head, weights):
  model = scaled_head.head_model(8, 6, head)
  assert model(np.zeros((2, 8), "float32")).shape == (2, 6)
  names = [w.name for w in model.weights]
  assert any("log_temperature" in n for n in names) == (head == "concat_scaled")
  with pytest.raises(ValueError, match="head"):
    scaled_head.head_model(8, 6, "wide")
