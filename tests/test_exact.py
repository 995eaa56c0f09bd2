"""Tests of tfrank4class.ranking.exact: rank and rank_within against numpy references."""

import numpy as np
import pytest
import tensorflow as tf

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
  np.testing.assert_array_equal(exact.rank([[0.1, 0.9, 0.5, 0.9]]).numpy(), [[4, 1, 3, 2]])


@pytest.mark.parametrize("shape", [(1, 1), (5, 7), (3, 1000), (2, 3, 4)])
def test_rank_matches_numpy_argsort(shape):
  rng = np.random.default_rng(0)
  scores = rng.standard_normal(shape).astype(np.float32)
  np.testing.assert_array_equal(exact.rank(scores).numpy(), np_rank(scores))


def test_rank_ties_lower_index_first():
  rng = np.random.default_rng(1)
  scores = rng.integers(0, 3, size=(20, 9)).astype(np.float32)  # many ties
  np.testing.assert_array_equal(exact.rank(scores).numpy(), np_rank(scores))
  np.testing.assert_array_equal(exact.rank([[2.0, 2.0, 2.0]]).numpy(), [[1, 2, 3]])


@pytest.mark.parametrize("axis", [0, 1, -3])
def test_rank_other_axes(axis):
  rng = np.random.default_rng(2)
  scores = rng.standard_normal((3, 4, 5)).astype(np.float32)
  expected = np.moveaxis(np_rank(np.moveaxis(scores, axis, -1)), -1, axis)
  np.testing.assert_array_equal(exact.rank(scores, axis=axis).numpy(), expected)


def test_rank_dtypes():
  assert exact.rank(tf.constant([[3, 1, 2]])).dtype == tf.float32
  assert exact.rank(tf.constant([[3.0, 1.0]], tf.float64)).dtype == tf.float64
  np.testing.assert_array_equal(exact.rank(tf.constant([[3, 1, 2]])).numpy(), [[1, 3, 2]])


def test_rank_bad_input():
  with pytest.raises(ValueError, match="rank >= 1"):
    exact.rank(1.0)
  with pytest.raises(ValueError, match=r"`axis` must be in \[-2, 2\), got 2"):
    exact.rank([[1.0, 2.0]], axis=2)
  with pytest.raises(TypeError, match="real tensor"):
    exact.rank(tf.constant([["a"]]))
  with pytest.raises(ValueError, match="`axis` must be an integer"):
    exact.rank([[1.0]], axis=0.5)


def test_rank_within_matches_brute_force():
  rng = np.random.default_rng(3)
  scores = rng.integers(0, 4, size=(6, 11)).astype(np.float32)
  mask = rng.random((6, 11)) < 0.4
  np.testing.assert_array_equal(
    exact.rank_within(scores, mask).numpy(), np_rank_within(scores, mask)
  )
  np.testing.assert_array_equal(
    exact.rank_within([[0.1, 0.9, 0.5, 0.7]], [[True, False, True, False]]).numpy(), [[2, 1, 1, 2]]
  )


def test_rank_within_axis0_and_bad_mask():
  rng = np.random.default_rng(4)
  scores = rng.standard_normal((7, 3)).astype(np.float32)
  mask = rng.random((7, 3)) < 0.5
  np.testing.assert_array_equal(
    exact.rank_within(scores, mask, axis=0).numpy(), np_rank_within(scores.T, mask.T).T
  )
  with pytest.raises(TypeError, match="`mask` must be a boolean"):
    exact.rank_within([[1.0, 2.0]], [[1, 0]])


def test_tf_function_xla_and_dynamic_shapes():
  rng = np.random.default_rng(5)
  scores = rng.standard_normal((4, 9)).astype(np.float32)
  mask = scores > 0
  for jit in (False, True):
    f = tf.function(lambda s, m: (exact.rank(s), exact.rank_within(s, m)), jit_compile=jit)
    r, rw = f(scores, mask)
    np.testing.assert_array_equal(r.numpy(), np_rank(scores))
    np.testing.assert_array_equal(rw.numpy(), np_rank_within(scores, mask))
  dynamic = tf.function(exact.rank, input_signature=[tf.TensorSpec([None, None], tf.float32)])
  np.testing.assert_array_equal(dynamic(scores).numpy(), np_rank(scores))


def test_mirrored_strategy(mirrored_strategy):
  rng = np.random.default_rng(6)
  scores = rng.standard_normal((4, 6)).astype(np.float32)
  dataset = tf.data.Dataset.from_tensor_slices(scores).batch(4)
  batch = next(iter(mirrored_strategy.experimental_distribute_dataset(dataset)))
  result = mirrored_strategy.run(tf.function(exact.rank), (batch,))
  got = np.concatenate([t.numpy() for t in mirrored_strategy.experimental_local_results(result)])
  np.testing.assert_array_equal(got, np_rank(scores))


@pytest.mark.parametrize(
  "fn",
  [exact.rank, lambda s: exact.rank_within(s, tf.ones_like(s) > 0)],
  ids=["rank", "rank_within"],
)
def test_nan_scores_raise_eagerly_and_in_tf_function(fn):
  scores = tf.constant([[0.1, np.nan, 0.5], [1.0, 2.0, np.nan]])
  for call in (fn, tf.function(fn)):
    with pytest.raises(
      tf.errors.InvalidArgumentError,
      match=r"(?s)`scores` must not contain NaN \(finite numbers and \+-inf are "
      r"allowed\); NaN entries:.*2",
    ):
      call(scores)
  # Infinities are ordinary scores: +inf first, -inf last.
  np.testing.assert_array_equal(fn(tf.constant([[0.1, -np.inf, np.inf]])).numpy(), [[2, 3, 1]])


def test_nan_check_is_dropped_under_xla_but_finite_ranks_are_unchanged():
  """XLA drops tf.debugging assertions (documented); finite input still ranks exactly."""
  scores = np.random.default_rng(5).standard_normal((4, 9)).astype(np.float32)
  jitted = tf.function(exact.rank, jit_compile=True)
  np.testing.assert_array_equal(jitted(scores).numpy(), np_rank(scores))
  assert jitted(tf.constant([[0.1, np.nan, 0.5]])).shape == (1, 3)  # no error under XLA


def test_sink_moves_excluded_items_below_every_kept_one():
  # Kept 0.5 and 0.2 (lo = 0.2, hi = 0.5): excluded items go to 0.2 - 0.3 - 1 = -1.1, whatever
  # their own score, and pass no gradient.
  s = tf.constant([[0.5, 9.0, 0.2, -7.0]])
  keep = tf.constant([[True, False, True, False]])
  with tf.GradientTape() as tape:
    tape.watch(s)
    sunk = exact.sink(s, keep)
  np.testing.assert_allclose(sunk.numpy(), [[0.5, -1.1, 0.2, -1.1]], rtol=1e-6)
  np.testing.assert_array_equal(tape.gradient(sunk, s).numpy(), [[1.0, 0.0, 1.0, 0.0]])
