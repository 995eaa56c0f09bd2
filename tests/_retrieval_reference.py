"""Independent numpy references for the retrieval tests: Recall@K and MAP@R by sorting."""

import itertools

import numpy as np
import pytest


def ranked(sims_row, order_keys):
  """Gallery positions sorted by decreasing similarity, ties broken by `order_keys`."""
  return np.lexsort((order_keys, -sims_row))


def recall_map_one_order(sims, labels, q_ids, g_ids, ks, tie_keys):
  """Per-query hits [Q, k] and AP@R [Q] and R [Q] for one fixed tie-breaking order."""
  hits, aps, rs = [], [], []
  for qi in q_ids:
    keep = g_ids != qi
    cand = g_ids[keep]
    order = cand[ranked(sims[qi, cand], tie_keys[keep])]
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


def brute_force(sims, labels, ks, q_ids=None, g_ids=None, singletons="exclude", all_orders=False):
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
    h, a, r = recall_map_one_order(sims, labels, q_ids, g_ids, ks, np.array(perm))
    acc = (h, a) if acc is None else (acc[0] + h, acc[1] + a)
  h, a = acc[0] / len(perms), acc[1] / len(perms)
  has = r > 0
  denom = has.sum() if singletons == "exclude" else q_ids.size
  out = {f"recall@{k}": h[has, j].sum() / denom for j, k in enumerate(ks)}
  out["map@r"] = a[has].sum() / denom
  out["num_excluded"] = int((~has).sum()) if singletons == "exclude" else 0
  return out


def cosine(e):
  e = np.asarray(e, np.float64)
  e = e / np.linalg.norm(e, axis=1, keepdims=True)
  return e @ e.T


def tied_embeddings(rng, n, num_bases, dim=5):
  """Rows drawn from a few random base vectors, and their exactly tied cosine matrix."""
  bases = rng.normal(size=(num_bases, dim))
  which = rng.integers(0, num_bases, size=n)
  base_sims = cosine(bases)
  return bases[which].astype(np.float32), base_sims[which][:, which]


def assert_close(got, want, ks, with_map=True, tol=1e-9):
  for k in ks:
    assert got[f"recall@{k}"] == pytest.approx(want[f"recall@{k}"], abs=tol), k
  if with_map:
    assert got["map@r"] == pytest.approx(want["map@r"], abs=tol)
  assert got["num_excluded"] == want["num_excluded"]
