"""Tests of tfrank4class.losses.rambo (the RaMBO loss functions) against independent references:
hand-computed cases, scikit-learn's average_precision_score / ndcg_score, and numpy
implementations of the closed forms and of Algorithm 1 written here."""
import numpy as np
import pytest
import tensorflow as tf
from sklearn.metrics import average_precision_score, ndcg_score

from tfrank4class.losses import rambo


def np_rank_within(scores, mask):
  """Rank of every item among the items of its own group, ties by lower index."""
  out = np.zeros(scores.shape)
  for b in range(scores.shape[0]):
    for group in (True, False):
      idx = np.flatnonzero(mask[b] == group)
      order = np.argsort(-scores[b, idx], kind="stable")
      out[b, idx[order]] = np.arange(1, idx.size + 1)
  return out


def np_negatives_above(scores, relevance):
  """r_i = #{j valid, irrelevant : s_j > s_i} for relevant i, counted directly (no ties)."""
  r = np.zeros(scores.shape)
  for b in range(scores.shape[0]):
    neg = (relevance[b] == 0)
    for i in np.flatnonzero(relevance[b] > 0):
      r[b, i] = np.sum(neg & (scores[b] > scores[b, i]))
  return r


def random_lists(seed, batch=6, n=15, pad=True):
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
    loss_at_k = ((r >= k) * pos).sum(-1) / pos.sum(-1)   # 1 - Recall@K, mean over relevant items
    weighted += np.log1p(1.0 / k) * loss_at_k
  got = rambo.recall_loss_values(scores, relevance, 1.0).numpy()
  np.testing.assert_allclose(got, weighted, rtol=1e-10)
  assert np.all(weighted > 0)


@pytest.mark.parametrize("weighting,margin,lam", [("log", 0.0, 0.05), ("loglog", 0.3, 0.3)])
def test_recall_gradient_matches_numpy_chain_rule(weighting, margin, lam):
  """dL/dy = blackbox(rk)^T dL/drk + blackbox(rk+)^T dL/drk+, each by Algorithm 1."""
  scores, relevance = random_lists(2)
  valid, pos = relevance >= 0, relevance > 0
  shifted = scores + np.where(pos, -margin / 2, margin / 2) * valid
  shifted = np.where(valid, shifted, 0.0)
  rk, rkp = np_rank_within(shifted, valid), np_rank_within(shifted, pos)
  r = np.where(pos, rk - rkp, 0.0)
  dphi = 1 / (1 + r) if weighting == "log" else 1 / ((1 + np.log1p(r)) * (1 + r))
  g_rk = np.where(pos, dphi, 0.0) / pos.sum(-1, keepdims=True)
  lam_n = lam * scores.shape[1]  # lambda_ is for ranks normalised by the list length n
  expected = ((np_rank_within(shifted + lam_n * g_rk, valid) - rk)
              + (np_rank_within(shifted - lam_n * g_rk, pos) - rkp)) / lam_n
  y = tf.constant(scores)
  with tf.GradientTape() as tape:
    tape.watch(y)
    loss = tf.reduce_sum(rambo.recall_loss_values(y, relevance, lam, margin, weighting))
  np.testing.assert_allclose(tape.gradient(loss, y).numpy(), np.where(valid, expected, 0.0),
                             atol=1e-12)
  assert np.count_nonzero(expected) > 5


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
      rambo.average_precision_loss_values(scores, relevance, 1.0, margin=0.2), [0.5])


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
  np.testing.assert_allclose(apc, 1 - average_precision_score(relevance.ravel(), scores.ravel()),
                             rtol=1e-10)


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


@pytest.mark.parametrize("fn", [rambo.recall_loss_values, rambo.average_precision_loss_values,
                                rambo.ndcg_loss_values])
def test_degenerate_lists_finite_loss_and_gradient(fn):
  cases = [
      ([[0.3, 0.2, 0.1]], [[0.0, 0.0, 0.0]], 0.0),   # no relevant item
      ([[0.3]], [[1.0]], 0.0),                        # single item
      ([[0.5, 0.5, 0.5, 0.5]], [[0.0, 1.0, 0.0, 1.0]], None),  # all-equal scores
      ([[0.1, 0.2]], [[-1.0, -1.0]], 0.0),            # only padding
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
  with pytest.raises(ValueError, match=r"`weighting` must be one of \['log', 'loglog'\], got 'sqrt'"):
    rambo.recall_loss_values([[0.1]], [[1.0]], 1.0, weighting="sqrt")
  with pytest.raises(ValueError, match="`similarity` must be one of"):
    rambo.similarity_lists(np.ones((2, 2)), np.zeros(2), similarity="l1")
  with pytest.raises(ValueError, match="`y_true` must be integer class ids of shape"):
    rambo.class_ids(np.zeros((2, 3)))


@pytest.mark.parametrize("module", [
    "tfrank4class.ranking.exact", "tfrank4class.ranking.blackbox", "tfrank4class.losses.rambo",
    "tfrank4class.losses.recall", "tfrank4class.losses.average_precision",
    "tfrank4class.losses.blackbox_ndcg", "tfrank4class.losses.score_memory"])
def test_docstring_examples_run(module):
  """The hand-computed examples in the docstrings of the RaMBO modules hold."""
  import doctest
  import importlib
  result = doctest.testmod(importlib.import_module(module), extraglobs={"tf": tf},
                           optionflags=doctest.NORMALIZE_WHITESPACE)
  assert result.attempted > 0 and result.failed == 0, result
