"""Tests of AttentionSorter: shipped weights close to exact ranks at n = 10..1000, gradients,
the backend's compile modes (and TensorFlow's MirroredStrategy), save/load, bad input."""

import backend_testing
import numpy as np
import pytest
from _sorter_checks import (
  check_gradient,
  check_mirrored,
  check_mixed_float16,
  check_modes,
  check_save_load,
  check_savedmodel_export,
  check_two_item_gradient,
  normalised_l1,
)

from tfrank4class.compat import ops
from tfrank4class.ranking import attention_sorter
from tfrank4class.ranking.attention_sorter import AttentionSorter


@pytest.fixture(scope="module")
def sorter():
  return AttentionSorter.pretrained()


@pytest.mark.parametrize("n,bound", [(3, 0.01), (10, 0.005), (100, 0.001), (1000, 0.001)])
def test_shipped_weights_close_to_exact_ranks(sorter, n, bound):
  lists = 64 if n == 1000 else 256
  assert normalised_l1(sorter, n, lists=lists) <= bound


def test_nearest_gap_and_neighbour_counts_against_numpy():
  z = np.array([[0.0, 0.5, 0.1, 2.0, 0.45]], np.float32)
  d = np.abs(z[0][:, None] - z[0][None, :])
  np.fill_diagonal(d, np.inf)
  gap = backend_testing.numpy(attention_sorter.nearest_gap(z))[0]
  np.testing.assert_allclose(gap, d.min(1), rtol=1e-6)
  counts = backend_testing.numpy(attention_sorter.neighbour_counts(z, (0.06, 0.5)))[0]
  np.testing.assert_array_equal(counts[:, 0], (d <= 0.06).sum(1))
  np.testing.assert_array_equal(counts[:, 1], (d <= 0.5).sum(1))


def test_one_items_gap_and_counts_equal_the_whole_lists_at_that_item():
  # The O(n) forms of ranks_at against the sorted forms, exactly: ties (0.25 twice, the chosen
  # item of list 1 among them), points on a bandwidth's edge (0.5 - 0.25), a list of 2 items.
  z = np.array([[0.0, 0.5, 0.25, -1.0, 0.25], [0.25, 0.5, 0.25, 3.0, -0.25]], np.float32)
  index = np.array([[1], [2]])
  bands = (0.25, 1.0, 10.0)
  counts = backend_testing.numpy(attention_sorter.neighbour_counts(z, bands))
  gaps = backend_testing.numpy(attention_sorter.nearest_gap(z))
  np.testing.assert_array_equal(
    backend_testing.numpy(attention_sorter.neighbour_counts_at(z, index, bands))[:, 0],
    counts[[0, 1], index[:, 0]],
  )
  np.testing.assert_array_equal(
    backend_testing.numpy(attention_sorter.nearest_gap_at(z, index))[:, 0],
    gaps[[0, 1], index[:, 0]],
  )
  assert gaps[1, 2] == 0.0 and counts[0, 1].tolist() == [2.0, 3.0, 4.0]
  two = np.array([[0.3, -0.7]], np.float32)
  np.testing.assert_allclose(
    backend_testing.numpy(attention_sorter.nearest_gap_at(two, np.array([[1]]))), [[1.0]]
  )


def _numpy_rank_of_one(sorter, s, t):
  """The attention sorter's rank of item ``t`` of the list ``s`` (1-D), in float64 numpy from
  its weights: standardise, count the others within each bandwidth, the nearest gap, the MLP's
  sharpness ``a``, then ``1 + sum_{j != t} sigmoid((a / gap) (z_j - z_t))``."""
  w = {key: backend_testing.numpy(v).astype(np.float64) for key, v in sorter.weight_table().items()}
  sigmoid = lambda x: 0.5 + 0.5 * np.tanh(0.5 * x)
  centred = s - s.mean()
  z = centred / np.sqrt(np.mean(centred**2) + 1e-12)
  others = np.delete(z - z[t], t)
  h = np.array(sorter.bandwidths)
  counts = (np.abs(others)[:, None] <= h[None, :]).sum(0)
  gap = max(np.abs(others).min(), 1e-6)
  x = np.append((np.log(counts + 0.5) - np.log(2 * h) + np.log(gap)) / 5, np.log(s.size) / 5)
  x = np.tanh(x @ w["hidden1/kernel"] + w["hidden1/bias"])
  x = np.tanh(x @ w["hidden2/kernel"] + w["hidden2/bias"])
  logit = (x @ w["sharpness_logit/kernel"] + w["sharpness_logit/bias"])[0]
  sharpness = sorter.min_sharpness + (sorter.max_sharpness - sorter.min_sharpness) * sigmoid(logit)
  return 1.0 + sigmoid(min(sharpness / gap, 1e7) * others).sum()


@pytest.mark.parametrize("n", [2, 3, 40])
def test_one_items_rank_and_rank_above_ties_against_numpy(sorter, n):
  """``ranks_at`` and the closed form ``rank_above_ties`` (the list of one item over ``n - 1``
  equal others, as ``sink`` leaves a list with one kept item) against the numpy sorter; a tie
  at the chosen item of list 1."""
  rng = np.random.default_rng(n)
  s = (rng.normal(size=(3, n)) * 2.0 + 1.0).astype(np.float32)
  index = np.array([0, 1, n - 1])
  s[1, 0] = s[1, 1]
  got = backend_testing.numpy(sorter.ranks_at(s, index))
  expected = [_numpy_rank_of_one(sorter, row.astype(np.float64), t) for row, t in zip(s, index)]
  np.testing.assert_allclose(got, expected, rtol=1e-5)
  top = s[np.arange(3), index]
  got = backend_testing.numpy(sorter.rank_above_ties(top, top - 1.0, n))
  sunk = [np.where(np.arange(n) == t, x, x - 1.0) for x, t in zip(top.astype(np.float64), index)]
  expected = [_numpy_rank_of_one(sorter, row, t) for row, t in zip(sunk, index)]
  np.testing.assert_allclose(got, expected, rtol=1e-5)


@pytest.mark.parametrize("n", [2, 3, 12])
def test_row_comparison_sum_gradient_against_finite_differences(n):
  """The written-out gradient of ``S_t = sum_j sigmoid(k scale (s_j - s_t))`` (scale the
  standardisation's, a constant for 2-item lists) with respect to the scores and ``k``, against
  central differences of the sum in numpy, float64, with a tie at the chosen item (not in a list
  of 2, whose variance it would make 0)."""
  rng = np.random.default_rng(n)
  s = rng.normal(size=(3, n)) * 1.5
  s[0, 1] = s[0, 0] if n > 2 else s[0, 1]
  k = np.array([[0.7], [2.0], [4.0]])
  index = np.array([0, 1, n - 1])
  weights = np.array([1.0, -2.0, 0.5])
  fixed_scale = 1.0 / np.sqrt(np.var(s, axis=1, keepdims=True) + 1e-12)

  def total(s, k):
    scale = fixed_scale if n == 2 else 1.0 / np.sqrt(np.var(s, axis=1, keepdims=True) + 1e-12)
    diff = s - s[np.arange(3), index][:, None]
    return np.sum(np.sum(1.0 / (1.0 + np.exp(-k * scale * diff)), axis=1) * weights)

  def fn(scores, steep):
    sums = attention_sorter.row_comparison_sum(scores, steep, index)
    return ops.sum(sums * ops.convert_to_tensor(weights, sums.dtype))

  with backend_testing.float64():
    value, (grad_s, grad_k) = backend_testing.value_and_grad(fn, s, k)
  np.testing.assert_allclose(value, total(s, k), rtol=1e-12)
  np.testing.assert_allclose(
    grad_s, backend_testing.finite_difference_grad(lambda v: total(v, k), s, 1e-6), atol=1e-7
  )
  np.testing.assert_allclose(
    grad_k, backend_testing.finite_difference_grad(lambda v: total(s, v), k, 1e-6), atol=1e-7
  )


def test_gradient_finite_and_nonzero(sorter):
  check_gradient(sorter, 20)


def test_two_item_lists_pass_rank_gradient(sorter):
  check_two_item_gradient(sorter)


def test_mixed_float16_policy():
  check_mixed_float16(AttentionSorter.pretrained, 10)
  check_mixed_float16(AttentionSorter, 6)  # sub-layers built under the policy


def test_modes(sorter):
  check_modes(sorter, 12)


@pytest.mark.tensorflow_only
def test_mirrored_strategy(sorter, mirrored_strategy):
  check_mirrored(sorter, 12, mirrored_strategy)


def test_save_load_round_trip(sorter, tmp_path):
  check_save_load(sorter, 10, tmp_path)


@pytest.mark.tensorflow_only
def test_savedmodel_export(sorter, tmp_path):
  check_savedmodel_export(sorter, 10, tmp_path)


def test_pretrained_is_frozen_or_trainable():
  assert not AttentionSorter.pretrained().trainable_weights
  assert AttentionSorter.pretrained(trainable=True).trainable_weights


def test_bad_input(sorter):
  with pytest.raises(ValueError, match="at least 2 items"):
    sorter(np.zeros([2, 1], np.float32))
  with pytest.raises(ValueError, match=r"shape \[batch_size, list_size\]"):
    sorter(np.zeros([2, 3, 4], np.float32))
  with pytest.raises(ValueError, match="`max_sharpness`"):
    AttentionSorter(min_sharpness=2.0, max_sharpness=1.0)
  with pytest.raises(ValueError, match="`bandwidths`"):
    AttentionSorter(bandwidths=(0.1, -1.0))
