"""The float32 O(B*C) metrics against the exact float64 reference, brute force over tie-breaking,
scikit-learn, Keras and TF-Ranking, on every backend (TF-Ranking: TensorFlow only)."""

import contextlib
import itertools
import math

import numpy as np
import pytest
from backend_testing import compile_modes, compiled, numpy
from scipy.stats import spearmanr
from sklearn.metrics import label_ranking_average_precision_score, ndcg_score, top_k_accuracy_score

from tfrank4class import compat
from tfrank4class.compat import keras, ops
from tfrank4class.metrics import functional as F
from tfrank4class.metrics import reference as R

RNG = np.random.default_rng(2024)

# (function name, kwargs) of every metric that the reference also has.
CASES = [
  ("top_k_accuracy", {"k": 1}),
  ("top_k_accuracy", {"k": 5}),
  ("reciprocal_rank", {}),
  ("reciprocal_rank", {"k": 3}),
  ("ndcg", {"k": 1}),
  ("ndcg", {"k": 5}),
  ("ndcg", {}),
  ("ndcg", {"k": 5, "gain": "linear"}),
  ("average_precision", {}),
]


def _within(name, kwargs, c):
  """``kwargs`` with Top-k's ``k`` at most ``c`` (a larger one is refused, see test_k_above_c)."""
  if name == "top_k_accuracy":
    return {"k": min(kwargs["k"], c)}
  return kwargs


def _tied_scores(b, c, levels):
  """Integer-valued float32 scores: many ties when ``levels`` is small against ``c``."""
  return RNG.integers(0, levels, (b, c)).astype(np.float32)


def float64():
  """Where float64 needs switching on (JAX: ``jax_enable_x64``), on for the block."""
  if compat.BACKEND == "jax":
    import jax  # noqa: PLC0415

    return jax.enable_x64(True)
  return contextlib.nullcontext()


def _exact(name, labels, scores, **kwargs):
  """The float64 reference value (scores given to it in float64, so its result is float64)."""
  with float64():
    return numpy(getattr(R, name)(labels, scores.astype(np.float64), **kwargs))


# --- the fast path equals the exact reference --------------------------------------------------


@pytest.mark.parametrize("c,levels", [(2, 2), (7, 3), (28, 5), (1000, 20), (10000, 50)])
@pytest.mark.parametrize("name,kwargs", CASES)
def test_class_ids_equal_reference_with_many_ties(c, levels, name, kwargs):
  b = 24
  scores = _tied_scores(b, c, levels)
  labels = RNG.integers(0, c, b)
  scores[0] = 1.0  # one list with every score tied: the chance value
  kwargs = _within(name, kwargs, c)
  got = numpy(getattr(F, name)(labels, scores, **kwargs))
  assert got.dtype == np.float32
  np.testing.assert_allclose(got, _exact(name, labels, scores, **kwargs), rtol=0, atol=1e-6)


@pytest.mark.parametrize("c,levels", [(2, 2), (9, 3), (300, 10), (10000, 50)])
@pytest.mark.parametrize("name,kwargs", CASES)
def test_dense_relevance_with_padding_equals_reference(c, levels, name, kwargs):
  b = 16
  scores = _tied_scores(b, c, levels)
  graded = RNG.integers(0, 4, (b, c)).astype(np.float32) * (RNG.random((b, c)) < 0.3)
  graded[RNG.random((b, c)) < 0.2] = -1.0  # padding
  graded[1] = -1.0
  graded[1, 0] = 2.0  # a list with one valid item
  graded[2] = 0.0  # no relevant item
  scores[3] = 0.0
  atol = 1e-5 if name == "average_precision" else 2e-6
  kwargs = _within(name, kwargs, c)
  got = numpy(getattr(F, name)(graded, scores, **kwargs))
  np.testing.assert_allclose(got, _exact(name, graded, scores, **kwargs), rtol=0, atol=atol)
  multi_hot = (graded > 0).astype(np.float32) - (graded < 0)
  got = numpy(getattr(F, name)(multi_hot, scores, **kwargs))
  np.testing.assert_allclose(got, _exact(name, multi_hot, scores, **kwargs), rtol=0, atol=atol)


@pytest.mark.parametrize("c", [5, 2000])
def test_spearman_equals_reference(c):
  scores = _tied_scores(12, c, 7)
  graded = RNG.integers(-1, 4, (12, c)).astype(np.float32)
  np.testing.assert_allclose(
    numpy(F.spearman(graded, scores)), _exact("spearman", graded, scores), rtol=0, atol=1e-5
  )


@pytest.mark.parametrize("c,levels", [(2, 2), (2000, 30)])
def test_spearman_of_class_ids_equals_reference_scipy_and_one_hot(c, levels):
  """The class-id path (one sort, closed-form label mid-ranks) against the float64 reference,
  scipy, and the two-sort path given the same labels as one-hot rows, in every compile mode."""
  scores = _tied_scores(10, c, levels)
  labels = RNG.integers(0, c, 10)
  scores[0] = 3.0  # every score tied: 0
  scores[1, labels[1]] = levels  # the true class alone on top
  one_hot = np.eye(c, dtype=np.float32)[labels]
  want = _exact("spearman", labels, scores)
  varied = [i for i in range(10) if np.ptp(scores[i]) > 0]  # scipy: NaN for constant scores
  scipy_values = [spearmanr(one_hot[i], scores[i]).statistic for i in varied]
  np.testing.assert_allclose(want[varied], scipy_values, rtol=1e-12)
  assert want[0] == 0.0
  for mode in compile_modes():
    fn = compiled(F.spearman, mode)
    got = numpy(fn(ops.convert_to_tensor(labels), ops.convert_to_tensor(scores)))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    dense = numpy(fn(ops.convert_to_tensor(one_hot), ops.convert_to_tensor(scores)))
    np.testing.assert_allclose(got, dense, rtol=0, atol=1e-6)


def test_spearman_of_class_ids_ties_signed_zeros():
  """-0.0 and 0.0 are one tie group (the class-id path sorts the scores' bit patterns), as scipy
  and the dense path rank them."""
  scores = np.array([[-0.0, 0.0, 1.0, -2.0], [0.0, -0.0, -0.0, 3.0]], np.float32)
  labels = np.array([0, 3])
  one_hot = np.eye(4, dtype=np.float32)[labels]
  want = [spearmanr(one_hot[i], scores[i]).statistic for i in range(2)]
  np.testing.assert_allclose(numpy(F.spearman(labels, scores)), want, rtol=0, atol=1e-6)
  np.testing.assert_allclose(numpy(F.spearman(one_hot, scores)), want, rtol=0, atol=1e-6)


def test_class_ids_and_their_one_hot_agree():
  scores = _tied_scores(20, 12, 4)
  labels = RNG.integers(0, 12, 20)
  one_hot = np.eye(12, dtype=np.float32)[labels]
  for name, kwargs in CASES:
    np.testing.assert_allclose(
      numpy(getattr(F, name)(labels, scores, **kwargs)),
      numpy(getattr(F, name)(one_hot, scores, **kwargs)),
      atol=2e-7,
    )


# --- brute force over every tie-breaking order -------------------------------------------------


def _expected_over_ties(metric, relevance, scores):
  n = len(scores)
  values = []
  for tiebreak in itertools.permutations(range(n)):
    order = sorted(range(n), key=lambda i: (-scores[i], tiebreak[i]))
    values.append(metric([relevance[i] for i in order]))
  return float(np.mean(values))


def _hits(ranked, k):
  return sum(r > 0 for r in ranked[:k])


def _rr(ranked, k=None):
  for p, r in enumerate(ranked, 1):
    if r > 0:
      return 1.0 / p if k is None or p <= k else 0.0
  return 0.0


def _ndcg(ranked, k):
  dcg = sum((2**r - 1) / math.log2(1 + p) for p, r in enumerate(ranked[:k], 1))
  ideal = sum(
    (2**r - 1) / math.log2(1 + p) for p, r in enumerate(sorted(ranked, reverse=True)[:k], 1)
  )
  return dcg / ideal if ideal > 0 else 0.0


@pytest.mark.parametrize("seed", range(5))
def test_expectations_over_tie_breaking(seed):
  rng = np.random.default_rng(seed)
  n = 6
  scores = rng.integers(0, 3, n).astype(np.float32)
  graded = rng.integers(0, 3, n).astype(np.float32) * (rng.random(n) < 0.5)
  graded[rng.integers(n)] = 1.0
  y = int(rng.integers(n))
  one_hot = np.eye(n)[y]
  for labels, relevance in (([y], one_hot), (graded[None], graded)):
    sc = scores[None]
    for k in (1, 2, 4):
      want_hits = _expected_over_ties(lambda r, k=k: _hits(r, k), relevance, scores)
      want_topk = _expected_over_ties(lambda r, k=k: float(_hits(r, k) > 0), relevance, scores)
      assert float(numpy(F.top_k_accuracy(labels, sc, k=k))[0]) == pytest.approx(
        want_topk, abs=1e-6
      )
      assert float(numpy(F.recall_at_k(labels, sc, k=k))[0]) == pytest.approx(
        want_hits / (relevance > 0).sum(), abs=1e-6
      )
      assert float(numpy(F.precision_at_k(labels, sc, k=k))[0]) == pytest.approx(
        want_hits / k, abs=1e-6
      )
      assert float(numpy(F.reciprocal_rank(labels, sc, k=k))[0]) == pytest.approx(
        _expected_over_ties(lambda r, k=k: _rr(r, k), relevance, scores), abs=1e-6
      )
      assert float(numpy(F.ndcg(labels, sc, k=k))[0]) == pytest.approx(
        _expected_over_ties(lambda r, k=k: _ndcg(r, k), relevance, scores), abs=1e-6
      )


def test_all_equal_scores_give_chance_values():
  scores = np.zeros((1, 4), np.float32)
  assert float(numpy(F.top_k_accuracy([2], scores, k=1))[0]) == pytest.approx(0.25)
  assert float(numpy(F.reciprocal_rank([2], scores))[0]) == pytest.approx(
    (1 + 1 / 2 + 1 / 3 + 1 / 4) / 4
  )
  assert float(numpy(F.ndcg([2], scores, k=2))[0]) == pytest.approx((1 + 1 / math.log2(3)) / 4)


# --- scikit-learn, Keras and TF-Ranking on tie-free inputs -------------------------------------


@pytest.mark.parametrize("c", [3, 10, 1000])
def test_class_ids_match_sklearn_and_keras(c):
  b = 64
  scores = RNG.normal(size=(b, c)).astype(np.float32)
  labels = RNG.integers(0, c, b)
  one_hot = np.eye(c)[labels]
  for k in (1, 2, 5):
    if k < c:
      want = top_k_accuracy_score(labels, scores, k=k, labels=range(c))
      assert numpy(F.top_k_accuracy(labels, scores, k=k)).mean() == pytest.approx(want, abs=1e-6)
    if k <= c:  # Keras's own metric fails for k > C on PyTorch (torch.topk)
      keras_metric = keras.metrics.SparseTopKCategoricalAccuracy(k)
      keras_metric.update_state(labels, scores)
      assert numpy(F.top_k_accuracy(labels, scores, k=k)).mean() == pytest.approx(
        float(numpy(keras_metric.result())), abs=1e-6
      )
    want = [ndcg_score(one_hot[i : i + 1], scores[i : i + 1], k=k) for i in range(b)]
    np.testing.assert_allclose(numpy(F.ndcg(labels, scores, k=k, gain="linear")), want, atol=1e-6)
  want = label_ranking_average_precision_score(one_hot, scores)
  assert numpy(F.average_precision(labels, scores)).mean() == pytest.approx(want, abs=1e-6)
  assert numpy(F.reciprocal_rank(labels, scores)).mean() == pytest.approx(want, abs=1e-6)


def test_dense_relevance_matches_sklearn():
  b, c = 40, 30
  scores = RNG.normal(size=(b, c)).astype(np.float32)
  graded = RNG.integers(0, 4, (b, c)).astype(np.float32) * (RNG.random((b, c)) < 0.3)
  graded[:, 0] = 1.0
  for k in (1, 5, None):
    want = [ndcg_score(graded[i : i + 1], scores[i : i + 1], k=k) for i in range(b)]
    np.testing.assert_allclose(numpy(F.ndcg(graded, scores, k=k, gain="linear")), want, atol=1e-6)
  binary = (graded > 0).astype(np.float32)
  want = label_ranking_average_precision_score(binary, scores)
  assert numpy(F.average_precision(binary, scores)).mean() == pytest.approx(want, abs=1e-6)


def test_spearman_matches_scipy():
  scores = _tied_scores(30, 8, 3)
  graded = RNG.integers(0, 4, (30, 8)).astype(np.float32)
  want = [
    0.0 if np.isnan(r) else r
    for r in (spearmanr(graded[i], scores[i]).statistic for i in range(30))
  ]
  np.testing.assert_allclose(numpy(F.spearman(graded, scores)), want, atol=1e-5)


@pytest.mark.tensorflow_only
def test_recall_and_precision_match_tf_ranking():
  import _tf_ranking_reference  # noqa: PLC0415  (TensorFlow only)

  tfr_metrics = _tf_ranking_reference.module("keras.metrics")
  b, c = 32, 28
  scores = RNG.normal(size=(b, c)).astype(np.float32)
  multi_hot = (RNG.random((b, c)) < 0.15).astype(np.float32)
  multi_hot[:, 3] = 1.0
  multi_hot[0, 10:] = -1.0  # padding: a list of 10 valid items
  for k in (1, 5, 20):
    want = numpy(tfr_metrics.RecallMetric(topn=k)(multi_hot, scores))
    assert numpy(F.recall_at_k(multi_hot, scores, k=k)).mean() == pytest.approx(want, abs=1e-6)
    want = numpy(tfr_metrics.PrecisionMetric(topn=k)(multi_hot, scores))
    assert numpy(F.precision_at_k(multi_hot, scores, k=k)).mean() == pytest.approx(want, abs=1e-6)


def test_rank4class_figure_1():
  """Rank4Class Fig. 1: same Top-1 and Top-5 (0.5, 1.0), NDCG@5 0.82 against 0.72."""
  labels = [0, 0]
  model_1 = [[0.3, 0.4, 0.1, 0.1, 0.1], [0.6, 0.1, 0.1, 0.1, 0.1]]
  model_2 = [[0.5, 0.2, 0.1, 0.1, 0.1], [0.15, 0.3, 0.25, 0.2, 0.1]]
  for scores in (model_1, model_2):
    assert numpy(F.top_k_accuracy(labels, scores, k=1)).mean() == pytest.approx(0.5)
    assert numpy(F.top_k_accuracy(labels, scores, k=5)).mean() == pytest.approx(1.0)
  assert round(float(numpy(F.ndcg(labels, model_1, k=5)).mean()), 2) == 0.82
  assert round(float(numpy(F.ndcg(labels, model_2, k=5)).mean()), 2) == 0.72


# --- the closed forms' pieces ------------------------------------------------------------------


def test_rank_range():
  scores = _tied_scores(30, 9, 3)
  labels = RNG.integers(0, 9, 30)
  g, e = F.rank_range(labels[:, None], scores)
  true = scores[np.arange(30), labels][:, None]
  np.testing.assert_array_equal(numpy(g), (scores > true).sum(1))
  np.testing.assert_array_equal(numpy(e), (scores == true).sum(1) - 1)
  with pytest.raises(ValueError, match=r"`labels` must be class ids of shape \[B\] or \[B, 1\]"):
    F.rank_range(np.eye(9)[labels], scores)


def test_rank_range_in_row_blocks():
  """C = 10,000, B = 211: on TensorFlow's graph executor (the batch size known when traced, and
  not) the counts run 26 rows at a time, the last block overlapping the one before; they are
  numpy's counts there and in every compile mode of every backend."""
  scores = _tied_scores(211, 10000, 300)
  labels = RNG.integers(0, 10000, 211)
  true = scores[np.arange(211), labels][:, None]
  expected = np.stack([(scores > true).sum(1), (scores == true).sum(1) - 1])
  fns = [compiled(lambda y, s: ops.stack(F.rank_range(y, s)), mode) for mode in compile_modes()]
  if compat.BACKEND == "tensorflow":
    import tensorflow as tf  # noqa: PLC0415

    unknown_batch = [tf.TensorSpec([None], tf.int64), tf.TensorSpec([None, 10000], tf.float32)]
    fns.append(
      tf.function(lambda y, s: ops.stack(F.rank_range(y, s)), input_signature=unknown_batch)
    )
  for fn in fns:
    np.testing.assert_array_equal(numpy(fn(labels, scores)), expected)


def _top_k_by_numpy(labels, scores, k):
  """Top-k accuracy with ties counted in expectation, from numpy's counts: ``g`` scores above
  the true one and ``e`` tied with it put its rank uniformly on ``g + 1 .. g + e + 1``."""
  true = scores[np.arange(len(labels)), labels][:, None]
  above, tied = (scores > true).sum(1), (scores == true).sum(1)
  return np.array([np.mean(np.arange(a + 1, a + t + 1) <= k) for a, t in zip(above, tied)])


def _checked_calls(fn, num_classes):
  """``(name, fn)`` of every compile mode, and on TensorFlow a ``tf.function`` with the batch
  size unknown when traced (the counts of many classes run in row blocks under ``tf.cond``)."""
  calls = [(mode, compiled(fn, mode)) for mode in compile_modes()]
  if compat.BACKEND == "tensorflow":
    import tensorflow as tf  # noqa: PLC0415

    spec = [tf.TensorSpec([None], tf.int64), tf.TensorSpec([None, num_classes], tf.float32)]
    calls.append(("function", tf.function(fn, input_signature=spec)))
  return calls


def test_a_nonfinite_score_in_a_later_row_block_is_refused():
  """The scores' check runs in the counting pass (26-row blocks on TensorFlow's graph executor):
  a NaN, +inf and -inf in the last block, away from the true classes, raise naming `scores` and
  the values eagerly, fail the call inside tf.function, and make those lists' values NaN where
  no check can raise (XLA, jax.jit); the other lists keep numpy's values."""
  scores = _tied_scores(211, 10000, 300)
  labels = RNG.integers(0, 10000, 211)
  bad_rows = [190, 200, 205]
  scores[bad_rows, (labels[bad_rows] + 1) % 10000] = [math.nan, math.inf, -math.inf]
  want = _top_k_by_numpy(labels, scores, 5)
  for mode, call in _checked_calls(lambda y, s: F.top_k_accuracy(y, s, k=5), 10000):
    if mode in ("eager", "function"):
      shown = r" got \[nan, inf, -inf\]\.$" if mode == "eager" else ""
      with pytest.raises(Exception, match=r"`scores` must be finite \(no NaN or Inf\)," + shown):
        numpy(call(labels, scores))
      continue
    out = numpy(call(labels, scores))
    assert np.isnan(out[bad_rows]).all()
    np.testing.assert_allclose(np.delete(out, bad_rows), np.delete(want, bad_rows), atol=1e-6)


def test_scores_whose_row_sums_overflow_are_finite():
  """Scores near float32's largest, tied in groups, 5,000 classes: each row's sum overflows to
  +-inf, which (TensorFlow's graph without XLA) sends the check to the scores themselves; they
  are finite, so every compile mode returns numpy's values (and eagerly numpy's counts)."""
  scores = (_tied_scores(40, 5000, 7) - 3.0) * np.float32(1.1e38)
  labels = RNG.integers(0, 5000, 40)
  with np.errstate(over="ignore", invalid="ignore"):
    assert not np.isfinite(scores.sum(1, dtype=np.float32)).all()
  want = _top_k_by_numpy(labels, scores, 3)
  for _, call in _checked_calls(lambda y, s: F.top_k_accuracy(y, s, k=3), 5000):
    np.testing.assert_allclose(numpy(call(labels, scores)), want, atol=1e-6)
  true = scores[np.arange(40), labels][:, None]
  g, e = F.rank_range(labels, scores)
  np.testing.assert_array_equal(numpy(g), (scores > true).sum(1))
  np.testing.assert_array_equal(numpy(e), (scores == true).sum(1) - 1)


@pytest.mark.parametrize("c", [4095, 4099, 21841, 100000])
def test_rank_range_at_the_packing_limits(c):
  """The counts numpy makes, exactly, where one pass of packed counts (under XLA) is at its
  limits: one block of 4,095 classes (all tied: a block's sum reaches 4096 * 4095), one block and
  a remainder of 4, five blocks and a remainder of 1,366 (ImageNet-21k's 21,841, a prime), 24
  blocks and a remainder of 1,720; the true class alone on top,
  alone at the bottom, in one large or many small tie groups. A NaN (also the true class's own),
  +inf or -inf score makes its row NaN where no check can raise, else raises."""
  base = np.zeros((5, c), np.float32)
  base[1, 0], base[2, 1:] = 1.0, 1.0
  base[3] = RNG.integers(0, 2, c)
  base[4] = RNG.integers(0, 50, c)
  labels = np.array([c - 1, 0, 0, 5, 7])
  bad = np.repeat(base[4:], 4, axis=0)
  bad[[0, 1, 2, 3], [0, 9, c - 1, 7]] = [math.nan, math.inf, -math.inf, math.nan]
  scores, labels = np.concatenate([base, bad]), np.concatenate([labels, [7, 7, 7, 7]])
  true = base[np.arange(5), labels[:5]][:, None]
  for mode, call in _checked_calls(lambda y, s: ops.stack(F.rank_range(y, s), axis=-1), c):
    if mode in ("eager", "function"):
      with pytest.raises(Exception, match=r"`scores` must be finite \(no NaN or Inf\),"):
        numpy(call(labels, scores))
      got = numpy(call(labels[:5], base))
    else:
      out = numpy(call(labels, scores))
      assert np.isnan(out[5:]).all(), mode
      got = out[:5]
    np.testing.assert_array_equal(got[:, 0], (base > true).sum(1), err_msg=mode)
    np.testing.assert_array_equal(got[:, 1], (base == true).sum(1) - 1, err_msg=mode)


# --- graph mode, XLA, unknown list size ------------------------------------------------------

ALL = [
  (F.top_k_accuracy, {"k": 2}),
  (F.reciprocal_rank, {}),
  (F.reciprocal_rank, {"k": 3}),
  (F.ndcg, {"k": 5}),
  (F.ndcg, {}),
  (F.average_precision, {}),
  (F.recall_at_k, {"k": 3}),
  (F.precision_at_k, {"k": 3}),
]


@pytest.mark.parametrize("fn,kwargs", ALL)
def test_compiled_equals_eager(fn, kwargs):
  """tf.function and XLA on TensorFlow, jax.jit on JAX (PyTorch: eager only)."""
  scores = _tied_scores(16, 12, 4)
  ids = RNG.integers(0, 12, 16)
  dense = RNG.integers(-1, 3, (16, 12)).astype(np.float32)
  for labels in (ids, dense):
    eager = numpy(fn(labels, scores, **kwargs))
    for mode in compile_modes()[1:]:
      out = compiled(lambda y, s: fn(y, s, **kwargs), mode)(
        ops.convert_to_tensor(labels), ops.convert_to_tensor(scores)
      )
      np.testing.assert_allclose(numpy(out), eager, atol=1e-6)


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("fn,kwargs", ALL)
def test_unknown_list_size(fn, kwargs):
  import tensorflow as tf  # noqa: PLC0415  (a list size unknown when traced: TensorFlow only)

  scores = _tied_scores(8, 10, 3)
  labels = RNG.integers(0, 10, 8)
  traced = tf.function(
    lambda y, s: fn(y, s, **kwargs),
    input_signature=[tf.TensorSpec([None], tf.int64), tf.TensorSpec([None, None], tf.float32)],
  )
  np.testing.assert_allclose(
    numpy(traced(labels, scores)), numpy(fn(labels, scores, **kwargs)), atol=1e-6
  )


# --- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
  "fn",
  [
    F.ndcg,
    F.top_k_accuracy,
    F.reciprocal_rank,
    F.average_precision,
    F.recall_at_k,
    F.precision_at_k,
    F.spearman,
  ],
)
def test_bad_input(fn):
  scores = [[0.1, 0.2, 0.3]] * 2
  for labels in ([0, 3], [-1, 0], [[0], [7]]):
    if fn is F.spearman:
      break
    with pytest.raises(ValueError, match=r"labels.*\[0, num_classes=3\)"):
      fn(labels, scores)
  if fn is not F.spearman:
    with pytest.raises(ValueError, match=r"class ids must be whole numbers, got \[0.5\]"):
      fn([0.5, 1.0], scores)
    with pytest.raises(ValueError, match=r"same batch size.*3 labels for 2"):
      fn([0, 1, 2], scores)
  with pytest.raises(ValueError, match=r"labels.*shape \(2, 4\).*3 scores"):
    fn(np.zeros((2, 4)), scores)
  with pytest.raises(ValueError, match=r"same batch size.*3 labels for 2"):
    fn(np.zeros((3, 3)), scores)
  with pytest.raises(TypeError, match=r"`scores` must be a numeric tensor"):
    fn([0], [["a", "b"]])
  with pytest.raises(ValueError, match=r"`scores` must hold a non-empty list"):
    fn(np.zeros((1, 0)), np.zeros((1, 0)))
  with pytest.raises(TypeError, match=r"`labels` must be"):
    fn(["a"], [[0.1, 0.2]])
  with pytest.raises(ValueError, match=r"`labels` .*must be finite"):
    fn([[1.0, float("nan"), 0.0]], [[0.1, 0.2, 0.3]])
  for labels in ([0], [[1.0, 0.0, 0.0]]):
    with pytest.raises(ValueError, match=r"`scores` must be finite"):
      fn(labels, [[0.1, float("nan"), 0.3]])


@pytest.mark.parametrize("fn,kwargs", ALL + [(F.spearman, {})])
def test_bad_labels_inside_compiled_code_give_nan(fn, kwargs):
  """Where no check can raise (XLA, jax.jit), the list with a bad id is NaN and the other one
  exact; inside tf.function the assertion fails the call."""
  scores = ops.convert_to_tensor(np.array([[0.1, 0.2, 0.9], [0.3, 0.2, 0.1]], np.float32))
  labels = ops.convert_to_tensor(np.array([5, 0]))
  want = numpy(fn(np.array([0, 0]), scores, **kwargs))[1]
  for mode in compile_modes()[1:]:
    call = compiled(lambda y, s: fn(y, s, **kwargs), mode)
    if mode == "function":
      with pytest.raises(Exception, match=r"labels.*\[0, num_classes=3\)"):
        call(labels, scores)
      continue
    out = numpy(call(labels, scores))
    assert np.isnan(out[0]) and out[1] == pytest.approx(want, abs=1e-6)


@pytest.mark.parametrize(
  "fn", [F.ndcg, F.top_k_accuracy, F.reciprocal_rank, F.recall_at_k, F.precision_at_k]
)
def test_bad_k(fn):
  for k in (0, -2, 1.5, "3"):
    with pytest.raises(ValueError, match=r"`k` must be an integer >= 1.*got"):
      fn([0], [[0.1, 0.2]], k=k)


def test_top_k_accuracy_refuses_k_above_the_classes():
  # K = C is every list's hit (allowed, as Keras does); K > C is refused by name, not read as 1
  assert numpy(F.top_k_accuracy([1], [[0.3, 0.1]], k=2)).tolist() == [1.0]
  for labels in ([1, 0], [[0.0, 1.0], [1.0, -1.0]]):
    with pytest.raises(ValueError, match=r"`k` must be at most the number of classes, got k=3 f"):
      F.top_k_accuracy(labels, [[0.3, 0.1], [0.2, 0.5]], k=3)
