"""Retrieval metrics for embedding models: Recall@K and MAP@R, exact and computed in blocks.

Each query embedding is compared by cosine similarity with every gallery embedding except itself,
and the gallery is ranked by decreasing similarity. With ``P_q`` the gallery items of the query's
class (its *positives*) and ``R_q = |P_q|``:

    Recall@K = 1/|Q| sum_q 1[ some item of P_q is among the K most similar gallery items ]

(Rolinek et al., "Optimizing Rank-based Metrics with Blackbox Differentiation", CVPR 2020
(RaMBO), Eq. 7-8; the usual metric of Song et al., CVPR 2016, and of Boudiaf et al., ECCV 2020),
and

    MAP@R    = 1/|Q| sum_q 1/R_q sum_{i=1}^{R_q} P(i) rel(i)

where ``rel(i)`` says whether the ``i``-th retrieved item is a positive and ``P(i)`` is the
precision of the first ``i`` (Musgrave et al., "A Metric Learning Reality Check", ECCV 2020,
Section 3.2).

Protocols.

  * Leave-one-out (CUB-200, Cars196, SOP): ``query=None, gallery=None``; every item is a query
    and the gallery is all the other items.
  * Separate query and gallery sets (In-Shop): pass ``query`` and ``gallery`` as index arrays or
    boolean masks over the rows of ``embeddings``. An item that is in both sets is never
    retrieved for itself (self is excluded by row index, not by similarity, so exact duplicates
    of the query still count).

Ties. Like :mod:`tfrank4class.metrics.functional`, a tie in the similarities is resolved by its
*expectation* over uniformly random orderings of the tied items (McSherry & Najork, ECIR 2008): a
query whose best positive is tied with ``n`` negatives at the boundary of the top K gets the
probability that a positive is drawn into the top K. So collapsed embeddings (all similarities
equal) score the chance value, never a lucky 1. Similarities are computed in float64 from
float64-normalised embeddings and rounded to float32, so identical embeddings tie exactly and
differences below float32 resolution (about 6e-8) are treated as ties.

Queries without a positive (a class with a single item under leave-one-out, or a query class
absent from the gallery) can never be answered. ``singletons="exclude"`` (the default, the
convention of the CUB/Cars/SOP literature, where such queries do not occur) leaves them out of
the average and reports how many were left out as ``num_excluded``; ``singletons="miss"`` counts
them as failures (0) in the average. If no query has a positive the metric is undefined and a
``ValueError`` is raised rather than returning NaN.

Memory. Queries are processed ``block_size`` at a time against the whole gallery, so the largest
temporary is ``block_size x |gallery|`` (about 60 MB for 256 x 60,000), never ``|Q| x |G|``.

A zero embedding has cosine similarity 0 with everything (``tf.math.l2_normalize`` semantics); NaN
or infinite embeddings raise a ``ValueError`` naming the offending rows.

This module is the host loop: it checks the inputs (:mod:`tfrank4class.retrieval.inputs`), feeds
the blocks to the ``keras.ops`` kernel (:mod:`tfrank4class.retrieval.kernel`, eagerly, on any
backend) and averages the queries. The Keras callback that runs it after every epoch is
:class:`tfrank4class.train.callbacks.RetrievalEvaluation`.
"""

import numpy as np

from tfrank4class import checks
from tfrank4class.compat import ops
from tfrank4class.retrieval import inputs
from tfrank4class.retrieval.kernel import block_statistics


def retrieval_metrics(
  embeddings,
  labels,
  ks=(1, 2, 4, 8),
  query=None,
  gallery=None,
  with_map=True,
  singletons="exclude",
  block_size=256,
):
  """Recall@K for every K in ``ks`` and (optionally) MAP@R in one pass over the data.

  See the module docstring for the formulas (RaMBO Eq. 7-8; Musgrave et al. 2020), the two
  protocols, ties and singletons.

  Args:
    embeddings: float ``[N, D]`` array or tensor, finite.
    labels: integer class ids ``[N]`` or ``[N, 1]``.
    ks: a positive integer or a sequence of them; each must be at most the gallery size per query
      (``|gallery| - 1`` when the query is in the gallery).
    query: ``None`` (every item), or row indices / a boolean mask of the queries.
    gallery: ``None`` (every item), or row indices / a boolean mask of the gallery.
    with_map: also compute ``"map@r"``.
    singletons: ``"exclude"`` queries without any positive in the gallery from the averages, or
      count them as a ``"miss"`` (0).
    block_size: number of queries compared with the gallery at a time.

  Returns:
    A dict ``{"recall@K": float for K in ks, "map@r": float (if with_map), "num_queries": int
    (queries in the averages), "num_excluded": int (queries without a positive)}``.

  Raises:
    ValueError: mismatched lengths, NaN/Inf embeddings, K larger than the gallery, bad
      ``query``/``gallery``, labels that are not whole numbers ``>= 0``, or no query with a
      positive.

  Example:
    >>> e = [[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]]
    >>> m = retrieval_metrics(e, [0, 0, 1, 1], ks=(1,))
    >>> m["recall@1"], round(m["map@r"], 6), m["num_excluded"]
    (1.0, 1.0, 0)
  """
  # Over 60 lines by its signature and docstring: one documented argument per option.
  ks = inputs.check_ks(ks)
  checks.check_choice("singletons", singletons, inputs.SINGLETONS)
  checks.check_int("block_size", block_size, minimum=1)
  e = inputs.as_embeddings(embeddings)
  n = e.shape[0]
  y = inputs.as_labels(labels, e)
  q_ids = inputs.as_subset("query", query, n)
  g_ids = inputs.as_subset("gallery", gallery, n)
  g_size = g_ids.size - (1 if np.isin(q_ids, g_ids).any() else 0)
  if max(ks) > g_size:
    raise ValueError(
      f"`ks` must not exceed the number of gallery items a query is compared with ({g_size}), "
      f"got ks={list(ks)}."
    )
  hit_sum, ap_sum, answerable = _sums_over_blocks(e, y, q_ids, g_ids, ks, with_map, block_size)
  excluded = int(q_ids.size - answerable)
  if answerable == 0:
    raise ValueError(
      f"No query has an item of its class in the gallery ({q_ids.size} queries); Recall@K and "
      f"MAP@R are undefined. Check `labels`, `query` and `gallery`."
    )
  denom = answerable if singletons == "exclude" else q_ids.size
  out = {f"recall@{k}": float(h / denom) for k, h in zip(ks, hit_sum)}
  if with_map:
    out["map@r"] = float(ap_sum / denom)
  out["num_queries"] = int(denom)
  out["num_excluded"] = excluded if singletons == "exclude" else 0
  return out


def _sums_over_blocks(e, y, q_ids, g_ids, ks, with_map, block_size):
  """Sums of the hit probabilities ``[k]`` and of AP@R over the answerable queries (those with a
  positive), and their number, ``block_size`` queries at a time."""
  gallery = [ops.convert_to_tensor(x) for x in (e[g_ids], y[g_ids], g_ids)]
  ks_t = ops.convert_to_tensor(np.asarray(ks, np.int64))
  hit_sum = np.zeros(len(ks), np.float64)
  ap_sum = 0.0
  answerable = 0
  for start in range(0, q_ids.size, block_size):
    ids = q_ids[start : start + block_size]
    out = block_statistics(e[ids], y[ids], ids, *gallery, ks_t, with_map=with_map)
    hits, ap_r, num_pos = (np.asarray(ops.convert_to_numpy(x), np.float64) for x in out)
    has = num_pos > 0
    answerable += int(has.sum())
    hit_sum += hits[has].sum(axis=0)
    ap_sum += float(ap_r[has].sum())
  return hit_sum, ap_sum, answerable


def retrieval_recall_at_k(
  embeddings,
  labels,
  ks=(1, 2, 4, 8),
  query=None,
  gallery=None,
  singletons="exclude",
  block_size=256,
):
  """Recall@K of cosine-similarity retrieval (RaMBO Eq. 7-8), exact and in blocks.

  ``Recall@K = 1/|Q| sum_q 1[an item of q's class is among q's K nearest gallery items]``, self
  excluded, ties in expectation. See the module docstring for protocols, ties and singletons.

  Args:
    embeddings: float ``[N, D]``.
    labels: integer class ids ``[N]``.
    ks: cut-offs, each ``<=`` the gallery size per query.
    query: ``None`` for leave-one-out, or row indices / boolean mask of the queries.
    gallery: ``None`` for all rows, or row indices / boolean mask of the gallery.
    singletons: ``"exclude"`` (default) or ``"miss"``.
    block_size: queries per block.

  Returns:
    ``{"recall@1": ..., "recall@2": ..., "num_queries": int, "num_excluded": int}``.

  Example:
    >>> e = [[1.0, 0.0], [0.8, 0.6], [0.6, 0.8], [0.0, 1.0]]
    >>> r = retrieval_recall_at_k(e, [0, 1, 0, 1], ks=(1, 2))
    >>> r["recall@1"], r["recall@2"]
    (0.0, 0.5)
  """
  return retrieval_metrics(
    embeddings,
    labels,
    ks,
    query,
    gallery,
    with_map=False,
    singletons=singletons,
    block_size=block_size,
  )


def map_at_r(embeddings, labels, query=None, gallery=None, singletons="exclude", block_size=256):
  """MAP@R (Musgrave et al., ECCV 2020, Sec. 3.2) of cosine-similarity retrieval, ties in
  expectation.

  ``MAP@R = 1/|Q| sum_q 1/R_q sum_{i<=R_q} P(i) rel(i)`` with ``R_q`` the number of gallery items
  of the query's class (self excluded).

  Returns:
    ``{"map@r": float, "num_queries": int, "num_excluded": int}``.

  Example:
    >>> e = [[1.0, 0.0], [0.8, 0.6], [0.6, 0.8], [0.0, 1.0]]
    >>> round(map_at_r(e, [0, 0, 1, 1])["map@r"], 6)
    0.5
  """
  out = retrieval_metrics(
    embeddings,
    labels,
    (1,),
    query,
    gallery,
    with_map=True,
    singletons=singletons,
    block_size=block_size,
  )
  return {key: out[key] for key in ("map@r", "num_queries", "num_excluded")}
