"""Tests of tfrank4class.heads.interactions against numpy written here."""

import numpy as np
import pytest
from backend_testing import (
  compile_modes,
  compiled,
  finite_difference_grad,
  numpy,
  value_and_grad,
)

from tfrank4class.compat import ops
from tfrank4class.heads import interactions
from tfrank4class.heads.interactions import (
  ConcatInteraction,
  DotProductInteraction,
  LatentCrossInteraction,
)


def _relu(x):
  return np.maximum(x, 0.0)


def _mlp(x, dense_weights, hidden_count):
  """numpy MLP: ``hidden_count`` ReLU layers then linear ones, weights [(W, b), ...]."""
  for i, (w, b) in enumerate(dense_weights):
    x = x @ w + b
    if i < hidden_count:
      x = _relu(x)
  return x


def _latent_cross_reference(layer, h, c):
  weights = [(numpy(dense.kernel), numpy(dense.bias)) for dense in layer._dense_layers]
  crossed = h[:, None, :] * (1.0 + c[None, :, :])  # [B, C, d]
  return _mlp(crossed, weights, len(layer.hidden_units))[..., 0]


def _concat_reference(layer, h, c):
  b, n = h.shape[0], c.shape[0]
  pairs = np.concatenate(
    [np.repeat(h[:, None, :], n, axis=1), np.repeat(c[None, :, :], b, axis=0)], axis=-1
  )  # explicit [B, C, d+e]
  weights = [(numpy(layer.first_kernel), numpy(layer.first_bias))]
  weights += [(numpy(dense.kernel), numpy(dense.bias)) for dense in layer._dense_layers]
  return _mlp(pairs, weights, len(layer.hidden_units))[..., 0]


def _data(b=3, d=4, n=5, e=None, seed=0):
  rng = np.random.default_rng(seed)
  return (
    rng.normal(size=(b, d)).astype(np.float32),
    rng.normal(size=(n, e or d)).astype(np.float32),
  )


def test_dot_product_hand_computed():
  h = np.array([[1.0, 2.0], [0.0, -1.0]], np.float32)
  c = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, -1.0], [2.0, 2.0, 0.0]], np.float32)
  # s = [h, 1] . c_i: row 0: [1 + 0.5, 2 - 1, 2 + 4] ; row 1: [0 + 0.5, -1 - 1, -2]
  expected = np.array([[1.5, 1.0, 6.0], [0.5, -2.0, -2.0]], np.float32)
  np.testing.assert_allclose(numpy(DotProductInteraction()([h, c])), expected, rtol=1e-6)
  no_bias = numpy(DotProductInteraction(use_bias=False)([h, c[:, :2]]))
  np.testing.assert_allclose(no_bias, [[1.0, 2.0, 6.0], [0.0, -1.0, -2.0]], rtol=1e-6)


@pytest.mark.parametrize("hidden_units", [(6, 6), (7,), ()])
@pytest.mark.parametrize("chunk", [None, 2])
def test_latent_cross_matches_numpy(hidden_units, chunk):
  h, c = _data()
  layer = LatentCrossInteraction(hidden_units=hidden_units, class_chunk_size=chunk)
  out = numpy(layer([h, c]))
  assert out.shape == (3, 5)
  np.testing.assert_allclose(out, _latent_cross_reference(layer, h, c), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("hidden_units", [(6, 6), (7,), ()])
@pytest.mark.parametrize("chunk", [None, 2])
def test_concat_matches_explicit_concatenation(hidden_units, chunk):
  h, c = _data(e=3)  # d = 4, e = 3: sizes may differ
  layer = ConcatInteraction(hidden_units=hidden_units, class_chunk_size=chunk)
  out = numpy(layer([h, c]))
  assert out.shape == (3, 5)
  np.testing.assert_allclose(out, _concat_reference(layer, h, c), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cls", [LatentCrossInteraction, ConcatInteraction])
def test_chunked_gradients_equal_unchunked(cls):
  h, c = _data(n=7)
  full = cls(hidden_units=(5, 5))
  full([h, c])
  chunked = cls(hidden_units=(5, 5), class_chunk_size=3)  # 3 + 3 + 1 classes
  chunked([h, c])
  chunked.set_weights(full.get_weights())
  assert chunked.num_chunks(7) == 3
  grads = [
    value_and_grad(lambda a, b, f=layer: ops.sum(ops.sin(f([a, b]))), h, c)[1]
    for layer in (full, chunked)
  ]
  for g_full, g_chunk in zip(*grads):
    np.testing.assert_allclose(g_chunk, g_full, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("cls", [LatentCrossInteraction, ConcatInteraction])
def test_recompute_gradient_of_inputs_and_weights_equals_plain_autodiff(cls):
  """The custom gradient of one chunk, for h, c and every weight, against the backend's own
  gradient of the same function without it."""
  h, c = _data(n=3, e=3 if cls is ConcatInteraction else None)
  layer = cls(hidden_units=(5, 4), activation="tanh")
  layer([h, c])
  weights = [numpy(w) for w in layer.chunk_weights()]

  def loss(score):
    return lambda a, b, *w: ops.sum(ops.sin(score(a, b, list(w))))

  _, custom = value_and_grad(loss(layer._recomputed_score), h, c, *weights)
  _, plain = value_and_grad(loss(layer.score_with), h, c, *weights)
  assert len(custom) == 2 + len(weights)
  for got, want in zip(custom, plain):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("cls", [LatentCrossInteraction, ConcatInteraction])
def test_chunked_gradient_matches_finite_differences(cls):
  h, c = _data(b=2, d=3, n=4, e=2 if cls is ConcatInteraction else None)
  layer = cls(hidden_units=(4,), activation="tanh", class_chunk_size=3)
  layer([h, c])
  _, (grad_h, grad_c) = value_and_grad(lambda a, b: ops.sum(layer([a, b]) ** 2), h, c)
  numeric_h = finite_difference_grad(lambda a: ops.sum(layer([a, c]) ** 2), h, eps=1e-2)
  numeric_c = finite_difference_grad(lambda b: ops.sum(layer([h, b]) ** 2), c, eps=1e-2)
  np.testing.assert_allclose(grad_h, numeric_h, rtol=2e-2, atol=2e-3)
  np.testing.assert_allclose(grad_c, numeric_c, rtol=2e-2, atol=2e-3)


def test_latent_cross_gradient_matches_numpy_finite_differences():
  h, c = _data(b=2, d=3, n=4)
  layer = LatentCrossInteraction(hidden_units=(4,), activation="tanh", class_chunk_size=3)
  _, (grad,) = value_and_grad(lambda a: ops.sum(layer([a, c]) ** 2), h)
  weights = [
    (numpy(dense.kernel).astype(np.float64), numpy(dense.bias).astype(np.float64))
    for dense in layer._dense_layers
  ]

  def f(hh):
    x = hh[:, None, :] * (1.0 + c[None].astype(np.float64))
    x = np.tanh(x @ weights[0][0] + weights[0][1])
    return np.sum((x @ weights[1][0] + weights[1][1]) ** 2)

  np.testing.assert_allclose(grad, finite_difference_grad(f, h, eps=1e-5), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize(
  "name, kwargs, e",
  [
    ("dot", {}, 5),
    ("latent_cross", {"hidden_units": (4,)}, 4),
    ("concat", {"hidden_units": (4, 4), "class_chunk_size": 2}, 2),
  ],
)
def test_compiled_equals_eager(name, kwargs, e):
  h, c = _data(e=e)
  layer = interactions.get(name, **kwargs)
  eager = numpy(layer([h, c]))
  for mode in compile_modes():
    got = numpy(compiled(lambda a, b: layer([a, b]), mode)(h, c))
    np.testing.assert_allclose(got, eager, rtol=1e-4, atol=1e-5, err_msg=mode)


@pytest.mark.tensorflow_only
def test_xla_gradients_of_chunked_interaction():
  import tensorflow as tf  # noqa: PLC0415

  h, c = _data(n=5)
  layer = LatentCrossInteraction(hidden_units=(4,), class_chunk_size=2)
  layer([h, c])

  def grads(x):
    with tf.GradientTape() as tape:
      tape.watch(x)
      loss = tf.reduce_sum(layer([x, c]))
    return tape.gradient(loss, x)

  np.testing.assert_allclose(
    tf.function(grads, jit_compile=True)(tf.constant(h)).numpy(),
    grads(tf.constant(h)).numpy(),
    rtol=1e-4,
    atol=1e-5,
  )


def test_get_config_round_trip():
  rng = np.random.default_rng(1)
  h = rng.normal(size=(3, 4)).astype(np.float32)
  for layer, e in (
    (DotProductInteraction(use_bias=False), 4),
    (LatentCrossInteraction((3, 2), "tanh", 2), 4),
    (ConcatInteraction((3,), class_chunk_size=4), 3),
  ):
    c = rng.normal(size=(5, e)).astype(np.float32)
    out = numpy(layer([h, c]))
    clone = type(layer).from_config(layer.get_config())
    clone([h, c])
    clone.set_weights(layer.get_weights())
    np.testing.assert_allclose(numpy(clone([h, c])), out, rtol=1e-6)
    assert clone.get_config() == layer.get_config()


def test_mismatched_sizes_are_refused():
  h, c = _data(d=4, e=3)
  with pytest.raises(
    ValueError,
    match=r"Mismatched embedding sizes.*d \+ 1 = 5.*got class "
    r"embedding size 3",
  ):
    DotProductInteraction()([h, c])
  with pytest.raises(
    ValueError,
    match=r"Mismatched embedding sizes.*size d = 4, got class "
    r"embedding size 3",
  ):
    LatentCrossInteraction(hidden_units=(2,))([h, c])
  with pytest.raises(ValueError, match=r"instance embeddings must have shape \[B, d\]"):
    ConcatInteraction(hidden_units=(2,))([h[None], c])
  with pytest.raises(ValueError, match=r"expects inputs \[instance_embeddings"):
    ConcatInteraction(hidden_units=(2,))(ops.convert_to_tensor(h))


def test_bad_arguments():
  with pytest.raises(
    ValueError,
    match=r"`interaction` must be one of \['concat', 'dot', "
    r"'latent_cross'\], got 'cross'",
  ):
    interactions.get("cross")
  with pytest.raises(
    ValueError,
    match=r"`class_chunk_size` must be an integer >= 1 or None, "
    r"got 0",
  ):
    LatentCrossInteraction(class_chunk_size=0)
  with pytest.raises(
    ValueError,
    match=r"`hidden_units` must be a sequence of positive integers, "
    r"got \(64, -1\)",
  ):
    ConcatInteraction(hidden_units=(64, -1))
  with pytest.raises(ValueError, match=r"`use_bias` must be True or False, got 1"):
    DotProductInteraction(use_bias=1)


@pytest.mark.parametrize(
  "cls, kwargs, e",
  [
    (DotProductInteraction, {}, 5),
    (LatentCrossInteraction, {"hidden_units": (8,)}, 4),
    (LatentCrossInteraction, {"hidden_units": (8,), "class_chunk_size": 2}, 4),
    (ConcatInteraction, {"hidden_units": (8, 8), "class_chunk_size": 2}, 3),
  ],
)
def test_mixed_float16_policy(cls, kwargs, e):
  """A mixed_float16 layer: float32 variables, float16 scores close to the float32 layer's."""
  rng = np.random.default_rng(12)
  h = rng.normal(size=(3, 4)).astype(np.float32)
  c = rng.normal(size=(5, e)).astype(np.float32)
  exact = cls(**kwargs)
  want = numpy(exact([h, c]))
  half = cls(dtype="mixed_float16", **kwargs)
  half.build([h.shape, c.shape])
  half.set_weights(exact.get_weights())
  got = half([h, c])
  assert numpy(got).dtype == np.float16
  assert all(numpy(w).dtype == np.float32 for w in half.weights)
  np.testing.assert_allclose(numpy(got).astype(np.float32), want, rtol=1e-2, atol=1e-2)
  _, grads = value_and_grad(lambda a: ops.sum(ops.cast(half([a, c]), "float32")), h)
  assert np.all(np.isfinite(grads[0]))


def test_interactions_registry_keeps_its_dict_like_use():
  from tfrank4class import heads
  from tfrank4class.registry import Registry

  assert (
    isinstance(interactions.INTERACTIONS, Registry)
    and heads.INTERACTIONS is interactions.INTERACTIONS
  )
  assert sorted(interactions.INTERACTIONS) == ["concat", "dot", "latent_cross"]
  assert interactions.INTERACTIONS["dot"] is DotProductInteraction
  assert interactions.INTERACTIONS["latent_cross"] is LatentCrossInteraction
  assert "concat" in interactions.INTERACTIONS and "cross" not in interactions.INTERACTIONS
  assert heads.get_interaction("dot", hidden_units=(4,), use_bias=False).use_bias is False
