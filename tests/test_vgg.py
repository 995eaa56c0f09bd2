"""Tests of tfrank4class.encoders.vgg (VGG16 for CIFAR)."""

import numpy as np
import pytest
from backend_testing import numpy

from tfrank4class.compat import keras
from tfrank4class.encoders import vgg16_cifar
from tfrank4class.heads import build_model


def _expected_params(widths, embedding_dim, batch_norm):
  """Parameter count written out from the VGG16 layer list (conv3x3, BN, final Dense)."""
  total, cin = 0, 3
  for w in widths:
    total += 9 * cin * w + (4 * w if batch_norm else w)  # BN: gamma, beta, moving mean/var
    cin = w
  return total + cin * embedding_dim + embedding_dim


VGG16_WIDTHS = [64, 64, 128, 128, 256, 256, 256, 512, 512, 512, 512, 512, 512]


def test_full_size_architecture():
  encoder = vgg16_cifar()
  assert encoder.output_shape == (None, 512)
  assert encoder.count_params() == _expected_params(VGG16_WIDTHS, 512, True)
  convs = [layer for layer in encoder.layers if isinstance(layer, keras.layers.Conv2D)]
  assert [c.filters for c in convs] == VGG16_WIDTHS
  assert sum(isinstance(layer, keras.layers.MaxPooling2D) for layer in encoder.layers) == 5


def test_narrow_variant_without_bn_and_local_weights(tmp_path):
  encoder = vgg16_cifar(width_multiplier=0.125, embedding_dim=16, batch_norm=False, dropout=0.2)
  assert encoder.count_params() == _expected_params([w // 8 for w in VGG16_WIDTHS], 16, False)
  x = np.random.default_rng(0).uniform(size=(2, 32, 32, 3)).astype(np.float32)
  out = numpy(encoder(x))
  assert out.shape == (2, 16) and np.all(out >= 0)  # ReLU embedding
  path = str(tmp_path / "vgg.weights.h5")
  encoder.save_weights(path)
  again = vgg16_cifar(
    width_multiplier=0.125, embedding_dim=16, batch_norm=False, dropout=0.2, weights_path=path
  )
  np.testing.assert_allclose(numpy(again(x)), out, rtol=1e-6)


@pytest.mark.tensorflow_only
def test_trains_under_mirrored_strategy_and_round_trips(tmp_path, mirrored_strategy):
  from tfrank4class import losses  # noqa: PLC0415

  keras.utils.set_random_seed(0)  # deterministic initial weights
  rng = np.random.default_rng(1)
  x = rng.uniform(size=(8, 32, 32, 3)).astype(np.float32)
  y = rng.integers(0, 3, size=8)
  with mirrored_strategy.scope():
    model = build_model(
      vgg16_cifar(width_multiplier=0.0625, embedding_dim=8),
      3,
      interaction="concat",
      hidden_units=(8,),
    )
    model.compile(optimizer=keras.optimizers.Adam(1e-3), loss=losses.get("softmax_loss"))
  history = model.fit(x, y, batch_size=4, epochs=2, verbose=0).history["loss"]
  assert np.all(np.isfinite(history))
  # Called outside the replicas, so BatchNormalization reads its replica-averaged statistics,
  # which is what model.save writes (inside predict each replica would use its own copy).
  expected = numpy(model(x, training=False))
  model.save(tmp_path / "m.keras")
  loaded = keras.models.load_model(tmp_path / "m.keras")
  np.testing.assert_allclose(numpy(loaded(x, training=False)), expected, rtol=1e-5, atol=1e-6)


def test_bad_input():
  with pytest.raises(
    ValueError,
    match=r"`input_shape` must have height and width divisible by "
    r"32, got \(48, 48, 3\)",
  ):
    vgg16_cifar(input_shape=(48, 48, 3))
  with pytest.raises(ValueError, match=r"`weights` must be None"):
    vgg16_cifar(weights="imagenet")
  with pytest.raises(ValueError, match=r"`dropout` must be in \[0, 1\), got 1.0"):
    vgg16_cifar(dropout=1.0)
  with pytest.raises(ValueError, match=r"`width_multiplier` must be a finite number > 0.0"):
    vgg16_cifar(width_multiplier=0)
  with pytest.raises(ValueError, match=r"`embedding_dim` must be an integer >= 1, got 0"):
    vgg16_cifar(embedding_dim=0)
