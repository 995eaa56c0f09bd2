"""Tests of tfrank4class.retrieval.kernel (the keras.ops kernel of Recall@K and MAP@R), on every
backend, against numpy brute force over every tie-breaking order."""

import itertools

import _retrieval_reference as ref
import numpy as np
import pytest
from backend_testing import compile_modes, compiled, numpy

from tfrank4class.compat import ops
from tfrank4class.retrieval.kernel import (
  average_precision_at_r,
  block_statistics,
  hit_probabilities,
  similarities,
)

TOL = 1e-12


#: float64 inputs stay float64 on every backend (JAX: ``jax_enable_x64``, on for each test).
pytestmark = pytest.mark.usefixtures("float64_inputs")


# ---------------------------------------------------------------- execution modes
def _kernel_inputs():
  rng = np.random.default_rng(7)
  e = rng.normal(size=(12, 3))
  e /= np.linalg.norm(e, axis=1, keepdims=True)
  y = rng.integers(0, 3, size=12)
  ids = np.arange(12)
  return [e, y, ids] * 2 + [np.array([1, 2, 4])]


def test_kernel_eager_and_compiled_agree_with_reference():
  """Eagerly against brute force; compiled (tf.function, XLA, jax.jit) against eager. MAP@R's
  top_k takes the block's largest R_q as k, which jax.jit and XLA cannot trace: Recall@K only
  there."""
  args = _kernel_inputs()
  e, y = args[0], args[1]
  want = ref.brute_force(e @ e.T, y, (1, 2, 4))
  hits, ap, r = numpy(block_statistics(*args))
  for j, k in enumerate((1, 2, 4)):
    assert hits[r > 0, j].mean() == pytest.approx(want[f"recall@{k}"], abs=TOL)
  assert ap[r > 0].mean() == pytest.approx(want["map@r"], abs=TOL)
  for mode in compile_modes()[1:]:
    with_map = mode == "function"
    got = numpy(compiled(lambda *a, m=with_map: block_statistics(*a, with_map=m), mode)(*args))
    np.testing.assert_allclose(got[0], hits, atol=1e-9)
    if with_map:
      np.testing.assert_allclose(got[1], ap, atol=TOL)


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
  got_hits = numpy(hit_probabilities(sims, valid, positive, np.array(ks)))
  num_pos = positive.sum(1).astype(np.float64)
  got_ap = numpy(average_precision_at_r(sims, valid, positive, num_pos))
  has = positive.sum(1) > 0
  np.testing.assert_allclose(got_hits[has], np.mean(hits, axis=0)[has], atol=TOL)
  np.testing.assert_allclose(got_ap[has], np.mean(aps, axis=0)[has], atol=TOL)


def test_similarities_round_to_float32_ties():
  a = np.array([[0.6, 0.8]])
  b = np.array([[0.6, 0.8], [0.6 + 1e-12, 0.8 - 1e-12]])  # equal within float32 resolution
  got = numpy(similarities(ops.convert_to_tensor(a), ops.convert_to_tensor(b)))
  assert got[0, 0] == got[0, 1]


def test_docstring_examples_run():
  import doctest

  from tfrank4class.retrieval import kernel

  result = doctest.testmod(kernel, optionflags=doctest.NORMALIZE_WHITESPACE)
  assert result.attempted > 0 and result.failed == 0, result
