"""Tests of tfrank4class.losses.rambo.base (the RaMBO loss functions) against independent
references: hand-computed cases, scikit-learn's average_precision_score / ndcg_score, numpy
implementations of the closed forms, and the numpy Algorithm 1 of ``_rambo_reference``
(rk+ a constant)."""

import _rambo_reference as ref
import numpy as np
import pytest
import tensorflow as tf
from sklearn.metrics import average_precision_score, ndcg_score

from tfrank4class.losses.rambo import base as rambo


def np_negatives_above(scores, relevance):
  """r_i = #{j valid, irrelevant : s_j > s_i} for relevant i, counted directly (no ties)."""
  r = np.zeros(scores.shape)
  for b in range(scores.shape[0]):
    neg = relevance[b] == 0
    for i in np.flatnonzero(relevance[b] > 0):
      r[b, i] = np.sum(neg & (scores[b] > scores[b, i]))
  return r


def random_lists(seed, batch=6, n=15, pad=True):
  """Random scores and 0/1 relevance, ~15% padding (-1); every list keeps a relevant item."""
  rng = np.random.default_rng(seed)
  scores = rng.standard_normal((batch, n))
  relevance = (rng.random((batch, n)) < 0.3).astype(np.float64)
  relevance[:, 0] = 1.0  # every list has a relevant item
  if pad:
    relevance[rng.random((batch, n)) < 0.15] = -1.0
    relevance[:, 0] = 1.0
  return scores, relevance


def test_list_ranks_hand_case():
  rk, rkp, rel, valid = rambo.list_ranks([[0.9, 0.5, 0.7, 3.0]], [[0.0, 1.0, 1.0, -1.0]], 1.0)
  np.testing.assert_array_equal(rk.numpy()[:, :3], [[1, 3, 2]])  # the padded 3.0 is ignored
  np.testing.assert_array_equal(rkp.numpy()[:, 1:3], [[2, 1]])
  np.testing.assert_array_equal(rel.numpy(), [[False, True, True, False]])
  np.testing.assert_array_equal(valid.numpy(), [[True, True, True, False]])


def test_recall_hand_cases():
  # list 1: relevant at 0.9 (r=0) and 0.5 (r=1, behind 0.7): (log 1 + log 2) / 2.
  # list 2: relevant 0.1 behind two irrelevant items: r = 2 -> log 3; loglog: log(1 + log 3).
  scores = [[0.9, 0.5, 0.7], [0.3, 0.1, 0.2]]
  relevance = [[1.0, 1.0, 0.0], [0.0, 1.0, 0.0]]
  log = rambo.recall_loss_values(scores, relevance, 1.0).numpy()
  np.testing.assert_allclose(log, [np.log(2) / 2, np.log(3)], rtol=1e-6)
  loglog = rambo.recall_loss_values(scores, relevance, 1.0, weighting="loglog").numpy()
  np.testing.assert_allclose(loglog, [np.log(1 + np.log(2)) / 2, np.log(1 + np.log(3))], rtol=1e-6)


@pytest.mark.parametrize("weighting", ["log", "loglog"])
def test_recall_matches_direct_count(weighting):
  scores, relevance = random_lists(0)
  r = np_negatives_above(scores, relevance)
  phi = np.log1p(r) if weighting == "log" else np.log1p(np.log1p(r))
  pos = relevance > 0
  expected = (phi * pos).sum(-1) / pos.sum(-1)
  got = rambo.recall_loss_values(scores, relevance, 1.0, weighting=weighting).numpy()
  np.testing.assert_allclose(got, expected, rtol=1e-10)


def test_proposition_2_weighted_recall_at_k():
  """log(1 + r) = sum_K log(1 + 1/K) * L@K with L@K = 1[relevant item not within the top K
  among the irrelevant ones] = 1[r >= K], averaged over the relevant items (Proposition 2)."""
  scores, relevance = random_lists(1, batch=5, n=60, pad=False)
  r = np_negatives_above(scores, relevance)
  pos = relevance > 0
  weighted = np.zeros(scores.shape[0])
  for k in range(1, scores.shape[1] + 1):
    loss_at_k = ((r >= k) * pos).sum(-1) / pos.sum(-1)  # 1 - Recall@K, mean over relevant items
    weighted += np.log1p(1.0 / k) * loss_at_k
  got = rambo.recall_loss_values(scores, relevance, 1.0).numpy()
  np.testing.assert_allclose(got, weighted, rtol=1e-10)
  assert np.all(weighted > 0)


def _gradient(fn, scores, relevance, *args, **kwargs):
  y = tf.constant(scores)
  with tf.GradientTape() as tape:
    tape.watch(y)
    loss = tf.reduce_sum(fn(y, relevance, *args, **kwargs))
  return tape.gradient(loss, y).numpy()


def test_three_item_gradient_by_hand():
  """rk+ carries no gradient: the top relevant item gets exactly 0 (Algorithm 1 by hand).

  scores (1.0, 0.9, 0.8), relevance (1, 0, 1), lambda_ = 1 on ranks / n, n = 3, i.e. lambda = 3 on
  integer ranks. rk = (1, 2, 3), rk+ = (1, -, 2), r = (0, -, 1).
  Recall (log): L = (log 1 + log 2) / 2, dL/drk = (1/(2*1), 0, 1/(2*2)) = (1/2, 0, 1/4).
    y' = y + 3 dL/drk = (2.5, 0.9, 1.55): rk(y') = (1, 3, 2);
    dL/dy = -(rk - rk(y')) / 3 = (0, 1/3, -1/3).
  AP: L = 1 - (1/1 + 2/3) / 2, dL/drk = rk+ / (|P| rk^2) = (1/2, 0, 2/18) = (1/2, 0, 1/9).
    y' = (2.5, 0.9, 0.8 + 1/3): rk(y') = (1, 3, 2); dL/dy = (0, 1/3, -1/3).
  (Differentiating rk+ as well would add -(rk+ - rk+(y + 3 dL/drk+)) / 3 with dL/drk+ =
  (-1/2, 0, -1/4) for recall and (-1/2, 0, -1/6) for AP: the relevant items swap among
  themselves, adding (1/3, 0, -1/3) for both, a positive gradient pushing the top relevant item
  down.)
  """
  scores, relevance = [[1.0, 0.9, 0.8]], [[1.0, 0.0, 1.0]]
  expected = [[0.0, 1 / 3, -1 / 3]]
  for fn, kind in ((rambo.recall_loss_values, "log"), (rambo.average_precision_loss_values, "ap")):
    np.testing.assert_allclose(
      ref.list_gradient(scores, relevance, 1.0, kind), expected, atol=1e-15
    )
    got = _gradient(fn, np.array(scores), relevance, 1.0)
    np.testing.assert_allclose(got, expected, atol=1e-15)
    assert got[0, 0] == 0.0


@pytest.mark.parametrize("kind", ["log", "loglog", "ap"])
@pytest.mark.parametrize(
  "shape,lam,margin",
  [
    ((8, 8), 0.5, 0.0),
    ((6, 15), 0.3, 0.0),
    ((15, 6), 0.5, 0.0),
    ((7, 12), 0.5, 0.3),
    ((12, 7), 1.0, 0.1),
  ],
)
def test_gradient_matches_algorithm_1_with_constant_rk_plus(kind, shape, lam, margin):
  """Square and non-square batches, with and without margin, padding included."""
  scores, relevance = random_lists(shape[0] + shape[1], batch=shape[0], n=shape[1])
  expected = ref.list_gradient(scores, relevance, lam, kind, margin)
  if kind == "ap":
    got = _gradient(rambo.average_precision_loss_values, scores, relevance, lam, margin)
  else:
    got = _gradient(rambo.recall_loss_values, scores, relevance, lam, margin, kind)
  np.testing.assert_allclose(got, expected, atol=1e-12)
  assert np.count_nonzero(expected) > 5


@pytest.mark.parametrize(
  "shape,lam,margin", [((16, 5), 2.0, 0.0), ((5, 16), 8.0, 0.2), ((7, 7), 3.0, 0.1)]
)
def test_map_and_apc_gradients_match_algorithm_1(shape, lam, margin):
  rng = np.random.default_rng(shape[0] * 100 + shape[1])
  scores = rng.standard_normal(shape)
  relevance = np.eye(shape[1])[rng.integers(0, shape[1], shape[0])]
  for fn, reference in (
    (rambo.mean_average_precision_loss_value, ref.map_gradient),
    (rambo.apc_loss_value, ref.apc_gradient),
  ):
    expected = reference(scores, relevance, lam, margin)
    np.testing.assert_allclose(_gradient(fn, scores, relevance, lam, margin), expected, atol=1e-12)
    assert np.count_nonzero(expected) > 3


def test_average_precision_matches_sklearn():
  scores, relevance = random_lists(3)
  got = rambo.average_precision_loss_values(scores, relevance, 1.0).numpy()
  for b in range(scores.shape[0]):
    valid = relevance[b] >= 0
    ap = average_precision_score(relevance[b, valid] > 0, scores[b, valid])
    np.testing.assert_allclose(got[b], 1 - ap, rtol=1e-10)


def test_average_precision_hand_case():
  got = rambo.average_precision_loss_values([[0.9, 0.5, 0.7]], [[1.0, 1.0, 0.0]], 1.0).numpy()
  np.testing.assert_allclose(got, [1 - (1 + 2 / 3) / 2], rtol=1e-6)


def test_margin_changes_ranking_as_eq_14_15():
  # relevant 0.6 vs irrelevant 0.5: without margin AP = 1; with margin 0.2 the gap is
  # 0.6 - 0.1 < 0.5 + 0.1, so the relevant item drops to rank 2 and AP = 1/2.
  scores, relevance = [[0.6, 0.5]], [[1.0, 0.0]]
  np.testing.assert_allclose(rambo.average_precision_loss_values(scores, relevance, 1.0), [0.0])
  np.testing.assert_allclose(
    rambo.average_precision_loss_values(scores, relevance, 1.0, margin=0.2), [0.5]
  )


@pytest.mark.parametrize("shape", [(16, 5), (5, 16), (7, 7)])
def test_mean_average_precision_non_square_matches_sklearn(shape):
  rng = np.random.default_rng(shape[0])
  scores = rng.standard_normal(shape)
  labels = rng.integers(0, shape[1], shape[0])
  relevance = np.eye(shape[1])[labels]
  present = [c for c in range(shape[1]) if relevance[:, c].any()]
  expected = 1 - np.mean([average_precision_score(relevance[:, c], scores[:, c]) for c in present])
  got = rambo.mean_average_precision_loss_value(scores, relevance, 1.0).numpy()
  np.testing.assert_allclose(got, expected, rtol=1e-10)
  apc = rambo.apc_loss_value(scores, relevance, 1.0).numpy()
  np.testing.assert_allclose(
    apc, 1 - average_precision_score(relevance.ravel(), scores.ravel()), rtol=1e-10
  )


def test_ndcg_matches_sklearn_with_exponential_gains():
  rng = np.random.default_rng(4)
  scores = rng.standard_normal((5, 12))
  relevance = rng.integers(0, 4, (5, 12)).astype(np.float64)
  relevance[:, 0] = 3.0
  got = rambo.ndcg_loss_values(scores, relevance, 1.0).numpy()
  expected = [1 - ndcg_score([2 ** relevance[b] - 1], [scores[b]]) for b in range(5)]
  np.testing.assert_allclose(got, expected, rtol=1e-10)


def test_ndcg_hand_case_and_padding():
  got = rambo.ndcg_loss_values([[0.9, 0.5, 5.0]], [[0.0, 1.0, -1.0]], 1.0).numpy()
  np.testing.assert_allclose(got, [1 - 1 / np.log2(3)], rtol=1e-6)


def test_similarity_lists_matches_numpy():
  rng = np.random.default_rng(5)
  emb = rng.standard_normal((4, 3))
  labels = np.array([0, 1, 0, 2])
  mem_emb, mem_labels = rng.standard_normal((3, 3)), np.array([1, 0, 2])
  gallery, gallery_labels = np.concatenate([emb, mem_emb]), np.concatenate([labels, mem_labels])
  sims, rel = rambo.similarity_lists(emb, labels, gallery, gallery_labels)
  unit = lambda a: a / np.linalg.norm(a, axis=1, keepdims=True)
  np.testing.assert_allclose(sims.numpy(), unit(emb) @ unit(gallery).T, rtol=1e-10)
  expected = (labels[:, None] == gallery_labels[None]).astype(float)
  expected[np.arange(4), np.arange(4)] = -1
  np.testing.assert_array_equal(rel.numpy(), expected)
  dot, _ = rambo.similarity_lists(emb, labels, similarity="dot")
  np.testing.assert_allclose(dot.numpy(), emb @ emb.T, rtol=1e-10)


@pytest.mark.parametrize(
  "fn", [rambo.recall_loss_values, rambo.average_precision_loss_values, rambo.ndcg_loss_values]
)
def test_degenerate_lists_finite_loss_and_gradient(fn):
  cases = [
    ([[0.3, 0.2, 0.1]], [[0.0, 0.0, 0.0]], 0.0),  # no relevant item
    ([[0.3]], [[1.0]], 0.0),  # single item
    ([[0.5, 0.5, 0.5, 0.5]], [[0.0, 1.0, 0.0, 1.0]], None),  # all-equal scores
    ([[0.1, 0.2]], [[-1.0, -1.0]], 0.0),  # only padding
  ]
  for scores, relevance, expected in cases:
    y = tf.constant(scores)
    with tf.GradientTape() as tape:
      tape.watch(y)
      loss = fn(y, relevance, 1.0)
    grad = tape.gradient(loss, y)
    assert np.all(np.isfinite(loss.numpy())) and np.all(np.isfinite(grad.numpy()))
    if expected is not None:
      np.testing.assert_allclose(loss.numpy(), [expected])


def test_all_equal_scores_tie_rule():
  # Ties are broken by index: relevant items 1 and 3 rank 2nd and 4th, each behind 1 / 2
  # irrelevant items: recall = (log 2 + log 3) / 2.
  got = rambo.recall_loss_values([[0.5, 0.5, 0.5, 0.5]], [[0.0, 1.0, 0.0, 1.0]], 1.0).numpy()
  np.testing.assert_allclose(got, [(np.log(2) + np.log(3)) / 2], rtol=1e-6)


def test_non_finite_scores_raise_not_nan():
  for fn in (rambo.recall_loss_values, rambo.average_precision_loss_values):
    with pytest.raises(tf.errors.InvalidArgumentError, match="must be finite"):
      fn([[0.1, np.nan]], [[1.0, 0.0]], 1.0)


def test_bad_weighting_and_similarity():
  with pytest.raises(
    ValueError, match=r"`weighting` must be one of \['log', 'loglog'\], got 'sqrt'"
  ):
    rambo.recall_loss_values([[0.1]], [[1.0]], 1.0, weighting="sqrt")
  with pytest.raises(ValueError, match="`similarity` must be one of"):
    rambo.similarity_lists(np.ones((2, 2)), np.zeros(2), similarity="l1")
