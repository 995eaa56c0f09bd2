"""The exact float64 reference metrics against scikit-learn, scipy, TF-Ranking and brute-force tie
enumeration."""

import itertools
import math

import _tf_ranking_reference as tf_ranking_reference
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import spearmanr
from sklearn.metrics import (
  average_precision_score,
  label_ranking_average_precision_score,
  ndcg_score,
  top_k_accuracy_score,
)

from tfrank4class.metrics import reference as F

tfr_metrics = tf_ranking_reference.module("keras.metrics")

RNG = np.random.default_rng(1234)
B, C = 40, 8


def _random_case(tied):
  scores = (RNG.integers(0, 3, (B, C)) if tied else RNG.normal(size=(B, C))).astype(np.float32)
  labels = RNG.integers(0, C, B)
  return labels, scores


# --- brute force over every tie-breaking order (the definition of the tie rule) -------------------


def _expected_over_ties(metric, relevance, scores):
  n = len(scores)
  values = []
  for tiebreak in itertools.permutations(range(n)):
    order = sorted(range(n), key=lambda i: (-scores[i], tiebreak[i]))
    values.append(metric([relevance[i] for i in order]))
  return float(np.mean(values))


def _ap(ranked):
  hits, total = 0, 0.0
  for p, r in enumerate(ranked, 1):
    if r > 0:
      hits += 1
      total += hits / p
  return total / max(1, sum(r > 0 for r in ranked))


def _rr(ranked, k=None):
  for p, r in enumerate(ranked, 1):
    if r > 0:
      return 1.0 / p if k is None or p <= k else 0.0
  return 0.0


def _topk(ranked, k):
  return float(any(r > 0 for r in ranked[:k]))


@pytest.mark.parametrize("tied", [False, True])
def test_ndcg_matches_sklearn(tied):
  labels, scores = _random_case(tied)
  onehot = np.eye(C)[labels]
  graded = RNG.integers(0, 4, (B, C)).astype(np.float32)
  for k in (1, 5, None):
    got = F.ndcg(labels, scores, k=k, gain="linear").numpy()
    want = [ndcg_score(onehot[i : i + 1], scores[i : i + 1], k=k) for i in range(B)]
    np.testing.assert_allclose(got, want, atol=1e-6)
    got = F.ndcg(graded, scores, k=k, gain="linear").numpy()
    want = [
      ndcg_score(graded[i : i + 1], scores[i : i + 1], k=k) if graded[i].any() else 0.0
      for i in range(B)
    ]
    np.testing.assert_allclose(got, want, atol=1e-6)
    # exp2 gains: sklearn on transformed relevance 2^r - 1.
    got = F.ndcg(graded, scores, k=k).numpy()
    want = [
      ndcg_score(2 ** graded[i : i + 1] - 1, scores[i : i + 1], k=k) if graded[i].any() else 0.0
      for i in range(B)
    ]
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_top_k_accuracy_matches_sklearn_on_distinct_scores():
  labels, scores = _random_case(tied=False)
  for k in (1, 3, 5):
    got = F.top_k_accuracy(labels, scores, k=k).numpy().mean()
    assert got == pytest.approx(top_k_accuracy_score(labels, scores, k=k, labels=range(C)))


def test_average_precision_matches_sklearn_on_distinct_scores():
  _, scores = _random_case(tied=False)
  relevance = (RNG.random((B, C)) < 0.3).astype(np.float32)
  relevance[:, 0] = 1.0
  got = F.average_precision(relevance, scores).numpy()
  want = [average_precision_score(relevance[i], scores[i]) for i in range(B)]
  np.testing.assert_allclose(got, want, atol=1e-6)
  assert got.mean() == pytest.approx(
    label_ranking_average_precision_score(relevance, scores), abs=1e-6
  )


@pytest.mark.parametrize("tied", [False, True])
def test_spearman_matches_scipy(tied):
  _, scores = _random_case(tied)
  graded = RNG.integers(0, 4, (B, C)).astype(np.float32)
  got = F.spearman(graded, scores).numpy()
  want = []
  for i in range(B):
    rho = spearmanr(graded[i], scores[i]).statistic
    want.append(0.0 if np.isnan(rho) else rho)  # constant lists: documented 0
  np.testing.assert_allclose(got, want, atol=1e-5)


@pytest.mark.parametrize("seed", range(6))
def test_tied_metrics_are_expectations_over_tie_breaking(seed):
  rng = np.random.default_rng(seed)
  n = 6
  scores = rng.integers(0, 3, n).astype(np.float64)
  relevance = (rng.random(n) < 0.4).astype(np.float64)
  relevance[rng.integers(n)] = 1.0
  rel, sc = relevance[None], scores[None]
  assert float(F.average_precision(rel, sc)[0]) == pytest.approx(
    _expected_over_ties(_ap, relevance, scores), abs=1e-6
  )
  assert float(F.reciprocal_rank(rel, sc)[0]) == pytest.approx(
    _expected_over_ties(_rr, relevance, scores), abs=1e-6
  )
  assert float(F.reciprocal_rank(rel, sc, k=2)[0]) == pytest.approx(
    _expected_over_ties(lambda r: _rr(r, 2), relevance, scores), abs=1e-6
  )
  for k in (1, 2, 4):
    assert float(F.top_k_accuracy(rel, sc, k=k)[0]) == pytest.approx(
      _expected_over_ties(lambda r, k=k: _topk(r, k), relevance, scores), abs=1e-6
    )


def test_all_equal_scores_give_chance_values():
  scores = np.zeros((1, 4), np.float32)
  assert float(F.top_k_accuracy([2], scores, k=1)[0]) == pytest.approx(0.25)
  assert float(F.reciprocal_rank([2], scores)[0]) == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 4) / 4)


@pytest.mark.parametrize("tied", [False, True])
def test_against_tf_ranking_metrics_on_one_hot(tied):
  labels, scores = _random_case(tied)
  if tied:
    # TF-Ranking breaks ties at random: compare on lists whose true class is not tied.
    true = scores[np.arange(B), labels]
    keep = (scores == true[:, None]).sum(1) == 1
    labels, scores = labels[keep], scores[keep]
  onehot = np.eye(C, dtype=np.float32)[labels]
  for k in (1, 5):
    want = tfr_metrics.NDCGMetric(topn=k)(onehot, scores).numpy()
    assert F.ndcg(labels, scores, k=k).numpy().mean() == pytest.approx(want, abs=1e-5)
  want = tfr_metrics.MRRMetric()(onehot, scores).numpy()
  assert F.reciprocal_rank(labels, scores).numpy().mean() == pytest.approx(want, abs=1e-5)


def test_rank4class_figure_1():
  """Two models over the same two images: same Top-1 and Top-5, different NDCG@5."""
  labels = [0, 0]
  # Model 1 puts the true class at ranks 2 and 1; model 2 at ranks 1 and 4.
  model_1 = [[0.3, 0.4, 0.1, 0.1, 0.1], [0.6, 0.1, 0.1, 0.1, 0.1]]
  model_2 = [[0.5, 0.2, 0.1, 0.1, 0.1], [0.15, 0.3, 0.25, 0.2, 0.1]]
  for scores in (model_1, model_2):
    assert F.top_k_accuracy(labels, scores, k=1).numpy().mean() == pytest.approx(0.5)
    assert F.top_k_accuracy(labels, scores, k=5).numpy().mean() == pytest.approx(1.0)
  assert F.ndcg(labels, model_1, k=5).numpy().mean() == pytest.approx(
    (1 / math.log2(3) + 1) / 2, abs=1e-6
  )
  assert F.ndcg(labels, model_2, k=5).numpy().mean() == pytest.approx(
    (1 + 1 / math.log2(5)) / 2, abs=1e-6
  )
  assert round(float(F.ndcg(labels, model_1, k=5).numpy().mean()), 2) == 0.82
  assert round(float(F.ndcg(labels, model_2, k=5).numpy().mean()), 2) == 0.72


def test_no_relevant_item_and_padding():
  relevance = np.array([[0.0, 0.0, 0.0], [1.0, -1.0, 0.0]], np.float32)
  scores = np.array([[0.1, 0.2, 0.3], [0.1, 9.0, 0.0]], np.float32)
  for fn in (F.ndcg, F.reciprocal_rank, F.average_precision, F.spearman):
    values = fn(relevance, scores).numpy()
    assert np.all(np.isfinite(values))
    assert values[0] == 0.0
  # The padded item (score 9) is ignored: the relevant item is first among the valid ones.
  assert F.reciprocal_rank(relevance, scores).numpy()[1] == pytest.approx(1.0)
  assert F.top_k_accuracy(relevance, scores, k=1).numpy()[1] == pytest.approx(1.0)
  assert F.ndcg(relevance, scores).numpy()[1] == pytest.approx(1.0)


@settings(max_examples=60, deadline=None)
@given(
  st.lists(st.lists(st.floats(-20, 20, width=32), min_size=5, max_size=5), min_size=1, max_size=6),
  st.data(),
)
def test_bruch_bound(logits, data):
  """Bruch et al. 2019: p(true) <= 1 / rank(true), so mean softmax CE >= -log(MRR)."""
  logits = np.array(logits, np.float32)
  labels = np.array([data.draw(st.integers(0, 4)) for _ in range(len(logits))])
  log_p = tf.nn.log_softmax(tf.constant(logits, tf.float64)).numpy()
  p_true = np.exp(log_p[np.arange(len(labels)), labels])
  # The pessimistic rank (every tie counted ahead) is the tightest rank the bound holds for.
  worst_rank = (logits >= logits[np.arange(len(labels)), labels][:, None]).sum(1)
  assert np.all(p_true <= 1.0 / worst_rank + 1e-9)
  rr = F.reciprocal_rank(labels, logits).numpy().astype(np.float64)
  assert np.all(p_true <= rr + 1e-6)  # expected RR over ties >= 1 / worst rank
  ce = -log_p[np.arange(len(labels)), labels].mean()
  assert ce >= -np.log(rr.mean()) - 1e-6


def test_runs_in_tf_function_and_xla():
  labels, scores = _random_case(tied=True)
  eager = F.ndcg(labels, scores, k=5).numpy()
  for jit in (False, True):
    fn = tf.function(
      lambda y, s: (
        F.ndcg(y, s, k=5),
        F.top_k_accuracy(y, s, k=2),
        F.reciprocal_rank(y, s),
        F.average_precision(y, s),
        F.spearman(tf.one_hot(y, C), s),
      ),
      jit_compile=jit,
    )
    out = fn(tf.constant(labels), tf.constant(scores))
    np.testing.assert_allclose(out[0].numpy(), eager, atol=1e-6)
    assert all(np.all(np.isfinite(o.numpy())) for o in out)


@pytest.mark.parametrize(
  "fn", [F.ndcg, F.top_k_accuracy, F.reciprocal_rank, F.average_precision, F.spearman]
)
def test_bad_input(fn):
  with pytest.raises(tf.errors.InvalidArgumentError, match=r"labels.*\[0, num_classes=3\)"):
    fn([0, 3], [[0.1, 0.2, 0.3]] * 2)
  with pytest.raises(tf.errors.InvalidArgumentError, match=r"labels.*\[0, num_classes=3\)"):
    tf.function(fn)(tf.constant([0, -1]), tf.constant([[0.1, 0.2, 0.3]] * 2))
  with pytest.raises(ValueError, match=r"labels.*shape \(2, 4\).*3 scores"):
    fn(np.zeros((2, 4)), [[0.1, 0.2, 0.3]] * 2)
  with pytest.raises(ValueError, match=r"same batch size.*3 labels for 2"):
    fn([0, 1, 2], [[0.1, 0.2, 0.3]] * 2)
  with pytest.raises(TypeError, match=r"`scores` must be a numeric tensor"):
    fn([0], [["a", "b"]])
  with pytest.raises(ValueError, match=r"`scores` must hold a non-empty list"):
    fn(np.zeros((1, 0)), np.zeros((1, 0)))
  with pytest.raises(tf.errors.InvalidArgumentError, match=r"`scores` must be finite"):
    fn([0], [[0.1, float("nan"), 0.3]])
  with pytest.raises(tf.errors.InvalidArgumentError, match=r"`scores` must be finite"):
    tf.function(fn)(tf.constant([0]), tf.constant([[0.1, float("inf"), 0.3]]))


@pytest.mark.parametrize("fn", [F.ndcg, F.top_k_accuracy, F.reciprocal_rank])
def test_bad_k(fn):
  for k in (0, -2, 1.5, "3"):
    with pytest.raises(ValueError, match=r"`k` must be an integer >= 1.*got"):
      fn([0], [[0.1, 0.2]], k=k)
