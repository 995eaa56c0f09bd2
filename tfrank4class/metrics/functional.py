"""Classification-as-ranking metrics as plain per-list functions: float32, O(B*C), on keras.ops.

Every function takes ``labels`` (integer class ids ``[B]`` / ``[B, 1]`` or dense relevance
``[B, C]``, entries below 0 marking padding) and raw ``scores`` ``[B, C]`` and returns one float32
value per list, shape ``[B]``, a tensor of the active Keras backend (TensorFlow, JAX or PyTorch;
eagerly, under ``tf.function`` / ``jit_compile=True`` and ``jax.jit``); average them yourself or
use the Keras metrics in
:mod:`tfrank4class.metrics.classification`. Rank4Class (Sec. 2.2, Eq. 1) motivates them: a
classifier ranks the classes, so Top-K accuracy, NDCG@K and MRR measure the same ranking.

Ties. A tie in the scores is resolved by its *expectation*: each metric is the exact mean of its
value over all orderings of tied items, equally likely (McSherry & Najork, ECIR 2008), so the value
does not depend on the order of the classes or on the backend, and all-equal scores get the chance
value (the sorts, ``top_k`` and ``searchsorted`` behind it are :mod:`tfrank4class.backend`'s,
which order ties alike on every backend). An item with
``a`` items strictly ahead of it in a tie group of ``t`` items (itself included) sits uniformly on
positions ``a + 1 .. a + t``. :func:`spearman` uses mid-ranks like ``scipy.stats.spearmanr``.

Two paths, one rule.

  * Class ids (one relevant class ``y`` per list): no sort. With ``s_y`` the true class's score,
    ``g = #{j : s_j > s_y}`` and ``e = #{j != y : s_j = s_y}``, the rank of ``y`` is uniform on
    ``g + 1 .. g + e + 1`` and every metric is a closed-form expectation over that range:
    ``O(B * C)`` work (a subtraction, a sign and two sums; under XLA one reduction of packed
    counts; :func:`rank_range`), like Keras' ``in_top_k``. (Class ids with a list size unknown
    when the graph is traced take the dense path, with the same values.)
  * Dense relevance (multi-hot, graded, padded): Top-K, MRR and Recall/Precision@K need only the
    first relevant tie group or the K-th score (``O(B * C)``, one ``top_k`` for @K); NDCG needs
    one ``top_k`` of the scores (a full sort when ``k=None``) and AP / Spearman one sort per list
    (Spearman two: labels and scores; with class ids one, of the scores).

Precision. Everything runs in float32 (scores of another float dtype are cast first, so scores
that differ only below float32 resolution count as ties); no float64 op is built, so the metrics
run inside a TPU step. Counts are exact for ``C < 2**24``. On the class-id path the position
sums behind NDCG and MRR (``sum 1/log2(1 + p)``, ``sum 1/p`` over a rank range) come from
cumulative tables summed in float64 with numpy when the graph is built and stored as two float32
tables (high and low part), so a tie group's mean keeps float32 relative accuracy. Dense AP uses
:func:`~tfrank4class.ranking.precision.harmonic_difference` (relative error below ``5e-7``,
tested against float64 up to ``a = 10**7``). Measured against
:mod:`tfrank4class.metrics.reference` (the exact float64 implementation) on random, heavily tied
and padded inputs up to ``C = 10,000``: absolute error at most ``1e-6`` for every metric with
class ids, ``2e-6`` for Top-K, MRR and NDCG with dense relevance, ``1e-5`` for dense AP and
Spearman (the bounds ``tests/test_functional.py`` checks).

Relevance. ``ndcg`` uses graded gains; the other metrics count an item as relevant when its
relevance is ``> 0``. Lists with no relevant item score 0 under every metric (``spearman``: 0 for
constant labels or scores); nothing returns NaN.

Bad input. Labels outside ``[0, C)`` (class ids have no padding value: a negative id is an error),
fractional class ids, non-finite dense relevance, dense labels of the wrong width, a batch-size
mismatch, non-finite scores and ``k < 1`` raise a ``ValueError`` (``TypeError`` for non-numeric
input) naming the argument and the value, eagerly on every backend (the label parser
:func:`tfrank4class.labels.parse_labels` and the score check
:func:`tfrank4class.checks.check_scores`; with class ids its refusal of NaN and +-inf runs in the
pass that counts the scores, :func:`tfrank4class.checks.check_finite_rows`); shape and ``k``
errors also when a compiled function is traced. Inside ``tf.function`` the value checks are
assertions: the call fails with the same message. Where no check can run (XLA, ``jax.jit``), a
list whose labels are bad gets the value NaN (:meth:`tfrank4class.labels.Labels.mark_invalid`;
the gathers see the id clipped into ``[0, C)``), and so does a list of class ids holding a NaN or
+-inf score (dense relevance: a NaN score makes its list's value NaN), so a batch mean, and a
metric, shows NaN rather than a silently wrong number.
"""

# Longer than the 500 lines the house allows a module: every metric here is a closed form of the
# same rank range and tie expectation, and they read best side by side.

import functools
import math

import numpy as np

from tfrank4class import backend, checks
from tfrank4class.compat import ops
from tfrank4class.labels import check_batch_size, num_items, parse_labels

# harmonic_difference: public here before the AP core moved to ranking/precision.py.
from tfrank4class.ranking.precision import expected_precision, harmonic_difference  # noqa: F401
from tfrank4class.ranking.ties import tie_statistics

GAINS = ("exp2", "linear")

#: The smallest normal float32, ``2**-126``.
_SMALLEST_NORMAL = 2.0**-126


# --- inputs ---------------------------------------------------------------------------------------


def _scores(scores, finite=True):
  """Validated float32 scores ``[B, C]`` (:func:`tfrank4class.checks.check_scores`), checked
  finite unless ``finite=False`` (class ids: :func:`_single` checks them in its counting pass)."""
  return ops.cast(checks.check_scores("scores", scores, finite=finite), "float32")


def _clipped_ids(ids, num_classes):
  """Int32 class ids clipped into ``[0, C)``: keeps the gathers in range inside compiled code,
  where a bad id is not raised but marks its list NaN (:func:`_finish`)."""
  if isinstance(num_classes, int):  # a static C: the bound is a constant of the graph
    return ops.clip(ops.cast(ids, "int32"), 0, num_classes - 1)
  return ops.clip(ops.cast(ids, "int32"), 0, ops.cast(num_classes, "int32") - 1)


def _dense(labels, scores):
  """``(relevance, mask, masked_scores)`` of parsed :class:`~tfrank4class.labels.Labels`: float32
  relevance with padding zeroed, the validity mask, and the scores with padded items at ``-inf``
  (below every valid item, never tied)."""
  relevance = labels.to_relevance(num_items(scores), dtype="float32")
  mask = relevance >= 0
  relevance = backend.where(mask, relevance, 0.0)
  masked = backend.where(mask, scores, -math.inf)
  return relevance, mask, masked


def _count(condition):
  return ops.sum(ops.cast(condition, "float32"), axis=-1)


def rank_range(labels, scores):
  """``(g, e)`` of the true class: ``g = #{j : s_j > s_y}``, ``e = #{j != y : s_j = s_y}``.

  Under random tie-breaking the true class ``y`` lands uniformly on ranks ``g + 1 .. g + e + 1``;
  every single-relevant metric of this module is a function of ``(g, e)``. Computing them is the
  whole ``O(B * C)`` cost of such a metric; inside one compiled step the identical computations
  of several metrics on the same batch are merged by the graph optimiser (TensorFlow's and
  XLA's), so each metric calls this on its own.

  Args:
    labels: integer class ids ``[B]`` or ``[B, 1]`` in ``[0, C)``.
    scores: float ``[B, C]``, finite.

  Returns:
    Two float32 ``[B]`` tensors ``(g, e)`` (NaN for a bad id inside compiled code).

  Example:
    >>> g, e = rank_range([1], [[0.5, 0.2, 0.9, 0.2]])
    >>> ops.convert_to_numpy(g), ops.convert_to_numpy(e)
    (array([2.], dtype=float32), array([1.], dtype=float32))
  """
  scores = _scores(scores, finite=False)
  labels = parse_labels(labels, num_items(scores), dense=False)
  check_batch_size(labels, scores)
  labels, g, e = _single(labels, scores)
  return _finish(labels, g), _finish(labels, e)


# --- closed forms ---------------------------------------------------------------------------------


def _cumulative_table(position_value, length):
  """``F(m) = sum_{p=1}^{m} position_value(p)``, ``m = 0 .. length``, summed in float64 with numpy
  when the graph is built and stored as float32 (high, low) pairs, a ``[length + 1, 2]`` table,
  so that ``F(x1) - F(x0)`` keeps float32 relative accuracy however large ``F`` grows."""
  positions = np.arange(1, length + 1, dtype=np.float64)
  cumulative = np.concatenate([[0.0], np.cumsum(position_value(positions))])
  high = cumulative.astype(np.float32)
  low = (cumulative - high.astype(np.float64)).astype(np.float32)
  return ops.convert_to_tensor(np.stack([high, low], axis=-1))


def _reciprocal_log2(p):
  return 1.0 / np.log2(1.0 + p)


def _mean_over_rank_range(position_value, g, e, length):
  """``E[1[r <= length] f(r)]`` for ``r`` uniform on ``g + 1 .. g + e + 1``:
  ``(F(min(g + e + 1, length)) - F(min(g, length))) / (e + 1)`` from :func:`_cumulative_table`,
  the differences of the high and of the low parts added."""
  table = _cumulative_table(position_value, length)
  i0 = ops.cast(ops.minimum(g, float(length)), "int32")
  i1 = ops.cast(ops.minimum(g + e + 1.0, float(length)), "int32")
  total = ops.sum(ops.take(table, i1, axis=0) - ops.take(table, i0, axis=0), axis=-1)
  return total / (e + 1.0)


def _hit_probability(k, g, e):
  """``P(r <= k)`` for ``r`` uniform on ``g + 1 .. g + e + 1``."""
  return ops.clip((float(k) - g) / (e + 1.0), 0.0, 1.0)


def _cut_off(k, num_classes):
  return num_classes if k is None else min(k, num_classes)


# --- dense relevance ------------------------------------------------------------------------------


def _first_relevant_group(relevant, masked):
  """``(a, t, r, has_relevant)`` of the highest tie group holding a relevant item, ``[B]`` each:
  ``a`` valid items strictly ahead of it, ``t`` items in it, ``r`` of them relevant."""
  best = ops.max(backend.where(relevant, masked, -math.inf), axis=-1, keepdims=True)
  in_group = masked == best
  return (
    _count(masked > best),
    _count(in_group),
    _count(in_group & relevant),
    ops.any(relevant, axis=-1),
  )


def _top_k_dense(k, relevant, masked):
  """``1 - C(t - m, r) / C(t, r)`` with ``m = k - a`` places of the group in the top ``k``."""
  a, t, r, has_rel = _first_relevant_group(relevant, masked)
  m = float(k) - a
  j = ops.arange(min(k, masked.shape[-1] or k), dtype="float32")
  # C(t - m, r) / C(t, r) = prod_{j < m} (t - r - j) / (t - j); only reached when m <= t - r.
  inside = j < m[:, None]
  factors = backend.where(inside, (t - r)[:, None] - j, 1.0) / backend.where(
    inside, ops.maximum(t[:, None] - j, 1.0), 1.0
  )
  miss = ops.prod(factors, axis=-1)
  hit = backend.where(m <= 0, 0.0, backend.where(m > t - r, 1.0, 1.0 - miss))
  return backend.where(has_rel, hit, 0.0)


def _reciprocal_rank_dense(k, relevant, masked):
  """``sum_x P(first relevant on place x of its group) / (a + x)``, the place probabilities
  ``C(t - x, r - 1) / C(t, r)`` as a running product of their ratios."""
  a, t, r, has_rel = _first_relevant_group(relevant, masked)
  n = masked.shape[-1]
  length = n if k is None else (min(k, n) if n is not None else k)
  if length is None:
    length = ops.shape(masked)[-1]
  x = ops.arange(1, length + 1, dtype="float32")[None, :]
  a, t, r = a[:, None], t[:, None], ops.maximum(r, 1.0)[:, None]
  valid = x <= t - r + 1.0
  # p(1) = r / t; p(x) / p(x - 1) = (t - x - r + 2) / (t - x + 1).
  ratio = backend.where(
    x == 1.0, r / ops.maximum(t, 1.0), (t - x - r + 2.0) / ops.maximum(t - x + 1.0, 1.0)
  )
  p = ops.cumprod(backend.where(valid, ratio, 0.0), axis=-1)
  position = a + x
  if k is not None:
    valid = valid & (position <= float(k))
  rr = ops.sum(backend.where(valid, p / position, 0.0), axis=-1)
  return backend.where(has_rel, rr, 0.0)


def _positional_discounts(length):
  p = ops.arange(1, length + 1, dtype="float32")
  return math.log(2.0) / ops.log1p(p)


def item_gains(relevance, gain="exp2"):
  """NDCG's gain of each item: ``2^rel - 1`` (``gain="exp2"``) or ``rel`` (``"linear"``).

  Example:
    >>> ops.convert_to_numpy(item_gains(np.array([[0.0, 1.0, 2.0]], np.float32)))
    array([[0., 1., 3.]], dtype=float32)
  """
  return ops.power(2.0, relevance) - 1.0 if gain == "exp2" else relevance


def _ndcg_dense(k, gain, relevance, mask, masked, normalize=True):
  """NDCG@k (DCG@k if not ``normalize``) from the mean gain of the tie group covering each of the
  top ``k`` positions."""
  gains = backend.where(mask, item_gains(relevance, gain), 0.0)
  n = masked.shape[-1]
  length = ops.shape(masked)[-1] if n is None else n
  if k is not None:
    length = min(k, n) if n is not None else ops.minimum(k, length)
  values, index = backend.top_k(masked, length)
  top_gains = backend.take_along_axis(gains, index, axis=-1)
  descending = -values
  first = backend.searchsorted(descending, descending, side="left")
  last = backend.searchsorted(descending, descending, side="right")
  cumulative = ops.concatenate(
    [ops.zeros_like(top_gains[:, :1]), ops.cumsum(top_gains, axis=-1)], axis=-1
  )
  within = (
    backend.take_along_axis(cumulative, last) - backend.take_along_axis(cumulative, first)
  ) / ops.cast(last - first, "float32")
  # The lowest group may reach past the cut-off: average its gain over the whole list.
  boundary = values[:, -1:]
  on_boundary = masked == boundary
  boundary_mean = backend.divide_no_nan(
    ops.sum(backend.where(on_boundary, gains, 0.0), axis=-1, keepdims=True),
    _count(on_boundary)[:, None],
  )
  expected_gain = backend.where(values == boundary, boundary_mean, within)
  discount = _positional_discounts(length)
  dcg = ops.sum(expected_gain * discount, axis=-1)
  if not normalize:
    return dcg
  ideal = ops.sum(backend.top_k(gains, length)[0] * discount, axis=-1)
  return backend.divide_no_nan(dcg, ideal)


def _expected_hits_dense(k, relevant, masked):
  """Expected relevant items among the top ``k``: all above the k-th score, plus a share of its
  tie group, and the number of valid items."""
  n = masked.shape[-1]
  length = min(k, n) if n is not None else ops.minimum(k, ops.shape(masked)[-1])
  kth = backend.top_k(masked, length)[0][:, -1:]
  above, at = masked > kth, masked == kth
  places = ops.cast(length, "float32") - _count(above)
  hits = _count(above & relevant) + places * backend.divide_no_nan(
    _count(at & relevant), _count(at)
  )
  return hits, _count(masked > -math.inf)


# --- public per-list metrics ----------------------------------------------------------------------


def _split(labels, scores):
  """``(parsed labels, scores float32, True if class ids with a static C)``: the one label parser
  (:func:`tfrank4class.labels.parse_labels`) and score check, and the batch-size check. The
  scores' values are checked here for dense relevance; with class ids (the fast path) by
  :func:`_single`, in the pass that counts them."""
  scores = _scores(scores, finite=False)
  labels = parse_labels(labels, num_items(scores))
  check_batch_size(labels, scores)
  single = labels.is_class_ids and scores.shape[-1] is not None
  if not single:
    scores = _scores(scores)
  return labels, scores, single


def _finish(labels, values):
  """``values`` ``[B]`` with NaN for the lists whose labels were found bad inside compiled code
  (:meth:`tfrank4class.labels.Labels.mark_invalid`; eagerly a bad label has already raised)."""
  return labels.mark_invalid(values)


def _single(labels, scores):
  """``(labels, g, e)`` for class ids (the fast path): the counts of :func:`rank_range`, and the
  labels with the lists holding a non-finite score marked invalid where that cannot raise.

  With ``q = sign(s - s_y)``, ``sum(q) = g - l`` and ``sum(|q|) = g + l`` (``l`` items below), so
  ``g = (sum(q) + sum(|q|)) / 2`` and ``e = C - 1 - sum(|q|)``: one subtraction, one sign and two
  sums, half the memory passes of counting ``s > s_y`` and ``s == s_y`` as floats. The same pass
  sums each row's scores (under XLA and below ``_BLOCK_ITEMS // 64`` classes ``0 * s`` joins
  ``q`` instead), finite unless the row holds a NaN or +-inf score (or the sum overflows): the
  scores' finiteness check
  (:func:`tfrank4class.checks.check_finite_rows`, the error of
  :func:`tfrank4class.checks.check_scores`) then reads ``[B]`` values, not the scores again. On
  TensorFlow's graph executor, which runs each op over the whole batch before the next, a large
  batch of many classes is counted a block of rows at a time
  (:func:`tfrank4class.backend.map_row_blocks`), so the intermediates stay in the CPU's cache;
  the values are the same. Under XLA (a static ``C``) the counts take one pass of packed counts
  instead (:func:`_packed_counts`). Two
  scores whose difference is below the smallest normal float32 (``1.2e-38``, flushed to zero on
  CPU) count as tied.
  """
  n = num_items(scores)
  ids = _clipped_ids(labels.ids, n)
  true = backend.take_along_axis(scores, ids[:, None], axis=-1)
  if backend.compiled_by_xla() and isinstance(n, int):
    ahead, tied = _packed_counts(scores, true)
    labels = labels.with_invalid(checks.check_finite_rows("scores", ahead, scores, True))
    return labels, ahead, tied
  if isinstance(n, int) and n >= _BLOCK_ITEMS // 64:
    exact = backend.compiled_by_xla()
    row_sums = functools.partial(_row_sums, exact=exact)
    sums = backend.map_row_blocks(row_sums, [scores, true], max(1, _BLOCK_ITEMS // n))
  else:  # few classes: the product costs less than a conditional's ops
    exact = True
    sums = _row_sums(scores, true, exact)
  ahead_minus_below, untied, row_sums = sums[:, 0], sums[:, 1], sums[:, 2]
  labels = labels.with_invalid(checks.check_finite_rows("scores", row_sums, scores, exact))
  return labels, (ahead_minus_below + untied) / 2.0, ops.cast(n - 1, "float32") - untied


#: The most classes in one block of :func:`_packed_counts`: with ``W`` the least power of two
#: above a block's size ``n``, a block's sum is at most ``W * n < 2**24``.
_PACKED_MAX = 2**12 - 1


def _packed_counts(scores, true):
  """``(g, e)`` in one pass (the form for XLA, which fuses the comparisons into the sums): each
  score becomes ``1`` above ``s_y``, ``W`` equal to it, ``0`` below and NaN where it is NaN or
  +-inf; the classes are split into blocks of ``n = min(C, _PACKED_MAX)`` (the last ``C mod n``
  a block of their own) and each block summed, ``g_b + W * t_b`` (``g_b`` scores above ``s_y``,
  ``t_b`` equal to it) with ``W = 2**n.bit_length()``: an integer below ``2**24`` (as
  ``g_b + t_b <= n < W``), exact in float32 in any order of summation, and ``t_b`` is its floor
  divided by ``W`` (exact, ``W`` a power of two). ``g`` and ``e`` sum the blocks' counts (``e``
  less ``y`` itself), NaN for a list holding a non-finite score. ``C`` is static."""
  classes = num_items(scores)
  block = min(classes, _PACKED_MAX)
  width = float(2 ** block.bit_length())
  packed = backend.where(scores > true, 1.0, backend.where(scores == true, width, 0.0))
  packed = backend.where(ops.isfinite(scores), packed, math.nan)
  whole = classes - classes % block
  sums = ops.sum(ops.reshape(packed[:, :whole], (-1, whole // block, block)), axis=-1)
  if whole < classes:
    sums = ops.concatenate([sums, ops.sum(packed[:, whole:], axis=-1, keepdims=True)], axis=-1)
  tied = ops.floor(sums / width)
  return ops.sum(sums - width * tied, axis=-1), ops.sum(tied, axis=-1) - 1.0


#: Scores in one block of rows of :func:`_single`'s pass (1 MiB of float32): on TensorFlow
#: without XLA, with at least ``_BLOCK_ITEMS // 64`` classes, the subtraction, sign and sums of a
#: large batch run a block at a time, in the CPU's cache (:func:`backend.map_row_blocks`).
_BLOCK_ITEMS = 2**18


def _row_sums(scores, true, exact):
  """``[sum(q), sum(|q|), r]`` per row, ``q = sign(scores - true)``, float32 ``[B, 3]``, with
  ``r`` the sums :func:`tfrank4class.checks.check_finite_rows` reads: ``sum(scores)``, or with
  ``exact`` ``q`` is ``sign(scores - true) + 0 * scores`` (NaN at a NaN or +-inf score, else the
  same; under XLA fused into the two reductions) and ``r = sum(q)``. ``sum(|q|)``:
  :func:`tfrank4class.backend.count_nonzero_signs`."""
  if exact:
    q = ops.sign(scores - true) + scores * 0.0
    ahead_minus_below = ops.sum(q, axis=-1)
    return ops.stack([ahead_minus_below, backend.count_nonzero_signs(q), ahead_minus_below], -1)
  q = ops.sign(scores - true)
  return ops.stack(
    [ops.sum(q, axis=-1), backend.count_nonzero_signs(q), ops.sum(scores, axis=-1)], axis=-1
  )


def top_k_accuracy(labels, scores, k=5):
  """1 if a relevant item is among the ``k`` highest scores, in expectation over ties.

      Top-k = 1[min_{i relevant} rk_i <= k],   rk_i = 1 + #{j : s_j > s_i}

  (RaMBO's ``r@K``, Rolinek et al., Sec. 3.1.2, Eq. 7, for distinct scores). Class ids:
  ``P(r <= k) = clip((k - g) / (e + 1), 0, 1)`` (see :func:`rank_range`). Dense relevance:
  with the first tie group holding a relevant item after ``a`` items, of ``t`` items of which
  ``r`` are relevant, and ``m = k - a`` of its places inside the top ``k``,
  ``P(hit) = 1 - C(t - m, r) / C(t, r)`` (0 if ``m <= 0``, 1 if ``m > t - r``), an ``O(k)``
  product. For distinct scores this is scikit-learn's ``top_k_accuracy_score`` per example and
  Keras' ``SparseTopKCategoricalAccuracy``; Rank4Class Sec. 2.2 relates it to Precision@K.

  Example:
    >>> # the true class ranks 3rd
    >>> ops.convert_to_numpy(top_k_accuracy([1], [[0.5, 0.2, 0.9]], k=2))
    array([0.], dtype=float32)
    >>> # place 2 goes to one of three tied items, two of them relevant: 1 - C(2, 2) / C(3, 2)
    >>> ops.convert_to_numpy(top_k_accuracy([[0, 1, 1, 0]], [[0.9, 0.5, 0.5, 0.5]], k=2)).round(4)
    array([0.6667], dtype=float32)
  """
  k = checks.check_int("k", k, minimum=1)
  labels, scores, single = _split(labels, scores)
  if single:  # counted (and the scores checked) before `k`, as the dense path checks them first
    labels, g, e = _single(labels, scores)
  num_classes = num_items(scores)
  if isinstance(num_classes, int) and k > num_classes:
    raise ValueError(
      f"`k` must be at most the number of classes, got k={k} for {num_classes} classes "
      f"(`y_pred` of shape {scores.shape}): Top-{k} accuracy would be 1 for every list."
    )
  if single:
    return _finish(labels, _hit_probability(k, g, e))
  relevance, _, masked = _dense(labels, scores)
  return _finish(labels, _top_k_dense(k, relevance > 0, masked))


def reciprocal_rank(labels, scores, k=None):
  """1 / (position of the first relevant item), 0 past ``k``, in expectation over ties.

      RR = 1 / min_{i relevant} rk_i   (0 if past ``k`` or no item is relevant)

  Class ids: ``(H(min(g + e + 1, k)) - H(min(g, k))) / (e + 1)`` (see :func:`rank_range`).
  Dense relevance: the first relevant item of the first relevant tie group (``a`` ahead, ``t``
  items, ``r`` relevant) lands on its ``x``-th place with probability ``C(t - x, r - 1) / C(t, r)``:

      RR = sum_{x=1}^{t-r+1} C(t - x, r - 1) / C(t, r) * 1[a + x <= k] / (a + x).

  The mean over lists is the MRR (TF-Ranking's ``MRRMetric`` for distinct scores).

  Example:
    >>> # the true class ranks 3rd
    >>> ops.convert_to_numpy(reciprocal_rank([1], [[0.5, 0.2, 0.9]]))
    array([0.33333334], dtype=float32)
    >>> # a = 1, t = 3, r = 2: place 1 of the group (rank 2) w.p. 2/3, else rank 3: 1/3 + 1/9
    >>> ops.convert_to_numpy(reciprocal_rank([[0, 1, 1, 0]], [[0.9, 0.5, 0.5, 0.5]])).round(4)
    array([0.4444], dtype=float32)
  """
  k = checks.check_int("k", k, minimum=1, allow_none=True)
  labels, scores, single = _split(labels, scores)
  if single:
    labels, g, e = _single(labels, scores)
    return _finish(
      labels, _mean_over_rank_range(np.reciprocal, g, e, _cut_off(k, scores.shape[-1]))
    )
  relevance, _, masked = _dense(labels, scores)
  return _finish(labels, _reciprocal_rank_dense(k, relevance > 0, masked))


def ndcg(labels, scores, k=None, gain="exp2"):
  """Normalised discounted cumulative gain at ``k`` (Rank4Class Eq. 1), tie-averaged.

      DCG@k = sum_{p=1}^{k} E[g at position p] / log2(1 + p),   NDCG@k = DCG@k / IDCG@k,

  where the item at position ``p`` is uniform over the tie group covering ``p``, so
  ``E[g at p]`` is that group's mean gain; gains ``g = 2^rel - 1`` (``gain="exp2"``, TF-Ranking's
  default) or ``g = rel`` (``gain="linear"``, scikit-learn's ``ndcg_score``, whose tie handling
  this matches); 0 when ``IDCG@k = 0``. Class ids (:func:`rank_range`): the ideal DCG is 1 and
  ``NDCG@k = (D_k(g + e + 1) - D_k(g)) / (e + 1)``,
  ``D_k(m) = sum_{p=1}^{min(m, k)} 1/log2(1 + p)``, no sort. Dense relevance: one ``top_k`` of
  the scores and one of the gains (full sorts when ``k=None``).

  Example:
    >>> # the true class ranks 2nd: 1 / log2(3)
    >>> ops.convert_to_numpy(ndcg([0], [[0.2, 0.9, 0.1]]))
    array([0.63092977], dtype=float32)
    >>> # gains 2^rel - 1 = (3, 0, 1) ranked (0, 1, 3): (0 + 1/log2(3)) / (3 + 1/log2(3))
    >>> ops.convert_to_numpy(ndcg([[2.0, 0.0, 1.0]], [[0.1, 0.9, 0.5]], k=2)).round(4)
    array([0.1738], dtype=float32)
  """
  return _discounted_gain(labels, scores, k, gain, normalize=True)


def _discounted_gain(labels, scores, k, gain, normalize):
  """NDCG@k (``normalize``) or DCG@k: the two are one with class ids, whose ideal DCG is 1."""
  k = checks.check_int("k", k, minimum=1, allow_none=True)
  checks.check_choice("gain", gain, GAINS)
  labels, scores, single = _split(labels, scores)
  if single:
    labels, g, e = _single(labels, scores)
    return _finish(
      labels, _mean_over_rank_range(_reciprocal_log2, g, e, _cut_off(k, scores.shape[-1]))
    )
  relevance, mask, masked = _dense(labels, scores)
  return _finish(labels, _ndcg_dense(k, gain, relevance, mask, masked, normalize=normalize))


def dcg(labels, scores, k=None, gain="exp2"):
  """Discounted cumulative gain at ``k``, tie-averaged: :func:`ndcg`'s numerator,

      DCG@k = sum_{p=1}^{k} E[g at position p] / log2(1 + p),

  with the same gains, discount and ties as :func:`ndcg` (keras-rs's ``DCG`` with its default
  gain ``2^rel - 1`` and discount ``1 / log2(1 + p)``). With class ids the only gain is 1, so
  DCG@k equals NDCG@k.

  Example:
    >>> # gains 2^rel - 1 = (3, 0, 1) ranked (0, 1, 3): 0 + 1 / log2(3)
    >>> ops.convert_to_numpy(dcg([[2.0, 0.0, 1.0]], [[0.1, 0.9, 0.5]], k=2)).round(4)
    array([0.6309], dtype=float32)
  """
  return _discounted_gain(labels, scores, k, gain, normalize=False)


def average_precision(labels, scores):
  """Average precision of one list, in expectation over ties.

      AP = 1/|P| sum_{i in P} Prec(i),   Prec(i) = #{j in P : rk_j <= rk_i} / rk_i

  over the relevant items ``P`` (RaMBO, Rolinek et al., Sec. 3.1.1, Eq. 4-5; SoDeep Sec. 3.2.2,
  Eq. 5-6). Ties: the tie-aware AP of He et al. (CVPR 2018, Eq. 9).

  For relevant item ``i`` (``rel > 0``) with ``a`` items and ``R`` relevant items strictly ahead,
  in a tie group of ``t`` items of which ``r`` are relevant, ``c0 = R + 1``,
  ``c1 = (r - 1)/(t - 1)`` and ``h = H(a + t) - H(a)``
  (:func:`tfrank4class.ranking.precision.expected_precision`, the AP core shared with the
  retrieval metrics):

      E[prec_i] = 1/t * sum_{p=a+1}^{a+t} (R + 1 + (p - a - 1)(r - 1)/(t - 1)) / p
               = (c0 - c1) h / t + c1 (1 - a h / t),
      AP = mean over relevant i of E[prec_i].

  (He et al. write ``c1 + (c0 - (a + 1) c1) h / t``; the form above avoids its cancellation
  in float32.) With class ids AP equals the reciprocal rank (no sort). Dense relevance: one sort
  per list (:func:`tfrank4class.ranking.tie_statistics`). For distinct scores this is
  scikit-learn's ``average_precision_score`` on the list.

  Example:
    >>> # relevant items at ranks 1 and 3: (1/1 + 2/3) / 2
    >>> ops.convert_to_numpy(average_precision([[1.0, 0.0, 1.0]], [[0.9, 0.8, 0.1]]))
    array([0.8333334], dtype=float32)
  """
  labels, scores, single = _split(labels, scores)
  if single:
    labels, g, e = _single(labels, scores)
    return _finish(labels, _mean_over_rank_range(np.reciprocal, g, e, scores.shape[-1]))
  relevance, mask, masked = _dense(labels, scores)
  relevant = ops.cast(relevance > 0, "float32")
  stats = tie_statistics(masked, relevant=relevant, mask=mask)
  precision = expected_precision(
    stats["above"], stats["tied"], stats["rel_above"], stats["rel_tied"]
  )
  total = ops.sum(relevant, axis=-1)
  return _finish(labels, backend.divide_no_nan(ops.sum(relevant * precision, axis=-1), total))


def recall_at_k(labels, scores, k=5):
  """Expected fraction of a list's relevant items among its ``k`` highest scores.

  With ``s_k`` the ``k``-th highest valid score, ``A`` the valid items above it (``R_A`` of them
  relevant) and ``T`` the items tied with it (``R_T`` relevant), ``k - A`` places go to the tie
  group, each holding a relevant item with probability ``R_T / T``:

      E[hits@k] = R_A + (k - A) R_T / T,     Recall@k = E[hits@k] / #relevant,

  one ``top_k`` per list (class ids: ``Recall@k = Top-k accuracy``, no sort). For distinct scores
  this is TF-Ranking's ``RecallMetric(topn=k)``.

  Example:
    >>> # the top 2 (0.9 and 0.8) hold one of the two relevant items
    >>> ops.convert_to_numpy(recall_at_k([[1.0, 0.0, 1.0, 0.0]], [[0.9, 0.8, 0.1, 0.2]], k=2))
    array([0.5], dtype=float32)
  """
  labels, hits, relevant, _ = _expected_hits(labels, scores, k)
  return _finish(labels, backend.divide_no_nan(hits, relevant))


def precision_at_k(labels, scores, k=5):
  """Expected fraction of relevant items among a list's ``k`` highest scores.

      Precision@k = E[hits@k] / min(k, #valid items)

  with ``E[hits@k]`` as in :func:`recall_at_k` (class ids: ``Top-k accuracy / min(k, C)``, so
  Top-K accuracy ``= min(1, K * Precision@K)``, Rank4Class Sec. 2.2). For distinct scores this is
  TF-Ranking's ``PrecisionMetric(topn=k)``, which divides by the same ``min``.

  Example:
    >>> # one relevant item among the top 2
    >>> ops.convert_to_numpy(precision_at_k([[1.0, 0.0, 1.0, 0.0]], [[0.9, 0.8, 0.1, 0.2]], k=2))
    array([0.5], dtype=float32)
  """
  labels, hits, _, valid = _expected_hits(labels, scores, k)
  return _finish(labels, backend.divide_no_nan(hits, ops.minimum(float(k), valid)))


def _expected_hits(labels, scores, k):
  """``(parsed labels, E[hits@k], #relevant, #valid)`` per list, for :func:`recall_at_k` /
  :func:`precision_at_k`.

  Class ids: one relevant item, hit with the Top-k probability, among ``C`` valid items.
  """
  k = checks.check_int("k", k, minimum=1)
  labels, scores, single = _split(labels, scores)
  if single:
    labels, g, e = _single(labels, scores)
    hits = _hit_probability(k, g, e)
    return labels, hits, ops.ones_like(hits), ops.full_like(hits, float(scores.shape[-1]))
  relevance, _, masked = _dense(labels, scores)
  relevant = relevance > 0
  hits, valid = _expected_hits_dense(k, relevant, masked)
  return labels, hits, _count(relevant), valid


def spearman(labels, scores):
  """Spearman's rank correlation between graded labels and scores, per list.

      rho = Pearson(midrank(labels), midrank(scores))   over the non-padded items,

  with mid-ranks for ties, as ``scipy.stats.spearmanr``. Without ties this is
  ``1 - 6 sum_i (rk(y)_i - rk(s)_i)^2 / (n (n^2 - 1))`` (SoDeep, Engilberge et al. 2019,
  Sec. 3.2.1, Eq. 2). A list whose labels or scores are all equal (or that has fewer than 2
  items) gets 0 rather than NaN.

  Cost: dense relevance, two sorts per list (the mid-ranks of labels and of scores). Class ids:
  one sort of the scores (of their bit patterns) and no sort of the labels: the labels' centred
  mid-ranks take two values, ``(1 - C)/2`` at the true class ``y`` and ``1/2`` elsewhere, so
  with ``x`` the scores' centred mid-ranks (which sum to 0) ``cov = -C x_y / 2`` and
  ``|y|^2 = C (C - 1)/4``; ``x_y = g + (e + 2)/2 - (C + 1)/2`` from :func:`rank_range`'s counts,
  ``O(C)``, and only ``|x|^2``, which depends on the sizes of the scores' tie groups, needs a sort
  to find them (no ``O(C)`` test tells whether two of ``C`` scores tie; without ties
  ``|x|^2 = (C^3 - C)/12``).

  Example:
    >>> # ranks (3, 2, 1) and (3, 1, 2): 1 - 6 * 2 / (3 * 8)
    >>> ops.convert_to_numpy(spearman([[1.0, 2.0, 3.0]], [[0.1, 0.5, 0.2]])).round(6)
    array([0.5], dtype=float32)
  """
  labels, scores, single = _split(labels, scores)
  if single:
    labels, values = _spearman_single(labels, scores)
    return _finish(labels, values)
  relevance, mask, _ = _dense(labels, scores)
  maskf = ops.cast(mask, "float32")
  count = ops.sum(maskf, axis=-1, keepdims=True)

  def centred_midrank(x):
    stats = tie_statistics(x, mask=mask)
    midrank = stats["above"] + (stats["tied"] + 1.0) / 2.0
    mean = backend.divide_no_nan(ops.sum(midrank * maskf, axis=-1, keepdims=True), count)
    return (midrank - mean) * maskf

  x, y = centred_midrank(scores), centred_midrank(relevance)
  cov = ops.sum(x * y, axis=-1)
  norm = ops.sqrt(ops.sum(x * x, axis=-1)) * ops.sqrt(ops.sum(y * y, axis=-1))
  return _finish(labels, backend.divide_no_nan(cov, norm))


def _spearman_single(labels, scores):
  """``(labels, values)``: :func:`spearman` of class ids (see its docstring),
  ``-C x_y / 2 / (|x| |y|)``, and the labels marked by :func:`_single`'s score check."""
  n = num_items(scores)
  labels, g, e = _single(labels, scores)
  x_true = g + (e + 2.0) / 2.0 - (n + 1.0) / 2.0
  norm = ops.sqrt(_midrank_sum_of_squares(scores)) * math.sqrt(n * (n - 1.0) / 4.0)
  return labels, backend.divide_no_nan(-n * x_true / 2.0, norm)


def _midrank_sum_of_squares(scores):
  """``sum_i (midrank_i - (C + 1)/2)^2`` per list of ``[B, C]`` scores with a static ``C``: one
  sort, then ``O(C)``: the tie groups are the runs of the sorted values, ``t`` items from
  position ``a`` each at mid-rank ``a + (t + 1)/2`` (a segment sum counts them). The sum depends
  on the groups' sizes only, not on their order, so the sort is of the values' bit patterns
  (``ops.view`` as int32, cheaper than a float sort), with zeros and denormals
  (below the smallest normal float32) made ``+0.0`` first, as a CPU that flushes denormals
  compares them."""
  n = num_items(scores)
  flushed = backend.where(ops.abs(scores) < _SMALLEST_NORMAL, 0.0, scores)
  ascending = ops.sort(ops.view(flushed, "int32"), axis=-1)
  starts = ops.concatenate(
    [
      ops.ones_like(ascending[:, :1], dtype="int32"),
      ops.cast(ascending[:, 1:] != ascending[:, :-1], "int32"),
    ],
    axis=-1,
  )
  # Group k of list b (0-based, in ascending order) is segment b * C + k.
  rows = ops.arange(ops.shape(scores)[0], dtype="int32")[:, None] * n
  segment = ops.reshape(ops.cumsum(starts, axis=-1) - 1 + rows, [-1])
  count = ops.segment_sum(
    ops.ones_like(segment, dtype="float32"), segment, num_segments=ops.shape(segment)[0]
  )
  count = ops.reshape(count, [-1, n])
  before = ops.cumsum(count, axis=-1) - count
  centred = before + (count + 1.0) / 2.0 - (n + 1.0) / 2.0
  return ops.sum(count * centred * centred, axis=-1)
