"""Tests of ConvSorter: shipped weights (n = 100) close to exact ranks, gradients, modes,
save/load, and the clear error at a length it cannot handle."""

import numpy as np
import pytest
from _sorter_checks import (
  check_gradient,
  check_mirrored,
  check_mixed_float16,
  check_modes,
  check_save_load,
  check_savedmodel_export,
  normalised_l1,
)

from tfrank4class.ranking.conv_sorter import ConvSorter

# A little above what the shipped weights reach, far below an untrained sorter (both in
# docs/sodeep.md, "Shipped weights").
BOUND_100 = 0.013


@pytest.fixture(scope="module")
def sorter():
  return ConvSorter.pretrained()


def test_shipped_weights_close_to_exact_ranks(sorter):
  assert sorter.list_size == 100
  assert normalised_l1(sorter, 100, lists=256) <= BOUND_100


def test_gradient_finite_and_nonzero(sorter):
  check_gradient(sorter, 100)


def test_modes():
  check_modes(ConvSorter(list_size=6, filters=4, num_blocks=2), 6)


@pytest.mark.tensorflow_only
def test_mirrored_strategy(mirrored_strategy):
  check_mirrored(ConvSorter(list_size=6, filters=4, num_blocks=2), 6, mirrored_strategy)


def test_save_load_round_trip(tmp_path):
  check_save_load(ConvSorter(list_size=6, filters=4, num_blocks=2), 6, tmp_path)


@pytest.mark.tensorflow_only
def test_savedmodel_export(tmp_path):
  check_savedmodel_export(ConvSorter(list_size=6, filters=4, num_blocks=2), 6, tmp_path)


def test_wrong_length_is_a_clear_error(sorter):
  with pytest.raises(ValueError, match=r"list_size=100 items and cannot rank lists of 10"):
    sorter(np.zeros([2, 10], np.float32))
  # A 2-class problem's lists: refused, naming the sorters that handle them.
  with pytest.raises(ValueError, match=r"cannot rank lists of 2; use LSTMSorter or Attention"):
    sorter(np.zeros([2, 2], np.float32))


@pytest.mark.tensorflow_only
def test_unknown_length_is_a_clear_error(sorter):
  import tensorflow as tf  # noqa: PLC0415  (a list length unknown when traced: TensorFlow only)

  fn = tf.function(sorter, input_signature=[tf.TensorSpec([None, None])])
  with pytest.raises(ValueError, match="static list length"):
    fn(tf.zeros([2, 100]))


def test_bad_arguments():
  with pytest.raises(ValueError, match=r"`list_size` must be an integer >= 2, got 1"):
    ConvSorter(list_size=1)
  with pytest.raises(ValueError, match="`num_blocks`"):
    ConvSorter(num_blocks=0)


def test_mixed_float16_policy():
  check_mixed_float16(ConvSorter.pretrained, 100)
