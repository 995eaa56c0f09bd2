"""Tests of tfrank4class.losses.sodeep.average_precision: SorterAPLoss against scikit-learn's
average_precision_score, SorterMAPLoss (Eq. 7 over class columns) against 1 - ROC AUC and a numpy
Eq. 7 through a sorter, padding, 2-class training of the class rankings, and bad input."""

import backend_testing
import numpy as np
import pytest
from _sorter_checks import seeded_linear, separable_blobs
from sklearn.metrics import average_precision_score, roc_auc_score

from tfrank4class import losses
from tfrank4class.compat import keras, ops
from tfrank4class.losses.sodeep.average_precision import SorterAPLoss, SorterMAPLoss
from tfrank4class.ranking import PairwiseSigmoidSorter

NONE = "none"


def test_ap_exact_matches_sklearn():
  rng = np.random.default_rng(1)
  rel = (rng.uniform(size=(6, 10)) < 0.3).astype(np.float32)
  rel[:, 0] = 1.0
  s = rng.normal(size=(6, 10)).astype(np.float32)
  got = backend_testing.numpy(SorterAPLoss(ranker="exact", reduction=NONE)(rel, s))
  ref = [1.0 - average_precision_score(r, x) for r, x in zip(rel, s)]
  np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
  # Padding excluded: sklearn on the valid items only.
  rel[:, 3] = -1.0
  got = backend_testing.numpy(SorterAPLoss(ranker="exact", reduction=NONE)(rel, s))
  ref = [1.0 - average_precision_score(r[r >= 0], x[r >= 0]) for r, x in zip(rel, s)]
  np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
  # Class ids: AP = 1 / rank of the true class; no positive -> 0.
  ids = backend_testing.numpy(SorterAPLoss(ranker="exact", reduction=NONE)([2], [[0.5, 0.9, 0.1]]))
  np.testing.assert_allclose(ids, [1.0 - 1.0 / 3.0], rtol=1e-6)
  none = backend_testing.numpy(
    SorterAPLoss(ranker="exact", reduction=NONE)([[0.0, 0.0]], [[0.5, 0.9]])
  )
  np.testing.assert_array_equal(none, [0.0])


def _soft_ranks(x, steepness):
  """The pairwise-sigmoid sorter's ranks ``0.5 + sum_j sigmoid(steepness (x_j - x_i))``."""
  return 0.5 + (1.0 / (1.0 + np.exp(-steepness * (x[None, :] - x[:, None])))).sum(1)


@pytest.mark.parametrize("mode", backend_testing.compile_modes())
def test_ap_on_class_ids_ranks_the_true_class_alone(mode):
  """Class ids: ``1 - rk(s_P)_y / rk(s)_y`` from the true class's row of comparisons; its value
  against numpy soft ranks (the relevant-only list sinks the others to ``s_y - 1``), its value
  and gradient against the one-hot (all-rows) path for the attention sorter, with ties."""
  rng = np.random.default_rng(5)
  s = rng.normal(size=(4, 9)).astype(np.float32)
  s[0, 2] = s[0, 5]  # the true class tied with another
  y = np.array([2, 0, 8, 4])
  steepness = 3.0
  expected = []
  for x, t in zip(s.astype(np.float64), y):
    sunk = np.where(np.arange(9) == t, x, x[t] - 1.0)
    expected.append(1.0 - _soft_ranks(sunk, steepness)[t] / _soft_ranks(x, steepness)[t])
  loss = SorterAPLoss(ranker=PairwiseSigmoidSorter(steepness=steepness), reduction=NONE)
  got = backend_testing.compiled(lambda v: loss(y, v), mode)(s)
  np.testing.assert_allclose(backend_testing.numpy(got), expected, rtol=1e-5)
  weights = ops.convert_to_tensor(np.arange(1.0, 5.0, dtype=np.float32))
  attention = SorterAPLoss(ranker="attention", reduction=NONE)
  onehot = np.eye(9, dtype=np.float32)[y]
  values = []
  for labels in (y, onehot):
    values.append(
      backend_testing.value_and_grad(
        backend_testing.compiled(lambda v, lab=labels: ops.sum(attention(lab, v) * weights), mode),
        s,
      )
    )
  np.testing.assert_allclose(values[0][0], values[1][0], rtol=1e-5)
  # The tie's gradient is ~1e5 (a steep comparator); the all-rows path's others are rounding.
  scale = np.abs(values[1][1][0]).max()
  np.testing.assert_allclose(values[0][1][0], values[1][1][0], rtol=1e-5, atol=1e-8 * scale)


def _map_reference(rel, s, soft_rank=None):
  """Eq. 7 per class column (ranked down the batch), scaled as documented, in numpy: the mean
  over classes with a positive and a negative of (sum of the positives' ranks - best) / (P N)."""
  terms = []
  for c in range(rel.shape[1]):
    r, x = rel[:, c], s[:, c]
    x, r = x[r >= 0], r[r >= 0]
    num_pos, num_neg = (r > 0).sum(), (r <= 0).sum()
    if num_pos == 0 or num_neg == 0:
      continue
    ranks = soft_rank(x) if soft_rank else 1.0 + (x[None, :] > x[:, None]).sum(1)
    terms.append((ranks[r > 0].sum() - num_pos * (num_pos + 1) / 2) / (num_pos * num_neg))
  return np.mean(terms)


def test_map_ranks_each_class_down_the_batch_exact_is_one_minus_auc():
  rng = np.random.default_rng(1)
  rel = (rng.uniform(size=(12, 6)) < 0.4).astype(np.float32)
  rel[:, 4] = 0.0  # no positive in the batch: left out (as in the paper)
  rel[:, 5] = 1.0  # no negative: left out (its rank sum is a constant)
  rel[0, :4] = 1.0
  rel[1, :4] = 0.0
  s = rng.normal(size=(12, 6)).astype(np.float32)
  got = backend_testing.numpy(SorterMAPLoss(ranker="exact")(rel, s))
  # With exact ranks: mean over the kept classes of 1 - ROC AUC (scikit-learn).
  ref = np.mean([1.0 - roc_auc_score(rel[:, c], s[:, c]) for c in range(4)])
  np.testing.assert_allclose(got, ref, rtol=1e-5)
  np.testing.assert_allclose(got, _map_reference(rel, s), rtol=1e-5)
  # Padding (relevance < 0) leaves the entry out of its class's list.
  rel[2, 0] = rel[7, 1] = -1.0
  got = backend_testing.numpy(SorterMAPLoss(ranker="exact")(rel, s))
  ref = np.mean(
    [1.0 - roc_auc_score(rel[rel[:, c] >= 0, c], s[rel[:, c] >= 0, c]) for c in range(4)]
  )
  np.testing.assert_allclose(got, ref, rtol=1e-5)
  # Class ids [B]; a batch without any kept class has loss 0.
  ids = backend_testing.numpy(
    SorterMAPLoss(ranker="exact")([0, 1, 0], [[0.9, 0.1], [0.5, 0.2], [0.1, 0.3]])
  )
  # class 0: column 0.9, 0.5, 0.1 with positives 0.9 and 0.1 -> 1 of 2 pairs wrong; class 1:
  # column 0.1, 0.2, 0.3 with positive 0.2 -> 1 of 2 pairs wrong.
  np.testing.assert_allclose(ids, (0.5 + 0.5) / 2, rtol=1e-6)
  np.testing.assert_array_equal(SorterMAPLoss(ranker="exact")([0, 0], [[1.0, 0.0]] * 2), 0.0)


def test_map_through_a_sorter_matches_numpy_eq7_on_columns():
  rng = np.random.default_rng(3)
  rel = (rng.uniform(size=(10, 5)) < 0.3).astype(np.float32)
  rel[0] = 1.0
  rel[1] = 0.0
  s = rng.uniform(-1, 1, size=(10, 5)).astype(np.float32)
  c = 3.0
  soft = lambda x: 1.0 + (1.0 / (1.0 + np.exp(-c * (x[None, :] - x[:, None])))).sum(1) - 0.5
  got = backend_testing.numpy(SorterMAPLoss(ranker=PairwiseSigmoidSorter(c))(rel, s))
  np.testing.assert_allclose(got, _map_reference(rel, s.astype(np.float64), soft), rtol=1e-5)


def test_map_loss_learns_the_class_rankings_of_a_2_class_problem():
  # Eq. 7 ranks each class down the batch: it is blind to a per-class offset of the scores, so
  # it learns per-class rankings (mAP), not top-1 (the paper adds it to a per-example loss).
  # Reference: scikit-learn's AP of each class column; chance is about 0.5.
  x, y = separable_blobs(2)
  onehot = np.eye(2)[y]
  model = seeded_linear(4, 2)  # the same start on every backend
  mean_ap = lambda: np.mean(
    [average_precision_score(onehot[:, c], model.predict(x, verbose=0)[:, c]) for c in range(2)]
  )
  before = mean_ap()
  model.compile(keras.optimizers.Adam(0.05), loss=losses.get("sorter_map_loss"))
  model.fit(x, y, batch_size=64, epochs=5, verbose=0, shuffle=False)
  assert mean_ap() > 0.95 and before < 0.7, (before, mean_ap())


def test_bad_input():
  with pytest.raises(ValueError, match=r"shape \[batch_size, list_size\]"):
    SorterMAPLoss(ranker="exact")(np.zeros([3]), np.zeros([3, 2, 2]))
  with pytest.raises(ValueError, match=r"ranks each class down the batch .* batch of at least 2"):
    SorterMAPLoss(ranker="exact")([[1.0, 0.0, 0.0]], [[0.1, 0.2, 0.3]])
