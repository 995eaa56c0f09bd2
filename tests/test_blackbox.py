"""Tests of tfrank4class.ranking.blackbox against a numpy implementation of RaMBO's Algorithm 1."""

import numpy as np
import pytest
import tensorflow as tf
from _sorter_checks import serve_in_fresh_process

from tfrank4class.ranking import blackbox


def np_rank(scores):
  order = np.argsort(-scores, axis=-1, kind="stable")
  ranks = np.empty(order.shape)
  np.put_along_axis(
    ranks, order, np.broadcast_to(np.arange(1, scores.shape[-1] + 1), order.shape), axis=-1
  )
  return ranks


def np_rank_within(scores, mask):
  out = np.zeros(scores.shape)
  for b in range(scores.shape[0]):
    for group in (True, False):
      idx = np.flatnonzero(mask[b] == group)
      if idx.size:
        out[b, idx] = np_rank(scores[b, idx][None])[0]
  return out


def np_algorithm1(y, g, lambda_, ranker=np_rank):
  """Rolinek et al., Algorithm 1: forward rk(y); backward -(rk(y) - rk(y + lambda g)) / lambda."""
  return ranker(y), -(ranker(y) - ranker(y + lambda_ * g)) / lambda_


def forward_backward(fn, y, g):
  y = tf.convert_to_tensor(y)
  with tf.GradientTape() as tape:
    tape.watch(y)
    out = fn(y)
  return out, tape.gradient(out, y, output_gradients=tf.convert_to_tensor(g))


@pytest.mark.parametrize(
  "shape,lambda_", [((1, 5), 3.0), ((8, 50), 1.0), ((4, 300), 10.0), ((16, 7), 0.01)]
)
def test_gradient_matches_numpy_algorithm1(shape, lambda_):
  rng = np.random.default_rng(shape[1])
  y = rng.standard_normal(shape)  # float64: exact y + lambda g in both implementations
  g = rng.standard_normal(shape)
  ranks, grad = forward_backward(lambda t: blackbox.blackbox_rank(t, lambda_), y, g)
  ref_ranks, ref_grad = np_algorithm1(y, g, lambda_)
  np.testing.assert_array_equal(ranks.numpy(), ref_ranks)
  np.testing.assert_allclose(grad.numpy(), ref_grad, atol=1e-12)
  if lambda_ >= 1:
    assert np.any(ref_grad != 0)  # the check is not vacuous


def test_normalized_lambda_uses_list_length():
  """normalized=True: the blackbox gradient of rk / n with lambda_, rescaled to rk (lambda_ * n)."""
  rng = np.random.default_rng(13)
  y, g = rng.standard_normal((3, 40)), rng.standard_normal((3, 40))
  _, grad = forward_backward(lambda t: blackbox.blackbox_rank(t, 0.05, normalized=True), y, g)
  np.testing.assert_allclose(grad.numpy(), np_algorithm1(y, g, 0.05 * 40)[1], atol=1e-12)
  # The same from the normalised op's own point of view: d(rk/n) with incoming n * g.
  n = 40
  ref = -(np_rank(y) / n - np_rank(y + 0.05 * (n * g)) / n) / 0.05
  np.testing.assert_allclose(grad.numpy(), ref, atol=1e-12)
  mask = rng.random((3, 40)) < 0.5
  _, grad_w = forward_backward(
    lambda t: blackbox.blackbox_rank_within(t, mask, 0.05, normalized=True), y, g
  )
  np.testing.assert_allclose(
    grad_w.numpy(), np_algorithm1(y, g, 2.0, lambda s: np_rank_within(s, mask))[1], atol=1e-12
  )


def test_gradient_axis0_three_dims():
  rng = np.random.default_rng(7)
  y = rng.standard_normal((6, 3, 4))
  g = rng.standard_normal((6, 3, 4))
  ranks, grad = forward_backward(lambda t: blackbox.blackbox_rank(t, 0.7, axis=0), y, g)
  move = lambda a: np.moveaxis(a, 0, -1).reshape(-1, 6)
  ref_ranks, ref_grad = np_algorithm1(move(y), move(g), 0.7)
  np.testing.assert_array_equal(move(ranks.numpy()), ref_ranks)
  np.testing.assert_allclose(move(grad.numpy()), ref_grad, atol=1e-12)


def test_docstring_example():
  y = tf.constant([[0.3, 0.1, 0.2]])
  with tf.GradientTape() as tape:
    tape.watch(y)
    loss = blackbox.blackbox_rank(y, lambda_=1.0)[0, 1]
  # y' = (0.3, 1.1, 0.2): ranks (2, 1, 3); grad = (2, 1, 3) - (1, 3, 2)
  np.testing.assert_array_equal(tape.gradient(loss, y).numpy(), [[1, -2, 1]])


def test_rank_within_gradient_matches_numpy():
  rng = np.random.default_rng(8)
  y = rng.standard_normal((5, 40))
  g = rng.standard_normal((5, 40))
  mask = rng.random((5, 40)) < 0.3
  ranks, grad = forward_backward(lambda t: blackbox.blackbox_rank_within(t, mask, 0.5), y, g)
  ref_ranks, ref_grad = np_algorithm1(y, g, 0.5, lambda s: np_rank_within(s, mask))
  np.testing.assert_array_equal(ranks.numpy(), ref_ranks)
  np.testing.assert_allclose(grad.numpy(), ref_grad, atol=1e-12)


@pytest.mark.parametrize("mode", ["eager", "function", "xla"])
def test_modes(mode):
  rng = np.random.default_rng(9)
  y = rng.standard_normal((3, 20)).astype(np.float32)
  g = rng.standard_normal((3, 20)).astype(np.float32)

  def step(y, g):
    return forward_backward(lambda t: blackbox.blackbox_rank(t, 2.0), y, g)

  if mode != "eager":
    step = tf.function(step, jit_compile=(mode == "xla"))
  ranks, grad = step(tf.constant(y), tf.constant(g))
  ref_ranks, ref_grad = np_algorithm1(y.astype(np.float64), g.astype(np.float64), 2.0)
  np.testing.assert_array_equal(ranks.numpy(), ref_ranks)
  np.testing.assert_allclose(grad.numpy(), ref_grad, atol=1e-6)


def test_mirrored_strategy(mirrored_strategy):
  rng = np.random.default_rng(10)
  y = rng.standard_normal((4, 12)).astype(np.float32)
  g = rng.standard_normal((4, 12)).astype(np.float32)
  data = tf.data.Dataset.from_tensor_slices((y, g)).batch(4)
  batch = next(iter(mirrored_strategy.experimental_distribute_dataset(data)))

  @tf.function
  def step(y, g):
    return forward_backward(lambda t: blackbox.blackbox_rank(t, 1.0), y, g)

  ranks, grad = mirrored_strategy.run(step, batch)
  cat = lambda v: np.concatenate(
    [t.numpy() for t in mirrored_strategy.experimental_local_results(v)]
  )
  ref_ranks, ref_grad = np_algorithm1(y.astype(np.float64), g.astype(np.float64), 1.0)
  np.testing.assert_array_equal(cat(ranks), ref_ranks)
  np.testing.assert_allclose(cat(grad), ref_grad, atol=1e-6)


def test_degenerate_lists_give_finite_zero_gradient():
  for y in ([[0.5]], [[1.0, 1.0, 1.0, 1.0]]):
    ranks, grad = forward_backward(
      lambda t: blackbox.blackbox_rank(t, 1.0), tf.constant(y), tf.zeros_like(tf.constant(y))
    )
    assert np.all(np.isfinite(ranks.numpy())) and np.all(grad.numpy() == 0)
  # All-equal scores with a non-zero incoming gradient: Algorithm 1 with stable ties.
  y = np.ones((1, 4))
  g = np.array([[0.0, 1.0, 0.0, -1.0]])
  _, grad = forward_backward(lambda t: blackbox.blackbox_rank(t, 1.0), y, g)
  np.testing.assert_array_equal(grad.numpy(), np_algorithm1(y, g, 1.0)[1])


def test_non_finite_scores_raise():
  for bad in (np.nan, np.inf):
    with pytest.raises(tf.errors.InvalidArgumentError, match="must be finite"):
      blackbox.blackbox_rank([[0.1, bad]], 1.0)
    with pytest.raises(tf.errors.InvalidArgumentError, match="must be finite"):
      tf.function(lambda s: blackbox.blackbox_rank(s, 1.0))(tf.constant([[0.1, bad]]))


@pytest.mark.parametrize("lambda_", [0, -1.0, float("nan"), "1", None])
def test_bad_lambda(lambda_):
  with pytest.raises(ValueError, match=r"`lambda_` must be a finite number > 0\.0, got"):
    blackbox.blackbox_rank([[1.0, 2.0]], lambda_)
  with pytest.raises(ValueError, match="`lambda_`"):
    blackbox.BlackboxRanker(lambda_=lambda_)


def test_bad_margin_and_axis():
  with pytest.raises(ValueError, match=r"`margin` must be a finite number >= 0\.0, got -0\.1"):
    blackbox.BlackboxRanker(lambda_=1.0, margin=-0.1)
  with pytest.raises(ValueError, match=r"`margin` must be a finite number >= 0\.0, got -1"):
    blackbox.margin_shift([[1.0]], [[True]], margin=-1)
  with pytest.raises(ValueError, match="`axis` must be in"):
    blackbox.blackbox_rank([[1.0, 2.0]], 1.0, axis=5)


def test_margin_shift_values():
  out = blackbox.margin_shift(
    [[1.0, 2.0, 3.0]], [[True, False, False]], 0.5, valid=[[True, True, False]]
  )
  np.testing.assert_allclose(out.numpy(), [[0.75, 2.25, 3.0]])


def test_layer_margin_only_in_training():
  layer = blackbox.BlackboxRanker(lambda_=1.0, margin=0.5)
  scores = tf.constant([[1.0, 0.8]])
  relevance = tf.constant([[0.0, 1.0]])
  # Without margin the relevant item (0.8) ranks 2nd; with margin: 0.55 vs 1.25, still 2nd.
  np.testing.assert_array_equal(layer(scores, relevance, training=True).numpy(), [[1, 2]])
  close = tf.constant([[1.0, 1.2]])
  np.testing.assert_array_equal(layer(close, relevance, training=False).numpy(), [[2, 1]])
  # Training with margin 0.5: 1.2 - 0.25 = 0.95 < 1.0 + 0.25: the relevant item drops to 2nd.
  np.testing.assert_array_equal(layer(close, relevance, training=True).numpy(), [[1, 2]])


def test_layer_in_model_save_load(tmp_path):
  inputs = tf.keras.Input([6])
  scores = tf.keras.layers.Dense(6)(inputs)
  ranks = blackbox.BlackboxRanker(lambda_=3.0, name="ranker")(scores)
  model = tf.keras.Model(inputs, ranks)
  x = np.random.default_rng(11).standard_normal((5, 6)).astype(np.float32)
  expected = np_rank(model.layers[1](x).numpy())
  np.testing.assert_array_equal(model(x).numpy(), expected)
  config = model.get_layer("ranker").get_config()
  assert config["lambda_"] == 3.0 and config["margin"] == 0.0 and config["normalized"] is False
  model.save(tmp_path / "m.keras")
  loaded = tf.keras.models.load_model(tmp_path / "m.keras")
  assert isinstance(loaded.get_layer("ranker"), blackbox.BlackboxRanker)
  assert loaded.get_layer("ranker").lambda_ == 3.0
  np.testing.assert_array_equal(loaded(x).numpy(), expected)
  model.export(str(tmp_path / "exported"))
  np.testing.assert_array_equal(serve_in_fresh_process(str(tmp_path / "exported"), x), expected)


def test_layer_trains_a_model_under_strategy(mirrored_strategy):
  """The blackbox gradient lets a model learn to put item 0 first (loss = its rank)."""
  x = np.random.default_rng(12).standard_normal((32, 4)).astype(np.float32)
  y = np.zeros((32, 5), np.float32)
  y[:, 0] = 1.0
  with mirrored_strategy.scope():
    inputs = tf.keras.Input([4])
    scores = tf.keras.layers.Dense(
      5,
      kernel_initializer="zeros",
      bias_initializer=tf.constant_initializer([0, 0.1, 0.2, 0.3, 0.4]),
    )(inputs)
    model = tf.keras.Model(inputs, blackbox.BlackboxRanker(lambda_=1.0)(scores))
    model.compile(tf.keras.optimizers.SGD(0.1), loss=lambda t, r: tf.reduce_sum(t * r, axis=-1))
  before = float(np.mean(model.predict(x, verbose=0)[:, 0]))
  model.fit(x, y, batch_size=8, epochs=3, verbose=0)
  after = float(np.mean(model.predict(x, verbose=0)[:, 0]))
  assert before == 5.0 and after < before
