"""Tests of tfrank4class.retrieval.evaluation (the host loop) against numpy brute force."""

import _retrieval_reference as ref
import numpy as np
import pytest

from tfrank4class.retrieval.evaluation import map_at_r, retrieval_metrics, retrieval_recall_at_k

#: float64 inputs stay float64 on every backend (JAX: ``jax_enable_x64``, on for each test).
pytestmark = pytest.mark.usefixtures("float64_inputs")


# ---------------------------------------------------------------- values
def test_hand_computed_example():
  # Query 0 ([1,0], class 0): nearest is item 1 (class 1), then item 2 (class 0).
  e = [[1.0, 0.0], [0.8, 0.6], [0.6, 0.8], [0.0, 1.0]]
  r = retrieval_recall_at_k(e, [0, 1, 0, 1], ks=(1, 2, 3))
  # Hits at K=1: none. K=2: queries 0 and 3. K=3: all.
  assert (r["recall@1"], r["recall@2"], r["recall@3"]) == (0.0, 0.5, 1.0)
  assert r["num_queries"] == 4 and r["num_excluded"] == 0
  # MAP@R with R=1: AP = 1 for queries 0 and 3 (positive first), 0 otherwise.
  assert map_at_r(e, [0, 0, 1, 1])["map@r"] == pytest.approx(0.5)


def test_leave_one_out_matches_sorting_without_ties():
  rng = np.random.default_rng(0)
  e = rng.normal(size=(90, 6)).astype(np.float32)
  y = rng.integers(0, 7, size=90)
  want = ref.brute_force(ref.cosine(e), y, (1, 2, 4, 8))
  got = retrieval_metrics(e, y, (1, 2, 4, 8), block_size=32)
  ref.assert_close(got, want, (1, 2, 4, 8), tol=1e-9)


def test_query_gallery_matches_sorting_without_ties():
  rng = np.random.default_rng(1)
  e = rng.normal(size=(80, 4)).astype(np.float32)
  y = rng.integers(0, 6, size=80)
  q, g = np.arange(30), np.arange(30, 80)
  want = ref.brute_force(ref.cosine(e), y, (1, 2, 4, 8), q_ids=q, g_ids=g)
  got = retrieval_metrics(e, y, (1, 2, 4, 8), query=q, gallery=g, block_size=7)
  ref.assert_close(got, want, (1, 2, 4, 8))
  # A boolean mask selects the same sets.
  mask = np.zeros(80, bool)
  mask[:30] = True
  got_mask = retrieval_metrics(e, y, (1, 2, 4, 8), query=mask, gallery=~mask)
  ref.assert_close(got_mask, want, (1, 2, 4, 8))


@pytest.mark.parametrize(
  "seed, n, num_bases, num_classes",
  [(0, 7, 3, 3), (1, 7, 3, 3), (2, 7, 3, 3), (3, 8, 2, 2), (4, 8, 3, 2)],
)
def test_ties_match_average_over_all_orderings_leave_one_out(seed, n, num_bases, num_classes):
  rng = np.random.default_rng(seed)
  e, sims = ref.tied_embeddings(rng, n=n, num_bases=num_bases)
  y = rng.integers(0, num_classes, size=n)
  ks = (1, 2, 4)
  want = ref.brute_force(sims, y, ks, all_orders=True)
  ref.assert_close(retrieval_metrics(e, y, ks, block_size=3), want, ks)


@pytest.mark.parametrize("seed", [3, 4])
def test_ties_match_average_over_all_orderings_query_gallery(seed):
  rng = np.random.default_rng(seed)
  e, sims = ref.tied_embeddings(rng, n=10, num_bases=3)
  y = rng.integers(0, 2, size=10)
  q, g = np.array([0, 1, 2, 3]), np.arange(3, 10)  # item 3 is in both sets
  ks = (1, 2, 3, 6)
  want = ref.brute_force(sims, y, ks, q_ids=q, g_ids=g, all_orders=True)
  got = retrieval_metrics(e, y, ks, query=q, gallery=g, block_size=2)
  ref.assert_close(got, want, ks)


def test_collapsed_embeddings_score_chance():
  # All similarities tie: each query has 1 positive among 5 others.
  e = np.ones((6, 3), np.float32)
  r = retrieval_metrics(e, [0, 0, 1, 1, 2, 2], ks=(1, 2, 5))
  assert r["recall@1"] == pytest.approx(1 / 5)
  assert r["recall@2"] == pytest.approx(2 / 5)  # 1 - C(4,2)/C(5,2)
  assert r["recall@5"] == pytest.approx(1.0)
  assert r["map@r"] == pytest.approx(1 / 5)


def test_blocked_equals_single_block_on_many_blocks():
  rng = np.random.default_rng(5)
  bases = rng.normal(size=(40, 16))
  e = (bases[rng.integers(0, 40, size=1500)] + 0.3 * rng.normal(size=(1500, 16))).astype(np.float32)
  e[:200] = e[200:400]  # exact duplicates give ties ...
  y = rng.integers(0, 30, size=1500)
  y[:200] = y[200:400]  # ... within a class, so any order is exact
  one = retrieval_metrics(e, y, (1, 2, 4, 8), block_size=1500)
  many = retrieval_metrics(e, y, (1, 2, 4, 8), block_size=97)
  for key in one:
    assert many[key] == pytest.approx(one[key], abs=1e-12), key
  ref.assert_close(many, ref.brute_force(ref.cosine(e), y, (1, 2, 4, 8)), (1, 2, 4, 8))


def test_zero_embedding_has_cosine_zero():
  # Item 2 is the zero vector: similarity 0 to everything, so for query 0 ([1, 0]) it ties with
  # the orthogonal item 3 (class 0) behind item 1.
  e = [[1.0, 0.0], [1.0, 0.1], [0.0, 0.0], [0.0, 1.0]]
  y = [0, 1, 1, 0]
  sims = np.array([[1, 0.995, 0, 0], [0.995, 1, 0, 0.0995], [0, 0, 0, 0], [0, 0.0995, 0, 1]])
  want = ref.brute_force(sims, np.array(y), (1, 2), all_orders=True)
  got = retrieval_metrics(e, y, (1, 2))
  ref.assert_close(got, want, (1, 2))


# ---------------------------------------------------------------- singletons
def test_singletons_excluded_and_counted():
  # Class 2 has one item (index 4): it can never be found.
  e = [[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9], [0.7, 0.7]]
  y = [0, 0, 1, 1, 2]
  ex = retrieval_recall_at_k(e, y, ks=(1,))
  assert ex == {"recall@1": 1.0, "num_queries": 4, "num_excluded": 1}
  miss = retrieval_recall_at_k(e, y, ks=(1,), singletons="miss")
  assert miss == {"recall@1": 0.8, "num_queries": 5, "num_excluded": 0}
  assert map_at_r(e, y, singletons="miss")["map@r"] == pytest.approx(0.8)


def test_query_class_absent_from_gallery_is_excluded():
  e = [[1.0, 0.0], [0.0, 1.0], [1.0, 0.1], [0.1, 1.0]]
  y = [0, 5, 0, 1]
  r = retrieval_recall_at_k(e, y, ks=(1,), query=[0, 1], gallery=[2, 3])
  assert r == {"recall@1": 1.0, "num_queries": 1, "num_excluded": 1}


# ---------------------------------------------------------------- bad input
def test_length_mismatch():
  with pytest.raises(
    ValueError, match=r"`labels` and `embeddings` must have the same length, got 3 labels for 4"
  ):
    retrieval_recall_at_k(np.ones((4, 2)), [0, 1, 0])


def test_k_larger_than_gallery():
  e = np.eye(4)
  with pytest.raises(ValueError, match=r"`ks` must not exceed .* \(3\), got ks=\[1, 4\]"):
    retrieval_recall_at_k(e, [0, 0, 1, 1], ks=(1, 4))
  with pytest.raises(ValueError, match=r"\(2\), got ks=\[3\]"):
    retrieval_recall_at_k(e, [0, 0, 1, 1], ks=3, query=[0, 1], gallery=[2, 3])


def test_nan_embeddings():
  e = np.eye(4)
  e[2, 1] = np.nan
  with pytest.raises(
    ValueError,
    match=r"`embeddings` must be finite, but 1 row\(s\) hold NaN or Inf \(first rows: \[2\]\)",
  ):
    retrieval_recall_at_k(e, [0, 0, 1, 1], ks=1)


@pytest.mark.parametrize(
  "kwargs, message",
  [
    (dict(ks=0), r"`ks` must be an integer >= 1, got 0"),
    (dict(ks=()), r"`ks` must hold at least one cut-off"),
    (dict(singletons="drop"), r"`singletons` must be one of \['exclude', 'miss'\], got 'drop'"),
    (dict(block_size=0), r"`block_size` must be an integer >= 1, got 0"),
    (dict(query=[0, 9]), r"`query` holds row indices outside \[0, 4\)"),
    (dict(gallery=[True, False]), r"`gallery` given as a boolean mask must have shape \(4,\)"),
    (dict(query=[]), r"`query` must select at least one item"),
  ],
)
def test_bad_arguments(kwargs, message):
  with pytest.raises(ValueError, match=message):
    retrieval_metrics(np.eye(4), [0, 0, 1, 1], **{"ks": 1, **kwargs})


def test_bad_shapes_and_no_answerable_query():
  with pytest.raises(ValueError, match=r"`embeddings` must have shape \[num_items, dim\]"):
    retrieval_recall_at_k(np.ones(4), [0, 0, 1, 1], ks=1)
  with pytest.raises(ValueError, match=r"`labels` must be class ids of shape \[N\] or \[N, 1\]"):
    retrieval_recall_at_k(np.eye(4), np.zeros((4, 2)), ks=1)
  with pytest.raises(ValueError, match=r"No query has an item of its class in the gallery"):
    retrieval_recall_at_k(np.eye(4), [0, 1, 2, 3], ks=1)
  with pytest.raises(ValueError, match=r"`labels` given as class ids must be whole numbers"):
    retrieval_recall_at_k(np.eye(4), [0.0, 0.5, 1.0, 1.0], ks=1)
  with pytest.raises(ValueError, match=r"`labels` must be class ids >= 0, got \[-1\]"):
    retrieval_recall_at_k(np.eye(4), [0, -1, 1, 1], ks=1)


def test_docstring_examples_run():
  import doctest

  from tfrank4class.retrieval import evaluation

  result = doctest.testmod(evaluation, optionflags=doctest.NORMALIZE_WHITESPACE)
  assert result.attempted > 0 and result.failed == 0, result
