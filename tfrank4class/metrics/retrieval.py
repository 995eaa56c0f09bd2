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
"""
import numbers

import numpy as np
import tensorflow as tf

from tfrank4class import _validation
from tfrank4class.compat import keras
from tfrank4class.ranking.ties import tie_statistics

_SINGLETONS = ("exclude", "miss")

_SPEC_E = tf.TensorSpec([None, None], tf.float64)
_SPEC_I = tf.TensorSpec([None], tf.int64)


def _log_choose(n, k):
  return tf.math.lgamma(n + 1.0) - tf.math.lgamma(k + 1.0) - tf.math.lgamma(n - k + 1.0)


def _expected_precision_sum(a, t, rho, r, num_pos):
  """(1/r) sum_{m=1}^{M} E[P(a+m) rel(a+m)] for a tie group (a, t, rho, r); see block_statistics."""
  big_m = tf.clip_by_value(num_pos - a, 0.0, tf.maximum(t, 0.0))
  s1 = tf.math.digamma(a + big_m + 1.0) - tf.math.digamma(a + 1.0)   # sum_m 1/(a+m)
  s2 = big_m - (a + 1.0) * s1                                        # sum_m (m-1)/(a+m)
  pair = tf.math.divide_no_nan(r - 1.0, t - 1.0)
  return ((1.0 + rho) * s1 + pair * s2) / tf.maximum(t, 1.0)


def block_statistics(query, query_labels, query_ids, gallery, gallery_labels, gallery_ids, ks,
                     with_map=True):
  """Per-query Recall@K and MAP@R for one block of queries against the whole gallery.

  This is the TensorFlow kernel behind :func:`retrieval_recall_at_k` and :func:`map_at_r`; it runs
  eagerly and inside ``tf.function``. Inputs must already be L2-normalised.

  Args:
    query: float64 ``[b, D]`` unit-norm query embeddings.
    query_labels: int64 ``[b]`` class ids.
    query_ids: int64 ``[b]`` row ids; a gallery item with the same id is the query itself and is
      excluded.
    gallery: float64 ``[G, D]`` unit-norm gallery embeddings.
    gallery_labels: int64 ``[G]``.
    gallery_ids: int64 ``[G]``.
    ks: int64 ``[k]`` cut-offs.
    with_map: also compute MAP@R (needs a top-k of each row, k = the largest R_q).

  Returns:
    ``(hits, ap_r, num_positives)``: float64 ``[b, k]`` probability of a hit at each K (ties in
    expectation), float64 ``[b]`` AP@R (zeros if ``with_map`` is false) and float64 ``[b]``
    ``R_q``. Rows with ``R_q == 0`` hold meaningless values.

  Example:
    >>> e = tf.constant([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]], tf.float64)
    >>> y = tf.constant([0, 0, 1], tf.int64)
    >>> i = tf.range(3, dtype=tf.int64)
    >>> hits, ap, r = block_statistics(e, y, i, e, y, i, tf.constant([1], tf.int64))
    >>> hits[:2, 0].numpy().tolist(), r.numpy().tolist()
    ([1.0, 1.0], [1.0, 1.0, 0.0])
  """
  f64 = tf.float64
  # Rounding to float32 makes equal embeddings tie exactly despite summation-order noise.
  sims = tf.cast(tf.cast(tf.matmul(query, gallery, transpose_b=True), tf.float32), f64)
  valid = tf.not_equal(query_ids[:, None], gallery_ids[None, :])
  pos = tf.logical_and(tf.equal(query_labels[:, None], gallery_labels[None, :]), valid)
  num_pos = tf.reduce_sum(tf.cast(pos, f64), axis=1)

  # Recall@K: the tie group of the best positive sits at positions above+1 .. above+tied.
  neg_inf = tf.constant(-np.inf, f64)
  best = tf.reduce_max(tf.where(pos, sims, neg_inf), axis=1, keepdims=True)
  above = tf.reduce_sum(tf.cast(tf.logical_and(valid, sims > best), f64), axis=1)
  at_best = tf.equal(sims, best)
  tied = tf.reduce_sum(tf.cast(tf.logical_and(valid, at_best), f64), axis=1)
  rel_tied = tf.reduce_sum(tf.cast(tf.logical_and(pos, at_best), f64), axis=1)
  neg_tied = tied - rel_tied
  slots = tf.cast(ks, f64)[None, :] - above[:, None]            # [b, k] places left in the top K
  m = tf.clip_by_value(slots, 0.0, tf.maximum(neg_tied, 0.0)[:, None])
  # P(all `slots` first places of the tie group are negatives) = C(neg_tied, m) / C(tied, m).
  miss = tf.exp(_log_choose(neg_tied[:, None], m) - _log_choose(tied[:, None], m))
  miss = tf.where(slots <= 0.0, tf.ones_like(miss), miss)
  miss = tf.where(slots > neg_tied[:, None], tf.zeros_like(miss), miss)
  hits = 1.0 - miss

  if not with_map:
    return hits, tf.zeros_like(num_pos), num_pos
  # MAP@R in expectation over ties. For a tie group at positions a+1..a+t holding r positives,
  # with rho positives above it, the expected P(a+m) rel(a+m) is
  #   1/(a+m) * [ r/t (1 + rho) + r/t (m-1)(r-1)/(t-1) ],
  # summed over m = 1..M with M = clip(R - a, 0, t).
  # Only the groups reaching into the first R positions count. With tau the R-th largest
  # similarity, these are the groups strictly above tau (all inside the top R, so inside a top_k
  # with k = max R) and the group at tau, whose size is counted over the whole row.
  k_top = tf.maximum(tf.cast(tf.reduce_max(num_pos), tf.int32), 1)
  top_v, top_i = tf.math.top_k(tf.where(valid, sims, neg_inf), k=k_top)
  top_pos = tf.cast(tf.gather(pos, top_i, batch_dims=1), f64)
  r_index = tf.clip_by_value(tf.cast(num_pos, tf.int32) - 1, 0, k_top - 1)
  tau = tf.gather(top_v, r_index, batch_dims=1)[:, None]
  above_tau = top_v > tau
  stats = tie_statistics(top_v, relevant=top_pos, mask=above_tau)
  per_item = _expected_precision_sum(stats["above"], stats["tied"], stats["rel_above"],
                                     stats["rel_tied"], num_pos[:, None])
  above_sum = tf.reduce_sum(tf.where(tf.logical_and(above_tau, top_pos > 0), per_item,
                                     tf.zeros_like(per_item)), axis=1)
  a_tau = tf.reduce_sum(tf.cast(above_tau, f64), axis=1)
  rho_tau = tf.reduce_sum(tf.where(above_tau, top_pos, tf.zeros_like(top_pos)), axis=1)
  at_tau = tf.equal(sims, tau)
  t_tau = tf.reduce_sum(tf.cast(tf.logical_and(valid, at_tau), f64), axis=1)
  r_tau = tf.reduce_sum(tf.cast(tf.logical_and(pos, at_tau), f64), axis=1)
  tau_sum = r_tau * _expected_precision_sum(a_tau, t_tau, rho_tau, r_tau, num_pos)
  ap_r = tf.math.divide_no_nan(above_sum + tau_sum, num_pos)
  return hits, ap_r, num_pos


_block_recall = tf.function(
    lambda *args: block_statistics(*args, with_map=False),
    input_signature=[_SPEC_E, _SPEC_I, _SPEC_I, _SPEC_E, _SPEC_I, _SPEC_I, _SPEC_I])
_block_all = tf.function(
    lambda *args: block_statistics(*args, with_map=True),
    input_signature=[_SPEC_E, _SPEC_I, _SPEC_I, _SPEC_E, _SPEC_I, _SPEC_I, _SPEC_I])


def _as_embeddings(embeddings):
  try:
    e = np.asarray(embeddings.numpy() if hasattr(embeddings, "numpy") else embeddings)
  except Exception as err:  # pylint: disable=broad-except
    raise TypeError(f"`embeddings` must be a numeric array [N, D], got {embeddings!r}: {err}") from None
  if not (np.issubdtype(e.dtype, np.floating) or np.issubdtype(e.dtype, np.integer)):
    raise TypeError(f"`embeddings` must be numeric, got dtype {e.dtype}.")
  if e.ndim != 2:
    raise ValueError(f"`embeddings` must have shape [num_items, dim], got shape {e.shape}.")
  if e.shape[0] < 2 or e.shape[1] < 1:
    raise ValueError(
        f"`embeddings` must hold at least 2 items of dimension >= 1, got shape {e.shape}.")
  e = e.astype(np.float64)
  bad = np.flatnonzero(~np.isfinite(e).all(axis=1))
  if bad.size:
    raise ValueError(
        f"`embeddings` must be finite, but {bad.size} row(s) hold NaN or Inf "
        f"(first rows: {bad[:5].tolist()}).")
  # Row-wise float64 normalisation: identical rows give bit-identical unit vectors.
  norms = np.sqrt(np.einsum("ij,ij->i", e, e))
  return e / np.where(norms > 0, norms, 1.0)[:, None]


def _as_labels(labels, n):
  y = np.asarray(labels.numpy() if hasattr(labels, "numpy") else labels)
  if y.ndim == 2 and y.shape[1] == 1:
    y = y[:, 0]
  if y.ndim != 1:
    raise ValueError(f"`labels` must be class ids of shape [N] or [N, 1], got shape {y.shape}.")
  if y.shape[0] != n:
    raise ValueError(
        f"`labels` and `embeddings` must have the same length, got {y.shape[0]} labels for {n} "
        f"embeddings.")
  if np.issubdtype(y.dtype, np.floating):
    if not np.all(np.isfinite(y)) or np.any(y != np.round(y)):
      raise ValueError("`labels` must be whole-valued class ids, got non-integer values.")
  elif not np.issubdtype(y.dtype, np.integer):
    raise TypeError(f"`labels` must be integer class ids, got dtype {y.dtype}.")
  return y.astype(np.int64)


def _as_subset(name, subset, n):
  if subset is None:
    return np.arange(n, dtype=np.int64)
  s = np.asarray(subset.numpy() if hasattr(subset, "numpy") else subset)
  if s.dtype == bool:
    if s.shape != (n,):
      raise ValueError(
          f"`{name}` given as a boolean mask must have shape ({n},), got shape {s.shape}.")
    s = np.flatnonzero(s)
  elif s.ndim != 1 or not (np.issubdtype(s.dtype, np.integer) or s.size == 0):
    raise ValueError(
        f"`{name}` must be a 1-D array of row indices or a boolean mask of length {n}, "
        f"got {subset!r}.")
  s = s.astype(np.int64)
  if s.size == 0:
    raise ValueError(f"`{name}` must select at least one item, got an empty selection.")
  if s.min() < 0 or s.max() >= n:
    raise ValueError(f"`{name}` holds row indices outside [0, {n}): {subset!r}.")
  if np.unique(s).size != s.size:
    raise ValueError(f"`{name}` must not repeat row indices.")
  return s


def _check_ks(ks):
  if isinstance(ks, numbers.Integral) and not isinstance(ks, bool):
    ks = (ks,)
  try:
    ks = tuple(ks)
  except TypeError:
    raise ValueError(f"`ks` must be a positive integer or a sequence of them, got {ks!r}.") from None
  if not ks:
    raise ValueError("`ks` must hold at least one cut-off, got an empty sequence.")
  for k in ks:
    _validation.check_int("ks", k, minimum=1)
  return tuple(int(k) for k in ks)


def retrieval_metrics(embeddings, labels, ks=(1, 2, 4, 8), query=None, gallery=None,
                      with_map=True, singletons="exclude", block_size=256):
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
      ``query``/``gallery``, or no query with a positive.

  Example:
    >>> e = [[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]]
    >>> m = retrieval_metrics(e, [0, 0, 1, 1], ks=(1,))
    >>> m["recall@1"], round(m["map@r"], 6), m["num_excluded"]
    (1.0, 1.0, 0)
  """
  ks = _check_ks(ks)
  _validation.check_choice("singletons", singletons, _SINGLETONS)
  _validation.check_int("block_size", block_size, minimum=1)
  e = _as_embeddings(embeddings)
  n = e.shape[0]
  y = _as_labels(labels, n)
  q_ids = _as_subset("query", query, n)
  g_ids = _as_subset("gallery", gallery, n)
  g_size = g_ids.size - (1 if np.isin(q_ids, g_ids).any() else 0)
  if max(ks) > g_size:
    raise ValueError(
        f"`ks` must not exceed the number of gallery items a query is compared with ({g_size}), "
        f"got ks={list(ks)}.")

  kernel = _block_all if with_map else _block_recall
  g = tf.constant(e[g_ids])
  g_lab = tf.constant(y[g_ids])
  g_idt = tf.constant(g_ids)
  ks_t = tf.constant(ks, tf.int64)
  hit_sum = np.zeros(len(ks), np.float64)
  ap_sum = 0.0
  answerable = 0
  for start in range(0, q_ids.size, block_size):
    ids = q_ids[start:start + block_size]
    hits, ap_r, num_pos = kernel(tf.constant(e[ids]), tf.constant(y[ids]), tf.constant(ids),
                                 g, g_lab, g_idt, ks_t)
    has = num_pos.numpy() > 0
    answerable += int(has.sum())
    hit_sum += hits.numpy()[has].sum(axis=0)
    ap_sum += float(ap_r.numpy()[has].sum())
  excluded = int(q_ids.size - answerable)
  if answerable == 0:
    raise ValueError(
        f"No query has an item of its class in the gallery ({q_ids.size} queries); Recall@K and "
        f"MAP@R are undefined. Check `labels`, `query` and `gallery`.")
  denom = answerable if singletons == "exclude" else q_ids.size
  out = {f"recall@{k}": float(h / denom) for k, h in zip(ks, hit_sum)}
  if with_map:
    out["map@r"] = float(ap_sum / denom)
  out["num_queries"] = int(denom)
  out["num_excluded"] = excluded if singletons == "exclude" else 0
  return out


def retrieval_recall_at_k(embeddings, labels, ks=(1, 2, 4, 8), query=None, gallery=None,
                          singletons="exclude", block_size=256):
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
  return retrieval_metrics(embeddings, labels, ks, query, gallery, with_map=False,
                           singletons=singletons, block_size=block_size)


def map_at_r(embeddings, labels, query=None, gallery=None, singletons="exclude", block_size=256):
  """MAP@R (Musgrave et al., ECCV 2020, Sec. 3.2) of cosine-similarity retrieval, ties in expectation.

  ``MAP@R = 1/|Q| sum_q 1/R_q sum_{i<=R_q} P(i) rel(i)`` with ``R_q`` the number of gallery items
  of the query's class (self excluded).

  Returns:
    ``{"map@r": float, "num_queries": int, "num_excluded": int}``.

  Example:
    >>> e = [[1.0, 0.0], [0.8, 0.6], [0.6, 0.8], [0.0, 1.0]]
    >>> round(map_at_r(e, [0, 0, 1, 1])["map@r"], 6)
    0.5
  """
  out = retrieval_metrics(embeddings, labels, (1,), query, gallery, with_map=True,
                          singletons=singletons, block_size=block_size)
  return {key: out[key] for key in ("map@r", "num_queries", "num_excluded")}


class RetrievalEvaluation(keras.callbacks.Callback):
  """Keras callback: Recall@K (and MAP@R) of a validation set at the end of every epoch.

  It embeds ``x`` with ``embedding_model`` (default: the model being trained, for models whose
  output is the embedding), computes :func:`retrieval_metrics`, prints one line and writes the
  values into the epoch's ``logs`` as ``"{prefix}recall@K"`` and ``"{prefix}map@r"``, so that
  ``History``, ``TensorBoard``, ``EarlyStopping(monitor="val_recall@1", mode="max")`` and
  ``ModelCheckpoint`` see them (put this callback before them in the list).

  Args:
    x: validation inputs (array, or a ``tf.data.Dataset`` yielding inputs only).
    labels: their class ids ``[N]``.
    ks: Recall@K cut-offs.
    query, gallery: the protocol (see :func:`retrieval_metrics`).
    embedding_model: a Keras model mapping ``x`` to embeddings, e.g. the ``embedding_model`` of
      :func:`tfrank4class.heads.embedding.build_retrieval_model`; ``None`` uses the trained model.
    with_map: also report MAP@R.
    prefix: key prefix in ``logs``.
    batch_size: prediction batch size.
    every: evaluate after epochs ``every``, ``2 * every``, ...
    verbose: print the line.
    singletons: see :func:`retrieval_metrics`.

  A callback is configuration of a ``fit`` call, not part of the model, so it is not
  Keras-serialisable (Keras never saves callbacks); results of every evaluation stay in
  ``self.history``.

  Example:
    >>> cb = RetrievalEvaluation(x_val, y_val, ks=(1, 2, 4, 8))   # doctest: +SKIP
    >>> model.fit(ds, epochs=5, callbacks=[cb])                     # doctest: +SKIP
  """

  def __init__(self, x, labels, ks=(1, 2, 4, 8), query=None, gallery=None, embedding_model=None,
               with_map=True, prefix="val_", batch_size=256, every=1, verbose=1, singletons="exclude"):
    super().__init__()
    self.ks = _check_ks(ks)
    _validation.check_int("batch_size", batch_size, minimum=1)
    _validation.check_int("every", every, minimum=1)
    _validation.check_choice("singletons", singletons, _SINGLETONS)
    self.x = x
    self.labels = labels
    self.query = query
    self.gallery = gallery
    self.embedding_model = embedding_model
    self.with_map = bool(with_map)
    self.prefix = str(prefix)
    self.batch_size = batch_size
    self.every = every
    self.verbose = verbose
    self.singletons = singletons
    self.history = []

  def evaluate(self):
    """Embeds the validation set and returns :func:`retrieval_metrics` of it."""
    model = self.embedding_model if self.embedding_model is not None else self.model
    if isinstance(self.x, tf.data.Dataset):
      emb = model.predict(self.x, verbose=0)
    else:
      emb = model.predict(self.x, batch_size=self.batch_size, verbose=0)
    return retrieval_metrics(emb, self.labels, self.ks, self.query, self.gallery,
                             with_map=self.with_map, singletons=self.singletons)

  def on_epoch_end(self, epoch, logs=None):
    if (epoch + 1) % self.every:
      return
    result = self.evaluate()
    self.history.append(dict(result, epoch=epoch))
    keys = [f"recall@{k}" for k in self.ks] + (["map@r"] if self.with_map else [])
    if logs is not None:
      for key in keys:
        logs[self.prefix + key] = result[key]
    if self.verbose:
      text = " - ".join(f"{self.prefix}{key}: {result[key]:.4f}" for key in keys)
      print(f"epoch {epoch + 1}: {text}")
