"""Tests of tfrank4class.encoders.resnet (ResNet50, never downloaded)."""

import numpy as np
import pytest
from backend_testing import numpy

from tfrank4class.compat import keras
from tfrank4class.encoders import resnet50
from tfrank4class.heads import build_model

# Parameters of Keras' ResNet50 without its top (Keras Applications table: 25,636,712 with the
# 2048 x 1000 + 1000 classifier).
RESNET50_NOTOP_PARAMS = 25_636_712 - (2048 * 1000 + 1000)


def test_shapes_params_and_local_weights(tmp_path):
  encoder = resnet50(input_shape=(32, 32, 3))
  assert encoder.output_shape == (None, 2048)
  assert encoder.count_params() == RESNET50_NOTOP_PARAMS
  # A local weights file (here: random weights written by Keras) is loaded, nothing downloaded.
  base = encoder.layers[1]
  rng = np.random.default_rng(0)
  base.set_weights([rng.normal(size=w.shape).astype(np.float32) * 0.01 for w in base.get_weights()])
  path = str(tmp_path / "resnet50_notop.weights.h5")
  base.save_weights(path)
  loaded = resnet50(input_shape=(32, 32, 3), weights_path=path, embedding_dim=16)
  assert loaded.output_shape == (None, 16)
  for a, b in zip(loaded.layers[1].get_weights(), base.get_weights()):
    np.testing.assert_array_equal(a, b)
  # get_config round trip of the whole encoder (model.save/load_model is in the slow test).
  clone = keras.Model.from_config(loaded.get_config())
  clone.set_weights(loaded.get_weights())
  x = rng.uniform(size=(2, 32, 32, 3)).astype(np.float32)
  np.testing.assert_allclose(numpy(clone(x)), numpy(loaded(x)), rtol=1e-5, atol=1e-5)


def test_never_downloads_and_bad_input(tmp_path):
  with pytest.raises(
    ValueError,
    match=r"`weights` must be None: tfrank4class never downloads "
    r"weights, got weights='imagenet'.*weights_path",
  ):
    resnet50(weights="imagenet")
  with pytest.raises(ValueError, match=r"`weights_path` must be an existing local weights file"):
    resnet50(input_shape=(32, 32, 3), weights_path=str(tmp_path / "missing.h5"))
  with pytest.raises(ValueError, match=r"`input_shape` must be an integer >= 32, got 16"):
    resnet50(input_shape=(16, 16, 3))
  with pytest.raises(
    ValueError,
    match=r"`input_shape` must be \(height, width, 3\), got "
    r"\(32, 32\)",
  ):
    resnet50(input_shape=(32, 32))
  with pytest.raises(ValueError, match=r"`pooling` must be one of \['avg', 'max'\], got None"):
    resnet50(input_shape=(32, 32, 3), pooling=None)
  bad = tmp_path / "bad.h5"
  bad.write_bytes(b"not an h5 file")
  with pytest.raises(ValueError, match=r"Could not load ResNet50"):
    resnet50(input_shape=(32, 32, 3), weights_path=str(bad))


@pytest.mark.slow
@pytest.mark.tensorflow_only
def test_trains_under_mirrored_strategy_and_round_trips(tmp_path, mirrored_strategy):
  from tfrank4class import losses  # noqa: PLC0415

  keras.utils.set_random_seed(0)  # deterministic initial weights
  rng = np.random.default_rng(1)
  x = rng.uniform(size=(8, 32, 32, 3)).astype(np.float32)
  y = rng.integers(0, 3, size=8)
  with mirrored_strategy.scope():
    model = build_model(
      resnet50(input_shape=(32, 32, 3), embedding_dim=32),
      3,
      interaction="latent_cross",
      hidden_units=(16, 16),
    )
    model.compile(optimizer=keras.optimizers.Adam(1e-4), loss=losses.get("softmax_loss"))
  history = model.fit(x, y, batch_size=4, epochs=2, verbose=0).history["loss"]
  assert np.all(np.isfinite(history))
  expected = numpy(model(x, training=False))  # replica-averaged BN statistics, as saved
  model.save(tmp_path / "m.keras")
  loaded = keras.models.load_model(tmp_path / "m.keras")
  np.testing.assert_allclose(numpy(loaded(x, training=False)), expected, rtol=1e-4, atol=1e-4)
