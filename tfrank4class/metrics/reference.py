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
"""

import math

import tensorflow as tf

from tfrank4class import checks
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
  out_dtype = scores.dtype
  relevance = to_relevance(labels, num_items(scores), dtype=scores.dtype)
  check_batch_size(relevance, scores)
  scores = tf.cast(scores, tf.float64)
  relevance = tf.cast(relevance, tf.float64)
  mask = relevance >= 0
  relevance = tf.where(mask, relevance, tf.zeros_like(relevance))
  return scores, relevance, mask, out_dtype


def _first_relevant_group(scores, relevant, mask):
  """``(a, t, r, has_relevant)`` of the highest tie group holding a relevant item, each ``[B]``.

  ``a`` items are strictly ahead of the group, ``t`` items form it and ``r`` of them are relevant.
  """
  stats = tie_statistics(scores, relevant=relevant, mask=mask)
  is_rel = relevant > 0
  big = tf.cast(tf.shape(scores)[-1] + 1, scores.dtype)
  above = tf.where(is_rel, stats["above"], big)
  best = tf.argmin(above, axis=-1, output_type=tf.int32)
  pick = lambda x: tf.gather(x, best[:, None], batch_dims=1)[:, 0]
  return (
    pick(stats["above"]),
    pick(stats["tied"]),
    pick(stats["rel_tied"]),
    tf.reduce_any(is_rel, -1),
  )


def top_k_accuracy(labels, scores, k=5):
  """1 if a relevant item is among the ``k`` highest scores, in expectation over ties.

  With the first tie group holding a relevant item starting after ``a`` items, of size ``t`` with
  ``r`` relevant items, and ``m = k - a`` of its places inside the top ``k``:

      P(hit) = 0 if m <= 0;   1 - C(t - m, r) / C(t, r) otherwise   (1 if m > t - r)

  For one relevant item this is ``clip((k - a) / t, 0, 1)``; for distinct scores it is
  ``scikit-learn``'s ``top_k_accuracy_score`` per example.

  Example:
    >>> top_k_accuracy([1], [[0.5, 0.2, 0.9]], k=2).numpy()
    array([0.], dtype=float32)
  """
  k = checks.check_int("k", k, minimum=1)
  scores, relevance, mask, out_dtype = _prepare(labels, scores)
  relevant = tf.cast(relevance > 0, scores.dtype)
  a, t, r, has_rel = _first_relevant_group(scores, relevant, mask)
  m = float(k) - a
  safe_m = tf.clip_by_value(m, 0.0, t - r)
  miss = tf.exp(log_binomial(t - safe_m, r) - log_binomial(t, r))
  hit = tf.where(m <= 0, tf.zeros_like(m), tf.where(m > t - r, tf.ones_like(m), 1.0 - miss))
  return tf.cast(tf.where(has_rel, hit, tf.zeros_like(hit)), out_dtype)


def reciprocal_rank(labels, scores, k=None):
  """1 / (position of the first relevant item), 0 past ``k``, in expectation over ties.

  With the first relevant tie group as in :func:`top_k_accuracy`, the first relevant item of the
  group lands on its ``x``-th place with probability ``C(t - x, r - 1) / C(t, r)``, so

      RR = sum_{x=1}^{t-r+1} C(t - x, r - 1) / C(t, r) * 1[a + x <= k] / (a + x).

  The mean over lists is the MRR (TF-Ranking's ``MRRMetric`` for distinct scores).

  Example:
    >>> reciprocal_rank([1], [[0.5, 0.2, 0.9]]).numpy()
    array([0.33333334], dtype=float32)
  """
  k = checks.check_int("k", k, minimum=1, allow_none=True)
  scores, relevance, mask, out_dtype = _prepare(labels, scores)
  relevant = tf.cast(relevance > 0, scores.dtype)
  a, t, r, has_rel = _first_relevant_group(scores, relevant, mask)
  n = tf.shape(scores)[-1]
  x = tf.range(1, n + 1, dtype=scores.dtype)[None, :]
  a, t, r = a[:, None], t[:, None], r[:, None]
  valid = x <= t - r + 1
  safe_x = tf.where(valid, x, tf.ones_like(x))
  log_p = log_binomial(t - safe_x, r - 1.0) - log_binomial(t, tf.maximum(r, 1.0))
  position = a + x
  term = tf.exp(log_p) / position
  if k is not None:
    valid = valid & (position <= k)
  rr = tf.reduce_sum(tf.where(valid, term, tf.zeros_like(term)), axis=-1)
  return tf.cast(tf.where(has_rel, rr, tf.zeros_like(rr)), out_dtype)


def ndcg(labels, scores, k=None, gain="exp2"):
  """Normalised discounted cumulative gain at ``k``, tie-averaged.

      DCG@k = sum_i g_i * E[d(p_i)],   d(p) = 1[p <= k] / log2(1 + p),
      E[d(p_i)] = (D(a_i + t_i) - D(a_i)) / t_i,   D(m) = sum_{p=1}^{m} d(p),
      NDCG@k = DCG@k / IDCG@k   (0 when IDCG@k = 0),

  with gains ``g = 2^rel - 1`` (``gain="exp2"``, TF-Ranking's default) or ``g = rel``
  (``gain="linear"``, scikit-learn's ``ndcg_score``, whose tie handling this matches).

  Example:
    >>> ndcg([0], [[0.2, 0.9, 0.1]]).numpy()
    array([0.63092977], dtype=float32)
  """
  k = checks.check_int("k", k, minimum=1, allow_none=True)
  checks.check_choice("gain", gain, GAINS)
  scores, relevance, mask, out_dtype = _prepare(labels, scores)
  gains = (
    tf.pow(tf.constant(2.0, relevance.dtype), relevance) - 1.0 if gain == "exp2" else relevance
  )
  gains = tf.where(mask, gains, tf.zeros_like(gains))
  n = tf.shape(scores)[-1]
  positions = tf.range(1, n + 1, dtype=scores.dtype)
  discount = 1.0 / (tf.math.log(1.0 + positions) / math.log(2.0))
  if k is not None:
    discount = tf.where(positions <= k, discount, tf.zeros_like(discount))
  cumulative = tf.concat([tf.zeros([1], discount.dtype), tf.cumsum(discount)], axis=0)
  stats = tie_statistics(scores, mask=mask)
  above = tf.cast(stats["above"], tf.int32)
  tied = tf.cast(stats["tied"], tf.int32)
  expected_discount = (
    tf.gather(cumulative, above + tied) - tf.gather(cumulative, above)
  ) / tf.cast(tied, scores.dtype)
  dcg = tf.reduce_sum(gains * expected_discount, axis=-1)
  ideal = tf.reduce_sum(tf.sort(gains, axis=-1, direction="DESCENDING") * discount, axis=-1)
  value = tf.math.divide_no_nan(dcg, ideal)
  return tf.cast(value, out_dtype)


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
    >>> average_precision([[1.0, 0.0, 1.0]], [[0.9, 0.8, 0.1]]).numpy()
    array([0.8333333], dtype=float32)
  """
  scores, relevance, mask, out_dtype = _prepare(labels, scores)
  relevant = tf.cast(relevance > 0, scores.dtype)
  stats = tie_statistics(scores, relevant=relevant, mask=mask)
  a, t = stats["above"], stats["tied"]
  c0 = stats["rel_above"] + 1.0
  c1 = tf.math.divide_no_nan(stats["rel_tied"] - 1.0, t - 1.0)
  harmonic = tf.math.digamma(a + t + 1.0) - tf.math.digamma(a + 1.0)
  precision = c1 + (c0 - (a + 1.0) * c1) * harmonic / t
  total = tf.reduce_sum(relevant, axis=-1)
  ap = tf.math.divide_no_nan(tf.reduce_sum(relevant * precision, axis=-1), total)
  return tf.cast(ap, out_dtype)


def spearman(labels, scores):
  """Spearman's rank correlation between graded labels and scores, per list.

      rho = Pearson(midrank(labels), midrank(scores))   over the non-padded items,

  with mid-ranks for ties, as ``scipy.stats.spearmanr``. A list whose labels or scores are all
  equal (or that has fewer than 2 items) gets 0 rather than NaN.

  Example:
    >>> spearman([[1.0, 2.0, 3.0]], [[0.1, 0.5, 0.2]]).numpy()
    array([0.5], dtype=float32)
  """
  scores, relevance, mask, out_dtype = _prepare(labels, scores)
  maskf = tf.cast(mask, scores.dtype)

  def midrank(x):
    stats = tie_statistics(x, mask=mask)
    return stats["above"] + (stats["tied"] + 1.0) / 2.0

  count = tf.reduce_sum(maskf, axis=-1, keepdims=True)

  def centred(x):
    mean = tf.math.divide_no_nan(tf.reduce_sum(x * maskf, -1, keepdims=True), count)
    return (x - mean) * maskf

  x, y = centred(midrank(scores)), centred(midrank(relevance))
  cov = tf.reduce_sum(x * y, -1)
  norm = tf.sqrt(tf.reduce_sum(x * x, -1) * tf.reduce_sum(y * y, -1))
  return tf.cast(tf.math.divide_no_nan(cov, norm), out_dtype)
