"""Tests of LSTMSorter: shipped weights close to exact ranks at several lengths, gradients (also of
2-item lists), mixed_float16, modes, save/load, bad input."""

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

from tfrank4class.ranking.lstm_sorter import LSTMSorter

# Bounds a little above what the shipped weights reach, far below an untrained sorter (both in
# docs/sodeep.md, "Shipped weights").
BOUNDS = {10: 0.03, 100: 0.013}


@pytest.fixture(scope="module")
def sorter():
  return LSTMSorter.pretrained()


@pytest.mark.parametrize("n", sorted(BOUNDS))
def test_shipped_weights_close_to_exact_ranks(sorter, n):
  assert normalised_l1(sorter, n, lists=128) <= BOUNDS[n]


def test_runs_at_any_length(sorter):
  assert tuple(sorter(np.random.default_rng(1).uniform(size=(2, 37))).shape) == (2, 37)


def test_gradient_finite_and_nonzero(sorter):
  check_gradient(sorter, 15)


def test_two_item_lists_pass_rank_gradient(sorter):
  check_two_item_gradient(sorter)


def test_mixed_float16_policy():
  check_mixed_float16(LSTMSorter.pretrained, 10)


def test_modes(sorter):
  check_modes(sorter, 8)


@pytest.mark.tensorflow_only
def test_mirrored_strategy(sorter, mirrored_strategy):
  check_mirrored(sorter, 8, mirrored_strategy)


def test_save_load_round_trip_keras_format(tmp_path):
  check_save_load(LSTMSorter(units=4, num_layers=1), 6, tmp_path)


@pytest.mark.slow
@pytest.mark.tensorflow_only
def test_savedmodel_export(tmp_path):
  check_savedmodel_export(LSTMSorter(units=4, num_layers=1), 6, tmp_path)


def test_bad_input(sorter):
  with pytest.raises(ValueError, match="at least 2 items"):
    sorter(np.zeros([2, 1], np.float32))
  with pytest.raises(ValueError, match=r"`units` must be an integer >= 1, got 0"):
    LSTMSorter(units=0)
