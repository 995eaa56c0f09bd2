"""One loss of each family of ours in a tiny Keras model on the active backend (TensorFlow, JAX,
PyTorch, tf-keras): ``compile``, ``fit``, ``evaluate``, ``.keras`` save and load. The values are
checked against the loss called directly on the model's predictions (itself tested against
independent references in each family's test file), and the loaded loss against the saved one."""

import backend_testing as bt
import numpy as np
import pytest

from tfrank4class import losses
from tfrank4class.compat import keras, ops

B, C, D = 8, 6, 5

FAMILIES = {
  "recall_loss": {},  # RaMBO, per list
  "mean_average_precision_loss": {},  # RaMBO, down the batch (coupling "batch")
  "blackbox_ndcg_loss": {"lambda_": 4.0},
  "topk_cross_entropy_loss": {"p_k": [0.5, 0.5], "method": "odd_even"},
  "smooth_topk_svm_loss": {"k": 2},
  "soft_rank_topk_loss": {"k": 2},
  "smoothed_cross_entropy": {"label_smoothing": 0.1},
  "triplet_loss": {"margin": 0.2},  # metric learning, on embeddings
}


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_compile_fit_evaluate_save_load(name, tmp_path):
  rng = np.random.default_rng(0)
  x = rng.normal(size=(2 * B, D)).astype(np.float32)
  y = np.tile(np.arange(C // 2), 2 * B)[: 2 * B]  # every class twice per batch (triplets)
  keras.utils.set_random_seed(0)
  model = keras.Sequential([keras.Input((D,)), keras.layers.Dense(C)])
  loss = losses.get(name, **FAMILIES[name])
  model.compile(optimizer=keras.optimizers.SGD(0.1), loss=loss)
  history = model.fit(x, y, batch_size=B, epochs=2, shuffle=False, verbose=0)
  assert np.all(np.isfinite(history.history["loss"])), history.history
  value = model.evaluate(x, y, batch_size=2 * B, verbose=0)
  want = float(bt.numpy(loss(y, model.predict(x, batch_size=2 * B, verbose=0))))
  assert value == pytest.approx(want, rel=1e-5, abs=1e-6)
  path = tmp_path / "m.keras"
  model.save(path)
  loaded = keras.models.load_model(path)
  assert type(loaded.loss) is type(loss)
  assert loaded.loss.get_config() == loss.get_config()
  assert loaded.evaluate(x, y, batch_size=2 * B, verbose=0) == pytest.approx(value, rel=1e-5)


#: The losses whose ``loss_values`` takes class ids as they are (``takes_class_ids``), read from
#: the registered classes (TF-Ranking's keys are partials of ``RankingLoss``, which does not).
TAKES_CLASS_IDS = sorted(
  n for n in losses.names() if getattr(losses.registry.LOSSES[n], "takes_class_ids", False)
)


def test_the_losses_that_take_class_ids():
  # The Top-K losses; RaMBO's per-list losses (the true class's rank by counting) and its
  # mAP / APC (the batch's own classes, the true classes' ranks by binary search); SoDeep's AP
  # (the true class's soft rank alone); the smoothed cross-entropy (its closed form of ids).
  assert TAKES_CLASS_IDS == [
    "apc_loss",
    "average_precision_loss",
    "blackbox_ndcg_loss",
    "map_apc_loss",
    "mean_average_precision_loss",
    "recall_loss",
    "smooth_topk_svm_loss",
    "smoothed_cross_entropy",
    "soft_rank_topk_loss",
    "sorter_ap_loss",
    "topk_cross_entropy_loss",
  ]


@pytest.mark.parametrize("mode", bt.compile_modes())
@pytest.mark.parametrize("name", TAKES_CLASS_IDS)
def test_class_ids_give_the_value_and_gradient_of_their_one_hot_rows(name, mode):
  """Ids skip the one-hot rows (``ListwiseLoss.takes_class_ids``); the one-hot rows take the
  dense path, so the two paths are checked against each other, in every compile mode. Where
  nothing can raise (XLA, ``jax.jit``), an id out of range makes its list's loss NaN and keeps the
  others."""
  rng = np.random.default_rng(3)
  s = rng.normal(size=(4, 7)).astype(np.float32)
  y = np.array([1, 0, 6, 3], np.int32)
  loss = losses.get(name, reduction="none", **FAMILIES.get(name, {}))
  summed = lambda labels: lambda v: ops.sum(loss(labels, v))  # noqa: E731
  want, (want_grad,) = bt.value_and_grad(summed(np.eye(7, dtype=np.float32)[y]), s)
  for labels in (y, y[:, None]):
    value = bt.numpy(bt.compiled(lambda v, labels: loss(labels, v), mode)(s, labels))
    np.testing.assert_allclose(value.sum(), want, rtol=1e-5)
    _, (grad,) = bt.value_and_grad(summed(labels), s)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-5, atol=1e-7)
  if mode in ("xla", "jit"):
    bad = bt.numpy(bt.compiled(lambda v, labels: loss(labels, v), mode)(s, np.array([1, 9, 6, 3])))
    if loss.coupling == "example":
      assert np.isnan(bad[1]) and np.allclose(bad[[0, 2, 3]], value[[0, 2, 3]], rtol=1e-5)
    else:  # mAP / APC: one value for the batch, which the bad id makes NaN
      assert np.isnan(bad).all(), bad
