"""Tests of tfrank4class.ranking.permutahedron: the authors' NumPy code (committed fixtures of
``tools/soft_sort_reference.py``), exact limits against scipy, closed forms, finite differences,
compile modes and bad input, on every backend in float64 (JAX: with ``jax_enable_x64``)."""

import pathlib

import backend_testing as bt
import numpy as np
import pytest
import scipy.stats

from tfrank4class.compat import ops
from tfrank4class.ranking.permutahedron import isotonic_regression, soft_rank, soft_sort

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "soft_sort.npz"
DATA = np.load(FIXTURES)
CASES = sorted({key.split("_")[0] for key in DATA.files}, key=lambda name: int(name[4:]))
OPS = {"rank": soft_rank, "sort": soft_sort}
#: float64 inputs stay float64 on every backend (JAX: ``jax_enable_x64``, on for each test).
pytestmark = pytest.mark.usefixtures("float64_inputs")
#: The authors' float64 values to 1e-5.
ATOL = 1e-5


def run(op, scores, params, cotangent):
  n, eps, kl, descending = params
  cotangent = ops.convert_to_tensor(cotangent)

  def fn(x):
    return OPS[op](x, eps, "kl" if kl else "l2", "DESCENDING" if descending else "ASCENDING")

  _, (grad,) = bt.value_and_grad(lambda x: ops.sum(fn(x) * cotangent), scores)
  return bt.numpy(fn(scores)), grad


@pytest.mark.parametrize("op", ["rank", "sort"])
@pytest.mark.parametrize("case", CASES)
def test_agrees_with_the_authors_code(case, op):
  scores, params = DATA[f"{case}_scores"], DATA[f"{case}_params"]
  values, vjp = run(op, scores, params, DATA[f"{case}_cotangent"])
  np.testing.assert_allclose(values, DATA[f"{case}_{op}"], atol=ATOL, rtol=0)
  ties = any(len(np.unique(row)) < len(row) for row in scores)
  if op == "sort" and ties:
    return  # not differentiable at ties; the reference's np.argsort orders ties arbitrarily
  kl = bool(params[2])
  if op == "sort" and kl:
    # The reference's SoftSort.vjp weighs KL blocks by the softmax of rho / eps instead of the
    # sorted values; compare with finite differences of its values (lists up to 100 items).
    if f"{case}_sort_numeric_vjp" in DATA.files:
      np.testing.assert_allclose(vjp, DATA[f"{case}_sort_numeric_vjp"], atol=ATOL, rtol=0)
    return
  np.testing.assert_allclose(vjp, DATA[f"{case}_{op}_vjp"], atol=ATOL, rtol=0)


def test_tiny_regularization_gives_exact_ranks_and_sorted_values():
  rng = np.random.default_rng(0)
  x = np.array([rng.permutation(50) * 0.01 for _ in range(4)])  # gaps of 10 * eps
  for regularization in ("l2", "kl"):
    tol = 1e-6
    ranks = bt.numpy(soft_rank(x, 1e-3, regularization))
    expected = np.array([scipy.stats.rankdata(-row) for row in x])  # 1 = highest
    np.testing.assert_allclose(ranks, expected, atol=tol)
    ascending = bt.numpy(soft_rank(x, 1e-3, regularization, "ASCENDING"))
    np.testing.assert_allclose(ascending, [scipy.stats.rankdata(row) for row in x], atol=tol)
    np.testing.assert_allclose(bt.numpy(soft_sort(x, 1e-3, regularization)), -np.sort(-x), atol=tol)
    np.testing.assert_allclose(
      bt.numpy(soft_sort(x, 1e-3, regularization, "ASCENDING")), np.sort(x), atol=tol
    )


def test_large_regularization_gives_the_mean():
  x = np.array([[3.0, -1.0, 0.5, 2.0]])
  np.testing.assert_allclose(bt.numpy(soft_rank(x, 1e4)), [[2.5] * 4], atol=1e-3)
  np.testing.assert_allclose(bt.numpy(soft_sort(x, 1e4)), [[x.mean()] * 4], atol=1e-3)


def test_two_items_closed_form():
  """n = 2, l2, by hand: the isotonic problem of two items pools them or leaves them apart.

  Soft rank (ascending) of ``a`` beside ``b``: ``1.5 + clip((a - b) / (2 eps), -1/2, 1/2)``.
  Soft sort (descending): ``mean +- min(|a - b|, 1 / eps) / 2``.
  """
  for a, b, eps in [(0.3, 0.1, 1.0), (0.3, 0.1, 0.05), (1.0, 3.0, 4.0), (1.0, 3.0, 0.2)]:
    r = 1.5 + np.clip((a - b) / (2 * eps), -0.5, 0.5)
    pair = np.array([[a, b]])
    got = bt.numpy(soft_rank(pair, eps, direction="ASCENDING"))
    np.testing.assert_allclose(got, [[r, 3 - r]], rtol=1e-6)
    half = min(abs(a - b), 1 / eps) / 2
    expected = [[(a + b) / 2 + half, (a + b) / 2 - half]]
    np.testing.assert_allclose(bt.numpy(soft_sort(pair, eps)), expected, rtol=1e-6)


def test_isotonic_regression_against_a_direct_pav():
  rng = np.random.default_rng(1)
  y = rng.normal(size=(5, 40)).cumsum(axis=1)  # rising: many violations

  def pav(values):  # decreasing isotonic regression, blocks as (sum, count)
    blocks = []
    for value in values:
      blocks.append([value, 1])
      while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] <= blocks[-1][0] / blocks[-1][1]:
        total, count = blocks.pop()
        blocks[-1][0] += total
        blocks[-1][1] += count
    return np.concatenate([[total / count] * count for total, count in blocks])

  got = bt.numpy(isotonic_regression(y, np.zeros_like(y)))
  np.testing.assert_allclose(got, [pav(row) for row in y], atol=1e-12)


def test_finite_differences():
  """float64 on every backend."""
  rng = np.random.default_rng(2)
  x = rng.normal(size=(2, 12))
  v = ops.convert_to_tensor(rng.normal(size=(2, 12)))
  eps, tol = 1e-6, 1e-6
  for op in (soft_rank, soft_sort):
    for regularization in ("l2", "kl"):

      def f(a, op=op, r=regularization):
        return ops.sum(op(a, 0.7, r) * v)

      _, (grad,) = bt.value_and_grad(f, x)
      np.testing.assert_allclose(grad, bt.finite_difference_grad(f, x, eps), atol=tol)


@pytest.mark.parametrize("mode", bt.compile_modes())
def test_compile_modes(mode):
  x = np.random.default_rng(3).normal(size=(3, 20))
  tol = 1e-5

  def value(x):
    r = soft_rank(x, 0.1, "kl")
    s = soft_sort(x, 0.5)
    return ops.sum(r * r) + ops.sum(s * s)

  def both(x):
    return soft_rank(x, 0.1, "kl"), soft_sort(x, 0.5)

  eager_value, (eager_grad,) = bt.value_and_grad(value, x)
  traced_value, (traced_grad,) = bt.value_and_grad(bt.compiled(value, mode), x)
  np.testing.assert_allclose(traced_value, eager_value, rtol=1e-5)
  np.testing.assert_allclose(traced_grad, eager_grad, rtol=tol, atol=tol)
  for a, b in zip(bt.numpy(both(x)), bt.numpy(bt.compiled(both, mode)(ops.convert_to_tensor(x)))):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.tensorflow_only
def test_unknown_list_length_in_a_function():
  import tensorflow as tf  # noqa: PLC0415

  f = tf.function(
    lambda x: soft_rank(x, 1e-3), input_signature=[tf.TensorSpec([None, None], tf.float32)]
  )
  np.testing.assert_allclose(f(tf.constant([[0.1, 0.3, 0.2]])).numpy(), [[3.0, 1.0, 2.0]])


@pytest.mark.tensorflow_only
def test_mirrored_strategy(mirrored_strategy):
  import tensorflow as tf  # noqa: PLC0415

  x = tf.constant([np.random.default_rng(i).permutation(6) * 0.1 for i in range(4)], tf.float32)

  @tf.function
  def step(x):
    return mirrored_strategy.run(lambda v: soft_rank(v, 0.01), args=(x,))

  dataset = tf.data.Dataset.from_tensor_slices(x).batch(4)
  for batch in mirrored_strategy.experimental_distribute_dataset(dataset):
    parts = mirrored_strategy.experimental_local_results(step(batch))
  got = np.concatenate([p.numpy() for p in parts])
  np.testing.assert_allclose(got, [scipy.stats.rankdata(-row) for row in x.numpy()], atol=1e-5)


def test_bad_arguments():
  with pytest.raises(ValueError, match=r"`regularization_strength` must be a finite number > 0"):
    soft_rank([[1.0, 2.0]], 0.0)
  with pytest.raises(ValueError, match=r"`regularization` must be one of \['kl', 'l2'\], got 'l1'"):
    soft_sort([[1.0, 2.0]], regularization="l1")
  with pytest.raises(ValueError, match=r"`direction` must be one of .*got 'up'"):
    soft_rank([[1.0, 2.0]], direction="up")
  with pytest.raises(ValueError, match="`scores` must be finite"):
    soft_rank([[1.0, np.nan]])
  with pytest.raises(ValueError, match=r"shape \[batch_size, list_size\]"):
    soft_sort([1.0, 2.0])
