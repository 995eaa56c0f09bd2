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
