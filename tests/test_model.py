"""Tests of tfrank4class.heads.model (build_model)."""

import numpy as np
import pytest
from backend_testing import numpy

from tfrank4class import encoders, losses, metrics
from tfrank4class.compat import BACKEND, keras
from tfrank4class.heads import Rank4ClassHead, build_model


def _tiny_encoder():
  return encoders.small_cnn(input_shape=(8, 8, 3), filters=(4,), embedding_dim=6)


def test_scores_are_head_of_encoder():
  encoder = _tiny_encoder()
  model = build_model(encoder, 5, interaction="concat", hidden_units=(4,))
  x = np.random.default_rng(0).normal(size=(3, 8, 8, 3)).astype(np.float32)
  head = model.get_layer("rank4class_head")
  assert isinstance(head, Rank4ClassHead) and model.output_shape == (None, 5)
  np.testing.assert_allclose(numpy(model(x)), numpy(head(encoder(x))), rtol=1e-6)


def test_encoder_by_name_and_plain_layer():
  model = build_model("small_cnn", 3, encoder_kwargs=dict(input_shape=(8, 8, 3), filters=(2,)))
  assert tuple(model(np.zeros((2, 8, 8, 3), np.float32)).shape) == (2, 3)
  dense = keras.layers.Dense(4)
  model = build_model(dense, 3, input_shape=(7,))
  x = np.random.default_rng(1).normal(size=(2, 7)).astype(np.float32)
  head = model.get_layer("rank4class_head")
  kernel = numpy(head.class_encoder.table).T  # [d + 1, C]
  h = numpy(dense(x))
  np.testing.assert_allclose(numpy(model(x)), h @ kernel[:4] + kernel[4], rtol=1e-5, atol=1e-6)


def test_class_features_and_chunking_pass_through():
  feats = np.eye(4, dtype=np.float32)
  model = build_model(
    _tiny_encoder(),
    4,
    interaction="latent_cross",
    hidden_units=(3,),
    class_features=feats,
    class_chunk_size=3,
    activation="tanh",
  )
  head = model.get_layer("rank4class_head")
  assert head.interaction.class_chunk_size == 3 and head.class_encoder.uses_class_features
  assert head.get_config()["activation"] == "tanh"


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("interaction", ["dot", "concat"])
def test_save_load_and_training_under_mirrored_strategy(tmp_path, mirrored_strategy, interaction):
  keras.utils.set_random_seed(0)  # deterministic initial weights
  rng = np.random.default_rng(2)
  x = rng.normal(size=(16, 8, 8, 3)).astype(np.float32)
  y = rng.integers(0, 3, size=16)
  with mirrored_strategy.scope():
    model = build_model(_tiny_encoder(), 3, interaction=interaction, hidden_units=(4, 4))
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss=losses.get("softmax_loss"))
  history = model.fit(x, y, batch_size=8, epochs=3, verbose=0).history["loss"]
  assert np.all(np.isfinite(history)) and history[-1] < history[0]
  model.save(tmp_path / "m.keras")
  loaded = keras.models.load_model(tmp_path / "m.keras")  # no custom_objects
  np.testing.assert_allclose(numpy(loaded(x[:4])), numpy(model(x[:4])), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("interaction", ["dot", "latent_cross"])
def test_compile_fit_evaluate_save_and_load_on_every_backend(tmp_path, interaction):
  """A Rank4Class model (encoder, head, a ranking loss, ranking metrics) trains, evaluates,
  saves and loads on the active backend; the loaded model scores as the trained one and is
  ready to train on."""
  keras.utils.set_random_seed(0)
  rng = np.random.default_rng(2)
  x = rng.normal(size=(16, 8, 8, 3)).astype(np.float32)
  y = rng.integers(0, 3, size=16).astype(np.int32)  # JAX: int64 only with jax_enable_x64
  model = build_model(
    _tiny_encoder(), 3, interaction=interaction, hidden_units=(4,), class_chunk_size=2
  )
  model.compile(
    optimizer=keras.optimizers.Adam(0.01),
    loss=losses.get("softmax_loss"),
    metrics=[metrics.MRR(), metrics.NDCG(k=2)],
  )
  history = model.fit(x, y, batch_size=8, epochs=3, verbose=0).history["loss"]
  assert np.all(np.isfinite(history)) and history[-1] < history[0], (BACKEND, history)
  evaluated = model.evaluate(x, y, batch_size=8, verbose=0, return_dict=True)
  assert set(evaluated) >= {"loss", "mrr", "ndcg_2"} and np.isfinite(evaluated["loss"])
  assert 0.0 <= evaluated["mrr"] <= 1.0
  model.save(tmp_path / "m.keras")
  loaded = keras.models.load_model(tmp_path / "m.keras")  # no custom_objects
  np.testing.assert_allclose(numpy(loaded(x[:4])), numpy(model(x[:4])), rtol=1e-5, atol=1e-6)
  again = loaded.evaluate(x, y, batch_size=8, verbose=0, return_dict=True)
  np.testing.assert_allclose(again["loss"], evaluated["loss"], rtol=1e-5)


def test_bad_input():
  with pytest.raises(ValueError, match=r"`num_classes` must be an integer >= 2, got 1"):
    build_model(_tiny_encoder(), 1)
  with pytest.raises(ValueError, match=r"`interaction` must be one of"):
    build_model(_tiny_encoder(), 3, interaction="mlp")
  with pytest.raises(
    ValueError,
    match=r"`name` must be one of \['bert_checkpoint', 'resnet50', 'saved_model', "
    r"'small_cnn', 'transformer', 'vgg16_cifar'\], got 'vit'",
  ):
    build_model("vit", 3)
  with pytest.raises(ValueError, match=r"`input_shape` is required"):
    build_model(keras.layers.Dense(4), 3)
  with pytest.raises(ValueError, match=r"`encoder_kwargs` is only used when `encoder` is a name"):
    build_model(_tiny_encoder(), 3, encoder_kwargs={"filters": (2,)})
  feature_map = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Conv2D(2, 3)])
  with pytest.raises(
    ValueError,
    match=r"must output instance embeddings \[B, d\], got shape "
    r"\(None, 6, 6, 2\)",
  ):
    build_model(feature_map, 3)
  with pytest.raises(ValueError, match=r"`encoder` must be a Keras model/layer"):
    build_model(42, 3)
