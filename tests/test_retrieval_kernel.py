"""Tests of tfrank4class.retrieval.kernel (the TensorFlow kernel of Recall@K and MAP@R)."""

import itertools

import _retrieval_reference as ref
import numpy as np
import pytest
import tensorflow as tf

from tfrank4class.retrieval.kernel import (
  average_precision_at_r,
  block_statistics,
  compiled_block_statistics,
  hit_probabilities,
  similarities,
)


# ---------------------------------------------------------------- TF execution modes
def _kernel_inputs():
  rng = np.random.default_rng(7)
  e = rng.normal(size=(12, 3))
  e /= np.linalg.norm(e, axis=1, keepdims=True)
  y = rng.integers(0, 3, size=12)
  ids = np.arange(12)
  return [tf.constant(e), tf.constant(y), tf.constant(ids)] * 2 + [tf.constant([1, 2, 4], tf.int64)]


def test_kernel_eager_function_and_jit_agree_with_reference():
  args = _kernel_inputs()
  e, y = args[0].numpy(), args[1].numpy()
  want = ref.brute_force(e @ e.T, y, (1, 2, 4))
  hits, ap, r = block_statistics(*args)
  for j, k in enumerate((1, 2, 4)):
    assert hits.numpy()[r.numpy() > 0, j].mean() == pytest.approx(want[f"recall@{k}"])
  assert ap.numpy()[r.numpy() > 0].mean() == pytest.approx(want["map@r"])
  fn_hits, fn_ap, _ = tf.function(block_statistics)(*args)
  np.testing.assert_allclose(fn_hits, hits, atol=1e-12)
  np.testing.assert_allclose(fn_ap, ap, atol=1e-12)
  jit_hits, _, _ = tf.function(lambda *a: block_statistics(*a, with_map=False), jit_compile=True)(
    *args
  )
  np.testing.assert_allclose(jit_hits, hits, atol=1e-9)


# ---------------------------------------------------------------- the kernel's pieces
def _pieces_inputs(seed):
  rng = np.random.default_rng(seed)
  e, sims = ref.tied_embeddings(rng, n=6, num_bases=3)
  y = rng.integers(0, 2, size=6)
  valid = ~np.eye(6, dtype=bool)
  positive = (y[:, None] == y[None, :]) & valid
  return sims, valid, positive, y


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_hit_probabilities_and_ap_at_r_match_all_orderings(seed):
  """Each piece against the mean over every tie-breaking order (leave-one-out, 5 candidates)."""
  sims, valid, positive, y = _pieces_inputs(seed)
  ks = (1, 2, 4)
  hits, aps = [], []
  for perm in itertools.permutations(range(6)):
    h, a, _ = ref.recall_map_one_order(sims, y, np.arange(6), np.arange(6), ks, np.array(perm))
    hits.append(h)
    aps.append(a)
  s = tf.constant(sims, tf.float64)
  got_hits = hit_probabilities(s, tf.constant(valid), tf.constant(positive), tf.constant(ks))
  num_pos = tf.constant(positive.sum(1), tf.float64)
  got_ap = average_precision_at_r(s, tf.constant(valid), tf.constant(positive), num_pos)
  has = positive.sum(1) > 0
  np.testing.assert_allclose(got_hits.numpy()[has], np.mean(hits, axis=0)[has], atol=1e-12)
  np.testing.assert_allclose(got_ap.numpy()[has], np.mean(aps, axis=0)[has], atol=1e-12)


def test_similarities_round_to_float32_ties():
  a = np.array([[0.6, 0.8]])
  b = np.array([[0.6, 0.8], [0.6 + 1e-12, 0.8 - 1e-12]])  # equal within float32 resolution
  got = similarities(tf.constant(a), tf.constant(b)).numpy()
  assert got[0, 0] == got[0, 1]


def test_compiled_kernel_is_traced_once():
  fn = compiled_block_statistics(True)
  assert fn is compiled_block_statistics(True) and fn is not compiled_block_statistics(False)
  args = _kernel_inputs()
  np.testing.assert_allclose(fn(*args)[1], block_statistics(*args)[1], atol=1e-12)
  traced = fn.experimental_get_tracing_count()
  fn(*[a[:5] if a.shape[0] == 12 else a for a in args[:3]], *args[3:])  # other block size
  assert fn.experimental_get_tracing_count() == traced


def test_docstring_examples_run():
  import doctest

  from tfrank4class.retrieval import kernel

  result = doctest.testmod(kernel, extraglobs={"tf": tf}, optionflags=doctest.NORMALIZE_WHITESPACE)
  assert result.attempted > 0 and result.failed == 0, result
