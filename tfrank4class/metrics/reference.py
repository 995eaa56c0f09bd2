"""Exact float64 reference of the classification-as-ranking metrics, for tests and host-side use.

These are the sort-based, float64 implementations that :mod:`tfrank4class.metrics.functional`
replaced on the training path. They are kept as the reference the fast float32 functions are
tested against, and for evaluation on the host where float64 is available and speed does not
matter. Same arguments, same tie rule, same values (within the float32 error bounds documented in
:mod:`tfrank4class.metrics.functional`); results come back in the scores' float dtype.

Every function takes ``labels`` (integer class ids ``[B]`` / ``[B, 1]`` or dense relevance
``[B, C]``, entries below 0 marking padding) and raw ``scores`` ``[B, C]`` and returns one value
per list, shape ``[B]``.

Ties. A tie in the scores is resolved by its *expectation*: each metric is the exact mean of its
value over all orderings of tied items, equally likely (McSherry & Najork, ECIR 2008). So the
value does not depend on the order of the classes, and a model that outputs all-equal scores gets
the chance value, not a lucky or unlucky one. In closed form, with ``a_i`` items strictly ahead of
item ``i`` and ``t_i`` items in its tie group (``i`` included), ``i`` sits uniformly on positions
``a_i + 1 .. a_i + t_i``. The exception is :func:`spearman`, which uses mid-ranks like
``scipy.stats.spearmanr``.

Relevance. ``ndcg`` uses graded gains; ``top_k_accuracy``, ``reciprocal_rank`` and
``average_precision`` count an item as relevant when its relevance is ``> 0``.

Lists with no relevant item score 0 under every metric (and ``spearman`` is 0 when either the
labels or the scores of a list are constant); nothing returns NaN.

Backends. Written on ``keras.ops``, so it runs on TensorFlow, JAX and PyTorch. JAX computes in
float64 only with ``jax_enable_x64`` on (``jax.config.update("jax_enable_x64", True)``); without
it JAX turns the float64 casts into float32 (with a warning) and this module is no more exact than
:mod:`tfrank4class.metrics.functional`.
"""

import math

from tfrank4class import backend, checks
from tfrank4class.compat import ops
from tfrank4class.labels import check_batch_size, num_items, to_relevance
from tfrank4class.metrics.functional import GAINS
from tfrank4class.ranking.ties import log_binomial, tie_statistics


def _prepare(labels, scores):
  """Validated float64 scores, relevance (padding zeroed), the validity mask, the output dtype.

  The inputs go through the package's one score check and label parser (their maths is what
  this module keeps independent). Computation runs in float64 so that harmonic numbers and
  binomial ratios stay exact for long lists; results come back in the scores' float dtype.
  """
  scores = checks.check_scores("scores", scores)
  out_dtype = ops.dtype(scores)
  relevance = to_relevance(labels, num_items(scores), dtype=out_dtype)
  check_batch_size(relevance, scores)
  scores = ops.cast(scores, "float64")
  relevance = ops.cast(relevance, "float64")
  mask = relevance >= 0
  relevance = backend.where(mask, relevance, ops.zeros_like(relevance))
  return scores, relevance, mask, out_dtype


def _first_relevant_group(scores, relevant, mask):
  """``(a, t, r, has_relevant)`` of the highest tie group holding a relevant item, each ``[B]``.

  ``a`` items are strictly ahead of the group, ``t`` items form it and ``r`` of them are relevant.
  """
  stats = tie_statistics(scores, relevant=relevant, mask=mask)
  is_rel = relevant > 0
  big = ops.cast(ops.shape(scores)[-1] + 1, scores.dtype)
  above = backend.where(is_rel, stats["above"], big)
  best = ops.argmin(above, axis=-1)
  pick = lambda x: backend.take_along_axis(x, best[:, None], axis=-1)[:, 0]
  return (
    pick(stats["above"]),
    pick(stats["tied"]),
    pick(stats["rel_tied"]),
    ops.any(is_rel, axis=-1),
  )


def top_k_accuracy(labels, scores, k=5):
  """1 if a relevant item is among the ``k`` highest scores, in expectation over ties.

  With the first tie group holding a relevant item starting after ``a`` items, of size ``t`` with
  ``r`` relevant items, and ``m = k - a`` of its places inside the top ``k``:

      P(hit) = 0 if m <= 0;   1 - C(t - m, r) / C(t, r) otherwise   (1 if m > t - r)

  For one relevant item this is ``clip((k - a) / t, 0, 1)``; for distinct scores it is
  ``scikit-learn``'s ``top_k_accuracy_score`` per example.

  Example:
    >>> ops.convert_to_numpy(top_k_accuracy([1], [[0.5, 0.2, 0.9]], k=2))
    array([0.], dtype=float32)
  """
  k = checks.check_int("k", k, minimum=1)
  scores, relevance, mask, out_dtype = _prepare(labels, scores)
  relevant = ops.cast(relevance > 0, scores.dtype)
  a, t, r, has_rel = _first_relevant_group(scores, relevant, mask)
  m = float(k) - a
  safe_m = ops.clip(m, 0.0, t - r)
  miss = ops.exp(log_binomial(t - safe_m, r) - log_binomial(t, r))
  hit = backend.where(
    m <= 0, ops.zeros_like(m), backend.where(m > t - r, ops.ones_like(m), 1.0 - miss)
  )
  return ops.cast(backend.where(has_rel, hit, ops.zeros_like(hit)), out_dtype)


def reciprocal_rank(labels, scores, k=None):
  """1 / (position of the first relevant item), 0 past ``k``, in expectation over ties.

  With the first relevant tie group as in :func:`top_k_accuracy`, the first relevant item of the
  group lands on its ``x``-th place with probability ``C(t - x, r - 1) / C(t, r)``, so

      RR = sum_{x=1}^{t-r+1} C(t - x, r - 1) / C(t, r) * 1[a + x <= k] / (a + x).

  The mean over lists is the MRR (TF-Ranking's ``MRRMetric`` for distinct scores).

  Example:
    >>> ops.convert_to_numpy(reciprocal_rank([1], [[0.5, 0.2, 0.9]]))
    array([0.33333334], dtype=float32)
  """
  k = checks.check_int("k", k, minimum=1, allow_none=True)
  scores, relevance, mask, out_dtype = _prepare(labels, scores)
  relevant = ops.cast(relevance > 0, scores.dtype)
  a, t, r, has_rel = _first_relevant_group(scores, relevant, mask)
  n = ops.shape(scores)[-1]
  x = ops.arange(1, n + 1, dtype=scores.dtype)[None, :]
  a, t, r = a[:, None], t[:, None], r[:, None]
  valid = x <= t - r + 1
  safe_x = backend.where(valid, x, ops.ones_like(x))
  log_p = log_binomial(t - safe_x, r - 1.0) - log_binomial(
    t, backend.where(r > 1, r, ops.ones_like(r))
  )
  position = a + x
  term = ops.exp(log_p) / position
  if k is not None:
    valid = valid & (position <= k)
  rr = ops.sum(backend.where(valid, term, ops.zeros_like(term)), axis=-1)
  return ops.cast(backend.where(has_rel, rr, ops.zeros_like(rr)), out_dtype)


def ndcg(labels, scores, k=None, gain="exp2"):
  """Normalised discounted cumulative gain at ``k``, tie-averaged.

      DCG@k = sum_i g_i * E[d(p_i)],   d(p) = 1[p <= k] / log2(1 + p),
      E[d(p_i)] = (D(a_i + t_i) - D(a_i)) / t_i,   D(m) = sum_{p=1}^{m} d(p),
      NDCG@k = DCG@k / IDCG@k   (0 when IDCG@k = 0),

  with gains ``g = 2^rel - 1`` (``gain="exp2"``, TF-Ranking's default) or ``g = rel``
  (``gain="linear"``, scikit-learn's ``ndcg_score``, whose tie handling this matches).

  Example:
    >>> ops.convert_to_numpy(ndcg([0], [[0.2, 0.9, 0.1]])).astype(float).round(5).tolist()
    [0.63093]
  """
  k = checks.check_int("k", k, minimum=1, allow_none=True)
  checks.check_choice("gain", gain, GAINS)
  scores, relevance, mask, out_dtype = _prepare(labels, scores)
  gains = ops.power(2.0, relevance) - 1.0 if gain == "exp2" else relevance
  gains = backend.where(mask, gains, ops.zeros_like(gains))
  n = ops.shape(scores)[-1]
  positions = ops.arange(1, n + 1, dtype=scores.dtype)
  discount = 1.0 / (ops.log(1.0 + positions) / math.log(2.0))
  if k is not None:
    discount = backend.where(positions <= k, discount, ops.zeros_like(discount))
  cumulative = ops.concatenate(
    [ops.zeros([1], discount.dtype), backend.cumsum(discount, axis=0)], axis=0
  )
  stats = tie_statistics(scores, mask=mask)
  above = ops.cast(stats["above"], "int32")
  tied = ops.cast(stats["tied"], "int32")
  expected_discount = (
    ops.take(cumulative, above + tied, axis=0) - ops.take(cumulative, above, axis=0)
  ) / ops.cast(tied, scores.dtype)
  dcg = ops.sum(gains * expected_discount, axis=-1)
  ideal = ops.sum(-ops.sort(-gains, axis=-1) * discount, axis=-1)
  value = backend.divide_no_nan(dcg, ideal)
  return ops.cast(value, out_dtype)


def average_precision(labels, scores):
  """Average precision of one list, in expectation over ties (He et al., CVPR 2018, Eq. 9).

  For relevant item ``i`` (``rel > 0``) with ``a`` items and ``R`` relevant items strictly ahead,
  in a tie group of ``t`` items of which ``r`` are relevant:

      E[prec_i] = 1/t * sum_{p=a+1}^{a+t} (R + 1 + (p - a - 1)(r - 1)/(t - 1)) / p
               = c1 + (c0 - (a + 1) c1) (H(a + t) - H(a)) / t,   c0 = R + 1, c1 = (r-1)/(t-1),
      AP = mean over relevant i of E[prec_i],

  with ``H`` the harmonic numbers. For distinct scores this is scikit-learn's
  ``average_precision_score`` on the list.

  Example:
    >>> ap = average_precision([[1.0, 0.0, 1.0]], [[0.9, 0.8, 0.1]])
    >>> ops.convert_to_numpy(ap).astype(float).round(5).tolist()
    [0.83333]
  """
  scores, relevance, mask, out_dtype = _prepare(labels, scores)
  relevant = ops.cast(relevance > 0, scores.dtype)
  stats = tie_statistics(scores, relevant=relevant, mask=mask)
  a, t = stats["above"], stats["tied"]
  c0 = stats["rel_above"] + 1.0
  c1 = backend.divide_no_nan(stats["rel_tied"] - 1.0, t - 1.0)
  harmonic = backend.digamma(a + t + 1.0) - backend.digamma(a + 1.0)
  precision = c1 + (c0 - (a + 1.0) * c1) * harmonic / t
  total = ops.sum(relevant, axis=-1)
  ap = backend.divide_no_nan(ops.sum(relevant * precision, axis=-1), total)
  return ops.cast(ap, out_dtype)


def spearman(labels, scores):
  """Spearman's rank correlation between graded labels and scores, per list.

      rho = Pearson(midrank(labels), midrank(scores))   over the non-padded items,

  with mid-ranks for ties, as ``scipy.stats.spearmanr``. A list whose labels or scores are all
  equal (or that has fewer than 2 items) gets 0 rather than NaN.

  Example:
    >>> ops.convert_to_numpy(spearman([[1.0, 2.0, 3.0]], [[0.1, 0.5, 0.2]]))
    array([0.5], dtype=float32)
  """
  scores, relevance, mask, out_dtype = _prepare(labels, scores)
  maskf = ops.cast(mask, scores.dtype)

  def midrank(x):
    stats = tie_statistics(x, mask=mask)
    return stats["above"] + (stats["tied"] + 1.0) / 2.0

  count = ops.sum(maskf, axis=-1, keepdims=True)

  def centred(x):
    mean = backend.divide_no_nan(ops.sum(x * maskf, axis=-1, keepdims=True), count)
    return (x - mean) * maskf

  x, y = centred(midrank(scores)), centred(midrank(relevance))
  cov = ops.sum(x * y, axis=-1)
  norm = ops.sqrt(ops.sum(x * x, axis=-1) * ops.sum(y * y, axis=-1))
  return ops.cast(backend.divide_no_nan(cov, norm), out_dtype)
