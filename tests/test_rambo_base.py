"""Tests of tfrank4class.losses.rambo.base (the ranks and label handling the RaMBO losses share)
through the per-list loss functions, against independent references: hand-computed cases and the
numpy Algorithm 1 of ``_rambo_reference`` (rk+ a constant), on every backend."""

import _rambo_reference as ref
import backend_testing as bt
import numpy as np
import pytest

from tfrank4class.compat import ops
from tfrank4class.losses.rambo import base as rambo
from tfrank4class.losses.rambo.average_precision import average_precision_loss_values
from tfrank4class.losses.rambo.ndcg import ndcg_loss_values
from tfrank4class.losses.rambo.recall import recall_loss_values

#: float64 inputs stay float64 on every backend (JAX: ``jax_enable_x64``, on for each test).
pytestmark = pytest.mark.usefixtures("float64_inputs")


PER_LIST = [recall_loss_values, average_precision_loss_values, ndcg_loss_values]


def random_lists(seed, batch=6, n=15, pad=True):
  """Random scores and 0/1 relevance, ~15% padding (-1); every list keeps a relevant item."""
  rng = np.random.default_rng(seed)
  scores = rng.standard_normal((batch, n))
  relevance = (rng.random((batch, n)) < 0.3).astype(np.float64)
  relevance[:, 0] = 1.0  # every list has a relevant item
  if pad:
    relevance[rng.random((batch, n)) < 0.15] = -1.0
    relevance[:, 0] = 1.0
  return scores, relevance


def _gradient(fn, scores, relevance, **kwargs):
  return bt.value_and_grad(lambda y: ops.sum(fn(y, relevance, **kwargs)), scores)[1][0]


def test_list_ranks_hand_case():
  scores = np.array([[0.9, 0.5, 0.7, 3.0]], np.float32)
  rk, rkp, rel, valid = rambo.list_ranks(scores, np.array([[0.0, 1.0, 1.0, -1.0]], np.float32))
  np.testing.assert_array_equal(bt.numpy(rk)[:, :3], [[1, 3, 2]])  # the padded 3.0 is ignored
  np.testing.assert_array_equal(bt.numpy(rkp)[:, 1:3], [[2, 1]])
  np.testing.assert_array_equal(bt.numpy(rel), [[False, True, True, False]])
  np.testing.assert_array_equal(bt.numpy(valid), [[True, True, True, False]])


def test_labels_as_class_ids_dense_or_masked_by_where_give_one_list():
  """Class ids are one-hot rows; ``where`` False is padding, as relevance -1 is."""
  scores = np.array([[0.9, 0.5, 0.7, 3.0], [0.1, 0.4, 0.3, 0.2]], np.float32)
  dense = np.array([[0.0, 1.0, 0.0, -1.0], [0.0, 0.0, 1.0, -1.0]], np.float32)
  where = dense >= 0
  for fn in PER_LIST:
    want = bt.numpy(fn(scores, dense))
    got = bt.numpy(fn(scores, np.array([1, 2]), where=where))
    np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=fn.__name__)
    np.testing.assert_allclose(
      bt.numpy(fn(scores, np.maximum(dense, 0.0), where=where)), want, rtol=1e-6
    )
  with pytest.raises(TypeError, match="`where` must be a boolean tensor"):
    recall_loss_values(scores, dense, where=where.astype(np.float32))


def test_three_item_gradient_by_hand():
  """rk+ carries no gradient: the top relevant item gets exactly 0 (Algorithm 1 by hand).

  scores (1.0, 0.9, 0.8), relevance (1, 0, 1), lambda_ = 1 on ranks / n, n = 3, i.e. lambda = 3 on
  integer ranks. rk = (1, 2, 3), rk+ = (1, -, 2), r = (0, -, 1).
  Recall (log): L = (log 1 + log 2) / 2, dL/drk = (1/(2*1), 0, 1/(2*2)) = (1/2, 0, 1/4).
    y' = y + 3 dL/drk = (2.5, 0.9, 1.55): rk(y') = (1, 3, 2);
    dL/dy = -(rk - rk(y')) / 3 = (0, 1/3, -1/3).
  AP: L = 1 - (1/1 + 2/3) / 2, dL/drk = rk+ / (|P| rk^2) = (1/2, 0, 2/18) = (1/2, 0, 1/9).
    y' = (2.5, 0.9, 0.8 + 1/3): rk(y') = (1, 3, 2); dL/dy = (0, 1/3, -1/3).
  (Differentiating rk+ as well would add -(rk+ - rk+(y + 3 dL/drk+)) / 3 with dL/drk+ =
  (-1/2, 0, -1/4) for recall and (-1/2, 0, -1/6) for AP: the relevant items swap among
  themselves, adding (1/3, 0, -1/3) for both, a positive gradient pushing the top relevant item
  down.)
  """
  scores, relevance = np.array([[1.0, 0.9, 0.8]]), np.array([[1.0, 0.0, 1.0]])
  expected = [[0.0, 1 / 3, -1 / 3]]
  for fn, kind in ((recall_loss_values, "log"), (average_precision_loss_values, "ap")):
    np.testing.assert_allclose(
      ref.list_gradient(scores, relevance, 1.0, kind), expected, atol=1e-15
    )
    got = _gradient(fn, scores, relevance)
    np.testing.assert_allclose(got, expected, atol=1e-15)
    assert got[0, 0] == 0.0


@pytest.mark.parametrize("kind", ["log", "loglog", "ap"])
@pytest.mark.parametrize(
  "shape,lam,margin",
  [
    ((8, 8), 0.5, 0.0),
    ((6, 15), 0.3, 0.0),
    ((15, 6), 0.5, 0.0),
    ((7, 12), 0.5, 0.3),
    ((12, 7), 1.0, 0.1),
  ],
)
def test_gradient_matches_algorithm_1_with_constant_rk_plus(kind, shape, lam, margin):
  """Square and non-square batches, with and without margin, padding included (float64)."""
  scores, relevance = random_lists(shape[0] + shape[1], batch=shape[0], n=shape[1])
  expected = ref.list_gradient(scores, relevance, lam, kind, margin)
  if kind == "ap":
    got = _gradient(average_precision_loss_values, scores, relevance, lambda_=lam, margin=margin)
  else:
    got = _gradient(
      recall_loss_values, scores, relevance, lambda_=lam, margin=margin, weighting=kind
    )
  np.testing.assert_allclose(got, expected, atol=1e-12)
  assert np.count_nonzero(expected) > 5


@pytest.mark.parametrize("fn", PER_LIST)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_score_dtype_is_kept(fn, dtype):
  scores, relevance = random_lists(7)
  values = fn(scores.astype(dtype), relevance.astype(dtype))
  assert bt.numpy(values).dtype == dtype


@pytest.mark.parametrize("fn", PER_LIST)
def test_degenerate_lists_finite_loss_and_gradient(fn):
  cases = [
    ([[0.3, 0.2, 0.1]], [[0.0, 0.0, 0.0]], 0.0),  # no relevant item
    ([[0.3, 9.0]], [[1.0, -1.0]], 0.0),  # a single valid item (labels are lists of >= 2)
    ([[0.5, 0.5, 0.5, 0.5]], [[0.0, 1.0, 0.0, 1.0]], None),  # all-equal scores
    ([[0.1, 0.2]], [[-1.0, -1.0]], 0.0),  # only padding
  ]
  for scores, relevance, expected in cases:
    relevance = np.array(relevance, np.float32)
    value, (grad,) = bt.value_and_grad(
      lambda y, r=relevance: ops.sum(fn(y, r)), np.array(scores, np.float32)
    )
    assert np.all(np.isfinite(value)) and np.all(np.isfinite(grad))
    if expected is not None:
      np.testing.assert_allclose(value, expected)


@pytest.mark.parametrize("fn", PER_LIST)
def test_compiled_like_eager(fn):
  scores, relevance = random_lists(8)
  scores, relevance = scores.astype(np.float32), relevance.astype(np.float32)
  want = bt.numpy(fn(scores, relevance))
  for mode in bt.compile_modes():
    got = bt.numpy(bt.compiled(lambda s, r: fn(s, r, margin=0.1), mode)(scores, relevance))
    np.testing.assert_allclose(got, bt.numpy(fn(scores, relevance, margin=0.1)), rtol=1e-5)
  assert np.all(np.isfinite(want))


def test_all_equal_scores_tie_rule():
  # Ties are broken by index: relevant items 1 and 3 rank 2nd and 4th, each behind 1 / 2
  # irrelevant items: recall = (log 2 + log 3) / 2.
  got = recall_loss_values(
    np.full([1, 4], 0.5, np.float32), np.array([[0.0, 1.0, 0.0, 1.0]], np.float32)
  )
  np.testing.assert_allclose(bt.numpy(got), [(np.log(2) + np.log(3)) / 2], rtol=1e-6)


def test_non_finite_scores_raise_not_nan():
  for fn in (recall_loss_values, average_precision_loss_values):
    with pytest.raises(ValueError, match="must be finite"):
      fn(np.array([[0.1, np.nan]], np.float32), np.array([[1.0, 0.0]], np.float32))


def test_bad_labels_raise_eagerly_and_are_nan_where_nothing_can_raise():
  scores = np.array([[0.1, 0.2, 0.3], [0.3, 0.2, 0.1]], np.float32)
  with pytest.raises(ValueError, match=r"in \[0, num_classes=3\), got \[3\]"):
    recall_loss_values(scores, np.array([0, 3]))
  for mode in bt.compile_modes():
    if mode in ("xla", "jit"):
      got = bt.numpy(bt.compiled(recall_loss_values, mode)(scores, np.array([0, 3])))
      assert np.isfinite(got[0]) and np.isnan(got[1]), (mode, got)
