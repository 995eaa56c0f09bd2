"""experiments/bounds.py: Bruch et al.'s bounds of softmax cross-entropy on ranking metrics."""

import doctest
import math

import numpy as np
import pytest
import tensorflow as tf
from scipy import special
from sklearn.metrics import log_loss

from experiments import bounds
from tfrank4class import losses


def _pessimistic_ranks(labels, scores):
  """Independent reference: loop over classes, ties counted against the true class."""
  ranks = []
  for y, row in zip(labels, scores):
    ranks.append(sum(1 for j, s in enumerate(row) if j == y or s >= row[y]))
  return np.array(ranks)


def test_hand_case():
  scores = [
    [2.0, 1.0, 0.0],  # true class on top: rank 1
    [1.0, 1.0, 0.0],  # tied with class 1: rank 2 (ties against it)
    [0.0, 3.0, 3.0],
  ]  # below two classes: rank 3
  check = bounds.softmax_rank_bound([0, 0, 0], scores)
  e = math.e
  p = [e**2 / (e**2 + e + 1), e / (2 * e + 1), 1 / (1 + 2 * e**3)]
  np.testing.assert_allclose(check.p_true, p, rtol=1e-12)
  np.testing.assert_array_equal(check.rank, [1, 2, 3])
  slack = [1 - p[0], 0.5 - p[1], 1 / 3 - p[2]]
  assert check.violations == 0 and check.holds
  assert check.min_slack == pytest.approx(min(slack), rel=1e-12)
  assert check.mean_slack == pytest.approx(np.mean(slack), rel=1e-12)
  ce = np.mean([-math.log(v) for v in p])
  mrr = (1 + 1 / 2 + 1 / 3) / 3
  assert check.cross_entropy == pytest.approx(ce, rel=1e-12)
  assert check.mrr == pytest.approx(mrr, rel=1e-12)
  assert check.neg_log_mrr == pytest.approx(-math.log(mrr), rel=1e-12)
  assert check.ce_gap == pytest.approx(ce + math.log(mrr), rel=1e-12)
  assert set(check.summary()) == {
    "violations",
    "min_slack",
    "mean_slack",
    "cross_entropy",
    "mrr",
    "neg_log_mrr",
    "ce_gap",
  }


def test_all_tied_scores_meet_the_bound_with_equality():
  # p_y = 1/C and, with ties counted against y, rank_y = C: the bound is tight, not broken.
  check = bounds.softmax_rank_bound([[2]], [[0.3, 0.3, 0.3, 0.3]])
  assert int(check.rank[0]) == 4
  assert float(check.p_true[0]) == pytest.approx(0.25, rel=1e-12)
  assert check.violations == 0
  assert check.min_slack == pytest.approx(0.0, abs=1e-12)
  # Counting the tie in the class's favour (rank 1) would claim slack 0.75: it must not.
  assert check.mean_slack < 1e-12


def test_on_a_small_trained_softmax_model():
  rng = np.random.default_rng(0)
  num_classes, dim = 5, 8
  centers = rng.normal(size=(num_classes, dim)) * 1.5
  y_train = rng.integers(0, num_classes, 600)
  x_train = (centers[y_train] + rng.normal(size=(600, dim))).astype("float32")
  y_test = rng.integers(0, num_classes, 300)
  x_test = (centers[y_test] + rng.normal(size=(300, dim))).astype("float32")
  tf.keras.utils.set_random_seed(0)
  model = tf.keras.Sequential([tf.keras.Input((dim,)), tf.keras.layers.Dense(num_classes)])
  model.compile(tf.keras.optimizers.Adam(0.05), loss=losses.get("softmax_loss"))
  model.fit(x_train, y_train, epochs=5, batch_size=64, verbose=0)
  scores = model.predict(x_test, verbose=0).astype(np.float64)
  check = bounds.softmax_rank_bound(y_test, scores)
  probs = special.softmax(scores, axis=-1)
  np.testing.assert_allclose(check.p_true, probs[np.arange(300), y_test], rtol=1e-9)
  ranks = _pessimistic_ranks(y_test, scores)
  np.testing.assert_array_equal(check.rank, ranks)
  assert check.cross_entropy == pytest.approx(
    log_loss(y_test, probs, labels=list(range(num_classes))), rel=1e-7
  )
  assert check.mrr == pytest.approx(np.mean(1.0 / ranks), rel=1e-12)
  # The model learned something (else the check would be trivial) and the bound holds.
  assert np.mean(ranks == 1) > 0.6
  assert check.violations == 0 and check.holds
  assert np.all(probs[np.arange(300), y_test] <= 1.0 / ranks + 1e-12)
  assert check.cross_entropy >= -math.log(np.mean(1.0 / ranks))


@pytest.mark.parametrize(
  "labels, scores, error, match",
  [
    ([0, 1], [1.0, 2.0], ValueError, "`scores` must have shape"),
    ([0, 1, 0], [[1.0, 2.0], [0.0, 1.0]], ValueError, "same number of examples"),
    ([[0, 1]], [[1.0, 2.0]], ValueError, "`labels` must be class ids of shape"),
    ([2], [[1.0, 2.0]], ValueError, "num_classes=2"),
    ([0], [[float("nan"), 2.0]], ValueError, "`scores` must be finite"),
  ],
)
def test_bad_input_is_named(labels, scores, error, match):
  with pytest.raises(error, match=match):
    bounds.softmax_rank_bound(labels, scores)


def test_atol_must_be_non_negative():
  with pytest.raises(ValueError, match="`atol` must be a finite number >= 0.0"):
    bounds.softmax_rank_bound([0], [[1.0, 2.0]], atol=-1.0)


def test_docstring_examples_run():
  assert doctest.testmod(bounds).failed == 0
