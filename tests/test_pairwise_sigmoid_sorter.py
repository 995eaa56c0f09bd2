"""Tests of the handcrafted sorter (SoDeep Eq. 11-12) against numpy and exact ranks."""

import backend_testing
import numpy as np
import pytest
from _sorter_checks import (
  check_mixed_float16,
  check_save_load,
  check_savedmodel_export,
  check_two_item_gradient,
)

from tfrank4class.compat import ops
from tfrank4class.ranking.pairwise_sigmoid_sorter import PairwiseSigmoidSorter


def _np_soft_rank(s, c):
  d = s[:, None, :] - s[:, :, None]
  sig = 1.0 / (1.0 + np.exp(-c * d))
  return 1.0 + sig.sum(-1) - 0.5  # j == i contributes sigmoid(0) = 0.5


def test_matches_numpy_formula():
  rng = np.random.default_rng(0)
  s = rng.uniform(-1, 1, size=(4, 9)).astype(np.float32)
  got = backend_testing.numpy(PairwiseSigmoidSorter(steepness=7.0, block_size=4)(s))
  np.testing.assert_allclose(got, _np_soft_rank(s.astype(np.float64), 7.0), rtol=1e-5)


def test_default_steepness_is_the_papers_lambda():
  # SoDeep Sec. 4.1.2: lambda = 10, on raw scores.
  sorter = PairwiseSigmoidSorter()
  assert sorter.steepness == 10.0 and not sorter.standardize_scores
  s = np.array([[0.1, 0.9, 0.5, -0.3]], np.float32)
  np.testing.assert_allclose(
    backend_testing.numpy(sorter(s)), _np_soft_rank(s.astype(np.float64), 10.0), rtol=1e-5
  )


def test_two_item_lists_pass_rank_gradient():
  check_two_item_gradient(PairwiseSigmoidSorter())
  check_two_item_gradient(PairwiseSigmoidSorter(5.0, standardize_scores=True))


def test_mixed_float16_policy():
  check_mixed_float16(PairwiseSigmoidSorter, 10)


def test_tends_to_exact_ranks_when_steep():
  s = np.array([[0.1, 0.9, 0.5, -0.3]], np.float32)
  got = backend_testing.numpy(PairwiseSigmoidSorter(steepness=1e4)(s))
  np.testing.assert_allclose(got, [[3.0, 1.0, 2.0, 4.0]], atol=1e-4)


def test_standardize_scores_makes_it_scale_free():
  s = np.array([[0.001, 0.003, 0.002]], np.float32)
  a = backend_testing.numpy(PairwiseSigmoidSorter(5.0, standardize_scores=True)(s))
  b = backend_testing.numpy(PairwiseSigmoidSorter(5.0, standardize_scores=True)(s * 1000.0))
  np.testing.assert_allclose(a, b, rtol=1e-4)


def test_gradient_finite_nonzero_and_long_list_blocks():
  s = np.random.default_rng(2).uniform(-1, 1, size=(2, 1500)).astype(np.float32)
  sorter = PairwiseSigmoidSorter(steepness=50.0, block_size=128)
  weights = np.arange(1500, dtype=np.float32)
  _, (g,) = backend_testing.value_and_grad(lambda x: ops.sum(ops.multiply(sorter(x), weights)), s)
  assert np.isfinite(g).all() and np.abs(g).sum() > 0
  # Sum of soft ranks is n(n+1)/2 exactly (sigmoid(x) + sigmoid(-x) = 1).
  np.testing.assert_allclose(backend_testing.numpy(sorter(s)).sum(-1), 1500 * 1501 / 2, rtol=1e-5)


def test_compiled_modes():
  s = np.array([[0.1, 0.9, 0.5]], np.float32)
  ref = _np_soft_rank(s.astype(np.float64), 3.0)
  sorter = PairwiseSigmoidSorter(3.0)
  for mode in backend_testing.compile_modes():
    got = backend_testing.numpy(backend_testing.compiled(sorter, mode)(s))
    np.testing.assert_allclose(got, ref, rtol=1e-5, err_msg=mode)


@pytest.mark.tensorflow_only
def test_mirrored(mirrored_strategy):
  import tensorflow as tf  # noqa: PLC0415

  s = tf.constant([[0.1, 0.9, 0.5]])
  ref = _np_soft_rank(s.numpy().astype(np.float64), 3.0)
  sorter = PairwiseSigmoidSorter(3.0)
  with mirrored_strategy.scope():
    out = mirrored_strategy.run(tf.function(sorter), (s,))
  for value in mirrored_strategy.experimental_local_results(out):
    np.testing.assert_allclose(value.numpy(), ref, rtol=1e-5)


def test_in_a_model_fit_save_load(tmp_path):
  check_save_load(PairwiseSigmoidSorter(3.0, standardize_scores=True, block_size=4), 6, tmp_path)


@pytest.mark.tensorflow_only
def test_savedmodel_export(tmp_path):
  sorter = PairwiseSigmoidSorter(3.0, standardize_scores=True, block_size=4)
  check_savedmodel_export(sorter, 6, tmp_path)


def test_config_round_trip_and_bad_arguments():
  sorter = PairwiseSigmoidSorter(3.0, standardize_scores=True, block_size=16)
  clone = PairwiseSigmoidSorter.from_config(sorter.get_config())
  assert (clone.steepness, clone.standardize_scores, clone.block_size) == (3.0, True, 16)
  with pytest.raises(ValueError, match=r"`steepness` must be a finite number > 0.0, got -1"):
    PairwiseSigmoidSorter(-1)
  with pytest.raises(ValueError, match="`block_size`"):
    PairwiseSigmoidSorter(1.0, block_size=0)
  with pytest.raises(ValueError, match="at least 2 items"):
    PairwiseSigmoidSorter(1.0)(np.zeros([3, 1], np.float32))
  with pytest.raises(ValueError, match="shape"):
    PairwiseSigmoidSorter(1.0)(np.zeros([3], np.float32))
