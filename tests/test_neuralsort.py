"""NeuralSort: difftopk fixtures, the n = 2 closed form, limits, straight-through, modes."""

import backend_testing as bt
import numpy as np
import pytest
from _topk_reference import case_id, cases, finite_difference, value_and_grad
from scipy import special

from tfrank4class import backend, ranking
from tfrank4class.compat import ops
from tfrank4class.ranking.neuralsort import tie_neutral_abs

CASES = cases("neuralsort")
#: float64 inputs stay float64 on every backend (JAX: ``jax_enable_x64``, on for each test).
pytestmark = pytest.mark.usefixtures("float64_inputs")
#: The float64 fixtures to 1e-10; finite differences: step and tolerance.
TOL = 1e-10
EPS, FD_TOL = 1e-6, 1e-6


@pytest.mark.parametrize("config,arrays", CASES, ids=[case_id(c) for c, _ in CASES])
def test_matches_difftopk(config, arrays):
  (perm,), grad = value_and_grad(
    lambda x: ranking.neuralsort(x, config["temperature"]), arrays["x"], [arrays["cot0"]]
  )
  np.testing.assert_allclose(perm, arrays["out0"], atol=TOL)
  np.testing.assert_allclose(grad, arrays["grad"], atol=TOL * 10)


def test_two_items_closed_form():
  """n = 2: the top position is softmax(s / tau), the bottom one softmax(-s / tau) (Sec. 3)."""
  a, b, tau = 0.4, -0.3, 0.5
  perm = bt.numpy(ranking.neuralsort(np.array([[a, b]]), tau))[0]
  top = special.expit((a - b) / tau)
  np.testing.assert_allclose(perm, [[1 - top, top], [top, 1 - top]], atol=TOL)


def test_columns_sum_to_one():
  perm = bt.numpy(ranking.neuralsort(np.random.default_rng(0).normal(size=(3, 7)), 2.0))
  np.testing.assert_allclose(perm.sum(1), 1.0, atol=TOL)
  assert not np.allclose(perm.sum(2), 1.0)  # rows need not (Grover et al., Sec. 3)


@pytest.mark.parametrize("n", [2, 5, 9])
def test_small_temperature_is_the_hard_sort(n):
  x = np.random.default_rng(n).normal(size=(3, n))
  perm = bt.numpy(ranking.neuralsort(x, 1e-4))
  np.testing.assert_array_equal(perm.argmax(1), np.argsort(x, -1))
  np.testing.assert_allclose(np.einsum("bi,bij->bj", x, perm), np.sort(x, -1), atol=TOL * 100)


def test_hard_is_a_permutation_with_the_soft_gradient():
  rng = np.random.default_rng(1)
  x, cot = rng.normal(size=(2, 6)), [rng.normal(size=(2, 6, 6))]
  (hard,), hard_grad = value_and_grad(lambda v: ranking.neuralsort(v, 3.0, hard=True), x, cot)
  _, soft_grad = value_and_grad(lambda v: ranking.neuralsort(v, 3.0), x, cot)
  expected = np.eye(6)[np.argsort(x, -1)].transpose(0, 2, 1)  # [b, item, position]
  np.testing.assert_array_equal(hard, expected)
  np.testing.assert_allclose(hard_grad, soft_grad)


def test_gradient_matches_finite_differences():
  rng = np.random.default_rng(2)
  x, cot = rng.normal(size=(1, 4)), [rng.normal(size=(1, 4, 4))]
  _, grad = value_and_grad(lambda v: ranking.neuralsort(v, 0.7), x, cot)
  numeric = finite_difference(lambda v: bt.numpy(ranking.neuralsort(v, 0.7)), x, cot, EPS)
  np.testing.assert_allclose(grad, numeric, atol=FD_TOL)


@pytest.mark.parametrize("mode", bt.compile_modes())
def test_modes_agree(mode):
  x = np.random.default_rng(3).normal(size=(3, 5)).astype(np.float32)
  fn = bt.compiled(lambda v: ranking.neuralsort(v, 0.5, hard=True), mode)
  want = bt.numpy(ranking.neuralsort(x, 0.5, hard=True))
  np.testing.assert_allclose(bt.numpy(fn(ops.convert_to_tensor(x))), want, atol=1e-6)


@pytest.mark.tensorflow_only
def test_mirrored_strategy(mirrored_strategy):
  import tensorflow as tf  # noqa: PLC0415

  x = np.random.default_rng(4).normal(size=(4, 5)).astype(np.float32)
  batch = next(
    iter(mirrored_strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensors(x)))
  )
  result = mirrored_strategy.run(tf.function(lambda v: ranking.neuralsort(v, 0.5)), (batch,))
  parts = mirrored_strategy.experimental_local_results(result)
  np.testing.assert_allclose(np.concatenate(parts), bt.numpy(ranking.neuralsort(x, 0.5)), atol=1e-6)


def test_half_precision_is_computed_in_float32():
  perm = ranking.neuralsort(ops.convert_to_tensor([[1.0, 3.0, 2.0]], "float16"))
  assert backend.dtype_name(perm) == "float32"


def test_bad_arguments():
  with pytest.raises(ValueError, match="`temperature` must be a finite number > 0.0, got 0"):
    ranking.neuralsort([[1.0, 2.0]], temperature=0)
  with pytest.raises(ValueError, match="`hard` must be a bool, got 'yes'"):
    ranking.neuralsort([[1.0, 2.0]], hard="yes")
  with pytest.raises(ValueError, match="shape \\[batch_size, list_size\\]"):
    ranking.neuralsort([1.0, 2.0])
  with pytest.raises(ValueError, match="`scores` must be finite"):
    ranking.neuralsort([[1.0, float("inf")]])


@pytest.mark.parametrize("mode", bt.compile_modes())
def test_tie_neutral_abs_has_derivative_zero_at_ties(mode):
  """``|x|`` in every compile mode, and its derivative ``sign(x)``, 0 at ``x = 0`` (JAX's own
  ``abs`` has 1 there)."""
  x = np.array([-2.0, 0.0, 3.0, 0.0])
  got = bt.numpy(bt.compiled(tie_neutral_abs, mode)(ops.convert_to_tensor(x)))
  np.testing.assert_array_equal(got, np.abs(x))
  _, (grad,) = bt.value_and_grad(lambda v: ops.sum(tie_neutral_abs(v)), x)
  np.testing.assert_array_equal(grad, [-1.0, 0.0, 1.0, 0.0])
