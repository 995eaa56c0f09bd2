"""Differentiable sorting networks: diffsort / difftopk fixtures, closed forms, limits, modes."""

import math

import backend_testing as bt
import numpy as np
import pytest
from _topk_reference import case_id, cases, finite_difference, value_and_grad
from scipy import special

from tfrank4class import backend, ranking
from tfrank4class.compat import ops
from tfrank4class.ranking import sorting_networks

SORT_CASES = cases("sort")
TOPK_CASES = cases("topk")
#: float64 inputs stay float64 on every backend (JAX: ``jax_enable_x64``, on for each test).
pytestmark = pytest.mark.usefixtures("float64_inputs")
#: float64 on both sides (the observed differences are below 1e-13).
ATOL = 1e-10
#: Sums and exact limits: float64 resolution.
EXACT = 1e-12
#: Finite differences: step and tolerance.
EPS, FD_TOL = 1e-6, 1e-6


@pytest.mark.parametrize("config,arrays", SORT_CASES, ids=[case_id(c) for c, _ in SORT_CASES])
def test_sort_matches_diffsort(config, arrays):
  (values, perm), grad = value_and_grad(
    lambda x: ranking.sorting_network_sort(
      x, config["network"], config["distribution"], config["steepness"], config["art_lambda"]
    ),
    arrays["x"],
    [arrays["cot0"], arrays["cot1"]],
  )
  np.testing.assert_allclose(values, arrays["out0"], atol=ATOL)
  np.testing.assert_allclose(perm, arrays["out1"], atol=ATOL)
  np.testing.assert_allclose(grad, arrays["grad"], atol=ATOL)


@pytest.mark.parametrize("config,arrays", TOPK_CASES, ids=[case_id(c) for c, _ in TOPK_CASES])
def test_topk_matches_difftopk(config, arrays):
  (top,), grad = value_and_grad(
    lambda x: ranking.sorting_network_topk(
      x,
      config["k"],
      config["network"],
      config["distribution"],
      config["steepness"],
      config["art_lambda"],
    ),
    arrays["x"],
    [arrays["cot0"]],
  )
  np.testing.assert_allclose(top, arrays["out0"], atol=ATOL)
  np.testing.assert_allclose(grad, arrays["grad"], atol=ATOL)


def _sigmoid(distribution, d, beta, art_lambda=0.25):
  """The sigmoids of the papers, written independently in numpy / scipy."""
  v = beta * d
  if distribution == "logistic":
    return special.expit(v)
  if distribution == "logistic_phi":
    return special.expit(v / (abs(d) + 1e-10) ** art_lambda)
  if distribution == "gaussian":
    return special.ndtr(v)
  if distribution == "reciprocal":
    return 0.5 * (v / (2 + abs(v)) + 1)
  if distribution == "cauchy":
    return np.arctan(v) / math.pi + 0.5
  if abs(v) <= 0.25:  # optimal
    return v + 0.5
  return 1 - 1 / (16 * v) if v > 0 else -1 / (16 * v)


@pytest.mark.parametrize("distribution", sorting_networks.DISTRIBUTIONS)
@pytest.mark.parametrize("network", ["odd_even", "bitonic"])
def test_two_items_closed_form(network, distribution):
  a, b, beta = 0.7, 0.3, 2.0
  alpha = _sigmoid(distribution, b - a, beta)
  values, perm = bt.numpy(
    ranking.sorting_network_sort(np.array([[a, b]]), network, distribution, steepness=beta)
  )
  np.testing.assert_allclose(
    values[0], [alpha * a + (1 - alpha) * b, (1 - alpha) * a + alpha * b], rtol=max(EXACT, 1e-7)
  )
  np.testing.assert_allclose(perm[0], [[alpha, 1 - alpha], [1 - alpha, alpha]], atol=EXACT)


def test_gaussian_swap_probability_is_accurate_in_float32_lower_tail():
  """Phi(v) in float32 against scipy's float64 ``ndtr`` for v in [-5, 0]: as erfc(-v / sqrt 2) / 2
  it keeps its relative precision; (1 + erf(v / sqrt 2)) / 2 cancels (erf -> -1) and was off by
  up to 32% of the value on this grid (1.2e-7 absolute, where Phi(-5) is 2.9e-7)."""
  v = np.linspace(-5.0, 0.0, 5001, dtype=np.float32)
  alpha = bt.numpy(
    sorting_networks.swap_probability(ops.convert_to_tensor(v), "gaussian", steepness=1.0)
  )
  expected = special.ndtr(v.astype(np.float64))
  assert alpha.dtype == np.float32
  np.testing.assert_allclose(alpha, expected, rtol=1e-5, atol=0)


@pytest.mark.parametrize("network", ["odd_even", "bitonic"])
def test_permutation_is_doubly_stochastic(network):
  x = np.random.default_rng(0).normal(size=(4, 11))
  perm = bt.numpy(ranking.sorting_network_sort(x, network, "cauchy", steepness=1.0)[1])
  np.testing.assert_allclose(perm.sum(1), 1.0, atol=EXACT)
  np.testing.assert_allclose(perm.sum(2), 1.0, atol=EXACT)
  assert perm.min() >= 0


@pytest.mark.parametrize("n", [2, 5, 8, 13])
@pytest.mark.parametrize("network", ["odd_even", "bitonic"])
def test_large_steepness_is_the_hard_sort(network, n):
  x = np.random.default_rng(n).normal(size=(3, n))
  values, perm = bt.numpy(ranking.sorting_network_sort(x, network, "logistic", steepness=1e6))
  np.testing.assert_allclose(values, np.sort(x, -1), atol=EXACT * 1000)
  np.testing.assert_array_equal(perm.argmax(1), np.argsort(x, -1))
  top = bt.numpy(ranking.sorting_network_topk(x, min(3, n), network, "logistic", steepness=1e6))
  np.testing.assert_array_equal(top.argmax(1), np.argsort(x, -1)[:, -min(3, n) :])


@pytest.mark.parametrize("n,k", [(10, 1), (10, 3), (33, 5), (7, 7)])
def test_splitter_selection_selects_the_top_k(n, k):
  x = np.random.default_rng(n + k).normal(size=(4, n))
  top = bt.numpy(
    ranking.sorting_network_topk(x, k, "splitter_selection", "logistic", steepness=1e6)
  )
  np.testing.assert_array_equal(top.argmax(1), np.argsort(x, -1)[:, -k:])
  np.testing.assert_allclose(top.sum(1), 1.0, atol=EXACT)


@pytest.mark.parametrize("network", ["odd_even", "bitonic"])
def test_topk_form_is_the_last_columns_of_the_permutation(network):
  x = np.random.default_rng(1).normal(size=(2, 9))
  perm = bt.numpy(ranking.sorting_network_sort(x, network, "optimal", steepness=3.0)[1])
  top = bt.numpy(ranking.sorting_network_topk(x, 4, network, "optimal", steepness=3.0))
  np.testing.assert_allclose(top, perm[:, :, -4:], atol=EXACT)


def test_comparator_counts():
  assert [len(layer.a) for layer in ranking.comparator_network("bitonic", 8)] == [4] * 6
  assert len(ranking.comparator_network("odd_even", 6)) == 6
  assert sum(len(layer.a) for layer in ranking.comparator_network("odd_even", 6)) == 15


@pytest.mark.parametrize("distribution", ["reciprocal", "cauchy", "optimal"])
def test_monotonic_sigmoids_give_a_monotonic_sort(distribution):
  """ICLR 2022 (Sec. 4): with these sigmoids every relaxed sorted value is non-decreasing in
  every input: raising one input never lowers a sorted value."""
  n, step = 6, 1e-3
  x = np.random.default_rng(2).normal(size=(1, n))
  raised = np.concatenate([x, x + step * np.eye(n)])  # row 0: x; row 1 + i: x with x_i raised
  values = bt.numpy(ranking.sorting_network_sort(raised, "odd_even", distribution, 4.0)[0])
  assert (values[1:] - values[:1]).min() >= -EXACT


def test_logistic_sort_is_not_monotonic():
  """The logistic sigmoid is not monotonic (ICLR 2022, Sec. 4): a counterexample."""
  n, step = 6, 1e-3
  x = np.random.default_rng(2).normal(size=(1, n))
  raised = np.concatenate([x, x + step * np.eye(n)])
  values = bt.numpy(ranking.sorting_network_sort(raised, "odd_even", "logistic", 4.0)[0])
  assert (values[1:] - values[:1]).min() < -1e-5


@pytest.mark.parametrize("distribution", sorting_networks.DISTRIBUTIONS)
@pytest.mark.parametrize("network", ["odd_even", "bitonic"])
def test_gradient_matches_finite_differences(network, distribution):
  rng = np.random.default_rng(3)
  x = rng.normal(size=(1, 5))
  cot = [rng.normal(size=(1, 5)), rng.normal(size=(1, 5, 5))]

  def fn(v):
    return ranking.sorting_network_sort(v, network, distribution, steepness=1.5)

  _, grad = value_and_grad(fn, x, cot)
  numeric = finite_difference(lambda v: tuple(bt.numpy(fn(v))), x, cot, EPS)
  np.testing.assert_allclose(grad, numeric, atol=FD_TOL)


@pytest.mark.parametrize("mode", bt.compile_modes())
def test_modes_agree(mode):
  x = np.random.default_rng(4).normal(size=(3, 6)).astype(np.float32)

  def fn(v):
    return ranking.sorting_network_sort(v, "bitonic", "logistic_phi", 2.0), (
      ranking.sorting_network_topk(v, 3, "splitter_selection", "cauchy", 2.0)
    )

  (want_values, want_perm), want_top = bt.numpy(fn(x))
  (values, perm), top = bt.numpy(bt.compiled(fn, mode)(ops.convert_to_tensor(x)))
  np.testing.assert_allclose(values, want_values, atol=1e-5)
  np.testing.assert_allclose(perm, want_perm, atol=1e-5)
  np.testing.assert_allclose(top, want_top, atol=1e-5)


@pytest.mark.tensorflow_only
def test_mirrored_strategy(mirrored_strategy):
  import tensorflow as tf  # noqa: PLC0415

  x = np.random.default_rng(5).normal(size=(4, 6)).astype(np.float32)
  batch = next(
    iter(mirrored_strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensors(x)))
  )

  @tf.function
  def step(v):
    with tf.GradientTape() as tape:
      tape.watch(v)
      top = ranking.sorting_network_topk(v, 2, "odd_even", "cauchy", 3.0)
      total = tf.reduce_sum(top[:, :, -1] * v)
    return top, tape.gradient(total, v)

  top, grad = mirrored_strategy.run(step, (batch,))
  cat = lambda t: np.concatenate(
    [p.numpy() for p in mirrored_strategy.experimental_local_results(t)]
  )
  (ref_top,), ref_grad = value_and_grad(
    lambda v: ranking.sorting_network_topk(v, 2, "odd_even", "cauchy", 3.0),
    x,
    [np.zeros((4, 6, 2))],
  )
  np.testing.assert_allclose(cat(top), ref_top, atol=1e-6)
  assert np.all(np.isfinite(cat(grad)))


def test_half_precision_is_computed_in_float32():
  x = np.random.default_rng(6).normal(size=(2, 5))
  values, perm = ranking.sorting_network_sort(ops.convert_to_tensor(x, "float16"), steepness=2.0)
  assert backend.dtype_name(values) == backend.dtype_name(perm) == "float32"
  ref_values, _ = ranking.sorting_network_sort(
    x.astype(np.float16).astype(np.float32), steepness=2.0
  )
  np.testing.assert_allclose(bt.numpy(values), bt.numpy(ref_values))


def test_bad_arguments():
  x = np.zeros((2, 4), np.float32)
  with pytest.raises(ValueError, match="`network` must be one of .*got 'odd'"):
    ranking.sorting_network_sort(x, network="odd")
  with pytest.raises(ValueError, match="`network` must be one of \\['bitonic', 'odd_even'\\]"):
    ranking.sorting_network_sort(x, network="splitter_selection")
  with pytest.raises(ValueError, match="`distribution` must be one of .*got 'sigmoid'"):
    ranking.sorting_network_sort(x, distribution="sigmoid")
  with pytest.raises(ValueError, match="`steepness` must be a finite number > 0.0, got 0"):
    ranking.sorting_network_sort(x, steepness=0)
  with pytest.raises(ValueError, match="`art_lambda` must be a finite number >= 0.0, got -1"):
    ranking.sorting_network_sort(x, art_lambda=-1)
  with pytest.raises(ValueError, match="`k` must be an integer in \\[1, n=4\\], got 5"):
    ranking.sorting_network_topk(x, 5)
  with pytest.raises(ValueError, match="`k` must be an integer in \\[1, n=4\\], got 0"):
    ranking.sorting_network_topk(x, 0, network="splitter_selection")
  with pytest.raises(ValueError, match="shape \\[batch_size, list_size\\]"):
    ranking.sorting_network_sort(np.zeros(4))
  with pytest.raises(ValueError, match="`scores` must be finite"):
    ranking.sorting_network_sort([[1.0, float("nan")]])
  with pytest.raises(ValueError, match="`k` is for network='splitter_selection' only"):
    ranking.comparator_network("bitonic", 4, 2)


@pytest.mark.tensorflow_only
def test_unknown_list_size_is_refused_when_traced():
  import tensorflow as tf  # noqa: PLC0415

  with pytest.raises(ValueError, match="known when traced"):
    tf.function(ranking.sorting_network_sort).get_concrete_function(
      tf.TensorSpec([2, None], tf.float32)
    )


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("network", ["bitonic", "splitter_selection"])
def test_topk_form_never_builds_an_n_by_n_tensor(network):
  """The top-k form carries [B, n, k] (forward and backward): no tensor of the traced graph has
  two axes of size n."""
  import tensorflow as tf  # noqa: PLC0415

  n = 64

  @tf.function
  def forward_backward(x):
    with tf.GradientTape() as tape:
      tape.watch(x)
      top = ranking.sorting_network_topk(x, 3, network, "cauchy", 2.0)
    return tape.gradient(tf.reduce_sum(top * top), x)

  graph = forward_backward.get_concrete_function(tf.TensorSpec([2, n], tf.float32)).graph
  shapes = [out.shape for op in graph.get_operations() for out in op.outputs]
  assert shapes and not [s for s in shapes if s.rank and list(s).count(n) >= 2]
