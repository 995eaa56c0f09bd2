"""Tests of tfrank4class.ranking.exact: rank and rank_within against numpy references, on every
backend and compile mode (TensorFlow's tf.function/XLA/strategy checks are TensorFlow-only)."""

import backend_testing as bt
import numpy as np
import pytest

from tfrank4class import backend
from tfrank4class.compat import ops
from tfrank4class.ranking import exact


def np_rank(scores):
  """Reference: 1 + position in a stable descending numpy sort (ties: lower index first)."""
  scores = np.asarray(scores)
  order = np.argsort(-scores, axis=-1, kind="stable")
  ranks = np.empty(order.shape, dtype=np.int64)
  np.put_along_axis(
    ranks, order, np.broadcast_to(np.arange(1, scores.shape[-1] + 1), order.shape), axis=-1
  )
  return ranks


def np_rank_within(scores, mask):
  """Reference by brute force: count same-group items ahead (ties by index)."""
  scores, mask = np.asarray(scores), np.asarray(mask)
  out = np.zeros(scores.shape)
  for idx in np.ndindex(scores.shape[:-1]):
    s, m = scores[idx], mask[idx]
    for i in range(len(s)):
      same = m == m[i]
      ahead = (s > s[i]) | ((s == s[i]) & (np.arange(len(s)) < i))
      out[idx + (i,)] = 1 + np.sum(same & ahead)
  return out


def test_doc_example():
  np.testing.assert_array_equal(bt.numpy(exact.rank([[0.1, 0.9, 0.5, 0.9]])), [[4, 1, 3, 2]])


@pytest.mark.parametrize("shape", [(1, 1), (5, 7), (3, 1000), (2, 3, 4)])
def test_rank_matches_numpy_argsort(shape):
  rng = np.random.default_rng(0)
  scores = rng.standard_normal(shape).astype(np.float32)
  np.testing.assert_array_equal(bt.numpy(exact.rank(scores)), np_rank(scores))


def test_rank_ties_lower_index_first():
  rng = np.random.default_rng(1)
  scores = rng.integers(0, 3, size=(20, 9)).astype(np.float32)  # many ties
  np.testing.assert_array_equal(bt.numpy(exact.rank(scores)), np_rank(scores))
  np.testing.assert_array_equal(bt.numpy(exact.rank([[2.0, 2.0, 2.0]])), [[1, 2, 3]])


@pytest.mark.parametrize("axis", [0, 1, -3])
def test_rank_other_axes(axis):
  rng = np.random.default_rng(2)
  scores = rng.standard_normal((3, 4, 5)).astype(np.float32)
  expected = np.moveaxis(np_rank(np.moveaxis(scores, axis, -1)), -1, axis)
  np.testing.assert_array_equal(bt.numpy(exact.rank(scores, axis=axis)), expected)


def test_rank_dtypes():
  ints = exact.rank(np.array([[3, 1, 2]], np.int32))
  assert backend.dtype_name(ints) == "float32"
  np.testing.assert_array_equal(bt.numpy(ints), [[1, 3, 2]])
  doubles = ops.convert_to_tensor(np.array([[3.0, 1.0]]))  # float32 on JAX without x64
  assert backend.dtype_name(exact.rank(doubles)) == backend.dtype_name(doubles)


def test_rank_bad_input():
  with pytest.raises(ValueError, match="rank >= 1"):
    exact.rank(1.0)
  with pytest.raises(ValueError, match=r"`axis` must be in \[-2, 2\), got 2"):
    exact.rank([[1.0, 2.0]], axis=2)
  with pytest.raises(TypeError, match="`scores` must be a numeric tensor"):
    exact.rank(np.array([["a"]]))
  with pytest.raises(ValueError, match="`axis` must be an integer"):
    exact.rank([[1.0]], axis=0.5)


def test_rank_within_matches_brute_force():
  rng = np.random.default_rng(3)
  scores = rng.integers(0, 4, size=(6, 11)).astype(np.float32)
  mask = rng.random((6, 11)) < 0.4
  np.testing.assert_array_equal(
    bt.numpy(exact.rank_within(scores, mask)), np_rank_within(scores, mask)
  )
  np.testing.assert_array_equal(
    bt.numpy(exact.rank_within([[0.1, 0.9, 0.5, 0.7]], [[True, False, True, False]])),
    [[2, 1, 1, 2]],
  )


def test_rank_within_axis0_and_bad_mask():
  rng = np.random.default_rng(4)
  scores = rng.standard_normal((7, 3)).astype(np.float32)
  mask = rng.random((7, 3)) < 0.5
  np.testing.assert_array_equal(
    bt.numpy(exact.rank_within(scores, mask, axis=0)), np_rank_within(scores.T, mask.T).T
  )
  with pytest.raises(TypeError, match="`mask` must be a boolean tensor, got dtype int"):
    exact.rank_within([[1.0, 2.0]], np.array([[1, 0]]))
  with pytest.raises(ValueError, match=r"`mask` must have the shape of `scores` \(1, 2\)"):
    exact.rank_within([[1.0, 2.0]], [[True, False, True]])


@pytest.mark.parametrize("mode", bt.compile_modes())
def test_compiled(mode):
  rng = np.random.default_rng(5)
  scores = rng.standard_normal((4, 9)).astype(np.float32)
  mask = scores > 0
  f = bt.compiled(lambda s, m: (exact.rank(s), exact.rank_within(s, m)), mode)
  r, rw = f(ops.convert_to_tensor(scores), ops.convert_to_tensor(mask))
  np.testing.assert_array_equal(bt.numpy(r), np_rank(scores))
  np.testing.assert_array_equal(bt.numpy(rw), np_rank_within(scores, mask))


def test_permutation_inversion_of_large_batches():
  """backend.invert_permutation, the O(n) inverse behind every rank, on a large batch."""
  rng = np.random.default_rng(6)
  perm = np.stack([rng.permutation(500) for _ in range(64)]).astype(np.int32)
  for mode in bt.compile_modes():
    got = bt.numpy(bt.compiled(backend.invert_permutation, mode)(ops.convert_to_tensor(perm)))
    np.testing.assert_array_equal(got, np.argsort(perm, axis=-1))


@pytest.mark.tensorflow_only
def test_dynamic_shapes_in_tf_function():
  import tensorflow as tf  # noqa: PLC0415

  scores = np.random.default_rng(5).standard_normal((4, 9)).astype(np.float32)
  dynamic = tf.function(exact.rank, input_signature=[tf.TensorSpec([None, None], tf.float32)])
  np.testing.assert_array_equal(dynamic(scores).numpy(), np_rank(scores))


@pytest.mark.tensorflow_only
def test_mirrored_strategy(mirrored_strategy):
  import tensorflow as tf  # noqa: PLC0415

  rng = np.random.default_rng(6)
  scores = rng.standard_normal((4, 6)).astype(np.float32)
  dataset = tf.data.Dataset.from_tensor_slices(scores).batch(4)
  batch = next(iter(mirrored_strategy.experimental_distribute_dataset(dataset)))
  result = mirrored_strategy.run(tf.function(exact.rank), (batch,))
  got = np.concatenate([t.numpy() for t in mirrored_strategy.experimental_local_results(result)])
  np.testing.assert_array_equal(got, np_rank(scores))


NAN_MESSAGE = r"`scores` must not contain NaN \(finite numbers and \+-inf are allowed\)"


@pytest.mark.parametrize(
  "fn",
  [exact.rank, lambda s: exact.rank_within(s, ops.ones_like(s, dtype="bool"))],
  ids=["rank", "rank_within"],
)
def test_nan_scores_raise_eagerly(fn):
  scores = ops.convert_to_tensor(np.array([[0.1, np.nan, 0.5], [1.0, 2.0, np.nan]], np.float32))
  with pytest.raises(ValueError, match=NAN_MESSAGE):
    fn(scores)
  # Infinities are ordinary scores: +inf first, -inf last.
  infinite = ops.convert_to_tensor(np.array([[0.1, -np.inf, np.inf]], np.float32))
  np.testing.assert_array_equal(bt.numpy(fn(infinite)), [[2, 3, 1]])


@pytest.mark.parametrize("mode", [m for m in bt.compile_modes() if m in ("xla", "jit")])
def test_nan_scores_give_nan_lists_where_no_check_raises(mode):
  """XLA and jax.jit cannot raise: a list with a NaN gets NaN ranks, the others exact ones."""
  scores = np.array([[0.1, np.nan, 0.5], [1.0, 3.0, 2.0]], np.float32)
  mask = np.array([[True, False, True]] * 2)
  for fn, want in ((exact.rank, [3, 1, 2]), (lambda s: exact.rank_within(s, mask), [2, 1, 1])):
    got = bt.numpy(bt.compiled(fn, mode)(ops.convert_to_tensor(scores)))
    assert np.all(np.isnan(got[0]))
    np.testing.assert_array_equal(got[1], want)


@pytest.mark.tensorflow_only
def test_nan_scores_raise_in_tf_function():
  import tensorflow as tf  # noqa: PLC0415

  with pytest.raises(tf.errors.InvalidArgumentError, match=NAN_MESSAGE):
    tf.function(exact.rank)(tf.constant([[0.1, np.nan, 0.5], [1.0, 2.0, np.nan]]))


def test_sink_moves_excluded_items_below_every_kept_one():
  # Kept 0.5 and 0.2 (lo = 0.2, hi = 0.5): excluded items go to 0.2 - 0.3 - 1 = -1.1, whatever
  # their own score, and pass no gradient.
  s = np.array([[0.5, 9.0, 0.2, -7.0]], np.float32)
  keep = np.array([[True, False, True, False]])
  np.testing.assert_allclose(bt.numpy(exact.sink(s, keep)), [[0.5, -1.1, 0.2, -1.1]], rtol=1e-6)
  _, (grad,) = bt.value_and_grad(lambda t: ops.sum(exact.sink(t, keep)), s)
  np.testing.assert_array_equal(grad, [[1.0, 0.0, 1.0, 0.0]])


@pytest.mark.parametrize("fn", [exact.rank, lambda s: exact.rank_within(s, s > 0.3)])
def test_the_exact_rank_has_no_gradient(fn):
  # Piecewise constant: jax.grad gives zeros, TensorFlow's tape None, and a PyTorch backward
  # pass one error naming the operator (not autograd's "element 0 ... does not require grad").
  s = np.array([[0.5, 0.1, 0.9]], np.float32)
  if backend.BACKEND == "torch":
    with pytest.raises(ValueError, match=r"The exact rank .* has no gradient.*stop_gradient"):
      bt.value_and_grad(lambda t: ops.sum(fn(t) * t), s)
    # as constants (stop_gradient), the ranks weigh the scores' own gradient
    _, (grad,) = bt.value_and_grad(lambda t: ops.sum(ops.stop_gradient(fn(t)) * t), s)
    np.testing.assert_array_equal(grad, bt.numpy(fn(s)))
    return
  _, (grad,) = bt.value_and_grad(lambda t: ops.sum(fn(t)), s)
  assert grad is None or not np.any(grad)
