"""experiments/true_ranks.py: the true class's rank and ties against a brute-force count, the
metrics recomputed from them against the package's metrics (ties in expectation), the compact
form."""

import numpy as np
import pytest

from experiments import training, true_ranks


def test_ranks_and_ties_against_a_brute_force_count():
  rng = np.random.default_rng(0)
  scores = rng.integers(0, 4, size=(50, 7)).astype(np.float32)  # many ties
  labels = rng.integers(0, 7, size=50)
  rank, ties = true_ranks.true_ranks(scores, labels)
  for i, y in enumerate(labels):
    higher = sum(scores[i, c] > scores[i, y] for c in range(7))
    same = sum(scores[i, c] == scores[i, y] for c in range(7) if c != y)
    assert (rank[i], ties[i]) == (1 + higher, same)


def test_metrics_equal_the_packages_metrics_with_ties():
  rng = np.random.default_rng(1)
  scores = rng.integers(0, 3, size=(64, 9)).astype(np.float32)
  labels = rng.integers(0, 9, size=64)
  rank, ties = true_ranks.true_ranks(scores, labels)
  expected = training.evaluate_scores(labels, scores, true_ranks.METRICS)
  found = true_ranks.summary(rank, ties)
  for metric in true_ranks.METRICS:
    assert found[metric] == pytest.approx(expected[metric], abs=1e-5), metric


def test_per_example_by_hand():
  # rank 2 with 2 ties: positions 2, 3, 4 equally likely
  assert true_ranks.per_example([2], [2], "top_1").tolist() == [0.0]
  assert true_ranks.per_example([2], [2], "top_5").tolist() == [1.0]
  assert true_ranks.per_example([2], [2], "mrr")[0] == pytest.approx((1 / 2 + 1 / 3 + 1 / 4) / 3)
  ndcg = (1 / np.log2(3) + 1 / np.log2(4) + 1 / np.log2(5)) / 3
  assert true_ranks.per_example([2], [2], "ndcg_5")[0] == pytest.approx(ndcg)
  assert true_ranks.per_example([5], [1], "top_5").tolist() == [0.5]


def test_encode_round_trip_and_size():
  values = np.r_[np.ones(4000, int), np.arange(1, 151)]
  text = true_ranks.encode(values)
  assert true_ranks.decode(text).tolist() == values.tolist()
  assert len(text) < 1000  # mostly rank 1: compresses far below 2 bytes a value


def test_bad_input_is_named():
  with pytest.raises(ValueError, match="class ids in"):
    true_ranks.true_ranks(np.zeros((2, 3)), [0, 3])
  with pytest.raises(ValueError, match="finite"):
    true_ranks.true_ranks(np.array([[np.nan, 1.0]]), [0])
  with pytest.raises(ValueError, match=r"\[N, C\]"):
    true_ranks.true_ranks(np.zeros(3), [0])
  with pytest.raises(ValueError, match="metric"):
    true_ranks.per_example([1], [0], "top_3")
  with pytest.raises(ValueError, match="65535"):
    true_ranks.encode([70000])
