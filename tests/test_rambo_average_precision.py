"""Tests of tfrank4class.losses.rambo.average_precision: AP, mAP, APC and mAP+APC Keras losses
against scikit-learn's average_precision_score, hand-computed cases and the numpy Algorithm 1 of
``_rambo_reference`` (gradients, with score memory)."""

import _rambo_reference as ref
import numpy as np
import pytest
import tensorflow as tf
from sklearn.metrics import average_precision_score

from tfrank4class import losses
from tfrank4class.losses import APCLoss, AveragePrecisionLoss, MapApcLoss, MeanAveragePrecisionLoss


def sk_map(scores, relevance):
  present = [c for c in range(scores.shape[1]) if relevance[:, c].any()]
  return np.mean([average_precision_score(relevance[:, c], scores[:, c]) for c in present])


def sk_apc(scores, relevance):
  return average_precision_score(relevance.ravel(), scores.ravel())


def test_hand_cases():
  np.testing.assert_allclose(
    AveragePrecisionLoss(reduction="none")([[1.0, 1.0, 0.0]], [[0.9, 0.5, 0.7]]).numpy(),
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
  got = AveragePrecisionLoss(reduction="none", lambda_=0.5)(relevance, scores).numpy()
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
    y = tf.constant(scores)
    with tf.GradientTape() as tape:
      tape.watch(y)
      value = loss(labels, y)
    all_scores = np.concatenate([s for s, _ in history[:3]])
    all_relevance = np.concatenate([r for _, r in history[:3]])
    expected = reference(all_scores, all_relevance, 4.0, margin)[:6]
    np.testing.assert_allclose(tape.gradient(value, y).numpy(), expected, atol=1e-12)
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
      y = tf.constant(scores)
      with tf.GradientTape() as tape:
        tape.watch(y)
        value = cls()(labels, y)
      assert np.isfinite(value.numpy()) and np.all(np.isfinite(tape.gradient(value, y).numpy()))


@pytest.mark.parametrize("jit", [False, True])
def test_tf_function_and_xla(jit):
  rng = np.random.default_rng(3)
  scores = rng.standard_normal((8, 5)).astype(np.float32)
  labels = rng.integers(0, 5, 8)
  for loss in (AveragePrecisionLoss(), MeanAveragePrecisionLoss(), MapApcLoss(margin=0.1)):
    f = tf.function(lambda y, s, loss=loss: loss(y, s), jit_compile=jit)
    np.testing.assert_allclose(f(labels, scores).numpy(), loss(labels, scores).numpy(), rtol=1e-6)


def test_fit_under_mirrored_strategy_with_memory(mirrored_strategy):
  rng = np.random.default_rng(4)
  x = rng.standard_normal((64, 6)).astype(np.float32)
  y = rng.integers(0, 4, 64)
  with mirrored_strategy.scope():
    model = tf.keras.Sequential([tf.keras.Input([6]), tf.keras.layers.Dense(4)])
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
  model = tf.keras.Sequential([tf.keras.Input([4]), tf.keras.layers.Dense(3)])
  model.compile("sgd", loss=loss)
  model.save(tmp_path / "m.keras")
  loaded = tf.keras.models.load_model(tmp_path / "m.keras")
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
  with pytest.raises(tf.errors.InvalidArgumentError, match="must be finite"):
    MeanAveragePrecisionLoss()([0, 1], [[np.inf, 0.0], [0.1, 0.2]])
