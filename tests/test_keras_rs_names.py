"""Tests of tfrank4class.losses.keras_rs_names, the DCG metric and keras-rs's labels dict: the
values of keras-rs 0.4.0 itself (committed by ``tools/keras_rs_reference.py``), a hand-computed
case, and what a keras-rs user does (compile, fit on a dict of labels and mask, save and load)."""

import pathlib

import numpy as np
import pytest

from tests.backend_testing import compile_modes, compiled, numpy
from tfrank4class import losses, metrics
from tfrank4class.compat import keras
from tfrank4class.labels import apply_mask

FIXTURES = np.load(pathlib.Path(__file__).parent / "fixtures" / "keras_rs.npz")
LOSS_NAMES = (
  "PairwiseHingeLoss",
  "PairwiseLogisticLoss",
  "PairwiseSoftZeroOneLoss",
  "PairwiseMeanSquaredError",
)
METRICS = {
  "dcg_3": metrics.DCG(3),
  "ndcg_3": metrics.NDCG(3),
  "mrr": metrics.MRR(),
  "map": metrics.MeanAveragePrecision(),
  "precision_3": metrics.PrecisionAtK(3),
  "recall_3": metrics.RecallAtK(3),
}


def _y_true(masked):
  labels = FIXTURES["labels"]
  return {"labels": labels, "mask": FIXTURES["mask"]} if masked else labels


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("name", LOSS_NAMES)
def test_pairwise_losses_equal_keras_rs(name, masked):
  loss = getattr(losses, name)(reduction="none")
  expected = FIXTURES[name + ("_masked" if masked else "")].sum(axis=1)  # keras-rs: per item
  for mode in compile_modes():
    got = compiled(lambda s, loss=loss: loss(_y_true(masked), s), mode)(FIXTURES["scores"])
    np.testing.assert_allclose(numpy(got), expected, rtol=1e-5, atol=1e-5, err_msg=mode)


def test_list_mle_equals_keras_rs_on_distinct_labels():
  got = losses.ListMLELoss(reduction="none")(FIXTURES["distinct"], FIXTURES["scores"])
  np.testing.assert_allclose(numpy(got), FIXTURES["ListMLELoss"], rtol=1e-5)


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("name", sorted(METRICS))
def test_metrics_equal_keras_rs(name, masked):
  metric = METRICS[name]
  metric.reset_state()
  metric.update_state(_y_true(masked), FIXTURES["scores"])
  expected = FIXTURES[name + ("_masked" if masked else "")]
  np.testing.assert_allclose(float(numpy(metric.result())), expected, rtol=1e-5, err_msg=name)


def test_dcg_hand_computed_and_by_name():
  # Gains 2^rel - 1 = (1, 3, 0) ranked by the scores as items 1, 0, 2: 3 + 1 / log2(3) + 0.
  m = metrics.get("dcg")
  m.update_state([[1.0, 2.0, 0.0]], [[0.5, 0.9, 0.1]])
  np.testing.assert_allclose(float(numpy(m.result())), 3.0 + 1.0 / np.log2(3.0), rtol=1e-6)
  # Class ids: the only gain is 1, so DCG@K is NDCG@K (rank 2 of 3 here).
  assert metrics.get("dcg_5").name == "dcg_5"
  m = metrics.DCG(5)
  m.update_state([0], [[0.5, 0.9, 0.1]])
  np.testing.assert_allclose(float(numpy(m.result())), 1.0 / np.log2(3.0), rtol=1e-6)


def test_labels_dict_is_checked():
  with pytest.raises(ValueError, match="must have the key 'labels' and may have 'mask'"):
    losses.PairwiseHingeLoss()({"label": [[1.0, 0.0]]}, [[0.0, 1.0]])
  with pytest.raises(ValueError, match="must have the key 'labels'.*'weights'"):
    metrics.NDCG()({"labels": [[1.0, 0.0]], "weights": [[1.0, 1.0]]}, [[0.0, 1.0]])
  with pytest.raises(TypeError, match=r"`y_true\['mask'\]` must be boolean, got dtype int"):
    losses.PairwiseHingeLoss()({"labels": [[1.0, 0.0]], "mask": [[1, 0]]}, [[0.0, 1.0]])
  with pytest.raises(
    ValueError, match=r"`labels\['mask'\]` must have the shape of the relevance .1, 2., got .2, 2."
  ):
    apply_mask({"labels": [[1.0, 0.0]], "mask": [[True, False], [True, True]]})


def test_labels_dict_with_class_ids_and_without_mask():
  np.testing.assert_array_equal(
    numpy(apply_mask({"labels": [2, 0], "mask": [[True, False, True], [True, True, False]]})),
    [[0.0, -1.0, 1.0], [1.0, 0.0, -1.0]],
  )
  loss = losses.PairwiseLogisticLoss(reduction="none")
  np.testing.assert_allclose(
    numpy(loss({"labels": [1, 0]}, [[0.0, 0.0], [1.0, 0.0]])),
    numpy(loss([1, 0], [[0.0, 0.0], [1.0, 0.0]])),
  )


def test_fit_and_save(tmp_path):
  # In `fit`, Keras 3 itself refuses a dict `y` for a model of one output ("y_true and y_pred have
  # different structures"), for keras-rs's losses as for ours: the dict is for direct calls.
  rng = np.random.default_rng(0)
  x = rng.normal(size=(32, 4)).astype("float32")
  y = np.where(rng.random((32, 5)) > 0.2, rng.integers(0, 3, size=(32, 5)), -1).astype("float32")
  model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(5)])
  model.compile(optimizer="adam", loss=losses.PairwiseHingeLoss(), metrics=[metrics.DCG(3)])
  history = model.fit(x, y, epochs=1, batch_size=16, verbose=0)
  assert np.isfinite(history.history["loss"][0])
  path = tmp_path / "model.keras"
  model.save(path)
  loaded = keras.models.load_model(path)
  assert type(loaded.loss).__name__ == "PairwiseHingeLoss"
  assert loaded.loss.get_config()["temperature"] == 1.0
  np.testing.assert_allclose(
    numpy(loaded.predict(x, verbose=0)), numpy(model.predict(x, verbose=0))
  )
