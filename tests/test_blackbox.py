"""Tests of tfrank4class.ranking.blackbox against a numpy implementation of RaMBO's Algorithm 1,
on every backend and compile mode (export, strategies and tf.function errors: TensorFlow only)."""

import backend_testing as bt
import numpy as np
import pytest

from tfrank4class import backend
from tfrank4class.compat import keras, ops
from tfrank4class.ranking import blackbox

#: The float dtype float64 input is computed in (float32 on JAX, where x64 is off here).
F64 = np.dtype(backend.dtype_name(backend.maximum(ops.convert_to_tensor(np.zeros(1)), 0.0)))


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
  """Rolinek et al., Algorithm 1: forward rk(y); backward -(rk(y) - rk(y + lambda g)) / lambda,
  in the dtype of ``y`` (the perturbed scores rounded as the backend rounds them)."""
  lam = np.asarray(lambda_, y.dtype)
  return ranker(y), -(ranker(y) - ranker(y + lam * g.astype(y.dtype))) / lam


def forward_backward(fn, y, g, mode="eager"):
  """``fn(y)`` and the gradient of ``sum(fn(y) * g)`` (the vector-Jacobian product), as numpy,
  with ``fn`` compiled as ``mode`` says."""
  g = ops.convert_to_tensor(g)
  _, (grad,) = bt.value_and_grad(bt.compiled(lambda t: ops.sum(fn(t) * g), mode), y)
  return bt.numpy(bt.compiled(fn, mode)(ops.convert_to_tensor(y))), grad


@pytest.mark.parametrize(
  "shape,lambda_", [((1, 5), 3.0), ((8, 50), 1.0), ((4, 300), 10.0), ((16, 7), 0.01)]
)
def test_gradient_matches_numpy_algorithm1(shape, lambda_):
  rng = np.random.default_rng(shape[1])
  y = rng.standard_normal(shape).astype(F64)  # y + lambda g rounded alike in both
  g = rng.standard_normal(shape).astype(F64)
  ranks, grad = forward_backward(lambda t: blackbox.blackbox_rank(t, lambda_), y, g)
  ref_ranks, ref_grad = np_algorithm1(y, g, lambda_)
  np.testing.assert_array_equal(ranks, ref_ranks)
  np.testing.assert_allclose(grad, ref_grad, rtol=1e-6, atol=1e-12)
  if lambda_ >= 1:
    assert np.any(ref_grad != 0)  # the check is not vacuous


def test_normalized_lambda_uses_list_length():
  """normalized=True: the blackbox gradient of rk / n with lambda_, rescaled to rk (lambda_ * n)."""
  rng = np.random.default_rng(13)
  y, g = rng.standard_normal((3, 40)).astype(F64), rng.standard_normal((3, 40)).astype(F64)
  n = 40
  lam = F64.type(0.05) * F64.type(n)  # lambda_ * n as the op computes it
  _, grad = forward_backward(lambda t: blackbox.blackbox_rank(t, 0.05, normalized=True), y, g)
  np.testing.assert_allclose(grad, np_algorithm1(y, g, lam)[1], rtol=1e-6, atol=1e-12)
  # The same from the normalised op's own point of view: d(rk/n) with incoming n * g.
  ref = -(np_rank(y) / n - np_rank(y + lam * g) / n) / 0.05
  np.testing.assert_allclose(grad, ref, rtol=1e-5, atol=1e-12)
  mask = rng.random((3, 40)) < 0.5
  _, grad_w = forward_backward(
    lambda t: blackbox.blackbox_rank_within(t, mask, 0.05, normalized=True), y, g
  )
  ref_w = np_algorithm1(y, g, lam, lambda s: np_rank_within(s, mask))[1]
  np.testing.assert_allclose(grad_w, ref_w, rtol=1e-6, atol=1e-12)


def test_gradient_axis0_three_dims():
  rng = np.random.default_rng(7)
  y = rng.standard_normal((6, 3, 4)).astype(F64)
  g = rng.standard_normal((6, 3, 4)).astype(F64)
  ranks, grad = forward_backward(lambda t: blackbox.blackbox_rank(t, 0.7, axis=0), y, g)
  move = lambda a: np.moveaxis(a, 0, -1).reshape(-1, 6)
  ref_ranks, ref_grad = np_algorithm1(move(y), move(g), 0.7)
  np.testing.assert_array_equal(move(ranks), ref_ranks)
  np.testing.assert_allclose(move(grad), ref_grad, rtol=1e-6, atol=1e-12)


def test_docstring_example():
  y = np.array([[0.3, 0.1, 0.2]], np.float32)
  _, (grad,) = bt.value_and_grad(lambda t: blackbox.blackbox_rank(t, lambda_=1.0)[0, 1], y)
  # y' = (0.3, 1.1, 0.2): ranks (2, 1, 3); grad = (2, 1, 3) - (1, 3, 2)
  np.testing.assert_array_equal(grad, [[1, -2, 1]])


def test_rank_within_gradient_matches_numpy():
  rng = np.random.default_rng(8)
  y = rng.standard_normal((5, 40)).astype(F64)
  g = rng.standard_normal((5, 40)).astype(F64)
  mask = rng.random((5, 40)) < 0.3
  ranks, grad = forward_backward(lambda t: blackbox.blackbox_rank_within(t, mask, 0.5), y, g)
  ref_ranks, ref_grad = np_algorithm1(y, g, 0.5, lambda s: np_rank_within(s, mask))
  np.testing.assert_array_equal(ranks, ref_ranks)
  np.testing.assert_allclose(grad, ref_grad, rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize("mode", bt.compile_modes())
def test_modes(mode):
  rng = np.random.default_rng(9)
  y = rng.standard_normal((3, 20)).astype(np.float32)
  g = rng.standard_normal((3, 20)).astype(np.float32)
  mask = y > 0
  for fn, ranker in (
    (lambda t: blackbox.blackbox_rank(t, 2.0), np_rank),
    (lambda t: blackbox.blackbox_rank_within(t, mask, 2.0), lambda s: np_rank_within(s, mask)),
  ):
    ranks, grad = forward_backward(fn, y, g, mode)
    ref_ranks, ref_grad = np_algorithm1(y, g, 2.0, ranker)
    np.testing.assert_array_equal(ranks, ref_ranks)
    np.testing.assert_allclose(grad, ref_grad, atol=1e-6)


@pytest.mark.tensorflow_only
def test_mirrored_strategy(mirrored_strategy):
  import tensorflow as tf  # noqa: PLC0415

  rng = np.random.default_rng(10)
  y = rng.standard_normal((4, 12)).astype(np.float32)
  g = rng.standard_normal((4, 12)).astype(np.float32)
  data = tf.data.Dataset.from_tensor_slices((y, g)).batch(4)
  batch = next(iter(mirrored_strategy.experimental_distribute_dataset(data)))

  @tf.function
  def step(y, g):
    with tf.GradientTape() as tape:
      tape.watch(y)
      out = blackbox.blackbox_rank(y, 1.0)
    return out, tape.gradient(out, y, output_gradients=g)

  ranks, grad = mirrored_strategy.run(step, batch)
  cat = lambda v: np.concatenate(
    [t.numpy() for t in mirrored_strategy.experimental_local_results(v)]
  )
  ref_ranks, ref_grad = np_algorithm1(y, g, 1.0)
  np.testing.assert_array_equal(cat(ranks), ref_ranks)
  np.testing.assert_allclose(cat(grad), ref_grad, atol=1e-6)


def test_degenerate_lists_give_finite_zero_gradient():
  for y in ([[0.5]], [[1.0, 1.0, 1.0, 1.0]]):
    y = np.array(y, np.float32)
    ranks, grad = forward_backward(lambda t: blackbox.blackbox_rank(t, 1.0), y, y * 0)
    assert np.all(np.isfinite(ranks)) and np.all(grad == 0)
  # All-equal scores with a non-zero incoming gradient: Algorithm 1 with stable ties.
  y = np.ones((1, 4), F64)
  g = np.array([[0.0, 1.0, 0.0, -1.0]], F64)
  _, grad = forward_backward(lambda t: blackbox.blackbox_rank(t, 1.0), y, g)
  np.testing.assert_array_equal(grad, np_algorithm1(y, g, 1.0)[1])


def test_non_finite_scores_raise():
  for bad in (np.nan, np.inf):
    with pytest.raises(ValueError, match="`scores` must be finite"):
      blackbox.blackbox_rank([[0.1, bad]], 1.0)


@pytest.mark.tensorflow_only
def test_non_finite_scores_raise_in_tf_function():
  import tensorflow as tf  # noqa: PLC0415

  for bad in (np.nan, np.inf):
    with pytest.raises(tf.errors.InvalidArgumentError, match="must be finite"):
      tf.function(lambda s: blackbox.blackbox_rank(s, 1.0))(tf.constant([[0.1, bad]]))


@pytest.mark.parametrize("mode", [m for m in bt.compile_modes() if m in ("xla", "jit")])
def test_nan_scores_give_nan_ranks_where_no_check_raises(mode):
  fn = bt.compiled(lambda s: blackbox.blackbox_rank(s, 1.0), mode)
  got = bt.numpy(fn(ops.convert_to_tensor(np.array([[0.1, np.nan], [0.2, 0.3]], np.float32))))
  assert np.all(np.isnan(got[0]))
  np.testing.assert_array_equal(got[1], [2, 1])


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
    blackbox.margin_shift([[1.0]], np.array([[True]]), margin=-1)
  with pytest.raises(ValueError, match="`axis` must be in"):
    blackbox.blackbox_rank([[1.0, 2.0]], 1.0, axis=5)
  with pytest.raises(TypeError, match="`mask` must be a boolean tensor"):
    blackbox.blackbox_rank_within([[1.0, 2.0]], np.array([[1, 0]]), 1.0)


def test_margin_shift_values():
  relevant, valid = np.array([[True, False, False]]), np.array([[True, True, False]])
  out = blackbox.margin_shift([[1.0, 2.0, 3.0]], relevant, 0.5, valid=valid)
  np.testing.assert_allclose(bt.numpy(out), [[0.75, 2.25, 3.0]])


def test_layer_margin_only_in_training():
  layer = blackbox.BlackboxRanker(lambda_=1.0, margin=0.5)
  scores = ops.convert_to_tensor([[1.0, 0.8]])
  relevance = ops.convert_to_tensor([[0.0, 1.0]])
  # Without margin the relevant item (0.8) ranks 2nd; with margin: 0.55 vs 1.25, still 2nd.
  np.testing.assert_array_equal(bt.numpy(layer(scores, relevance, training=True)), [[1, 2]])
  close = ops.convert_to_tensor([[1.0, 1.2]])
  np.testing.assert_array_equal(bt.numpy(layer(close, relevance, training=False)), [[2, 1]])
  # Training with margin 0.5: 1.2 - 0.25 = 0.95 < 1.0 + 0.25: the relevant item drops to 2nd.
  np.testing.assert_array_equal(bt.numpy(layer(close, relevance, training=True)), [[1, 2]])


def _ranker_model():
  inputs = keras.Input([6])
  scores = keras.layers.Dense(6)(inputs)
  ranks = blackbox.BlackboxRanker(lambda_=3.0, name="ranker")(scores)
  return keras.Model(inputs, ranks)


def test_layer_in_model_save_load(tmp_path):
  model = _ranker_model()
  x = np.random.default_rng(11).standard_normal((5, 6)).astype(np.float32)
  expected = np_rank(bt.numpy(model.layers[1](x)))
  np.testing.assert_array_equal(bt.numpy(model(x)), expected)
  config = model.get_layer("ranker").get_config()
  assert config["lambda_"] == 3.0 and config["margin"] == 0.0 and config["normalized"] is False
  model.save(tmp_path / "m.keras")
  loaded = keras.models.load_model(tmp_path / "m.keras")
  assert isinstance(loaded.get_layer("ranker"), blackbox.BlackboxRanker)
  assert loaded.get_layer("ranker").lambda_ == 3.0
  np.testing.assert_array_equal(bt.numpy(loaded(x)), expected)


@pytest.mark.tensorflow_only
def test_layer_exported_and_served(tmp_path):
  from _sorter_checks import serve_in_fresh_process  # noqa: PLC0415

  model = _ranker_model()
  x = np.random.default_rng(11).standard_normal((5, 6)).astype(np.float32)
  expected = np_rank(bt.numpy(model.layers[1](x)))
  model.export(str(tmp_path / "exported"))
  np.testing.assert_array_equal(serve_in_fresh_process(str(tmp_path / "exported"), x), expected)


def test_layer_trains_a_model():
  """The blackbox gradient lets a model learn to put item 0 first (loss = its rank)."""
  x = np.random.default_rng(12).standard_normal((32, 4)).astype(np.float32)
  y = np.zeros((32, 5), np.float32)
  y[:, 0] = 1.0
  inputs = keras.Input([4])
  scores = keras.layers.Dense(
    5,
    kernel_initializer="zeros",
    bias_initializer=keras.initializers.Constant([0, 0.1, 0.2, 0.3, 0.4]),
  )(inputs)
  model = keras.Model(inputs, blackbox.BlackboxRanker(lambda_=1.0)(scores))
  model.compile(keras.optimizers.SGD(0.1), loss=lambda t, r: ops.sum(t * r, axis=-1))
  before = float(np.mean(model.predict(x, verbose=0)[:, 0]))
  model.fit(x, y, batch_size=8, epochs=3, verbose=0)
  after = float(np.mean(model.predict(x, verbose=0)[:, 0]))
  assert before == 5.0 and after < before


def np_item_rank(y, item, mask, g, lambda_):
  """Algorithm 1 for the rank of one item per list among ``mask`` (plus the item): the whole
  group re-ranked with ``g`` placed at the item, every other item's ``dL/drk`` 0."""
  rows = np.arange(len(item))
  group = mask.copy()
  group[rows, item] = True
  g_full = np.zeros(y.shape, y.dtype)
  g_full[rows, item] = g
  ranks, grad = np_algorithm1(y, g_full, lambda_, lambda s: np_rank_within(s, group))
  return ranks[rows, item], np.where(group, grad, 0.0)


@pytest.mark.parametrize("mode", bt.compile_modes())
def test_item_rank_matches_numpy_algorithm1_with_ties(mode):
  rng = np.random.default_rng(21)
  y = rng.integers(-2, 3, size=(6, 25)).astype(F64)  # many ties
  item = rng.integers(0, 25, size=6)
  mask = rng.random((6, 25)) < 0.7
  mask[0, item[0]] = False  # the item is counted whether or not the mask holds it
  g = rng.uniform(-1.0, 1.0, size=6).astype(F64)
  fn = lambda t: blackbox.blackbox_item_rank(t, item, mask, 4.0)
  ranks, grad = forward_backward(fn, y, g, mode)
  ref_ranks, ref_grad = np_item_rank(y, item, mask, g, 4.0)
  np.testing.assert_array_equal(ranks, ref_ranks)
  np.testing.assert_allclose(grad, ref_grad, rtol=1e-6, atol=1e-12)
  assert np.count_nonzero(ref_grad) > 2 * len(item)  # items are passed: not vacuous


def test_item_rank_equals_rank_within_at_the_item():
  rng = np.random.default_rng(22)
  y = rng.integers(0, 4, size=(5, 40)).astype(F64)
  item = rng.integers(0, 40, size=5)
  mask = rng.random((5, 40)) < 0.6
  mask[np.arange(5), item] = True
  g = rng.standard_normal(5).astype(F64)
  g_full = np.zeros((5, 40), F64)
  g_full[np.arange(5), item] = g
  ranks, grad = forward_backward(
    lambda t: blackbox.blackbox_item_rank(t, item, mask, 0.5, normalized=True), y, g
  )
  within, grad_within = forward_backward(
    lambda t: blackbox.blackbox_rank_within(t, mask, 0.5, normalized=True), y, g_full
  )
  np.testing.assert_array_equal(ranks, within[np.arange(5), item])
  np.testing.assert_array_equal(grad, grad_within)


def test_item_rank_bad_input():
  y, item, mask = np.zeros((2, 3), np.float32), np.array([0, 1]), np.ones((2, 3), bool)
  with pytest.raises(ValueError, match="lambda_"):
    blackbox.blackbox_item_rank(y, item, mask, 0.0)
  with pytest.raises(ValueError, match="finite"):
    blackbox.blackbox_item_rank(np.array([[0.0, np.nan, 1.0]]), [0], mask[:1], 1.0)
  with pytest.raises(ValueError, match=r"\[B, n\]"):
    blackbox.blackbox_item_rank(np.zeros(3, np.float32), [0], mask[0], 1.0)
  with pytest.raises(ValueError, match="mask"):
    blackbox.blackbox_item_rank(y, item, mask[:, :2], 1.0)
