"""Tests of tfrank4class.ranking.sorter_base: standardisation, the block-wise pairwise sigmoid
sum (values and hand-written gradient against numpy / finite differences, on every backend),
input checks and the weights file format."""

import backend_testing
import numpy as np
import pytest

from tfrank4class.compat import ops
from tfrank4class.ranking import sigmoid_comparisons, sorter_base
from tfrank4class.ranking.pairwise_sigmoid_sorter import PairwiseSigmoidSorter
from tfrank4class.ranking.sigmoid_comparisons import block_columns, pairwise_sigmoid_sum
from tfrank4class.ranking.sorters import PRETRAINED_SORTERS

#: Whether the backend computes in float64 (JAX without x64 computes float64 input in float32);
#: the float64 checks are tight, the float32 ones allow for its rounding.
DOUBLE = backend_testing.numpy(ops.convert_to_tensor(np.zeros(1))).dtype == np.float64
RTOL = 1e-10 if DOUBLE else 1e-5


def _np_sum(z, k):
  d = z[:, None, :] - z[:, :, None]
  return (1.0 / (1.0 + np.exp(-k[:, :, None] * d))).sum(-1)


def test_standardize_matches_numpy_and_constant_list_is_zero():
  x = np.array([[1.0, 2.0, 4.0], [5.0, 5.0, 5.0]], np.float32)
  got = backend_testing.numpy(sorter_base.standardize(x))
  ref = (x[0] - x[0].mean()) / x[0].std()
  np.testing.assert_allclose(got[0], ref, rtol=1e-5)
  np.testing.assert_array_equal(got[1], np.zeros(3))


@pytest.mark.parametrize("x", [[[1.0, 2.0, 4.0, -0.5]], [[0.3, -0.2]]], ids=["n=4", "n=2"])
def test_standardize_gradient_exact_except_for_two_items(x):
  # Reference (numpy): the exact Jacobian dz_i / ds_j = (delta_ij - 1/n - z_i z_j / n) / sigma for
  # n >= 3; for n = 2 it is 0 (every 2-item list maps to +-1), so there sigma is held:
  # (delta_ij - 1/n) / sigma.
  x = np.array(x, np.float64)
  v = x[0]
  n = v.size
  zv = (v - v.mean()) / v.std()
  ref = (np.eye(n) - 1.0 / n - (np.outer(zv, zv) / n if n > 2 else 0.0)) / v.std()
  for i in range(n):  # row i of the Jacobian: the gradient of z_i
    z_i = lambda s, i=i: sorter_base.standardize(s)[0, i]
    _, (row,) = backend_testing.value_and_grad(z_i, x)
    np.testing.assert_allclose(row[0], ref[i], rtol=RTOL * 1000, atol=RTOL / 10)
  z = backend_testing.numpy(sorter_base.standardize(x))
  np.testing.assert_allclose(z[0], (v - v.mean()) / v.std(), rtol=RTOL)


def test_check_scores_casts_low_precision_to_float32():
  for dtype in ("float16", "bfloat16"):
    out = backend_testing.numpy(
      sorter_base.check_scores(ops.convert_to_tensor([[0.5, 1.5]], dtype))
    )
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, [[0.5, 1.5]])
  if DOUBLE:  # float64 is kept
    out = sorter_base.check_scores(np.array([[0.5, 1.5]], np.float64))
    assert backend_testing.numpy(out).dtype == np.float64


@pytest.mark.parametrize("block_size", [1, 3, 7, 256])
def test_pairwise_sigmoid_sum_matches_numpy_for_any_block_size(block_size):
  rng = np.random.default_rng(0)
  z = rng.normal(size=(3, 7)).astype(np.float64)
  k = rng.uniform(0.5, 5.0, size=(3, 7))
  got = backend_testing.numpy(pairwise_sigmoid_sum(z, k, block_size))
  np.testing.assert_allclose(got, _np_sum(z, k), rtol=RTOL)


@pytest.mark.parametrize("block_size", [2, 256])
def test_pairwise_sigmoid_sum_gradient_matches_finite_differences(block_size):
  # The hand-written backward pass (backend.custom_gradient) against central differences of the
  # forward pass, w.r.t. both z and k (in float32 a wider step: rounding over truncation).
  rng = np.random.default_rng(1)
  z = rng.normal(size=(2, 5))
  k = rng.uniform(0.5, 3.0, size=(2, 5))
  w = rng.normal(size=(2, 5))
  f = lambda z_, k_: ops.sum(ops.multiply(w, pairwise_sigmoid_sum(z_, k_, block_size)))
  _, (gz, gk) = backend_testing.value_and_grad(f, z, k)
  # float32: the rounding of f (~5) over the step is ~3e-5.
  eps, rtol, atol = (1e-6, 1e-5, 1e-8) if DOUBLE else (1e-2, 3e-3, 1e-4)
  numeric_z = backend_testing.finite_difference_grad(lambda z_: f(z_, k), z, eps)
  numeric_k = backend_testing.finite_difference_grad(lambda k_: f(z, k_), k, eps)
  np.testing.assert_allclose(gz, numeric_z, rtol=rtol, atol=atol)
  np.testing.assert_allclose(gk, numeric_k, rtol=rtol, atol=atol)


def _np_sum_grad(z, k, w):
  """The gradient of ``sum_i w_i S_i`` w.r.t. ``z`` and ``k``, written densely in numpy."""
  diff = z[:, None, :] - z[:, :, None]  # [b, i, j]: z_j - z_i
  sig = 1.0 / (1.0 + np.exp(-k[:, :, None] * diff))
  dsig = sig * (1.0 - sig)
  grad_z = np.einsum("bi,bi,bij->bj", w, k, dsig) - w * k * dsig.sum(-1)
  return grad_z, w * (dsig * diff).sum(-1)


@pytest.mark.parametrize("mode", backend_testing.compile_modes())
def test_pairwise_sigmoid_sum_long_lists_take_fewer_columns(mode, monkeypatch):
  """A list longer than PAIRS_PER_BLOCK / block_size is processed in fewer columns per block
  (here 2 of 7, 4 blocks one after another), with the same values and gradients."""
  monkeypatch.setattr(sigmoid_comparisons, "PAIRS_PER_BLOCK", 14)
  assert block_columns(7, 256) == 2 and block_columns(None, 5) == 5
  rng = np.random.default_rng(2)
  z = rng.normal(size=(3, 7))
  z[0, 3] = z[0, 5]  # a tie
  k, w = rng.uniform(0.5, 3.0, size=(3, 7)), rng.normal(size=(3, 7))
  z, k, w = (a.astype(np.float64 if DOUBLE else np.float32) for a in (z, k, w))
  total = lambda z_, k_: ops.sum(ops.multiply(w, pairwise_sigmoid_sum(z_, k_)))
  got = backend_testing.numpy(
    backend_testing.compiled(lambda a, b: pairwise_sigmoid_sum(a, b), mode)(z, k)
  )
  _, (gz, gk) = backend_testing.value_and_grad(backend_testing.compiled(total, mode), z, k)
  ref64 = [a.astype(np.float64) for a in (z, k)]
  grad_z, grad_k = _np_sum_grad(*ref64, w.astype(np.float64))
  tol = dict(rtol=1e-12, atol=1e-12) if DOUBLE else dict(rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(got, _np_sum(*ref64), **tol)
  np.testing.assert_allclose(gz, grad_z, **tol)
  np.testing.assert_allclose(gk, grad_k, **tol)


@pytest.mark.parametrize(
  "make",
  [
    lambda: PairwiseSigmoidSorter(steepness=4.0),
    lambda: PairwiseSigmoidSorter(steepness=4.0, standardize_scores=True),
    lambda: PRETRAINED_SORTERS.get("attention"),
    lambda: PRETRAINED_SORTERS.get("lstm"),
  ],
  ids=["pairwise_sigmoid", "standardized", "attention", "lstm"],
)
def test_ranks_at_is_the_call_at_one_item(make):
  """``ranks_at`` (one row of comparisons for the pairwise sorters) against every rank of the
  call, gathered, values and gradients, with a tie at the chosen item."""
  sorter = make()
  rng = np.random.default_rng(3)
  s = rng.normal(size=(3, 40)).astype(np.float32)
  s[1, 7] = s[1, 30]
  index = np.array([0, 7, 39])
  w = ops.convert_to_tensor(np.array([1.0, -2.0, 0.5], np.float32))
  pick = ops.convert_to_tensor(np.eye(40, dtype=np.float32)[index])
  one, (g_one,) = backend_testing.value_and_grad(
    lambda v: ops.sum(sorter.ranks_at(v, index) * w), s
  )
  every, (g_every,) = backend_testing.value_and_grad(
    lambda v: ops.sum(ops.sum(sorter(v) * pick, axis=-1) * w), s
  )
  np.testing.assert_allclose(one, every, rtol=1e-5)
  np.testing.assert_allclose(g_one, g_every, rtol=1e-4, atol=1e-4 * np.abs(g_every).max())


def test_pairwise_sigmoid_sum_compiled():
  z = np.array([[0.3, -0.2, 0.9, 0.0]], np.float32)
  k = np.full([1, 4], 2.0, np.float32)
  ref = _np_sum(z.astype(np.float64), k.astype(np.float64))
  fn = lambda a, b: pairwise_sigmoid_sum(a, b, 3)
  for mode in backend_testing.compile_modes():
    got = backend_testing.numpy(backend_testing.compiled(fn, mode)(z, k))
    np.testing.assert_allclose(got, ref, rtol=1e-5, err_msg=mode)


@pytest.mark.tensorflow_only
def test_pairwise_sigmoid_sum_in_tf_function_with_unknown_length():
  import tensorflow as tf  # noqa: PLC0415

  z = tf.constant([[0.3, -0.2, 0.9, 0.0]])
  k = tf.fill([1, 4], 2.0)
  ref = _np_sum(z.numpy().astype(np.float64), k.numpy().astype(np.float64))
  fn = tf.function(
    lambda a, b: pairwise_sigmoid_sum(a, b, 3),
    input_signature=[tf.TensorSpec([None, None], tf.float32)] * 2,
  )
  np.testing.assert_allclose(fn(z, k).numpy(), ref, rtol=1e-5)


def test_check_scores_errors_name_the_problem():
  with pytest.raises(ValueError, match=r"`scores` must have shape \[batch_size, list_size\]"):
    sorter_base.check_scores(np.zeros([2, 3, 4]))
  with pytest.raises(ValueError, match="at least 2 items"):
    sorter_base.check_scores(np.zeros([2, 1]))
  with pytest.raises(TypeError, match="numeric"):
    sorter_base.check_scores(np.array([["a", "b"]]))


@pytest.mark.tensorflow_only
def test_check_scores_length_known_only_at_run_time():
  import tensorflow as tf  # noqa: PLC0415

  fn = tf.function(sorter_base.check_scores, input_signature=[tf.TensorSpec([None, None])])
  with pytest.raises(tf.errors.InvalidArgumentError, match="at least 2 items"):
    fn(tf.zeros([3, 1]))


def test_missing_weights_file_is_named(tmp_path):
  from tfrank4class.ranking.attention_sorter import AttentionSorter

  with pytest.raises(FileNotFoundError, match="nowhere.json"):
    AttentionSorter.pretrained(path=str(tmp_path / "nowhere"))


def test_export_and_load_round_trip_and_class_mismatch(tmp_path):
  from tfrank4class.ranking.attention_sorter import AttentionSorter
  from tfrank4class.ranking.lstm_sorter import LSTMSorter

  sorter = AttentionSorter(hidden_units=4)
  x = np.array([[0.5, -1.0, 2.0, 0.1]], np.float32)
  before = backend_testing.numpy(sorter(x))
  sorter.export_weights(str(tmp_path / "a"), metadata={"note": 1})
  loaded = AttentionSorter.load_weights_file(str(tmp_path / "a"))
  np.testing.assert_allclose(backend_testing.numpy(loaded(x)), before, rtol=1e-6)
  assert loaded.pretrained_metadata == {"note": 1}
  assert not loaded.trainable_weights
  with pytest.raises(ValueError, match="holds a 'AttentionSorter', not a LSTMSorter"):
    LSTMSorter.load_weights_file(str(tmp_path / "a"))


class Killed(BaseException):
  """Stands for the process being killed."""


def test_weights_export_killed_halfway_leaves_the_previous_files(tmp_path, monkeypatch):
  from tfrank4class.ranking.attention_sorter import AttentionSorter

  sorter = AttentionSorter(hidden_units=4)
  x = np.array([[0.5, -1.0, 2.0, 0.1]], np.float32)
  before = backend_testing.numpy(sorter(x))
  sorter.export_weights(str(tmp_path / "a"), metadata={"step": 1})
  real_savez = np.savez

  def savez_killed_halfway(file, **arrays):
    real_savez(file, **arrays)
    file.truncate(file.tell() // 2)
    raise Killed()

  monkeypatch.setattr(np, "savez", savez_killed_halfway)
  with pytest.raises(Killed):
    AttentionSorter(hidden_units=4).export_weights(str(tmp_path / "a"), metadata={"step": 2})
  loaded = AttentionSorter.load_weights_file(str(tmp_path / "a"))
  np.testing.assert_allclose(backend_testing.numpy(loaded(x)), before, rtol=1e-6)
  assert loaded.pretrained_metadata == {"step": 1}
  assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "a.npz"]


def test_handcrafted_sorter_has_no_pretrained_weights():
  with pytest.raises(ValueError, match="no pretrained weights"):
    PairwiseSigmoidSorter.pretrained()
