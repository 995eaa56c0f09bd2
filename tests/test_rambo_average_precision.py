"""Tests of tfrank4class.losses.rambo.average_precision: the AP, mAP and APC functions and the
AP, mAP, APC and mAP+APC Keras losses against scikit-learn's average_precision_score,
hand-computed cases and the numpy Algorithm 1 of ``_rambo_reference`` (gradients, with score
memory), on every backend (strategies: TensorFlow only; the score memory: not on JAX)."""

import _rambo_reference as ref
import backend_testing as bt
import numpy as np
import pytest
from sklearn.metrics import average_precision_score

from tfrank4class import losses
from tfrank4class.compat import BACKEND, keras, ops
from tfrank4class.losses import APCLoss, AveragePrecisionLoss, MapApcLoss, MeanAveragePrecisionLoss
from tfrank4class.losses.rambo.average_precision import (
  apc_loss_value,
  average_precision_loss_values,
  mean_average_precision_loss_value,
)

#: float64 inputs stay float64 on every backend (JAX: ``jax_enable_x64``, on for each test).
pytestmark = pytest.mark.usefixtures("float64_inputs")


#: A score memory keeps only values it can read when called: on JAX, not under jax.grad.
MEMORY_UNDER_GRAD = BACKEND != "jax"


def sk_map(scores, relevance):
  present = [c for c in range(scores.shape[1]) if relevance[:, c].any()]
  return np.mean([average_precision_score(relevance[:, c], scores[:, c]) for c in present])


def sk_apc(scores, relevance):
  return average_precision_score(relevance.ravel(), scores.ravel())


def test_hand_cases():
  np.testing.assert_allclose(
    bt.numpy(AveragePrecisionLoss(reduction="none")([[1.0, 1.0, 0.0]], [[0.9, 0.5, 0.7]])),
    [1 - (1 + 2 / 3) / 2],
    rtol=1e-6,
  )
  labels, scores = [0, 0, 1], [[0.9, 0.0], [0.5, 0.1], [0.7, 0.8]]
  # class 0: rows 0 (0.9) and 1 (0.5) relevant, row 2 (0.7) between: AP 5/6; class 1: AP 1.
  np.testing.assert_allclose(
    float(MeanAveragePrecisionLoss()(labels, scores)), 1 - (5 / 6 + 1) / 2, rtol=1e-6
  )
  # one list 0.9 0.8 0.7 0.5 0.1 0.0, relevant at ranks 1, 2, 4: AP = (1 + 1 + 3/4) / 3.
  np.testing.assert_allclose(float(APCLoss()(labels, scores)), 1 - 2.75 / 3, rtol=1e-6)
  np.testing.assert_allclose(
    float(MapApcLoss(map_weight=1.0, apc_weight=3.0)(labels, scores)),
    (1 * (1 - 11 / 12) + 3 * (1 - 2.75 / 3)) / 4,
    rtol=1e-6,
  )


def test_ap_rows_match_sklearn_with_dense_and_padding():
  rng = np.random.default_rng(0)
  scores = rng.standard_normal((5, 12)).astype(np.float32)
  relevance = (rng.random((5, 12)) < 0.3).astype(np.float32)
  relevance[:, 0] = 1.0
  relevance[:, -2:] = -1.0
  got = bt.numpy(AveragePrecisionLoss(reduction="none", lambda_=0.5)(relevance, scores))
  for b in range(5):
    np.testing.assert_allclose(
      got[b], 1 - average_precision_score(relevance[b, :-2], scores[b, :-2]), rtol=1e-5
    )


@pytest.mark.parametrize("batch,classes", [(24, 5), (6, 10), (8, 8)])
def test_map_and_apc_non_square_match_sklearn(batch, classes):
  rng = np.random.default_rng(batch)
  scores = rng.standard_normal((batch, classes)).astype(np.float32)
  labels = rng.integers(0, classes, batch)
  relevance = np.eye(classes)[labels]
  np.testing.assert_allclose(
    float(MeanAveragePrecisionLoss()(labels, scores)), 1 - sk_map(scores, relevance), rtol=1e-5
  )
  np.testing.assert_allclose(
    float(APCLoss()(labels, scores)), 1 - sk_apc(scores, relevance), rtol=1e-5
  )
  np.testing.assert_allclose(
    float(MapApcLoss()(labels, scores)),
    (2 * (1 - sk_map(scores, relevance)) + (1 - sk_apc(scores, relevance))) / 3,
    rtol=1e-5,
  )


@pytest.mark.parametrize("cls", [MeanAveragePrecisionLoss, APCLoss, MapApcLoss])
def test_memory_lengthens_lists(cls):
  rng = np.random.default_rng(1)
  loss = cls(memory=2)
  history = []
  for _ in range(4):
    scores = rng.standard_normal((6, 4)).astype(np.float32)
    labels = rng.integers(0, 4, 6)
    history.append((scores, np.eye(4)[labels]))
    kept = history[::-1][:3]  # current + 2 remembered, newest first
    all_scores = np.concatenate([s for s, _ in kept])
    all_rel = np.concatenate([r for _, r in kept])
    expected = {
      MeanAveragePrecisionLoss: 1 - sk_map(all_scores, all_rel),
      APCLoss: 1 - sk_apc(all_scores, all_rel),
      MapApcLoss: (2 * (1 - sk_map(all_scores, all_rel)) + (1 - sk_apc(all_scores, all_rel))) / 3,
    }[cls]
    np.testing.assert_allclose(float(loss(labels, scores)), expected, rtol=1e-5)


@pytest.mark.skipif(not MEMORY_UNDER_GRAD, reason="JAX: a memory cannot keep traced values")
@pytest.mark.parametrize(
  "cls,margin", [(MeanAveragePrecisionLoss, 0.0), (MeanAveragePrecisionLoss, 0.2), (APCLoss, 0.1)]
)
def test_gradient_with_memory_matches_algorithm_1(cls, margin):
  """The lists are the current batch followed by the remembered ones; only the current rows get a
  gradient, that of Algorithm 1 on the whole list with rk+ a constant."""
  rng = np.random.default_rng(2)
  loss = cls(memory=2, lambda_=4.0, margin=margin)
  reference = {MeanAveragePrecisionLoss: ref.map_gradient, APCLoss: ref.apc_gradient}[cls]
  history = []
  for _ in range(3):
    scores = rng.standard_normal((6, 4))
    labels = rng.integers(0, 4, 6)
    history.insert(0, (scores, np.eye(4)[labels]))
    _, (grad,) = bt.value_and_grad(lambda y, labels=labels: loss(labels, y), scores)
    all_scores = np.concatenate([s for s, _ in history[:3]])
    all_relevance = np.concatenate([r for _, r in history[:3]])
    expected = reference(all_scores, all_relevance, 4.0, margin)[:6]
    np.testing.assert_allclose(grad, expected, atol=1e-12)
  assert np.count_nonzero(expected) > 2


def test_classes_without_positives_left_out_and_empty_batch():
  # Only class 0 has positives: mAP is its AP alone (1.0 here), whatever the other columns hold.
  scores = [[0.9, 0.1, 0.5], [0.2, 0.8, 0.3]]
  np.testing.assert_allclose(float(MeanAveragePrecisionLoss()([[1, 0, 0], [0, 0, 0]], scores)), 0.0)
  np.testing.assert_allclose(float(MeanAveragePrecisionLoss()([[0, 0, 0], [0, 0, 0]], scores)), 0.0)


def test_degenerate_inputs_finite():
  cases = [([[0.0, 0.0]], [[0.1, 0.2]]), ([1, 0], [[0.5, 0.5], [0.5, 0.5]])]
  for cls in (AveragePrecisionLoss, MeanAveragePrecisionLoss, APCLoss, MapApcLoss):
    for labels, scores in cases:
      labels = np.array(labels)
      value, (grad,) = bt.value_and_grad(
        lambda y, labels=labels, cls=cls: cls()(labels, y), np.array(scores, np.float32)
      )
      assert np.isfinite(value) and np.all(np.isfinite(grad))


def test_compiled_modes():
  rng = np.random.default_rng(3)
  scores = rng.standard_normal((8, 5)).astype(np.float32)
  labels = rng.integers(0, 5, 8)
  for loss in (AveragePrecisionLoss(), MeanAveragePrecisionLoss(), MapApcLoss(margin=0.1)):
    for mode in bt.compile_modes():
      f = bt.compiled(lambda y, s, loss=loss: loss(y, s), mode)
      np.testing.assert_allclose(
        bt.numpy(f(labels, scores)), bt.numpy(loss(labels, scores)), rtol=1e-5
      )


@pytest.mark.tensorflow_only
def test_fit_under_mirrored_strategy_with_memory(mirrored_strategy):
  rng = np.random.default_rng(4)
  x = rng.standard_normal((64, 6)).astype(np.float32)
  y = rng.integers(0, 4, 64)
  with mirrored_strategy.scope():
    model = keras.Sequential([keras.Input([6]), keras.layers.Dense(4)])
    model.compile("adam", loss=MapApcLoss(memory=2, margin=0.05))
  history = model.fit(x, y, batch_size=16, epochs=1, verbose=0)
  assert np.all(np.isfinite(history.history["loss"]))


def test_registry_and_save(tmp_path):
  for name, cls in [
    ("average_precision_loss", AveragePrecisionLoss),
    ("mean_average_precision_loss", MeanAveragePrecisionLoss),
    ("apc_loss", APCLoss),
    ("map_apc_loss", MapApcLoss),
  ]:
    assert isinstance(losses.get(name), cls)
  loss = losses.get("map_apc_loss", map_weight=3.0, apc_weight=1.0, memory=2, lambda_=4.0)
  clone = MapApcLoss.from_config(loss.get_config())
  assert (clone.map_weight, clone.apc_weight, clone.memory, clone.lambda_) == (3.0, 1.0, 2, 4.0)
  model = keras.Sequential([keras.Input([4]), keras.layers.Dense(3)])
  model.compile("sgd", loss=loss)
  model.save(tmp_path / "m.keras")
  loaded = keras.models.load_model(tmp_path / "m.keras")
  assert isinstance(loaded.loss, MapApcLoss) and loaded.loss.map_weight == 3.0


def test_bad_arguments():
  with pytest.raises(ValueError, match=r"`lambda_` must be a finite number > 0\.0, got -1"):
    MeanAveragePrecisionLoss(lambda_=-1)
  with pytest.raises(ValueError, match=r"`margin` must be a finite number >= 0\.0, got -0\.1"):
    APCLoss(margin=-0.1)
  with pytest.raises(ValueError, match=r"`memory` must be an integer >= 0, got -1"):
    MapApcLoss(memory=-1)
  with pytest.raises(ValueError, match="`map_weight` and `apc_weight` must not both be 0"):
    MapApcLoss(map_weight=0, apc_weight=0)
  with pytest.raises(ValueError, match=r"`apc_weight` must be a finite number >= 0\.0, got -1"):
    MapApcLoss(apc_weight=-1)
  with pytest.raises(TypeError):
    AveragePrecisionLoss(memory=2)  # per-row lists: no memory argument


def test_non_finite_scores_raise():
  with pytest.raises(ValueError, match="must be finite"):
    MeanAveragePrecisionLoss()(np.array([0, 1]), np.array([[np.inf, 0.0], [0.1, 0.2]], np.float32))


def test_memory_under_jax_grad_says_why_it_cannot():
  loss = MeanAveragePrecisionLoss(memory=1)
  scores, labels = np.eye(3, dtype=np.float32), np.arange(3)
  if MEMORY_UNDER_GRAD:
    assert np.isfinite(bt.value_and_grad(lambda s: loss(labels, s), scores)[0])
    return
  # JAX: the memory's variables exist (a first eager call) but jax.grad does not carry them.
  loss(labels, scores)
  with pytest.raises(ValueError, match="traced function that does not carry its variables"):
    bt.value_and_grad(lambda s: loss(labels, s), scores)


# ---------------------------------------------------------------------------------------------
# The pure functions.


def random_lists(seed, batch=6, n=15):
  """Random float64 scores and 0/1 relevance, ~15% padding; every list keeps a relevant item."""
  rng = np.random.default_rng(seed)
  scores = rng.standard_normal((batch, n))
  relevance = (rng.random((batch, n)) < 0.3).astype(np.float64)
  relevance[rng.random((batch, n)) < 0.15] = -1.0
  relevance[:, 0] = 1.0
  return scores, relevance


def _gradient(fn, scores, relevance, **kwargs):
  return bt.value_and_grad(lambda y: ops.sum(fn(y, relevance, **kwargs)), scores)[1][0]


def test_average_precision_function_matches_sklearn_in_float64():
  scores, relevance = random_lists(3)
  got = bt.numpy(average_precision_loss_values(scores, relevance))
  assert got.dtype == np.float64
  for b in range(scores.shape[0]):
    valid = relevance[b] >= 0
    ap = average_precision_score(relevance[b, valid] > 0, scores[b, valid])
    np.testing.assert_allclose(got[b], 1 - ap, rtol=1e-10)


def test_average_precision_function_hand_case_and_margin():
  got = average_precision_loss_values(
    np.array([[0.9, 0.5, 0.7]], np.float32), np.array([[1.0, 1.0, 0.0]], np.float32)
  )
  np.testing.assert_allclose(bt.numpy(got), [1 - (1 + 2 / 3) / 2], rtol=1e-6)
  # relevant 0.6 vs irrelevant 0.5: without margin AP = 1; with margin 0.2 (Eq. 14-15) the gap
  # is 0.6 - 0.1 < 0.5 + 0.1, so the relevant item drops to rank 2 and AP = 1/2.
  scores, relevance = np.array([[0.6, 0.5]], np.float32), np.array([[1.0, 0.0]], np.float32)
  np.testing.assert_allclose(bt.numpy(average_precision_loss_values(scores, relevance)), [0.0])
  np.testing.assert_allclose(
    bt.numpy(average_precision_loss_values(scores, relevance, margin=0.2)), [0.5]
  )


@pytest.mark.parametrize("shape", [(16, 5), (5, 16), (7, 7)])
def test_map_and_apc_functions_non_square_match_sklearn(shape):
  rng = np.random.default_rng(shape[0])
  scores = rng.standard_normal(shape)
  labels = rng.integers(0, shape[1], shape[0])
  relevance = np.eye(shape[1])[labels]
  got = bt.numpy(mean_average_precision_loss_value(scores, labels))
  np.testing.assert_allclose(got, 1 - sk_map(scores, relevance), rtol=1e-10)
  np.testing.assert_allclose(
    bt.numpy(apc_loss_value(scores, relevance)), 1 - sk_apc(scores, relevance), rtol=1e-10
  )


@pytest.mark.parametrize(
  "shape,lam,margin", [((16, 5), 2.0, 0.0), ((5, 16), 8.0, 0.2), ((7, 7), 3.0, 0.1)]
)
def test_map_and_apc_gradients_match_algorithm_1(shape, lam, margin):
  rng = np.random.default_rng(shape[0] * 100 + shape[1])
  scores = rng.standard_normal(shape)
  relevance = np.eye(shape[1])[rng.integers(0, shape[1], shape[0])]
  for fn, reference in (
    (mean_average_precision_loss_value, ref.map_gradient),
    (apc_loss_value, ref.apc_gradient),
  ):
    expected = reference(scores, relevance, lam, margin)
    got = _gradient(fn, scores, relevance, lambda_=lam, margin=margin)
    np.testing.assert_allclose(got, expected, atol=1e-12)
    assert np.count_nonzero(expected) > 3


def test_batch_values_are_nan_for_bad_labels_where_nothing_can_raise():
  scores = np.eye(3, dtype=np.float32)
  for fn in (mean_average_precision_loss_value, apc_loss_value):
    with pytest.raises(ValueError, match="num_classes=3"):
      fn(scores, np.array([0, 1, 5]))
    for mode in bt.compile_modes():
      if mode in ("xla", "jit"):
        assert np.isnan(bt.numpy(bt.compiled(fn, mode)(scores, np.array([0, 1, 5]))))
