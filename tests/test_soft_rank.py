"""Tests of tfrank4class.losses.topk.soft_rank: the soft ranks of the authors' NumPy code
(committed fixtures of ``tools/soft_sort_reference.py``), the hard limit against scipy, padding,
finite differences, compiled modes, Keras integration and bad input, on every backend (strategies:
TensorFlow only)."""

import pathlib

import backend_testing as bt
import numpy as np
import pytest
import scipy.stats

from tfrank4class import losses
from tfrank4class.compat import keras, ops
from tfrank4class.losses.topk.soft_rank import SoftRankTopKLoss, soft_rank_topk_loss

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "soft_sort.npz"


#: float64 inputs stay float64 on every backend (JAX: ``jax_enable_x64``, on for each test).
pytestmark = pytest.mark.usefixtures("float64_inputs")


def test_soft_ranks_of_the_authors_code():
  """The fixture cases ranked highest-first ("DESCENDING") without ties: loss from their ranks."""
  data = np.load(FIXTURES)
  checked = 0
  for case in sorted({key.split("_")[0] for key in data.files}):
    n, eps, kl, descending = data[f"{case}_params"]
    scores = data[f"{case}_scores"]
    if not descending:
      continue
    labels = np.arange(len(scores)) % int(n)
    for k in (1, 3):
      expected = np.maximum(data[f"{case}_rank"][np.arange(len(scores)), labels] - k, 0)
      got = bt.numpy(
        soft_rank_topk_loss(
          scores, labels, k=k, regularization_strength=eps, regularization="kl" if kl else "l2"
        )
      )
      np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)
      checked += 1
  assert checked >= 6


def test_tiny_regularization_is_the_hinge_on_the_exact_rank():
  rng = np.random.default_rng(0)
  s = np.array([rng.permutation(20) * 0.1 for _ in range(6)])
  y = rng.integers(0, 20, 6)
  ranks = np.array([scipy.stats.rankdata(-row)[label] for row, label in zip(s, y)])
  for k in (1, 5):
    for regularization in ("l2", "kl"):
      got = bt.numpy(
        soft_rank_topk_loss(s, y, k=k, regularization_strength=1e-3, regularization=regularization)
      )
      np.testing.assert_allclose(got, np.maximum(ranks - k, 0), atol=1e-6)


def test_two_classes_closed_form():
  """C = 2, l2: the true class's soft rank is 1.5 - clip((s_y - s_o) / (2 eps), -1/2, 1/2)."""
  for sy, so, eps in [(0.2, 0.5, 1.0), (0.2, 0.5, 0.1), (1.0, 0.0, 4.0)]:
    r = 1.5 - np.clip((sy - so) / (2 * eps), -0.5, 0.5)
    got = bt.numpy(soft_rank_topk_loss(np.array([[sy, so]]), [0], k=1, regularization_strength=eps))
    np.testing.assert_allclose(got, [max(r - 1, 0)], rtol=1e-12)


def test_scores_farther_apart_than_eps_give_the_hard_hinge_and_no_gradient():
  """l2: when consecutive sorted scores differ by more than ``eps``, ``-s / eps`` minus the ranks
  is already decreasing in sorted order, so the projection is the vertex (the exact ranks) and
  its Jacobian is zero there: a true class ranked below ``k`` gets no gradient. Gaps below
  ``eps`` pool the classes and give one (finite differences)."""
  base = np.arange(9.0, -1.0, -1.0)  # class 9 ranked last of 10
  f = bt.quickest(lambda v: ops.sum(soft_rank_topk_loss(v, [9], k=5, regularization_strength=1.0)))
  for gap, expect_gradient in ((2.0, False), (0.3, True)):
    scores = np.array([base * gap])
    loss, (gradient,) = bt.value_and_grad(f, scores)
    gradient = gradient[0]
    numeric = bt.finite_difference_grad(f, scores, eps=1e-6)[0]
    np.testing.assert_allclose(gradient, numeric, atol=1e-6)
    if expect_gradient:
      assert float(loss) < 5.0 and np.abs(gradient).max() > 0.1
    else:
      np.testing.assert_allclose(float(loss), 10 - 5, rtol=1e-12)  # rank 10, k = 5
      np.testing.assert_array_equal(gradient, np.zeros(10))


def test_padding_is_the_loss_of_the_valid_classes():
  rng = np.random.default_rng(1)
  s = rng.normal(size=(3, 9))
  dense = np.zeros((3, 9))
  dense[np.arange(3), [0, 4, 6]] = 1.0
  dense[:, 7:] = -1.0
  s_padded = s.copy()
  s_padded[:, 7:] = [[50.0, -3.0], [np.nan, 0.0], [np.inf, 1.0]]
  got = bt.numpy(soft_rank_topk_loss(s_padded, dense, k=2, regularization_strength=0.5))
  expected = bt.numpy(soft_rank_topk_loss(s[:, :7], [0, 4, 6], k=2, regularization_strength=0.5))
  np.testing.assert_allclose(got, expected, atol=1e-12)
  empty = bt.numpy(soft_rank_topk_loss([[1.0, 2.0, 3.0]], [[0.0, 0.0, -1.0]], k=1))
  np.testing.assert_array_equal(empty, [0.0])


def test_finite_differences_float64():
  rng = np.random.default_rng(2)
  s, y = rng.normal(size=(3, 8)), np.array([0, 3, 7])
  for regularization in ("l2", "kl"):
    f = bt.quickest(
      lambda v, r=regularization: ops.sum(
        soft_rank_topk_loss(v, y, k=2, regularization_strength=2.0, regularization=r)
      )
    )
    _, (grad,) = bt.value_and_grad(f, s)
    np.testing.assert_allclose(grad, bt.finite_difference_grad(f, s, eps=1e-6), atol=1e-6)


@pytest.mark.parametrize("mode", [m for m in bt.compile_modes() if m != "eager"])
def test_compiled_modes_agree_with_eager(mode):
  rng = np.random.default_rng(3)
  s = rng.normal(size=(4, 12))
  y = np.array([0, 5, 11, 2])
  loss = SoftRankTopKLoss(k=3, regularization_strength=0.5, reduction="none")
  fn = bt.compiled(lambda v: loss(y, v), mode)
  eager = bt.value_and_grad(lambda v: ops.sum(loss(y, v)), s)
  traced = bt.value_and_grad(lambda v: ops.sum(fn(v)), s)
  np.testing.assert_allclose(bt.numpy(fn(s)), bt.numpy(loss(y, s)), rtol=1e-6, atol=1e-9)
  np.testing.assert_allclose(traced[1][0], eager[1][0], rtol=1e-6, atol=1e-9)


@pytest.mark.tensorflow_only
def test_fit_under_mirrored_strategy(mirrored_strategy):
  rng = np.random.default_rng(4)
  x = rng.standard_normal((64, 6)).astype(np.float32)
  y = rng.integers(0, 10, 64)
  with mirrored_strategy.scope():
    model = keras.Sequential([keras.Input([6]), keras.layers.Dense(10)])
    model.compile("adam", loss=SoftRankTopKLoss(k=3, regularization="kl"))
  history = model.fit(x, y, batch_size=16, epochs=1, verbose=0)
  assert np.all(np.isfinite(history.history["loss"]))


def test_registry_config_and_fit():
  """Saving and loading in a model: tests/test_loss_keras.py."""
  loss = losses.get("soft_rank_topk_loss", k=3, regularization_strength=0.25, regularization="kl")
  assert isinstance(loss, SoftRankTopKLoss)
  config = loss.get_config()
  assert (config["k"], config["regularization_strength"], config["regularization"]) == (
    3,
    0.25,
    "kl",
  )
  restored = keras.losses.deserialize(keras.losses.serialize(loss))
  assert isinstance(restored, SoftRankTopKLoss) and restored.k == 3
  assert restored.regularization == "kl"
  model = keras.Sequential([keras.Input([4]), keras.layers.Dense(5)])
  model.compile("sgd", loss=loss)
  history = model.fit(np.ones((8, 4), np.float32), np.arange(8) % 5, verbose=0)
  assert np.all(np.isfinite(history.history["loss"]))


def test_bad_arguments():
  with pytest.raises(ValueError, match=r"`k` must be an integer >= 1, got 0"):
    SoftRankTopKLoss(k=0)
  with pytest.raises(ValueError, match=r"`regularization_strength` must be a finite number > 0"):
    SoftRankTopKLoss(regularization_strength=0)
  with pytest.raises(ValueError, match=r"`regularization` must be one of \['kl', 'l2'\]"):
    SoftRankTopKLoss(regularization="l1")
  with pytest.raises(ValueError, match=r"`k` must be smaller than the number of classes, got k=3"):
    SoftRankTopKLoss(k=3)([0], [[1.0, 2.0, 3.0]])
  with pytest.raises(ValueError, match="at most one entry > 0 per row"):
    soft_rank_topk_loss([[1.0, 2.0, 3.0]], [[1.0, 1.0, 0.0]], k=1)
  with pytest.raises(ValueError, match="must be finite"):
    soft_rank_topk_loss([[1.0, np.inf, 3.0]], [0], k=1)
