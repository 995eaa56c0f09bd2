"""tfrank4class.backend's cumulative log-sum-exp, log-sum-exp of finite terms and ``logaddexp``,
random draws, gathers, constants, ``where``, row permutation and split, and top-k, on every
backend and compile mode, against numpy (float64 suffix and prefix sums, indexing, sorts), finite
differences and Keras's own ``keras.random.uniform``."""

import keras as keras_3
import numpy as np
import pytest
from backend_testing import (
  BACKEND,
  compile_modes,
  compiled,
  finite_difference_grad,
  numpy,
  value_and_grad,
)

from tfrank4class import backend
from tfrank4class.compat import ops

#: float64 inputs stay float64 on every backend (JAX: ``jax_enable_x64``, on for each test).
pytestmark = pytest.mark.usefixtures("float64_inputs")


def _parts(n, reverse):
  """``mask[i, j]``: whether ``x_j`` enters the ``i``-th sum."""
  i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
  return j >= i if reverse else j <= i


# (dtype, spread, tolerance): a batch whose rows all span less than 60 (600 in float64) takes the
# shifted cumulative sum, else the scan (float64 at 1,000 and float32 at 100, whose middle row is
# narrow: one wide row decides for the batch).
CASES = [("float64", 1.0, 1e-12), ("float64", 1000.0, 1e-12), ("float32", 30.0, 2e-6)]
CASES += [("float32", 100.0, 2e-6)]


@pytest.mark.parametrize("mode", compile_modes())
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dtype,spread,tol", CASES)
def test_cumulative_logsumexp_values_and_gradients(dtype, spread, tol, reverse, mode):
  rng = np.random.default_rng(5)
  x = rng.uniform(-0.5, 0.5, size=(3, 9)) * spread
  x[1] *= 0.01  # a narrow row beside the others
  x = x.astype(dtype)
  weights = rng.uniform(0.5, 1.5, size=(3, 9))
  mask = _parts(9, reverse)[None]
  wide = x.astype(np.float64)[:, None, :]
  top = np.max(np.where(mask, wide, -np.inf), axis=-1, keepdims=True)
  want = top[..., 0] + np.log(np.sum(np.exp(np.where(mask, wide - top, -np.inf)), axis=-1))
  # d/dx_j sum_i w_i lse_i = sum_i w_i exp(x_j - lse_i) over the sums i that x_j enters.
  terms = np.exp(np.where(mask, wide - want[..., None], -np.inf))
  want_grad = np.sum(weights[..., None] * terms, 1)
  fn = compiled(lambda v: backend.cumulative_logsumexp(v, reverse=reverse), mode)
  got = numpy(fn(ops.convert_to_tensor(x)))
  assert got.dtype == np.dtype(dtype)
  np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
  w = ops.convert_to_tensor(weights.astype(dtype))
  _, (grad,) = value_and_grad(lambda v: ops.sum(fn(v) * w), x)
  np.testing.assert_allclose(grad, want_grad, rtol=10 * tol, atol=10 * tol)


@pytest.mark.parametrize("reverse", [False, True])
def test_cumulative_logsumexp_is_finite_at_a_spread_of_a_thousand(reverse):
  x = np.array([[-500.0, 3.0, 500.0, 2.0, -1.0], [0.1, 0.2, 0.3, 0.4, 0.5]])
  parts = [[row[i:] if reverse else row[: i + 1] for i in range(5)] for row in x]
  sums = [[np.logaddexp.reduce(part) for part in row] for row in parts]
  x32 = ops.convert_to_tensor(x.astype(np.float32))
  got = numpy(backend.cumulative_logsumexp(x32, reverse=reverse))
  np.testing.assert_allclose(got, np.array(sums), rtol=1e-6)


@pytest.mark.parametrize("mode", compile_modes())
@pytest.mark.parametrize("reverse", [False, True])
def test_cumulative_logsumexp_is_nan_where_a_sum_takes_in_a_nan(reverse, mode):
  """On every path (TensorFlow's own op drops NaNs)."""
  x = np.array([[0.0, np.nan, 1.0], [0.0, 1.0, 2.0]], np.float32)
  got = numpy(compiled(lambda v: backend.cumulative_logsumexp(v, reverse=reverse), mode)(x))
  np.testing.assert_array_equal(np.isnan(got[0]), [True, True, False] if reverse else [0, 1, 1])
  assert np.isfinite(got[1]).all()


#: Where a draw advances its generator by itself: not under ``jax.jit``, whose state must be
#: handed in (Keras's JAX ``fit`` does; tests/test_tf_ranking.py checks it there).
STATEFUL_MODES = [m for m in compile_modes() if m != "jit"]


@pytest.mark.parametrize("mode", [m for m in STATEFUL_MODES if m != "xla"])
def test_uniform_draws_keras_numbers_and_advances(mode):
  """Outside XLA the numbers are ``keras.random.uniform``'s from a generator of the same seed
  (under XLA TensorFlow draws another stream of the same law: the next test)."""
  ours, theirs = keras_3.random.SeedGenerator(37), keras_3.random.SeedGenerator(37)
  draw = compiled(lambda: backend.uniform((4, 6), ours, "float32"), mode)
  first, second = numpy(draw()), numpy(draw())
  for got in (first, second):
    np.testing.assert_array_equal(got, numpy(keras_3.random.uniform((4, 6), seed=theirs)))
  assert not np.array_equal(first, second)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_uniform_in_every_compile_mode_is_uniform_on_the_unit_interval(dtype):
  """A Kolmogorov-Smirnov distance of 4,000 draws from U[0, 1) below its 0.1 % critical value."""
  for mode in STATEFUL_MODES:
    seed = keras_3.random.SeedGenerator(3)
    draws = np.sort(numpy(compiled(lambda s=seed: backend.uniform((4000,), s, dtype), mode)()))
    assert draws.dtype == np.dtype(dtype) and draws.min() >= 0.0 and draws.max() < 1.0
    grid = np.arange(1, 4001) / 4000
    assert np.max(np.abs(draws - grid)) < 1.95 / np.sqrt(4000), (mode, BACKEND)


@pytest.mark.parametrize("mode", compile_modes())
def test_take_along_axis_matches_numpy_with_its_gradient(mode):
  """The batched gather (indices of the leading shape of ``x``, last axis) and Keras's form for
  the rest (broadcast indices, another axis), against ``np.take_along_axis``; the gradient (which
  adds up where an index repeats) against central differences, exact for this linear map."""
  rng = np.random.default_rng(2)
  x = rng.normal(size=(2, 3, 5))
  cases = [
    (rng.integers(0, 5, size=(2, 3, 4)), -1),
    (rng.integers(0, 5, size=(2, 3, 1)), 2),
    (rng.integers(0, 5, size=(1, 3, 4)), -1),
    (rng.integers(0, 2, size=(1, 3, 5)), 0),
  ]
  for indices, axis in cases:
    fn = compiled(lambda v, i=indices, a=axis: backend.take_along_axis(v, i, axis=a), mode)
    want = np.take_along_axis(x, indices, axis=axis)
    np.testing.assert_array_equal(numpy(fn(ops.convert_to_tensor(x))), want)
    w = ops.convert_to_tensor(rng.normal(size=want.shape))

    def total(v, fn=fn, w=w):
      return ops.sum(fn(v) * w)

    _, (grad,) = value_and_grad(total, x)
    np.testing.assert_allclose(grad, finite_difference_grad(total, x, eps=0.5), atol=1e-12)


@pytest.mark.parametrize("mode", compile_modes())
def test_logsumexp_of_finite_matches_numpy_with_its_gradient(mode):
  """Against numpy's ``logaddexp.reduce`` in float64 (rows spanning 1,000, where an unshifted
  sum overflows), float64 kept; the gradient (the softmax of each row) against central
  differences."""
  rng = np.random.default_rng(4)
  x = rng.normal(size=(2, 3, 4)) * 300.0
  fn = compiled(backend.logsumexp_of_finite, mode)
  got = numpy(fn(ops.convert_to_tensor(x)))
  assert got.dtype == np.float64
  np.testing.assert_allclose(got, np.logaddexp.reduce(x, axis=-1), rtol=1e-14)
  small = rng.normal(size=(2, 3))
  w = ops.convert_to_tensor(rng.normal(size=(2,)))

  def total(v):
    return ops.sum(fn(v) * w)

  _, (grad,) = value_and_grad(total, small)
  np.testing.assert_allclose(grad, finite_difference_grad(total, small, eps=1e-5), atol=1e-8)


@pytest.mark.parametrize("mode", compile_modes())
def test_take_last_and_constant_match_numpy_with_the_gradient(mode):
  """``take_last`` with a 2-D index (repeats among it) against ``np.take``, its gradient (which
  adds up where an index repeats) against central differences; ``constant`` takes the dtype of
  its ``like``."""
  rng = np.random.default_rng(5)
  x = rng.normal(size=(2, 3, 4))
  index = np.array([[0, 3, 3], [1, 1, 2]], np.int32)
  fn = compiled(lambda v: backend.take_last(v, index), mode)
  want = np.take(x, index, axis=-1)
  np.testing.assert_array_equal(numpy(fn(ops.convert_to_tensor(x))), want)
  w = ops.convert_to_tensor(rng.normal(size=want.shape))

  def total(v):
    return ops.sum(fn(v) * w)

  _, (grad,) = value_and_grad(total, x)
  np.testing.assert_allclose(grad, finite_difference_grad(total, x, eps=0.5), atol=1e-12)
  for dtype in ("float32", "float64"):
    like = ops.convert_to_tensor(x.astype(dtype))
    got = backend.constant(np.array([0.1, -1e20]), like)
    assert backend.dtype_name(got) == dtype
    np.testing.assert_array_equal(numpy(got), np.array([0.1, -1e20]).astype(dtype))


@pytest.mark.parametrize("mode", compile_modes())
def test_logaddexp_matches_numpy_with_the_half_gradient_at_ties(mode):
  """Against ``np.logaddexp`` in float64 (far apart, tied, one operand ``-inf``), float64 kept;
  at ``a == b`` each operand's gradient is exactly 1/2; against ``-inf`` the other's is 1."""
  a = np.array([0.3, 700.0, -2.0, 1.5, -np.inf])
  b = np.array([0.3, -700.0, 5.0, 1.5, 4.0])
  got = numpy(compiled(backend.logaddexp, mode)(ops.convert_to_tensor(a), ops.convert_to_tensor(b)))
  assert got.dtype == np.float64
  np.testing.assert_allclose(got, np.logaddexp(a, b), rtol=1e-14)
  _, (grad_a, grad_b) = value_and_grad(lambda u, v: ops.sum(backend.logaddexp(u, v)), a, b)
  np.testing.assert_array_equal(grad_a[[0, 3, 4]], [0.5, 0.5, 0.0])
  np.testing.assert_array_equal(grad_b[[0, 3, 4]], [0.5, 0.5, 1.0])


def _operand(spec, v):
  """``v`` for ``"x"``, its first column for ``"x0"``, else ``spec`` itself."""
  if isinstance(spec, str):
    return v if spec == "x" else v[:, 0]
  return spec


@pytest.mark.parametrize("mode", compile_modes())
def test_where_matches_numpy_and_keras_dtypes_with_its_gradient(mode):
  """``backend.where`` (TensorFlow's ``Select`` where the operands allow) against ``np.where``
  for values, ``keras.ops.where`` for the result's dtype (Keras's promotion of a Python number
  and of two dtypes) and central differences for the gradient (exact: the map is linear)."""
  rng = np.random.default_rng(3)
  x = rng.normal(size=(3, 4))
  same, rows, vector = x > 0, x[:, :1] > 0, x[:, 0] > 0
  cases = [  # (condition, x1, x2) as numpy; "x" marks the differentiated operand
    (same, "x", 0.0),
    (rows, "x", -1.5),
    (rows, 2, "x"),
    (same, "x", np.float64(1.0) * x[::-1]),
    (vector, "x0", 0.5),
    (same, "x", np.zeros((1, 4))),  # an operand Keras broadcasts
  ]
  for condition, a, b in cases:

    def fn(v, c=condition, a=a, b=b):
      return backend.where(ops.convert_to_tensor(c), _operand(a, v), _operand(b, v))

    f = compiled(fn, mode)
    want = np.where(condition, _operand(a, x), _operand(b, x))
    got = f(ops.convert_to_tensor(x))
    np.testing.assert_array_equal(numpy(got), want)
    w = ops.convert_to_tensor(rng.normal(size=want.shape))

    def total(v, f=f, w=w):
      return ops.sum(f(v) * w)

    _, (grad,) = value_and_grad(total, x)
    np.testing.assert_allclose(grad, finite_difference_grad(total, x, eps=0.5), atol=1e-12)
  ints = ops.convert_to_tensor(np.array([[1, 2], [3, 4]], np.int32))
  c = ops.convert_to_tensor(np.array([[True, False], [False, True]]))
  for a, b in [(ints, 0), (ints, 0.5), (ints, ops.cast(ints, "float32")), (0.5, ints)]:
    got, keras_got = backend.where(c, a, b), ops.where(c, a, b)
    assert backend.dtype_name(got) == backend.dtype_name(keras_got), (a, b)
    np.testing.assert_array_equal(numpy(got), numpy(keras_got))


@pytest.mark.tensorflow_only
def test_where_with_an_unknown_batch_size_in_a_tf_function():
  """TensorFlow: a scalar filled to a batch dimension known only at run time, and a condition
  ``[B, 1]`` picking rows, as Keras traces a loss in ``fit`` (batch ``None``)."""
  import tensorflow as tf  # noqa: PLC0415

  @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
  def fn(v):
    return backend.where(v[:, :1] > 0, v, 0.0), backend.where(v > 0, 1.0, v)

  x = np.array([[1.0, -2.0, 3.0], [-1.0, 2.0, 3.0]], np.float32)
  rows, same = fn(x)
  np.testing.assert_array_equal(rows.numpy(), [[1.0, -2.0, 3.0], [0.0, 0.0, 0.0]])
  np.testing.assert_array_equal(same.numpy(), np.where(x > 0, 1.0, x))
  ops_run = {op.type for op in fn.get_concrete_function().graph.get_operations()}
  assert "Select" in ops_run and "SelectV2" not in ops_run, ops_run


def test_where_on_keras_symbolic_tensors_is_keras_own():
  """A functional model's symbolic inputs go to ``keras.ops.where`` (on every backend)."""
  x = keras_3.Input((3,))
  out = backend.where(x > 0, x, 0.0)
  assert isinstance(out, keras_3.KerasTensor) and tuple(out.shape) == (None, 3)
  model = keras_3.Model(x, out)
  np.testing.assert_array_equal(
    numpy(model(ops.convert_to_tensor(np.array([[1.0, -1.0, 2.0]], np.float32)))),
    [[1.0, 0.0, 2.0]],
  )


@pytest.mark.parametrize("mode", compile_modes())
def test_permute_rows_and_its_gradient_the_inverse_permutation(mode):
  """Values: NumPy's indexing; gradient: finite differences and the inverse permutation."""
  rows = np.random.default_rng(7).normal(size=(5, 3))
  weights = ops.convert_to_tensor(np.random.default_rng(8).normal(size=(5, 3)))
  index = np.array([3, 0, 4, 1, 2])

  def fn(r):
    return ops.sum(backend.permute_rows(r, index) * weights)

  permuted = compiled(lambda r: backend.permute_rows(r, index), mode)(ops.convert_to_tensor(rows))
  np.testing.assert_array_equal(numpy(permuted), rows[index])
  _, (grad,) = value_and_grad(compiled(fn, mode), rows)
  np.testing.assert_allclose(grad, finite_difference_grad(fn, rows, 1e-6), atol=1e-6)
  np.testing.assert_allclose(grad, numpy(weights)[np.argsort(index)], atol=1e-12)


@pytest.mark.parametrize("mode", compile_modes())
@pytest.mark.parametrize("sizes", [[2, 2, 1], [1, 1, 0], [0, 3, 0]])
def test_split_rows_matches_numpy_with_its_gradient(sizes, mode):
  """Blocks: NumPy's slices of consecutive rows; gradient: finite differences."""
  rows = np.random.default_rng(9).normal(size=(sum(sizes), 3))
  weights = [np.random.default_rng(10 + i).normal(size=(size, 3)) for i, size in enumerate(sizes)]

  def fn(r):
    blocks = backend.split_rows(r, sizes)
    return sum(ops.sum(b * ops.convert_to_tensor(w)) for b, w in zip(blocks, weights))

  blocks = compiled(lambda r: backend.split_rows(r, sizes), mode)(ops.convert_to_tensor(rows))
  starts = np.cumsum([0, *sizes])
  for block, start, stop in zip(blocks, starts[:-1], starts[1:]):
    np.testing.assert_array_equal(numpy(block), rows[start:stop])
  _, (grad,) = value_and_grad(compiled(fn, mode), rows)
  np.testing.assert_allclose(grad, finite_difference_grad(fn, rows, 1e-6), atol=1e-6)


@pytest.mark.parametrize("mode", compile_modes())
def test_top_k_takes_ties_by_the_lower_index(mode):
  """Against NumPy's lexicographic sort (by value descending, then by index): ties at and across
  the k-th place, infinities, long rows (1,000 entries of 4 values), distinct values, k = n."""
  rows = np.array(
    [
      [1.0, 3.0, 3.0, 2.0, 3.0, 0.0, 3.0],
      [-np.inf, 1.0, np.inf, np.inf, -np.inf, 1.0, 1.0],
      [-np.inf] * 7,
    ]
  )
  rng = np.random.default_rng(11)
  long = rng.integers(0, 4, size=(3, 1000)).astype(np.float64)
  # Distinct values (PyTorch's topk answers alone), and the same rows but one with a tie at the
  # third place (every row then takes the tie rule).
  distinct = np.stack([rng.permutation(7) for _ in range(3)]).astype(np.float64)
  tied = distinct.copy()
  tied[1, np.argsort(-tied[1])[3]] = np.sort(tied[1])[-3]
  for x in (rows, long, distinct, tied):
    order = np.lexsort((np.broadcast_to(np.arange(x.shape[1]), x.shape), -x), axis=-1)
    for k in (1, 3, 6, 7):
      top = compiled(lambda v, k=k: backend.top_k(v, k), mode)(ops.convert_to_tensor(x))
      np.testing.assert_array_equal(numpy(top[1]), order[:, :k])
      np.testing.assert_array_equal(numpy(top[0]), np.take_along_axis(x, order[:, :k], -1))


def test_count_nonzero_signs():
  """numpy's count of non-zero signs in every compile mode (TensorFlow's graph: the rounded
  square of a Euclidean norm), up to the longest list that takes the norm, all non-zero."""
  rng = np.random.default_rng(5)
  signs = rng.integers(-1, 2, (7, 4099)).astype(np.float32)
  longest = np.where(rng.random((1, 2**21)) < 0.5, -1.0, 1.0).astype(np.float32)
  for mode in compile_modes():
    count = compiled(backend.count_nonzero_signs, mode)
    np.testing.assert_array_equal(numpy(count(signs)), np.abs(signs).sum(-1))
    np.testing.assert_array_equal(numpy(count(longest)), [2.0**21])
