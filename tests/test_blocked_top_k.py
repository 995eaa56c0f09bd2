"""Tests of tfrank4class.heads.blocked_top_k: the blocked scan equals a full top-k written in
numpy (stable order: ties by the lower class id), for block sizes that do and do not divide C,
in every compile mode; bad arguments."""

import numpy as np
import pytest

from tests.backend_testing import compile_modes, compiled, numpy
from tfrank4class.compat import ops
from tfrank4class.heads.blocked_top_k import blocked_top_k


def _dot(queries, block):
  return ops.matmul(queries, ops.transpose(block))


def _reference(queries, table, k):
  scores = queries.astype(np.float64) @ table.astype(np.float64).T
  ids = np.argsort(-scores, axis=1, kind="stable")[:, :k]
  return np.take_along_axis(scores, ids, axis=1), ids


def _tied_case(c=23, b=5, d=3):
  """Integer embeddings in {-1, 0, 1}: many exact ties among the C scores of each row."""
  rng = np.random.default_rng(0)
  queries = rng.integers(-1, 2, size=(b, d)).astype("float32")
  table = rng.integers(-1, 2, size=(c, d)).astype("float32")
  return queries, table


@pytest.mark.parametrize("mode", compile_modes())
@pytest.mark.parametrize("block_size", [1, 4, 7, 23, 100])
def test_equals_a_full_top_k_ties_included(mode, block_size):
  queries, table = _tied_case()
  k = 6
  want_scores, want_ids = _reference(queries, table, k)
  assert any(len(set(row)) < k for row in want_scores)  # the case has ties inside the top k
  run = compiled(lambda q, t: blocked_top_k(_dot, q, t, k, block_size), mode)
  scores, ids = numpy(run(queries, table))
  np.testing.assert_array_equal(ids, want_ids)
  np.testing.assert_allclose(scores, want_scores, rtol=1e-6)
  assert ids.dtype == np.int32


@pytest.mark.parametrize("k", [1, 23])
def test_k_at_the_ends(k):
  rng = np.random.default_rng(1)
  queries, table = rng.normal(size=(3, 4)), rng.normal(size=(23, 4))
  want_scores, want_ids = _reference(queries, table, k)
  scores, ids = numpy(blocked_top_k(_dot, queries.astype("float32"), table.astype("float32"), k, 5))
  np.testing.assert_array_equal(ids, want_ids)
  np.testing.assert_allclose(scores, want_scores, rtol=1e-5, atol=1e-6)


def test_bad_arguments():
  queries, table = _tied_case()
  with pytest.raises(ValueError, match=r"`k` must be at most the 23 classes, got 24"):
    blocked_top_k(_dot, queries, table, 24, 4)
  with pytest.raises(ValueError, match=r"`k` must be an integer >= 1, got 0"):
    blocked_top_k(_dot, queries, table, 0, 4)
  with pytest.raises(ValueError, match=r"`block_size` must be an integer >= 1, got 0"):
    blocked_top_k(_dot, queries, table, 2, 0)
