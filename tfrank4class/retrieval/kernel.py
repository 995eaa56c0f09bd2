"""The kernel of the retrieval metrics: Recall@K and AP@R of one block of queries, on keras.ops.

For a block of ``b`` queries against the whole gallery (unit-norm float64 embeddings), with
``P_q`` the gallery items of query ``q``'s class other than ``q`` itself and ``R_q = |P_q|``:

    hit_q(K) = P(some item of P_q is among the K most similar gallery items)      (Recall@K)
    AP@R_q   = 1/R_q sum_{i=1}^{R_q} P(i) rel(i)                                   (MAP@R)

(Rolinek et al., CVPR 2020, Eq. 7-8; Musgrave et al., ECCV 2020, Sec. 3.2), both in expectation
over uniformly random orderings of tied similarities (McSherry & Najork, ECIR 2008). The host
loop that feeds the blocks and averages the queries is :mod:`tfrank4class.retrieval.evaluation`.

Backends. Written on ``keras.ops``: it runs on TensorFlow (eagerly, inside ``tf.function``, and
under XLA without MAP@R), JAX and PyTorch. :func:`average_precision_at_r` takes a ``top_k`` whose
``k`` is the block's largest ``R_q``, a number known only from the data: eagerly (and inside
``tf.function``, whose ``top_k`` takes a tensor ``k``) that is fine, but ``jax.jit`` cannot trace
it, so on JAX the kernel runs eagerly (:func:`hit_probabilities` alone also runs under
``jax.jit``). Float64 on JAX needs ``jax_enable_x64``; without it JAX computes in float32 (the
similarities are rounded to float32 anyway, so the ties are the same; the binomial ratios and
precisions lose digits beyond float32's, about ``1e-7``).
"""

import numpy as np

from tfrank4class import backend
from tfrank4class.compat import ops
from tfrank4class.ranking.precision import expected_precision
from tfrank4class.ranking.ties import log_binomial, tie_statistics


def similarities(query, gallery):
  """Cosine similarities ``[b, G]`` of unit-norm float64 rows, rounded to float32 and back.

  The rounding makes equal embeddings tie exactly despite summation-order noise (differences
  below float32 resolution, about 6e-8, count as ties).

  Example:
    >>> e = ops.convert_to_tensor(np.array([[1.0, 0.0], [0.6, 0.8]]))
    >>> ops.convert_to_numpy(similarities(e, e)).astype(float).round(6).tolist()
    [[1.0, 0.6], [0.6, 1.0]]
  """
  # einsum, not matmul: Keras's matmul returns float32 for float64 inputs on PyTorch (3.15).
  sims = ops.einsum("bd,gd->bg", query, gallery)
  return ops.cast(ops.cast(sims, "float32"), query.dtype)


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
    >>> sims = np.array([[0.9, 0.9, 0.1]])   # one positive tied with a negative
    >>> hit = hit_probabilities(sims, np.array([[True] * 3]),
    ...                         np.array([[True, False, False]]), np.array([1, 2]))
    >>> ops.convert_to_numpy(hit).round(12).tolist()   # JAX's lgamma: 0.49999999999999933
    [[0.5, 1.0]]
  """
  sims = ops.convert_to_tensor(sims)
  dtype = sims.dtype
  count = lambda x: ops.sum(ops.cast(x, dtype), axis=1)
  best = ops.max(backend.where(positive, sims, -np.inf), axis=1, keepdims=True)
  above = count(ops.logical_and(valid, sims > best))
  at_best = sims == best
  tied = count(ops.logical_and(valid, at_best))
  rel_tied = count(ops.logical_and(positive, at_best))
  neg_tied = tied - rel_tied
  slots = ops.cast(ks, dtype)[None, :] - above[:, None]  # places left in the top K
  # Not ops.maximum nor ops.divide_no_nan: on PyTorch they return float32 for float64 inputs.
  m = ops.clip(slots, 0.0, backend.where(neg_tied > 0, neg_tied, ops.zeros_like(neg_tied))[:, None])
  miss = ops.exp(log_binomial(neg_tied[:, None], m) - log_binomial(tied[:, None], m))
  miss = backend.where(slots <= 0.0, ops.ones_like(miss), miss)
  miss = backend.where(slots > neg_tied[:, None], ops.zeros_like(miss), miss)
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
    >>> sims = np.array([[0.9, 0.5, 0.7]])   # positives ranked 1st and 3rd
    >>> ap = average_precision_at_r(sims, np.array([[True] * 3]),
    ...                             np.array([[True, True, False]]), np.array([2.0]))
    >>> round(float(ops.convert_to_numpy(ap)[0]), 12)   # (1/1 + 0) / 2: only the first R = 2 count
    0.5
  """
  sims, num_positives = ops.convert_to_tensor(sims), ops.convert_to_tensor(num_positives)
  dtype = sims.dtype
  k_top = ops.maximum(ops.cast(ops.max(num_positives), "int32"), 1)
  known = backend.static_value(k_top)
  k_top = int(known) if known is not None else k_top  # a tensor inside tf.function
  top_v, top_i = backend.top_k(backend.where(valid, sims, -np.inf), k_top)
  top_pos = ops.cast(backend.take_along_axis(ops.convert_to_tensor(positive), top_i, axis=1), dtype)
  r_index = ops.clip(ops.cast(num_positives, "int32") - 1, 0, k_top - 1)
  tau = backend.take_along_axis(top_v, r_index[:, None], axis=1)
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
  above_sum = ops.sum(
    backend.where(ops.logical_and(above_tau, top_pos > 0), per_item, ops.zeros_like(per_item)),
    axis=1,
  )
  # The group at tau: counted over the whole row.
  count = lambda x: ops.sum(ops.cast(x, dtype), axis=1)
  a_tau = count(above_tau)
  rho_tau = ops.sum(backend.where(above_tau, top_pos, ops.zeros_like(top_pos)), axis=1)
  at_tau = sims == tau
  t_tau = count(ops.logical_and(valid, at_tau))
  r_tau = count(ops.logical_and(positive, at_tau))
  tau_sum = r_tau * expected_precision(a_tau, t_tau, rho_tau, r_tau, cutoff=num_positives)
  has = num_positives > 0
  ap_sum = above_sum + tau_sum
  return backend.where(has, ap_sum / backend.where(has, num_positives, 1.0), ops.zeros_like(ap_sum))


def block_statistics(
  query, query_labels, query_ids, gallery, gallery_labels, gallery_ids, ks, with_map=True
):
  """Per-query Recall@K and MAP@R for one block of queries against the whole gallery.

  This is the kernel behind :func:`tfrank4class.retrieval.retrieval_metrics`: the similarities
  (:func:`similarities`), the positives, :func:`hit_probabilities` and
  :func:`average_precision_at_r`. Inputs must already be L2-normalised.

  Args:
    query: float64 ``[b, D]`` unit-norm query embeddings (arrays or tensors of the backend).
    query_labels: integer ``[b]`` class ids.
    query_ids: integer ``[b]`` row ids; a gallery item with the same id is the query itself and
      is excluded.
    gallery: float64 ``[G, D]`` unit-norm gallery embeddings.
    gallery_labels: integer ``[G]``.
    gallery_ids: integer ``[G]``.
    ks: integer ``[k]`` cut-offs.
    with_map: also compute MAP@R (needs a top-k of each row, k = the largest R_q).

  Returns:
    ``(hits, ap_r, num_positives)``: float64 ``[b, k]`` probability of a hit at each K (ties in
    expectation), float64 ``[b]`` AP@R (zeros if ``with_map`` is false) and float64 ``[b]``
    ``R_q``. Rows with ``R_q == 0`` hold meaningless values.

  Example:
    >>> e = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    >>> y, i = np.array([0, 0, 1]), np.arange(3)
    >>> hits, ap, r = block_statistics(e, y, i, e, y, i, np.array([1]))
    >>> ops.convert_to_numpy(hits)[:2, 0].tolist(), ops.convert_to_numpy(r).tolist()
    ([1.0, 1.0], [1.0, 1.0, 0.0])
  """
  query, query_labels, query_ids, gallery, gallery_labels, gallery_ids = (
    ops.convert_to_tensor(x)
    for x in (query, query_labels, query_ids, gallery, gallery_labels, gallery_ids)
  )
  sims = similarities(query, gallery)
  valid = query_ids[:, None] != gallery_ids[None, :]
  positive = ops.logical_and(query_labels[:, None] == gallery_labels[None, :], valid)
  num_positives = ops.sum(ops.cast(positive, sims.dtype), axis=1)
  hits = hit_probabilities(sims, valid, positive, ks)
  if not with_map:
    return hits, ops.zeros_like(num_positives), num_positives
  return hits, average_precision_at_r(sims, valid, positive, num_positives), num_positives
