"""Tests of tfrank4class.encoders.small_cnn."""

import numpy as np
import pytest
from backend_testing import compile_modes, compiled, numpy

from tfrank4class.compat import keras
from tfrank4class.encoders import small_cnn
from tfrank4class.heads import build_model


def test_architecture_and_forward():
  encoder = small_cnn(input_shape=(16, 16, 3), filters=(4, 8), embedding_dim=5)
  # conv(3->4): 27*4+4, conv(4->8): 36*8+8, dense(8->5): 40+5
  assert encoder.count_params() == (27 * 4 + 4) + (36 * 8 + 8) + (8 * 5 + 5)
  x = np.random.default_rng(0).uniform(size=(3, 16, 16, 3)).astype(np.float32)
  out = numpy(encoder(x))
  assert out.shape == (3, 5) and np.all(out >= 0)


def test_single_stage_matches_numpy():
  encoder = small_cnn(input_shape=(4, 4, 3), filters=(2,), embedding_dim=3)
  rng = np.random.default_rng(1)
  x = rng.normal(size=(1, 4, 4, 3)).astype(np.float32)
  k, b = encoder.get_layer("conv1").get_weights()
  w, c = encoder.get_layer("embedding").get_weights()
  padded = np.pad(x[0], ((1, 1), (1, 1), (0, 0)))
  conv = np.zeros((4, 4, 2))
  for i in range(4):
    for j in range(4):
      conv[i, j] = np.tensordot(padded[i : i + 3, j : j + 3], k, axes=3) + b
  conv = np.maximum(conv, 0)
  pooled = conv.reshape(2, 2, 2, 2, 2).max(axis=(1, 3))  # 2x2 max pool
  expected = np.maximum(pooled.mean(axis=(0, 1)) @ w + c, 0)
  np.testing.assert_allclose(numpy(encoder(x))[0], expected, rtol=1e-5, atol=1e-6)


def test_compiled_equals_eager():
  encoder = small_cnn(input_shape=(8, 8, 3), filters=(4,), embedding_dim=5)
  x = np.random.default_rng(3).uniform(size=(2, 8, 8, 3)).astype(np.float32)
  eager = numpy(encoder(x))
  for mode in compile_modes():
    got = numpy(compiled(encoder, mode)(x))
    np.testing.assert_allclose(got, eager, rtol=1e-4, atol=1e-5, err_msg=mode)


@pytest.mark.tensorflow_only
def test_trains_under_mirrored_strategy_and_round_trips(tmp_path, mirrored_strategy):
  from tfrank4class import losses  # noqa: PLC0415

  keras.utils.set_random_seed(0)  # deterministic initial weights
  rng = np.random.default_rng(2)
  x = rng.uniform(size=(16, 8, 8, 3)).astype(np.float32)
  y = rng.integers(0, 4, size=16)
  with mirrored_strategy.scope():
    model = build_model(
      small_cnn(input_shape=(8, 8, 3), filters=(4,), embedding_dim=8),
      4,
      interaction="latent_cross",
      hidden_units=(8,),
      class_chunk_size=3,
    )
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss=losses.get("approx_ndcg_loss"))
  history = model.fit(x, y, batch_size=8, epochs=3, verbose=0).history["loss"]
  assert np.all(np.isfinite(history)) and history[-1] < history[0]
  model.save(tmp_path / "m.keras")
  loaded = keras.models.load_model(tmp_path / "m.keras")
  np.testing.assert_allclose(numpy(loaded(x)), numpy(model(x)), rtol=1e-5, atol=1e-6)


def test_bad_input():
  with pytest.raises(
    ValueError,
    match=r"`filters` must be a non-empty sequence of positive "
    r"integers, got \(\)",
  ):
    small_cnn(filters=())
  with pytest.raises(ValueError, match=r"`input_shape` must be an integer >= 4, got 2"):
    small_cnn(input_shape=(2, 2, 3), filters=(2, 2))
  with pytest.raises(ValueError, match=r"`embedding_dim` must be an integer >= 1, got -1"):
    small_cnn(embedding_dim=-1)
