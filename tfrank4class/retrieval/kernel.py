"""The TensorFlow kernel of the retrieval metrics: Recall@K and AP@R of one block of queries.

For a block of ``b`` queries against the whole gallery (unit-norm float64 embeddings), with
``P_q`` the gallery items of query ``q``'s class other than ``q`` itself and ``R_q = |P_q|``:

    hit_q(K) = P(some item of P_q is among the K most similar gallery items)      (Recall@K)
    AP@R_q   = 1/R_q sum_{i=1}^{R_q} P(i) rel(i)                                   (MAP@R)

(Rolinek et al., CVPR 2020, Eq. 7-8; Musgrave et al., ECCV 2020, Sec. 3.2), both in expectation
over uniformly random orderings of tied similarities (McSherry & Najork, ECIR 2008). The host
loop that feeds the blocks and averages the queries is :mod:`tfrank4class.retrieval.evaluation`.
Everything here is pure TensorFlow and runs eagerly, inside ``tf.function`` and under XLA.
"""

import numpy as np
import tensorflow as tf

from tfrank4class.ranking.precision import expected_precision
from tfrank4class.ranking.ties import log_binomial, tie_statistics

_SPEC_E = tf.TensorSpec([None, None], tf.float64)
_SPEC_I = tf.TensorSpec([None], tf.int64)


def similarities(query, gallery):
  """Cosine similarities ``[b, G]`` of unit-norm float64 rows, rounded to float32 and back.

  The rounding makes equal embeddings tie exactly despite summation-order noise (differences
  below float32 resolution, about 6e-8, count as ties).

  Example:
    >>> e = tf.constant([[1.0, 0.0], [0.6, 0.8]], tf.float64)
    >>> similarities(e, e).numpy().round(6).tolist()
    [[1.0, 0.6], [0.6, 1.0]]
  """
  return tf.cast(tf.cast(tf.matmul(query, gallery, transpose_b=True), tf.float32), query.dtype)


def hit_probabilities(sims, valid, positive, ks):
  """``P(hit@K)`` ``[b, k]`` per query and cut-off, ties in expectation.

  The best positive's tie group of ``t`` valid items, ``r`` of them positive and ``n = t - r``
  negative, sits at positions ``a + 1 .. a + t`` (``a`` valid items strictly more similar). With
  ``s = K - a`` places of the top K left for the group and ``m = clip(s, 0, n)``:

      P(hit@K) = 0 if s <= 0;   1 if s > n;   1 - C(n, m) / C(t, m) otherwise

  (the probability that the group's first ``m`` places are not all negatives).

  Args:
    sims: float ``[b, G]`` similarities.
    valid: bool ``[b, G]``, the gallery items each query is compared with.
    positive: bool ``[b, G]``, its valid items of the query's class.
    ks: int ``[k]`` cut-offs.

  Example:
    >>> sims = tf.constant([[0.9, 0.9, 0.1]], tf.float64)   # one positive tied with a negative
    >>> hit = hit_probabilities(sims, tf.constant([[True] * 3]),
    ...                         tf.constant([[True, False, False]]), tf.constant([1, 2]))
    >>> hit.numpy().tolist()
    [[0.5, 1.0]]
  """
  dtype = sims.dtype
  best = tf.reduce_max(tf.where(positive, sims, tf.constant(-np.inf, dtype)), axis=1, keepdims=True)
  above = tf.reduce_sum(tf.cast(tf.logical_and(valid, sims > best), dtype), axis=1)
  at_best = tf.equal(sims, best)
  tied = tf.reduce_sum(tf.cast(tf.logical_and(valid, at_best), dtype), axis=1)
  rel_tied = tf.reduce_sum(tf.cast(tf.logical_and(positive, at_best), dtype), axis=1)
  neg_tied = tied - rel_tied
  slots = tf.cast(ks, dtype)[None, :] - above[:, None]  # places left in the top K
  m = tf.clip_by_value(slots, 0.0, tf.maximum(neg_tied, 0.0)[:, None])
  miss = tf.exp(log_binomial(neg_tied[:, None], m) - log_binomial(tied[:, None], m))
  miss = tf.where(slots <= 0.0, tf.ones_like(miss), miss)
  miss = tf.where(slots > neg_tied[:, None], tf.zeros_like(miss), miss)
  return 1.0 - miss


def average_precision_at_r(sims, valid, positive, num_positives):
  """AP@R ``[b]`` per query, ties in expectation (Musgrave et al., ECCV 2020, Sec. 3.2).

  ``AP@R_q = 1/R_q sum_{i <= R_q} P(i) rel(i)``: for every relevant item, its expected precision
  counted up to position ``R_q`` (:func:`tfrank4class.ranking.precision.expected_precision`
  with ``cutoff = R_q``). Only the tie groups reaching into the first ``R_q`` positions count.
  With ``tau`` the ``R_q``-th largest similarity these are the groups strictly above ``tau`` (all
  inside a ``top_k`` with ``k = max R_q``) and the group at ``tau``, whose size is counted over
  the whole row.

  Args:
    sims, valid, positive: as for :func:`hit_probabilities`.
    num_positives: float ``[b]``, ``R_q``.

  Example:
    >>> sims = tf.constant([[0.9, 0.5, 0.7]], tf.float64)   # positives ranked 1st and 3rd
    >>> ap = average_precision_at_r(sims, tf.constant([[True] * 3]),
    ...                             tf.constant([[True, True, False]]),
    ...                             tf.constant([2.0], tf.float64))
    >>> round(float(ap[0]), 12)   # (1/1 + 0) / 2: only the first R = 2 positions count
    0.5
  """
  dtype = sims.dtype
  k_top = tf.maximum(tf.cast(tf.reduce_max(num_positives), tf.int32), 1)
  top_v, top_i = tf.math.top_k(tf.where(valid, sims, tf.constant(-np.inf, dtype)), k=k_top)
  top_pos = tf.cast(tf.gather(positive, top_i, batch_dims=1), dtype)
  r_index = tf.clip_by_value(tf.cast(num_positives, tf.int32) - 1, 0, k_top - 1)
  tau = tf.gather(top_v, r_index, batch_dims=1)[:, None]
  # Groups strictly above tau: their statistics come from the top_k alone.
  above_tau = top_v > tau
  stats = tie_statistics(top_v, relevant=top_pos, mask=above_tau)
  per_item = expected_precision(
    stats["above"],
    stats["tied"],
    stats["rel_above"],
    stats["rel_tied"],
    cutoff=num_positives[:, None],
  )
  above_sum = tf.reduce_sum(
    tf.where(tf.logical_and(above_tau, top_pos > 0), per_item, tf.zeros_like(per_item)), axis=1
  )
  # The group at tau: counted over the whole row.
  a_tau = tf.reduce_sum(tf.cast(above_tau, dtype), axis=1)
  rho_tau = tf.reduce_sum(tf.where(above_tau, top_pos, tf.zeros_like(top_pos)), axis=1)
  at_tau = tf.equal(sims, tau)
  t_tau = tf.reduce_sum(tf.cast(tf.logical_and(valid, at_tau), dtype), axis=1)
  r_tau = tf.reduce_sum(tf.cast(tf.logical_and(positive, at_tau), dtype), axis=1)
  tau_sum = r_tau * expected_precision(a_tau, t_tau, rho_tau, r_tau, cutoff=num_positives)
  return tf.math.divide_no_nan(above_sum + tau_sum, num_positives)


def block_statistics(
  query, query_labels, query_ids, gallery, gallery_labels, gallery_ids, ks, with_map=True
):
  """Per-query Recall@K and MAP@R for one block of queries against the whole gallery.

  This is the kernel behind :func:`tfrank4class.retrieval.retrieval_metrics`: the similarities
  (:func:`similarities`), the positives, :func:`hit_probabilities` and
  :func:`average_precision_at_r`. Inputs must already be L2-normalised.

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
  sims = similarities(query, gallery)
  valid = tf.not_equal(query_ids[:, None], gallery_ids[None, :])
  positive = tf.logical_and(tf.equal(query_labels[:, None], gallery_labels[None, :]), valid)
  num_positives = tf.reduce_sum(tf.cast(positive, sims.dtype), axis=1)
  hits = hit_probabilities(sims, valid, positive, ks)
  if not with_map:
    return hits, tf.zeros_like(num_positives), num_positives
  return hits, average_precision_at_r(sims, valid, positive, num_positives), num_positives


_SIGNATURE = [_SPEC_E, _SPEC_I, _SPEC_I, _SPEC_E, _SPEC_I, _SPEC_I, _SPEC_I]
_COMPILED = {
  False: tf.function(
    lambda *args: block_statistics(*args, with_map=False), input_signature=_SIGNATURE
  ),
  True: tf.function(
    lambda *args: block_statistics(*args, with_map=True), input_signature=_SIGNATURE
  ),
}


def compiled_block_statistics(with_map):
  """:func:`block_statistics` as a ``tf.function`` with a fixed signature, traced once per process
  (float64 ``[None, None]`` embeddings, int64 ``[None]`` labels, ids and cut-offs)."""
  return _COMPILED[bool(with_map)]
