"""Tests of the class-id path of the per-list RaMBO losses (recall, AP, blackbox NDCG): counts in
place of sorts (``base.true_class_ranks``). Each is checked against an independent numpy
Algorithm 1 on small tied, padded lists (``_rambo_reference``), and against the package's own
sorting path given the same labels as one-hot rows, values and gradients, in every compile mode,
with sample weights, on every backend."""

import _rambo_reference as ref
import backend_testing as bt
import numpy as np
import pytest

from tfrank4class.compat import BACKEND, ops
from tfrank4class.losses import (
  APCLoss,
  AveragePrecisionLoss,
  BlackboxNDCGLoss,
  MapApcLoss,
  MeanAveragePrecisionLoss,
  RecallLoss,
)
from tfrank4class.losses import base as losses_base
from tfrank4class.losses.rambo.average_precision import (
  apc_loss_value,
  average_precision_loss_values,
  mean_average_precision_loss_value,
)
from tfrank4class.losses.rambo.ndcg import ndcg_loss_values
from tfrank4class.losses.rambo.recall import recall_loss_values
from tfrank4class.ranking.blackbox import blackbox_marked_rank

#: float64 inputs stay float64 on every backend (JAX: ``jax_enable_x64``, on for each test).
pytestmark = pytest.mark.usefixtures("float64_inputs")

FUNCTIONS = {
  "log": lambda s, y, **kw: recall_loss_values(s, y, **kw),
  "loglog": lambda s, y, **kw: recall_loss_values(s, y, weighting="loglog", **kw),
  "ap": average_precision_loss_values,
  "ndcg": ndcg_loss_values,
}


def tied_lists(seed, batch=7, n=12, dtype=np.float64):
  """Integer-valued scores (many ties), class ids, and a padding mask that pads the true class of
  one list."""
  rng = np.random.default_rng(seed)
  scores = rng.integers(-3, 4, size=(batch, n)).astype(dtype)
  ids = rng.integers(0, n, size=batch)
  where = rng.random((batch, n)) > 0.2
  where[np.arange(batch), ids] = True
  where[0, ids[0]] = False  # a list whose only relevant item is padding: loss 0, no gradient
  return scores, ids, where


def np_loss_and_gradient(kind, scores, ids, where, lambda_, margin, weights):
  """``sum_b w_b L_b`` per list and its gradient by Algorithm 1, one relevant item per list.

  ``L = log(rk)`` (recall, r = rk - 1), ``log(1 + log(rk))``, ``1 - 1/rk`` (AP) or
  ``1 - 1/log2(1 + rk)`` (NDCG, one gain of 1), ``rk`` the true class's rank among the valid
  items after the margin; ``dL/drk`` by hand."""
  batch, n = scores.shape
  relevance = np.where(where, 0.0, -1.0)
  has_true = where[np.arange(batch), ids]
  relevance[np.arange(batch), ids] = np.where(has_true, 1.0, -1.0)
  valid, relevant = relevance >= 0, relevance > 0
  shifted = np.where(valid, scores + np.where(relevant, -margin / 2, margin / 2), 0.0)
  rk = ref.rank_within(shifted, valid)[np.arange(batch), ids]
  values = {
    "log": np.log(rk),
    "loglog": np.log1p(np.log(rk)),
    "ap": 1.0 - 1.0 / rk,
    "ndcg": 1.0 - np.log(2.0) / np.log1p(rk),
  }[kind]
  slope = {
    "log": 1.0 / rk,
    "loglog": 1.0 / ((1.0 + np.log(rk)) * rk),
    "ap": 1.0 / rk**2,
    "ndcg": np.log(2.0) / ((1.0 + rk) * np.log1p(rk) ** 2),
  }[kind]
  g = np.zeros((batch, n))
  g[np.arange(batch), ids] = np.where(has_true, weights * slope, 0.0)
  lam = lambda_ * n
  moved = ref.rank_within(shifted + lam * g, valid)
  grad = np.where(valid, -(ref.rank_within(shifted, valid) - moved) / lam, 0.0)
  return np.where(has_true, values, 0.0), grad


def weighted_sum(fn, labels, where, weights, **kwargs):
  return lambda s: ops.sum(fn(s, labels, where=where, **kwargs) * ops.convert_to_tensor(weights))


@pytest.mark.parametrize("kind", sorted(FUNCTIONS))
@pytest.mark.parametrize("margin", [0.0, 0.5])
def test_class_ids_match_numpy_algorithm_1_with_ties_and_padding(kind, margin):
  scores, ids, where = tied_lists(1)
  weights = np.linspace(0.5, 2.0, len(ids))
  fn, kwargs = FUNCTIONS[kind], {"lambda_": 2.0, "margin": margin}
  expected, expected_grad = np_loss_and_gradient(kind, scores, ids, where, 2.0, margin, weights)
  values = bt.numpy(fn(scores, ids, where=where, **kwargs))
  _, (grad,) = bt.value_and_grad(weighted_sum(fn, ids, where, weights, **kwargs), scores)
  assert values.dtype == np.float64
  np.testing.assert_allclose(values, expected, rtol=1e-12, atol=1e-12)
  np.testing.assert_allclose(grad, expected_grad, rtol=1e-10, atol=1e-12)
  assert np.count_nonzero(grad) > len(ids)  # the perturbation passes items: not vacuous


def all_losses(labels, where, weights, margin=0.25):
  """``sum_k (k + 1) sum_b w_b L_k,b`` over the four losses ``k``: one function to compile."""

  def total(s):
    parts = [
      weighted_sum(fn, labels, where, weights * (1 + i), lambda_=2.0, margin=margin)(s)
      for i, fn in enumerate(FUNCTIONS.values())
    ]
    return parts[0] + parts[1] + parts[2] + parts[3]

  return total


@pytest.mark.parametrize("mode", bt.compile_modes())
def test_class_id_path_in_every_compile_mode(mode):
  scores, ids, where = tied_lists(4)
  weights = np.linspace(0.5, 2.0, len(ids))
  expected, expected_grad = 0.0, 0.0
  for i, kind in enumerate(FUNCTIONS):
    values, grad = np_loss_and_gradient(kind, scores, ids, where, 2.0, 0.25, weights * (1 + i))
    expected, expected_grad = expected + np.sum(values * weights * (1 + i)), expected_grad + grad
  value, (grad,) = bt.value_and_grad(bt.compiled(all_losses(ids, where, weights), mode), scores)
  np.testing.assert_allclose(value, expected, rtol=1e-12)
  np.testing.assert_allclose(grad, expected_grad, rtol=1e-10, atol=1e-12)


MODES = [
  pytest.param(mode, marks=[pytest.mark.slow] if mode != "eager" else [])
  for mode in bt.compile_modes()
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-5), (np.float64, 1e-10)])
def test_class_ids_equal_the_sorting_path(dtype, tol, mode):
  """The sorting path (the same ids as one-hot rows) is the one the losses took before. One
  function per label form: the four losses, each with its own weight. (Compiled: slow, the
  sorting path's compilation; eager is the fast counterpart.)"""
  scores, ids, where = tied_lists(2, batch=5, n=30, dtype=dtype)
  one_hot = np.eye(30, dtype=dtype)[ids]
  weights = np.linspace(1.0, 3.0, 5).astype(dtype)

  for kind, fn in FUNCTIONS.items():
    got, want = (bt.numpy(fn(scores, labels, where=where)) for labels in (ids, one_hot))
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=kind)
  got, want = (
    bt.value_and_grad(bt.compiled(all_losses(labels, where, weights), mode), scores)
    for labels in (ids, one_hot)
  )
  np.testing.assert_allclose(got[0], want[0], rtol=tol, atol=tol)
  np.testing.assert_allclose(got[1][0], want[1][0], rtol=tol, atol=tol)
  assert np.count_nonzero(want[1][0]) > len(ids)


BATCH_LOSSES = (MeanAveragePrecisionLoss, APCLoss, MapApcLoss)


@pytest.mark.parametrize(
  ("loss_class", "seed", "lambda_"),
  [
    (RecallLoss, 3, 0.5),
    (AveragePrecisionLoss, 3, 0.5),
    (BlackboxNDCGLoss, 3, 0.5),
    # the batch's losses, with a class repeated in the batch
    (MeanAveragePrecisionLoss, 7, 8.0),
    (APCLoss, 7, 8.0),
    (MapApcLoss, 10, 8.0),
  ],
)
def test_keras_losses_with_sample_weights_equal_the_sorting_path(
  loss_class, seed, lambda_, monkeypatch
):
  """Class ids with sample weights against one-hot rows: for a per-list loss the weighted sum of
  its one-hot losses; for a batch loss (``coupling = "batch"``) the one-hot rows with the rows of
  weight 0 as padding (``-1``), unweighted, times the mean weight (written out here)."""
  scores, ids, _ = tied_lists(seed, batch=6, n=20)
  scores = scores.astype(np.float32)
  if loss_class in BATCH_LOSSES:
    ids[4] = ids[2]
  weights = np.array([1.0, 0.0, 2.0, 0.5, 1.0, 3.0], np.float32)
  loss = loss_class(lambda_=lambda_, margin=0.1)
  one_hot = np.eye(20, dtype=np.float32)[ids]
  if loss_class in BATCH_LOSSES:
    padded = np.where(weights[:, None] != 0, one_hot, -1.0).astype(np.float32)
    want = bt.value_and_grad(lambda s: loss(padded, s) * float(np.mean(weights)), scores)
  else:
    want = bt.value_and_grad(lambda s: loss(one_hot, s, sample_weight=weights), scores)
  # The class ids build no one-hot rows: the weighting's dense path is not taken.
  monkeypatch.setattr(losses_base, "to_relevance", None)
  got = bt.value_and_grad(lambda s: loss(ids, s, sample_weight=weights), scores)
  np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
  np.testing.assert_allclose(got[1][0], want[1][0], rtol=1e-6, atol=1e-7)
  assert np.all(got[1][0][1] == 0)  # the example of weight 0 passes no gradient


def test_bad_margin_and_lambda_raise_on_the_class_id_path():
  scores, ids = np.zeros((2, 4), np.float32), np.array([0, 1])
  with pytest.raises(ValueError, match="margin"):
    average_precision_loss_values(scores, ids, margin=-1.0)
  with pytest.raises(ValueError, match="lambda_"):
    ndcg_loss_values(scores, ids, lambda_=0.0)
  with pytest.raises(ValueError, match="finite"):
    recall_loss_values(np.array([[0.0, np.inf]], np.float32), np.array([0]))


@pytest.mark.skipif(BACKEND != "jax", reason="jax.jit: the one mode where no check can raise")
def test_nan_scores_give_nan_under_jit():
  import jax  # noqa: PLC0415

  scores = np.array([[0.1, np.nan, 0.3], [0.1, 0.2, 0.3]], np.float32)
  values = bt.numpy(jax.jit(lambda s: average_precision_loss_values(s, np.array([0, 2])))(scores))
  assert np.isnan(values[0]) and values[1] == 0.0


# --- mAP: the per-class lists of the batch's own classes ------------------------------------------


def np_map_loss(scores, ids, where, lambda_, margin):
  """``1 - mAP`` (lists: the columns, mean over the classes with a valid relevant example) and its
  gradient by Algorithm 1, from the dense one-hot relevance with padding, every column ranked."""
  batch, n = scores.shape
  relevance = np.where(where, np.eye(n)[ids], -1.0)
  valid, relevant = relevance >= 0, relevance > 0
  shifted = np.where(valid, scores + np.where(relevant, -margin / 2, margin / 2), 0.0)
  rk = ref.rank_within(shifted.T, valid.T)
  rk_plus = ref.rank_within(shifted.T, relevant.T)
  present = relevant.T.any(-1)
  ap = [np.mean((rk_plus / rk)[c][relevant.T[c]]) for c in np.flatnonzero(present)]
  return 1.0 - np.mean(ap), ref.map_gradient(scores, relevance, lambda_, margin)


@pytest.mark.parametrize("margin", [0.0, 0.5])
def test_map_class_ids_match_numpy_algorithm_1_with_ties_repeats_and_padding(margin):
  scores, ids, where = tied_lists(5, batch=9, n=6)
  assert len(set(ids)) < len(ids)  # repeated classes: one list each
  expected, expected_grad = np_map_loss(scores, ids, where, 30.0, margin)
  fn = lambda s: mean_average_precision_loss_value(s, ids, where=where, lambda_=30.0, margin=margin)
  value, (grad,) = bt.value_and_grad(fn, scores)
  np.testing.assert_allclose(value, expected, rtol=1e-12)
  np.testing.assert_allclose(grad, expected_grad, rtol=1e-10, atol=1e-12)
  assert np.count_nonzero(grad) > 3  # the perturbation passes items: not vacuous


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-5), (np.float64, 1e-10)])
def test_map_class_ids_equal_the_sorting_path(dtype, tol, mode):
  """The one-hot rows take the path every class id took before: all C columns ranked.
  (Compiled: slow, as above; eager is the fast counterpart.)"""
  scores, ids, where = tied_lists(6, batch=8, n=30, dtype=dtype)
  ids[3] = ids[5]
  one_hot = np.eye(30, dtype=dtype)[ids]

  def loss(labels):
    return lambda s: mean_average_precision_loss_value(
      s, labels, where=where, lambda_=8.0, margin=0.25
    )

  got, want = (
    bt.value_and_grad(bt.compiled(loss(labels), mode), scores) for labels in (ids, one_hot)
  )
  np.testing.assert_allclose(got[0], want[0], rtol=tol, atol=tol)
  np.testing.assert_allclose(got[1][0], want[1][0], rtol=tol, atol=tol)
  assert np.count_nonzero(want[1][0]) > 3


# --- APC: the B true classes in the one list of B x C scores -------------------------------------


def np_apc_loss(scores, ids, where, lambda_, margin):
  """``1 - AP`` of all entries as one list (Eq. 23) and its gradient by Algorithm 1, every entry
  of the flattened list ranked (``_rambo_reference``)."""
  relevance = np.where(where, np.eye(scores.shape[1])[ids], -1.0).reshape(1, -1)
  valid, relevant = relevance >= 0, relevance > 0
  shifted = np.where(valid, scores.reshape(1, -1) + np.where(relevant, -margin / 2, margin / 2), 0)
  rk, rk_plus = ref.rank_within(shifted, valid), ref.rank_within(shifted, relevant)
  value = 1.0 - np.mean((rk_plus / rk)[relevant])
  return value, ref.apc_gradient(scores, relevance.reshape(scores.shape), lambda_, margin)


@pytest.mark.parametrize("margin", [0.0, 0.5])
@pytest.mark.parametrize("batch", [9, 40])  # on JAX: all marks compared at once; a search
def test_apc_class_ids_match_numpy_algorithm_1_with_ties_repeats_and_padding(margin, batch):
  scores, ids, where = tied_lists(8, batch=batch, n=6)
  scores[4, ids[4]] = scores[2, ids[2]]  # two true classes tied: rk+ by row
  expected, expected_grad = np_apc_loss(scores, ids, where, 30.0, margin)
  fn = lambda s: apc_loss_value(s, ids, where=where, lambda_=30.0, margin=margin)
  value, (grad,) = bt.value_and_grad(fn, scores)
  np.testing.assert_allclose(value, expected, rtol=1e-12)
  np.testing.assert_allclose(grad, expected_grad, rtol=1e-10, atol=1e-12)
  assert np.count_nonzero(grad) > len(ids)  # the perturbation passes items: not vacuous


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-5), (np.float64, 1e-10)])
def test_apc_class_ids_equal_the_sorting_path(dtype, tol, mode):
  """The one-hot rows take the path every class id took before: the B x C list sorted.
  (Compiled: slow, as above; eager is the fast counterpart.)"""
  scores, ids, where = tied_lists(9, batch=8, n=30, dtype=dtype)
  ids[3] = ids[5]
  one_hot = np.eye(30, dtype=dtype)[ids]

  def total(labels):
    kwargs = {"where": where, "lambda_": 4.0, "margin": 0.25}
    return lambda s: (
      3.0 * apc_loss_value(s, labels, **kwargs)
      + mean_average_precision_loss_value(s, labels, **kwargs)
    )

  got, want = (
    bt.value_and_grad(bt.compiled(total(labels), mode), scores) for labels in (ids, one_hot)
  )
  np.testing.assert_allclose(got[0], want[0], rtol=tol, atol=tol)
  np.testing.assert_allclose(got[1][0], want[1][0], rtol=tol, atol=tol)
  assert np.count_nonzero(want[1][0]) > len(ids)


def test_marked_rank_with_every_mark_padded_or_none_ahead():
  scores = np.array([[0.5, 0.5, 0.1], [0.5, 0.9, 0.5]])
  where = np.array([[True, False, True], [True, True, True]])
  # mark (0, 1) is padding: the loss sees (1, 2) alone, below 0.9 and two 0.5s ahead of it
  value, (grad,) = bt.value_and_grad(
    lambda s: apc_loss_value(s, np.array([1, 2]), where=where, lambda_=1.0), scores
  )
  np.testing.assert_allclose(value, 1.0 - 1.0 / 4.0)
  expected_value, expected_grad = np_apc_loss(scores, np.array([1, 2]), where, 1.0, 0.0)
  np.testing.assert_allclose(value, expected_value)
  np.testing.assert_allclose(grad, expected_grad, atol=1e-12)
  empty = np.zeros_like(where)
  assert bt.numpy(apc_loss_value(scores, np.array([1, 2]), where=empty)) == 0.0


@pytest.mark.parametrize("mode", bt.compile_modes())
@pytest.mark.parametrize("batch", [7, 40])  # compiled by XLA: all marks compared; a search
def test_marked_rank_gradient_with_signed_upstream_matches_algorithm_1(batch, mode):
  """The ranker itself, for any sign of ``dL/dr`` (marks move up and down, onto other scores: the
  integer scores and steps tie), with two marks tied, in every compile mode (TensorFlow's
  ``tf.function`` runs it as XLA clusters), against numpy Algorithm 1 on the flattened list:
  ``-(rk(y) - rk(y + lambda g)) / lambda``."""
  scores, ids, where = tied_lists(11, batch=batch, n=5)
  scores[4, ids[4]] = scores[2, ids[2]]
  upstream = np.resize([0.0, 1.5, -2.0, 0.7, -0.4, 3.0, -1.0, 1.0], batch)
  flat, group = scores.reshape(1, -1), where.reshape(1, -1)
  g = np.zeros_like(scores)
  rows = np.arange(batch)
  g[rows, ids] = np.where(where[rows, ids], upstream, 0.0)
  rk = ref.rank_within(flat, group).reshape(scores.shape)
  moved = ref.rank_within(flat + 3.0 * g.reshape(1, -1), group).reshape(scores.shape)
  expected = np.where(where, (moved - rk) / 3.0, 0.0)
  has_mark = where[rows, ids]
  fn = lambda s: ops.sum(blackbox_marked_rank(s, ids, where, 3.0) * ops.convert_to_tensor(upstream))
  value, (grad,) = bt.value_and_grad(bt.compiled(fn, mode), scores)
  np.testing.assert_allclose(value, np.sum(np.where(has_mark, rk[rows, ids], 1.0) * upstream))
  np.testing.assert_allclose(grad, expected, atol=1e-12)
  assert np.count_nonzero(expected) > batch
