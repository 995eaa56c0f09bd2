"""Tests of tfrank4class.metrics.retrieval against brute-force numpy references."""
import itertools

import numpy as np
import pytest
import tensorflow as tf

from tfrank4class.metrics import retrieval
from tfrank4class.metrics.retrieval import (RetrievalEvaluation, block_statistics, map_at_r,
                                            retrieval_metrics, retrieval_recall_at_k)


# ---------------------------------------------------------------- independent references

def _ranked(sims_row, order_keys):
  """Gallery positions sorted by decreasing similarity, ties broken by `order_keys`."""
  return np.lexsort((order_keys, -sims_row))


def _recall_map_one_order(sims, labels, q_ids, g_ids, ks, tie_keys):
  """Per-query hits [Q, k] and AP@R [Q] and R [Q] for one fixed tie-breaking order."""
  hits, aps, rs = [], [], []
  for qi in q_ids:
    keep = g_ids != qi
    cand = g_ids[keep]
    order = cand[_ranked(sims[qi, cand], tie_keys[keep])]
    rel = labels[order] == labels[qi]
    r = int(rel.sum())
    hits.append([float(rel[:k].any()) for k in ks])
    if r:
      prec = np.cumsum(rel) / np.arange(1, rel.size + 1)
      aps.append(float((prec[:r] * rel[:r]).sum() / r))
    else:
      aps.append(0.0)
    rs.append(r)
  return np.array(hits), np.array(aps), np.array(rs)


def _brute_force(sims, labels, ks, q_ids=None, g_ids=None, singletons="exclude", all_orders=False):
  """Recall@K and MAP@R by sorting; with all_orders, averaged over every tie-breaking order."""
  n = sims.shape[0]
  q_ids = np.arange(n) if q_ids is None else np.asarray(q_ids)
  g_ids = np.arange(n) if g_ids is None else np.asarray(g_ids)
  if all_orders:
    perms = list(itertools.permutations(range(g_ids.size)))
  else:
    perms = [tuple(range(g_ids.size))]
  acc = None
  for perm in perms:
    h, a, r = _recall_map_one_order(sims, labels, q_ids, g_ids, ks, np.array(perm))
    acc = (h, a) if acc is None else (acc[0] + h, acc[1] + a)
  h, a = acc[0] / len(perms), acc[1] / len(perms)
  has = r > 0
  denom = has.sum() if singletons == "exclude" else q_ids.size
  out = {f"recall@{k}": h[has, j].sum() / denom for j, k in enumerate(ks)}
  out["map@r"] = a[has].sum() / denom
  out["num_excluded"] = int((~has).sum()) if singletons == "exclude" else 0
  return out


def _cosine(e):
  e = np.asarray(e, np.float64)
  e = e / np.linalg.norm(e, axis=1, keepdims=True)
  return e @ e.T


def _tied_embeddings(rng, n, num_bases, dim=5):
  """Rows drawn from a few random base vectors, and their exactly tied cosine matrix."""
  bases = rng.normal(size=(num_bases, dim))
  which = rng.integers(0, num_bases, size=n)
  base_sims = _cosine(bases)
  return bases[which].astype(np.float32), base_sims[which][:, which]


def _assert_close(got, want, ks, with_map=True, tol=1e-9):
  for k in ks:
    assert got[f"recall@{k}"] == pytest.approx(want[f"recall@{k}"], abs=tol), k
  if with_map:
    assert got["map@r"] == pytest.approx(want["map@r"], abs=tol)
  assert got["num_excluded"] == want["num_excluded"]


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
  want = _brute_force(_cosine(e), y, (1, 2, 4, 8))
  got = retrieval_metrics(e, y, (1, 2, 4, 8), block_size=32)
  _assert_close(got, want, (1, 2, 4, 8), tol=1e-9)


def test_query_gallery_matches_sorting_without_ties():
  rng = np.random.default_rng(1)
  e = rng.normal(size=(80, 4)).astype(np.float32)
  y = rng.integers(0, 6, size=80)
  q, g = np.arange(30), np.arange(30, 80)
  want = _brute_force(_cosine(e), y, (1, 2, 4, 8), q_ids=q, g_ids=g)
  got = retrieval_metrics(e, y, (1, 2, 4, 8), query=q, gallery=g, block_size=7)
  _assert_close(got, want, (1, 2, 4, 8))
  # A boolean mask selects the same sets.
  mask = np.zeros(80, bool)
  mask[:30] = True
  got_mask = retrieval_metrics(e, y, (1, 2, 4, 8), query=mask, gallery=~mask)
  _assert_close(got_mask, want, (1, 2, 4, 8))


@pytest.mark.parametrize("seed, n, num_bases, num_classes", [
    (0, 7, 3, 3), (1, 7, 3, 3), (2, 7, 3, 3), (3, 8, 2, 2), (4, 8, 3, 2)])
def test_ties_match_average_over_all_orderings_leave_one_out(seed, n, num_bases, num_classes):
  rng = np.random.default_rng(seed)
  e, sims = _tied_embeddings(rng, n=n, num_bases=num_bases)
  y = rng.integers(0, num_classes, size=n)
  ks = (1, 2, 4)
  want = _brute_force(sims, y, ks, all_orders=True)
  _assert_close(retrieval_metrics(e, y, ks, block_size=3), want, ks)


@pytest.mark.parametrize("seed", [3, 4])
def test_ties_match_average_over_all_orderings_query_gallery(seed):
  rng = np.random.default_rng(seed)
  e, sims = _tied_embeddings(rng, n=10, num_bases=3)
  y = rng.integers(0, 2, size=10)
  q, g = np.array([0, 1, 2, 3]), np.arange(3, 10)       # item 3 is in both sets
  ks = (1, 2, 3, 6)
  want = _brute_force(sims, y, ks, q_ids=q, g_ids=g, all_orders=True)
  got = retrieval_metrics(e, y, ks, query=q, gallery=g, block_size=2)
  _assert_close(got, want, ks)


def test_collapsed_embeddings_score_chance():
  # All similarities tie: each query has 1 positive among 5 others.
  e = np.ones((6, 3), np.float32)
  r = retrieval_metrics(e, [0, 0, 1, 1, 2, 2], ks=(1, 2, 5))
  assert r["recall@1"] == pytest.approx(1 / 5)
  assert r["recall@2"] == pytest.approx(2 / 5)      # 1 - C(4,2)/C(5,2)
  assert r["recall@5"] == pytest.approx(1.0)
  assert r["map@r"] == pytest.approx(1 / 5)


def test_blocked_equals_single_block_on_many_blocks():
  rng = np.random.default_rng(5)
  bases = rng.normal(size=(40, 16))
  e = (bases[rng.integers(0, 40, size=1500)] + 0.3 * rng.normal(size=(1500, 16))).astype(np.float32)
  e[:200] = e[200:400]                                  # exact duplicates give ties ...
  y = rng.integers(0, 30, size=1500)
  y[:200] = y[200:400]                                  # ... within a class, so any order is exact
  one = retrieval_metrics(e, y, (1, 2, 4, 8), block_size=1500)
  many = retrieval_metrics(e, y, (1, 2, 4, 8), block_size=97)
  for key in one:
    assert many[key] == pytest.approx(one[key], abs=1e-12), key
  _assert_close(many, _brute_force(_cosine(e), y, (1, 2, 4, 8)), (1, 2, 4, 8))


def test_zero_embedding_has_cosine_zero():
  # Item 2 is the zero vector: similarity 0 to everything, so for query 0 ([1, 0]) it ties with
  # the orthogonal item 3 (class 0) behind item 1.
  e = [[1.0, 0.0], [1.0, 0.1], [0.0, 0.0], [0.0, 1.0]]
  y = [0, 1, 1, 0]
  sims = np.array([[1, .995, 0, 0], [.995, 1, 0, .0995], [0, 0, 0, 0], [0, .0995, 0, 1]])
  want = _brute_force(sims, np.array(y), (1, 2), all_orders=True)
  got = retrieval_metrics(e, y, (1, 2))
  _assert_close(got, want, (1, 2))


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
  with pytest.raises(ValueError, match=r"`labels` and `embeddings` must have the same length, got 3 labels for 4"):
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
  with pytest.raises(ValueError, match=r"`embeddings` must be finite, but 1 row\(s\) hold NaN or Inf \(first rows: \[2\]\)"):
    retrieval_recall_at_k(e, [0, 0, 1, 1], ks=1)


@pytest.mark.parametrize("kwargs, message", [
    (dict(ks=0), r"`ks` must be an integer >= 1, got 0"),
    (dict(ks=()), r"`ks` must hold at least one cut-off"),
    (dict(singletons="drop"), r"`singletons` must be one of \['exclude', 'miss'\], got 'drop'"),
    (dict(block_size=0), r"`block_size` must be an integer >= 1, got 0"),
    (dict(query=[0, 9]), r"`query` holds row indices outside \[0, 4\)"),
    (dict(gallery=[True, False]), r"`gallery` given as a boolean mask must have shape \(4,\)"),
    (dict(query=[]), r"`query` must select at least one item"),
])
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
  want = _brute_force(e @ e.T, y, (1, 2, 4))
  hits, ap, r = block_statistics(*args)
  for j, k in enumerate((1, 2, 4)):
    assert hits.numpy()[r.numpy() > 0, j].mean() == pytest.approx(want[f"recall@{k}"])
  assert ap.numpy()[r.numpy() > 0].mean() == pytest.approx(want["map@r"])
  fn_hits, fn_ap, _ = tf.function(block_statistics)(*args)
  np.testing.assert_allclose(fn_hits, hits, atol=1e-12)
  np.testing.assert_allclose(fn_ap, ap, atol=1e-12)
  jit_hits, _, _ = tf.function(lambda *a: block_statistics(*a, with_map=False), jit_compile=True)(*args)
  np.testing.assert_allclose(jit_hits, hits, atol=1e-9)


# ---------------------------------------------------------------- Keras callback
def _toy_model():
  inputs = tf.keras.Input((4,))
  return tf.keras.Model(inputs, tf.keras.layers.Dense(3, use_bias=False)(inputs))


def test_callback_reports_into_logs(mirrored_strategy):
  rng = np.random.default_rng(8)
  x = rng.normal(size=(40, 4)).astype(np.float32)
  y = rng.integers(0, 4, size=40)
  with mirrored_strategy.scope():
    model = _toy_model()
    model.compile(optimizer="sgd", loss="mse")
  cb = RetrievalEvaluation(x, y, ks=(1, 2), verbose=0)
  hist = model.fit(x, rng.normal(size=(40, 3)), epochs=2, batch_size=8, verbose=0, callbacks=[cb])
  assert len(hist.history["val_recall@1"]) == 2 and "val_map@r" in hist.history
  want = _brute_force(_cosine(model.predict(x, verbose=0)), y, (1, 2))
  assert hist.history["val_recall@1"][-1] == pytest.approx(want["recall@1"], abs=1e-6)
  assert hist.history["val_recall@2"][-1] == pytest.approx(want["recall@2"], abs=1e-6)
  assert hist.history["val_map@r"][-1] == pytest.approx(want["map@r"], abs=1e-6)
  assert [h["epoch"] for h in cb.history] == [0, 1]


def test_callback_with_separate_embedding_model_and_every():
  rng = np.random.default_rng(9)
  x = rng.normal(size=(30, 4)).astype(np.float32)
  y = rng.integers(0, 3, size=30)
  inputs = tf.keras.Input((4,))
  emb = tf.keras.layers.Dense(3)(inputs)
  logits = tf.keras.layers.Dense(3)(emb)
  train_model, emb_model = tf.keras.Model(inputs, logits), tf.keras.Model(inputs, emb)
  train_model.compile(optimizer="sgd", loss=tf.keras.losses.SparseCategoricalCrossentropy(True))
  cb = RetrievalEvaluation(x, y, ks=(1,), embedding_model=emb_model, with_map=False, every=2,
                           verbose=0, prefix="test_")
  hist = train_model.fit(x, y, epochs=2, verbose=0, callbacks=[cb])
  assert len(cb.history) == 1 and cb.history[0]["epoch"] == 1
  want = _brute_force(_cosine(emb_model.predict(x, verbose=0)), y, (1,))
  assert cb.history[0]["recall@1"] == pytest.approx(want["recall@1"], abs=1e-6)
  assert "test_recall@1" in hist.history


def test_callback_bad_arguments():
  with pytest.raises(ValueError, match=r"`every` must be an integer >= 1, got 0"):
    RetrievalEvaluation(np.eye(3), [0, 0, 1], every=0)
  with pytest.raises(ValueError, match=r"`ks` must be an integer >= 1, got -1"):
    RetrievalEvaluation(np.eye(3), [0, 0, 1], ks=(-1,))


def test_module_exports():
  import tfrank4class.metrics as m
  assert m.retrieval_recall_at_k is retrieval_recall_at_k and m.map_at_r is retrieval.map_at_r
