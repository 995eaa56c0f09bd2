"""Tests of tfrank4class.losses.topk.smooth_svm: the authors' PyTorch code (committed fixtures of
``tools/smooth_topk_reference.py``), brute force over all k-subsets, closed forms, finite
differences, compiled modes, Keras integration and bad input, on every backend (graph structure
and strategies: TensorFlow only)."""

import decimal
import itertools
import pathlib

import backend_testing as bt
import numpy as np
import pytest
from scipy.special import logsumexp

from tfrank4class import losses
from tfrank4class.compat import keras, ops
from tfrank4class.losses.topk import smooth_svm
from tfrank4class.losses.topk.smooth_svm import SmoothTopKSVMLoss, smooth_topk_svm_loss

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "smooth_topk_svm.npz"


#: float64 inputs stay float64 on every backend (JAX: ``jax_enable_x64``, on for each test).
pytestmark = pytest.mark.usefixtures("float64_inputs")


def brute_force(s, y, k, tau, alpha):
  """L_{k,tau} by its definition (Sec. 2.2): log-sum-exp over every k-subset of classes."""
  every, with_true = [], []
  for subset in itertools.combinations(range(len(s)), k):
    mean = sum(s[j] for j in subset) / k
    every.append((alpha * (y not in subset) + mean) / tau)
    if y in subset:
      with_true.append(mean / tau)
  return tau * (logsumexp(every) - logsumexp(with_true))


def hard(s, y, k, alpha):
  rivals = np.sort(np.delete(s, y))[::-1]
  return max(alpha + (rivals[k - 1] - s[y]) / k, 0.0)


def loss_and_grad(scores, labels, weights, **kwargs):
  """The losses and the gradient of their sum weighted by ``weights``, as numpy (JAX: jitted)."""
  fn = bt.quickest(lambda s: smooth_topk_svm_loss(s, labels, **kwargs))
  _, (grad,) = bt.value_and_grad(lambda s: ops.sum(fn(s) * ops.array(weights)), scores)
  return bt.numpy(fn(scores)), grad


def fixture_cases():
  data = np.load(FIXTURES)
  names = sorted({key.split("_")[0] for key in data.files})
  return [
    (name, {key.split("_", 1)[1]: data[key] for key in data.files if key.startswith(name + "_")})
    for name in names
  ]


@pytest.mark.parametrize(
  "name,case", fixture_cases(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_agrees_with_the_authors_code(name, case):
  _, k, tau, alpha = case["params"]
  loss, grad = loss_and_grad(
    case["scores"], case["labels"], case["weights"], k=int(k), tau=tau, alpha=alpha
  )
  np.testing.assert_allclose(loss, case["loss"], atol=1e-5, rtol=0)
  np.testing.assert_allclose(grad, case["grad"], atol=1e-5, rtol=0)


def test_float32_at_1000_classes_and_small_tau_agrees_with_the_reference():
  case = dict(fixture_cases())["case8"]  # C = 1000, k = 5, tau = 0.01
  loss, grad = loss_and_grad(
    case["scores"].astype(np.float32),
    case["labels"],
    case["weights"].astype(np.float32),
    k=5,
    tau=0.01,
    alpha=1.0,
  )
  np.testing.assert_allclose(loss, case["loss"], atol=1e-4, rtol=1e-5)
  np.testing.assert_allclose(grad, case["grad"], atol=1e-4)


@pytest.mark.parametrize(
  "c,k,tau,alpha", [(6, 1, 1.0, 1.0), (7, 3, 0.5, 1.0), (8, 5, 0.1, 0.5), (9, 2, 2.0, 0.0)]
)
def test_brute_force_over_subsets(c, k, tau, alpha):
  rng = np.random.default_rng(c)
  s, y = rng.normal(size=(3, c)), rng.integers(0, c, 3)
  expected = [brute_force(s[i], y[i], k, tau, alpha) for i in range(3)]
  np.testing.assert_allclose(
    bt.numpy(smooth_topk_svm_loss(s, y, k=k, tau=tau, alpha=alpha)), expected, atol=1e-12
  )


def test_float64_beyond_the_softplus_threshold_of_pytorch_against_40_digits():
  """k = 1, alpha = 0, two classes: ``L = softplus(s_1 - s_0)``, ``dL/ds_1 = sigmoid(s_1 - s_0)``
  at margins above 20, where PyTorch's own softplus returns the margin itself (off by 2e-9)."""
  decimal.getcontext().prec = 40
  margins = [20.1, 25.0, 33.0, 39.5, 45.0]
  s = np.array([[0.0, m] for m in margins])
  exact = [(1 + decimal.Decimal(m).exp()).ln() for m in margins]
  slope = [1 / (1 + (-decimal.Decimal(m)).exp()) for m in margins]
  loss, grad = bt.value_and_grad(
    lambda v: ops.sum(smooth_topk_svm_loss(v, [0] * len(margins), k=1, tau=1.0, alpha=0.0)), s
  )
  values = bt.numpy(smooth_topk_svm_loss(s, [0] * len(margins), k=1, tau=1.0, alpha=0.0))
  np.testing.assert_allclose(values, [float(v) for v in exact], rtol=1e-15, atol=0)
  np.testing.assert_allclose(grad[0][:, 1], [float(v) for v in slope], rtol=1e-14, atol=0)
  np.testing.assert_allclose(bt.numpy(loss), float(sum(exact)), rtol=1e-15)


def decimal_loss(s, y, k, tau, alpha):
  """``L_{k,tau}`` of the decimals ``s`` in 40 digits: ``e_j`` of the rivals' ``exp(s / (k tau))``
  by the recursion ``e_j += v e_{j-1}`` over the classes (Sec. 3), then the closed form."""
  tau, alpha = decimal.Decimal(repr(tau)), decimal.Decimal(repr(alpha))
  x = [v / (k * tau) for v in s]
  e = [decimal.Decimal(1)] + [decimal.Decimal(0)] * k
  for i, value in enumerate(x):
    if i != y:
      v = value.exp()
      for j in range(k, 0, -1):
        e[j] += v * e[j - 1]
  margin = e[k].ln() - e[k - 1].ln() + alpha / tau - x[y]
  return tau * (1 + margin.exp()).ln()


def decimal_loss_and_grad(s, y, k, tau, alpha):
  """The losses of the rows of ``s`` and their gradients (central differences of
  :func:`decimal_loss` with step ``1e-15``: exact to about ``1e-25``), as float64."""
  decimal.getcontext().prec = 40
  step = decimal.Decimal("1e-15")
  losses, grads = [], np.zeros(s.shape)
  for row in range(len(s)):
    base = [decimal.Decimal(float(v)) for v in s[row]]
    losses.append(float(decimal_loss(base, y[row], k, tau, alpha)))
    for i in range(s.shape[1]):
      up, down = list(base), list(base)
      up[i], down[i] = base[i] + step, base[i] - step
      difference = decimal_loss(up, y[row], k, tau, alpha) - decimal_loss(
        down, y[row], k, tau, alpha
      )
      grads[row, i] = float(difference / (2 * step))
  return np.array(losses), grads


def spread_rows(k, spread, tau, dtype):
  """Scores ``[4, 24]`` spanning ``spread`` (in units of ``tau``) and their true classes: rivals
  far above the k-th, far below it, tied with it, the true class above, below and amid them."""
  rng = np.random.default_rng(k)
  s = rng.uniform(-1.0, 1.0, size=(4, 24)) * spread * tau
  s[1, : k + 3] = 0.25 * spread * tau  # ties at the k-th rival
  s[2, :] = np.round(s[2, :] / (spread * tau) * 3) * spread * tau / 3  # four levels, many ties
  s[3, 1:k] = spread * tau  # k - 1 rivals far above the rest
  return s.astype(dtype), np.array([0, 2, 23, 5])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("k", [1, 2, 5, 10])
@pytest.mark.parametrize("spread", [1.0, 1e3, 1e6])
def test_any_spread_against_40_digits(dtype, k, spread):
  """Rows whose scores span ``spread`` (in units of ``tau``): rivals far above the k-th, far
  below it, tied with it, the true class above, below and amid them, agree with 40-digit
  decimals: values and gradients to 1e-5 (relative and absolute) in float32, 1e-10 in float64."""
  decimal.getcontext().Emax = 10**8  # exp(x) of x up to 2e6
  tau, alpha = 0.5, 1.0
  s, y = spread_rows(k, spread, tau, dtype)
  expected, expected_grad = decimal_loss_and_grad(s.astype(np.float64), y, k, tau, alpha)
  loss, grad = loss_and_grad(s, y, np.ones(4, dtype), k=k, tau=tau, alpha=alpha)
  tolerance = dict(atol=1e-5, rtol=1e-5) if dtype == "float32" else dict(atol=1e-12, rtol=1e-10)
  np.testing.assert_allclose(loss, expected, **tolerance)
  np.testing.assert_allclose(grad, expected_grad, **tolerance)


@pytest.mark.parametrize("c,k,dtype", [(1000, 5, "float64"), (1009, 3, "float32")])
def test_rows_of_24_classes_among_many_far_below(c, k, dtype):
  """The rows of :func:`spread_rows` (spread ``1e3 tau``) placed among ``c`` classes (1,009: a
  prime, the blocks of the top-k padded), some in one block of ``_top_k_by_block_maxima``, some in
  others, one at the last class; the other classes ``2000 k tau`` below all of them, where
  ``exp(x)`` is 0 even in float64. Loss and gradient are those of the 24 classes (40-digit
  decimals), the gradient 0 at the other classes."""
  decimal.getcontext().Emax = 10**8
  tau, alpha = 0.5, 1.0
  small, y = spread_rows(k, 1e3, tau, dtype)
  expected, expected_grad = decimal_loss_and_grad(small.astype(np.float64), y, k, tau, alpha)
  rng = np.random.default_rng(c)
  places = np.concatenate([[0, 1, 2, 3, 4, 5, c - 1], rng.choice(np.arange(6, c - 1), 17, False)])
  s = np.full((4, c), small.min() - 2000 * k * tau, dtype)
  s[:, places] = small
  loss, grad = loss_and_grad(s, places[y], np.ones(4, dtype), k=k, tau=tau, alpha=alpha)
  tolerance = dict(atol=1e-5, rtol=1e-5) if dtype == "float32" else dict(atol=1e-12, rtol=1e-10)
  np.testing.assert_allclose(loss, expected, **tolerance)
  np.testing.assert_allclose(grad[:, places], expected_grad, **tolerance)
  np.testing.assert_array_equal(np.delete(grad, places, axis=1), 0.0)


@pytest.mark.parametrize("n,k", [(24, 1), (1000, 5), (1009, 3), (4096, 10)])
def test_top_k_by_block_maxima_against_a_sort(n, k):
  """``_top_k_by_block_maxima``: the ``k`` largest of each row (a sort's) and classes holding them,
  rows with ties within and across blocks and with ``-inf`` (the classes that are not rivals)."""
  rng = np.random.default_rng(n)
  x = rng.normal(size=(5, n)).astype(np.float32)
  x[1] = np.round(x[1])  # a handful of levels
  x[2, : n // 2] = -np.inf
  x[3, rng.choice(n, 2 * k, False)] = 9.0  # 2 k ties at the top
  x[4, -k:] = 5.0  # the k largest at the end
  top_k = smooth_svm._top_k_by_block_maxima  # noqa: SLF001
  values, index = (bt.numpy(v) for v in top_k(ops.convert_to_tensor(x), k))
  np.testing.assert_array_equal(values, -np.sort(-x, axis=1)[:, :k])
  np.testing.assert_array_equal(np.take_along_axis(x, index, axis=1), values)
  assert all(len(set(row)) == k for row in index.tolist())


def test_ties_at_60000_classes_and_k10_in_float32():
  """All rivals tied: ``e_k / e_{k-1} = (n - k + 1) / k`` exactly (``n`` rivals). At
  ``n = 59,999``, ``k = 10``, ``e_k`` (1.7e41 times ``exp(k x)``) is beyond float32; the gradient
  of the loss is ``sigmoid(margin) / k`` at the true class (negative), shared among the rivals."""
  k, tau, alpha, c = 10, 1.0, 1.0, 60_000
  s = np.zeros((2, c), np.float32)
  s[1, 7] = 3.0
  y = np.array([0, 7])
  margin = np.log((c - 1 - k + 1) / k) + alpha / tau - s[np.arange(2), y] / (k * tau)
  loss, grad = loss_and_grad(s, y, np.ones(2, np.float32), k=k, tau=tau, alpha=alpha)
  np.testing.assert_allclose(loss, tau * np.logaddexp(0.0, margin), rtol=1e-5)
  slope = 1.0 / (1.0 + np.exp(-margin)) / k
  np.testing.assert_allclose(grad[np.arange(2), y], -slope, rtol=1e-5)
  np.testing.assert_allclose(
    grad[:, 1:6], np.repeat(slope[:, None] / (c - 1), 5, axis=1), rtol=1e-4
  )


def test_k1_is_the_smooth_multiclass_svm_and_the_cross_entropy():
  rng = np.random.default_rng(1)
  s, y = rng.normal(size=(4, 7)), rng.integers(0, 7, 4)
  tau, alpha = 0.7, 1.0
  margins = (s + alpha * (np.arange(7)[None] != y[:, None]) - s[np.arange(4), y][:, None]) / tau
  np.testing.assert_allclose(
    bt.numpy(smooth_topk_svm_loss(s, y, k=1, tau=tau, alpha=alpha)),
    tau * logsumexp(margins, axis=1),
    atol=1e-12,
  )
  cross_entropy = logsumexp(s, axis=1) - s[np.arange(4), y]
  np.testing.assert_allclose(
    bt.numpy(smooth_topk_svm_loss(s, y, k=1, tau=1.0, alpha=0.0)), cross_entropy, atol=1e-12
  )


def test_small_tau_tends_to_the_hard_loss_and_tau_zero_is_it():
  rng = np.random.default_rng(2)
  s, y = rng.normal(size=(5, 20)), rng.integers(0, 20, 5)
  expected = [hard(s[i], y[i], 5, 1.0) for i in range(5)]
  np.testing.assert_allclose(
    bt.numpy(smooth_topk_svm_loss(s, y, k=5, tau=0.0)), expected, atol=1e-12
  )
  np.testing.assert_allclose(
    bt.numpy(smooth_topk_svm_loss(s, y, k=5, tau=1e-4)), expected, atol=1e-2
  )
  # The smooth loss upper-bounds the hard one.
  assert np.all(bt.numpy(smooth_topk_svm_loss(s, y, k=5, tau=0.3)) >= np.array(expected) - 1e-12)


def test_stable_for_large_scores_and_tiny_tau():
  rng = np.random.default_rng(3)
  s = (rng.normal(size=(4, 1000)) * 100).astype(np.float32)
  y = rng.integers(0, 1000, 4)
  loss, grad = loss_and_grad(s, y, np.ones(4, np.float32), k=5, tau=1e-3)
  assert np.all(np.isfinite(loss)) and np.all(np.isfinite(grad))
  expected = [hard(s[i].astype(np.float64), y[i], 5, 1.0) for i in range(4)]
  np.testing.assert_allclose(loss, expected, rtol=1e-4, atol=1e-2)
  # Spreads of ~1e16 tau: far beyond float32's exp, inside the products' finite log 0.
  loss, grad = loss_and_grad(s * 100, y, np.ones(4, np.float32), k=5, tau=1e-12)
  assert np.all(np.isfinite(loss)) and np.all(np.isfinite(grad))
  expected = [hard(s[i].astype(np.float64) * 100, y[i], 5, 1.0) for i in range(4)]
  np.testing.assert_allclose(loss, expected, rtol=1e-5)


def hard_gradient(s, y, k, alpha):
  """The gradient of ``hard`` in ``s``: ``+1/k`` at the k-th rival, ``-1/k`` at the true class
  when the loss is positive. Among tied rivals the lowest index ranks first (``top_k``'s
  order), so the k-th rival is the one a strict order on (score descending, index) gives."""
  grad = np.zeros_like(s)
  if hard(s, y, k, alpha) > 0:
    rivals = sorted((j for j in range(len(s)) if j != y), key=lambda j: (-s[j], j))
    grad[rivals[k - 1]], grad[y] = 1.0 / k, -1.0 / k
  return grad


@pytest.mark.parametrize("mode", bt.compile_modes())
@pytest.mark.parametrize("tied", [False, True], ids=["random", "tied"])
def test_hard_loss_and_gradient_against_numpy(mode, tied):
  rng = np.random.default_rng(8)
  s = rng.integers(0, 3, size=(16, 12)) if tied else rng.normal(size=(16, 12))
  s = s.astype(np.float32)
  y = rng.integers(0, 12, 16)
  fn = bt.compiled(lambda v: smooth_topk_svm_loss(v, y, k=4, tau=0.0, alpha=0.5), mode)
  _, (grad,) = bt.value_and_grad(lambda v: ops.sum(fn(v)), s)
  np.testing.assert_array_equal(bt.numpy(fn(s)), [hard(s[i], y[i], 4, 0.5) for i in range(16)])
  np.testing.assert_array_equal(grad, [hard_gradient(s[i], y[i], 4, 0.5) for i in range(16)])


def hard_of_kept(s, y, keep, k, alpha):
  """``hard`` and ``hard_gradient`` over the classes where ``keep`` holds (the others padding):
  0 and a zero gradient where ``y`` is not kept (no true class) or fewer than ``k`` rivals are."""
  grad = np.zeros(len(s), np.float64)
  rivals = sorted((j for j in range(len(s)) if keep[j] and j != y), key=lambda j: (-s[j], j))
  if not keep[y] or len(rivals) < k:
    return 0.0, grad
  value = max(alpha + (float(s[rivals[k - 1]]) - float(s[y])) / k, 0.0)
  if value > 0:
    grad[rivals[k - 1]], grad[y] = 1.0 / k, -1.0 / k
  return value, grad


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("k", [1, 6])  # 6 = C - 1: every other class is a rival
@pytest.mark.parametrize("form", ["ids", "loss_object", "dense", "where"])
def test_hard_loss_edges_padding_and_dtypes_against_numpy(dtype, k, form):
  """Ties (scores 0-2), k = 1 and k = C - 1, padded classes holding NaN and inf (dense -1 or
  ``where``), rows without a true class and with fewer than k rivals, float32 and float64; on
  PyTorch the loss takes ``backend.hard_topk_svm``, elsewhere the Keras form."""
  rng = np.random.default_rng(11)
  s = rng.integers(0, 3, size=(12, 7)).astype(dtype)
  y = rng.integers(0, 7, 12)
  keep = np.ones_like(s, bool) if form in ("ids", "loss_object") else rng.random(s.shape) < 0.8
  if form in ("dense", "where"):
    keep[0], keep[1, y[1]] = True, False  # row 1: its true class is padding
  s = np.where(keep | (np.arange(7) == y[:, None]), s, np.nan).astype(dtype)
  s[3, ~keep[3]] = np.inf
  labels, where = y, None
  if form == "dense":
    labels = np.where(keep, np.eye(7)[y], -1.0).astype(dtype)
    labels[2] = np.where(keep[2], 0.0, -1.0)  # row 2: no entry > 0, no true class
    keep[2] = False
  elif form == "where":
    where = keep
  if form == "loss_object":
    loss = SmoothTopKSVMLoss(k=k, tau=0.0, alpha=0.5, reduction="none")
    fn = lambda v: loss(labels, v)  # noqa: E731
  else:
    fn = lambda v: smooth_topk_svm_loss(v, labels, where=where, k=k, tau=0.0, alpha=0.5)  # noqa: E731
  with bt.float64():
    _, (grad,) = bt.value_and_grad(lambda v: ops.sum(fn(v)), s)
    got = bt.numpy(fn(s))
  expected = [hard_of_kept(s[i], y[i], keep[i], k, 0.5) for i in range(12)]
  # The function returns the scores' dtype; a loss object its flavour's (Keras 3: float32).
  assert form == "loss_object" or got.dtype == np.dtype(dtype)
  tolerance = {"float32": 1e-6, "float64": 1e-12}[got.dtype.name]
  np.testing.assert_allclose(got, [e[0] for e in expected], rtol=tolerance, atol=tolerance)
  np.testing.assert_allclose(grad, [e[1] for e in expected], rtol=tolerance, atol=tolerance)


def test_backend_hard_topk_svm_on_pytorch_only():
  """``backend.hard_topk_svm``, the hard loss's PyTorch form, against numpy (ties broken by the
  lower index, rows with fewer than k rivals); elsewhere it refuses (the Keras form is used)."""
  from tfrank4class import backend  # noqa: PLC0415

  s = np.array([[1.0, 2.0, 2.0, 0.0, 2.0], [3.0, 1.0, 1.0, 1.0, 0.0]], np.float32)
  ids = np.array([3, 0], np.int32)
  rivals = np.array([[True, True, True, False, True], [False, True, True, True, False]])
  enough = np.array([True, True])
  args = [ops.convert_to_tensor(a) for a in (ids, rivals, enough)]
  if backend.BACKEND != "torch":
    with pytest.raises(NotImplementedError, match="PyTorch's form"):
      backend.hard_topk_svm(ops.convert_to_tensor(s), *args, 2, 0.5)
    return
  for k in (1, 2, 3):
    got, (grad,) = bt.value_and_grad(
      lambda v, k=k: ops.sum(backend.hard_topk_svm(v, *args, k, 0.5)), s
    )
    expected = [
      hard_of_kept(s[i], ids[i], rivals[i] | (np.arange(5) == ids[i]), k, 0.5) for i in (0, 1)
    ]
    np.testing.assert_allclose(got, sum(e[0] for e in expected), rtol=1e-6)
    np.testing.assert_allclose(grad, [e[1] for e in expected], rtol=1e-6)
  # Without rivals (every class but the true one), and with a row short of k rivals: alpha.
  every = [hard_of_kept(s[i], ids[i], np.ones(5, bool), 4, 0.5)[0] for i in (0, 1)]
  got = backend.hard_topk_svm(ops.convert_to_tensor(s), args[0], None, args[2], 4, 0.5)
  np.testing.assert_allclose(bt.numpy(got), every, rtol=1e-6)
  short = ops.convert_to_tensor(np.array([True, False]))
  got = backend.hard_topk_svm(ops.convert_to_tensor(s), args[0], args[1], short, 3, 0.5)
  np.testing.assert_allclose(bt.numpy(got), [0.5 + (2.0 - 0.0) / 3, 0.5], rtol=1e-6)


@pytest.mark.tensorflow_only
def test_hard_loss_has_no_top_k():
  """Under XLA on CPU, ``top_k`` over the masked scores and its gradient (a scatter) made the
  hard loss 5-17x slower than a plain graph at 1,000 classes (docs/topk.md); the k rounds of
  argmax are unrolled (k is a Python int)."""
  import tensorflow as tf  # noqa: PLC0415

  s, y = tf.zeros([2, 8]), tf.constant([0, 1])

  @tf.function
  def value_and_grad(s):
    with tf.GradientTape() as tape:
      tape.watch(s)
      loss = tf.reduce_sum(smooth_topk_svm_loss(s, y, k=3, tau=0.0))
    return tape.gradient(loss, s)

  graph = value_and_grad.get_concrete_function(s).graph.as_graph_def()
  ops = {node.op for node in graph.node}
  ops |= {node.op for function in graph.library.function for node in function.node_def}
  assert "ArgMax" in ops
  assert "TopKV2" not in ops and "ScatterNd" not in ops


def test_finite_differences_float64():
  rng = np.random.default_rng(4)
  s, y = rng.normal(size=(3, 9)), rng.integers(0, 9, 3)
  w = ops.array(rng.normal(size=3))
  f = bt.quickest(lambda v: ops.sum(smooth_topk_svm_loss(v, y, k=3, tau=0.3, alpha=1.0) * w))
  _, (grad,) = bt.value_and_grad(f, s)
  np.testing.assert_allclose(grad, bt.finite_difference_grad(f, s, eps=1e-6), atol=1e-7)


def test_label_forms_and_padding():
  rng = np.random.default_rng(6)
  s = rng.normal(size=(3, 8))
  y = np.array([2, 0, 7])
  ids = bt.numpy(smooth_topk_svm_loss(s, y, k=2, tau=0.5))
  np.testing.assert_allclose(bt.numpy(smooth_topk_svm_loss(s, y[:, None], k=2, tau=0.5)), ids)
  np.testing.assert_allclose(bt.numpy(smooth_topk_svm_loss(s, np.eye(8)[y], k=2, tau=0.5)), ids)
  # Padded classes (relevance -1) are left out: the loss of the remaining classes.
  dense = np.eye(8)[y]
  dense[:, 5:] = np.where(dense[:, 5:] > 0, 1.0, -1.0)
  got = bt.numpy(smooth_topk_svm_loss(s, dense, k=2, tau=0.5))
  for i in range(3):
    keep = [j for j in range(8) if dense[i, j] >= 0]
    expected = brute_force(s[i, keep], keep.index(y[i]), 2, 0.5, 1.0)
    np.testing.assert_allclose(got[i], expected, atol=1e-12)
  # A row without a true class, or with fewer than k rivals left, has loss 0 and gradient 0.
  dense = np.array([[0.0, 0.0, 0.0, 0.0], [1.0, 0.0, -1.0, -1.0]])
  x = rng.normal(size=(2, 4))
  loss = smooth_topk_svm_loss(x, dense, k=2, tau=0.5)
  _, (grad,) = bt.value_and_grad(lambda v: ops.sum(smooth_topk_svm_loss(v, dense, k=2, tau=0.5)), x)
  np.testing.assert_array_equal(bt.numpy(loss), [0.0, 0.0])
  np.testing.assert_array_equal(grad, np.zeros((2, 4)))
  np.testing.assert_array_equal(bt.numpy(smooth_topk_svm_loss(x, dense, k=2, tau=0.0)), [0.0, 0.0])


def test_padded_scores_may_hold_anything():
  s = np.array([[2.0, 1.0, 0.5, np.nan, np.inf]])
  dense = np.array([[0.0, 1.0, 0.0, -1.0, -1.0]])
  np.testing.assert_allclose(
    bt.numpy(smooth_topk_svm_loss(s, dense, k=1, tau=0.5)), [brute_force(s[0, :3], 1, 1, 0.5, 1.0)]
  )


@pytest.mark.parametrize("mode", [m for m in bt.compile_modes() if m != "eager"])
def test_compiled_modes_agree_with_eager(mode):
  rng = np.random.default_rng(7)
  s = rng.normal(size=(4, 30)).astype(np.float32)
  y = rng.integers(0, 30, 4)
  for tau in (0.0, 0.2):
    loss = SmoothTopKSVMLoss(k=5, tau=tau, reduction="none")
    fn = bt.compiled(lambda v, loss=loss: loss(y, v), mode)
    eager = bt.value_and_grad(lambda v, loss=loss: ops.sum(loss(y, v)), s)
    traced = bt.value_and_grad(lambda v, fn=fn: ops.sum(fn(v)), s)
    np.testing.assert_allclose(bt.numpy(fn(s)), bt.numpy(loss(y, s)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(traced[1][0], eager[1][0], rtol=1e-5, atol=1e-6)


@pytest.mark.tensorflow_only
def test_fit_under_mirrored_strategy(mirrored_strategy):
  rng = np.random.default_rng(8)
  x = rng.standard_normal((64, 6)).astype(np.float32)
  y = rng.integers(0, 10, 64)
  with mirrored_strategy.scope():
    model = keras.Sequential([keras.Input([6]), keras.layers.Dense(10)])
    model.compile("adam", loss=SmoothTopKSVMLoss(k=3, tau=0.5))
  history = model.fit(x, y, batch_size=16, epochs=1, verbose=0)
  assert np.all(np.isfinite(history.history["loss"]))


def test_fit_lowers_the_loss():
  rng = np.random.default_rng(9)
  x = rng.standard_normal((128, 8)).astype(np.float32)
  y = np.argmax(x[:, :6] @ rng.standard_normal((6, 12)), axis=1)
  keras.utils.set_random_seed(0)
  model = keras.Sequential([keras.Input([8]), keras.layers.Dense(12)])
  model.compile(keras.optimizers.Adam(0.05), loss=losses.get("smooth_topk_svm_loss", k=2, tau=0.5))
  history = model.fit(x, y, batch_size=32, epochs=5, verbose=0)
  assert history.history["loss"][-1] < history.history["loss"][0]


def test_registry_and_config():
  """Saving and loading in a model: tests/test_loss_keras.py."""
  loss = losses.get("smooth_topk_svm_loss", k=3, tau=0.0, alpha=0.5)
  assert isinstance(loss, SmoothTopKSVMLoss)
  config = loss.get_config()
  assert (config["k"], config["tau"], config["alpha"]) == (3, 0.0, 0.5)
  assert SmoothTopKSVMLoss.from_config(config).k == 3
  assert keras.losses.deserialize(keras.losses.serialize(loss)).k == 3


def test_sample_weight_and_reduction():
  s, y = [[2.0, 0.0, 0.0], [0.0, 2.0, 0.0]], [1, 1]
  values = bt.numpy(smooth_topk_svm_loss(s, y, k=1, tau=1.0))
  got = SmoothTopKSVMLoss(k=1, reduction="sum")(y, s, [[1.0], [0.0]])
  np.testing.assert_allclose(bt.numpy(got), values[0], rtol=1e-6)


def test_bad_arguments():
  with pytest.raises(ValueError, match=r"`k` must be an integer >= 1, got 0"):
    SmoothTopKSVMLoss(k=0)
  with pytest.raises(ValueError, match=r"`tau` must be a finite number >= 0\.0, got -0\.1"):
    SmoothTopKSVMLoss(tau=-0.1)
  with pytest.raises(ValueError, match=r"`alpha` must be a finite number >= 0\.0, got nan"):
    SmoothTopKSVMLoss(alpha=float("nan"))
  with pytest.raises(
    ValueError, match=r"`k` must be smaller than the number of classes, got k=5 for 5"
  ):
    SmoothTopKSVMLoss(k=5)([0], [[1.0, 2.0, 3.0, 4.0, 5.0]])
  with pytest.raises(ValueError, match="at most one entry > 0 per row"):
    smooth_topk_svm_loss([[1.0, 2.0, 3.0]], [[1.0, 1.0, 0.0]], k=1)
  with pytest.raises(ValueError, match=r"must be finite"):
    smooth_topk_svm_loss([[1.0, np.nan, 3.0]], [0], k=1)
  with pytest.raises(ValueError, match=r"class ids in \[0, num_classes=3\)"):
    smooth_topk_svm_loss([[1.0, 2.0, 3.0]], [3], k=1)


@pytest.mark.tensorflow_only
def test_unknown_number_of_classes_when_traced():
  """Only tf.function traces with an unknown dimension (jax.jit always knows the shapes)."""
  import tensorflow as tf  # noqa: PLC0415

  with pytest.raises(ValueError, match="number of classes known when traced"):
    tf.function(
      lambda s: smooth_topk_svm_loss(s, [0], k=1), input_signature=[tf.TensorSpec([1, None])]
    ).get_concrete_function()
