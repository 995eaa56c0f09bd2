"""Tests of tfrank4class.encoders.text_transformer (raw strings in, TextVectorization inside)."""

import numpy as np
import pytest
from backend_testing import compile_modes, compiled, numpy

from tfrank4class import compat
from tfrank4class.encoders import TransformerTextEncoder, transformer
from tfrank4class.heads import build_model


@pytest.fixture
def tf():
  """TensorFlow, for the tests of the raw-string model (``transformer``: TensorFlow only)."""
  import tensorflow  # noqa: PLC0415

  return tensorflow


VOCAB = ["good", "bad", "film", "plot"]
SMALL = dict(sequence_length=6, embedding_dim=8, num_heads=2, num_layers=1, ff_dim=16, dropout=0.0)


@pytest.mark.tensorflow_only
def test_no_block_encoder_is_masked_mean_of_embeddings(tf):
  enc = transformer(vocabulary=VOCAB, **{**SMALL, "num_layers": 0})
  layer = enc.get_layer("transformer")
  tok = layer.token_embedding.embeddings.numpy()
  pos = layer.position_embedding.numpy()
  # Ids by hand: "" = 0 (padding), "[UNK]" = 1, then VOCAB from 2; text is lowercased and
  # punctuation stripped.
  cases = {"Good film!": [2, 4], "bad plot zzz": [3, 5, 1], "plot": [5]}
  out = enc(tf.constant(list(cases))).numpy()
  for row, ids in zip(out, cases.values()):
    expected = np.mean([tok[i] + pos[t] for t, i in enumerate(ids)], axis=0)
    np.testing.assert_allclose(row, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.tensorflow_only
def test_string_shapes_and_empty_text(tf):
  enc = transformer(vocabulary=VOCAB, **SMALL)
  flat = enc(tf.constant(["good film", ""])).numpy()
  column = enc(tf.constant([["good film"], [""]])).numpy()
  np.testing.assert_allclose(flat, column, rtol=1e-6)
  assert flat.shape == (2, 8) and np.all(np.isfinite(flat))


def test_no_block_layer_is_masked_mean_of_embeddings():
  layer = TransformerTextEncoder(10, 6, embedding_dim=8, num_heads=2, num_layers=0)
  ids = np.array([[2, 4, 0, 0, 0, 0], [3, 5, 1, 0, 0, 0], [5, 0, 0, 0, 0, 0]])
  out = numpy(layer(ids))
  tok, pos = numpy(layer.token_embedding.embeddings), numpy(layer.position_embedding)
  for row, row_ids in zip(out, ids):
    kept = [t for t, i in enumerate(row_ids) if i != 0]
    expected = np.mean([tok[row_ids[t]] + pos[t] for t in kept], axis=0)
    np.testing.assert_allclose(row, expected, rtol=1e-5, atol=1e-6)


def test_padding_does_not_leak_into_attention():
  layer = TransformerTextEncoder(
    10, 8, embedding_dim=8, num_heads=2, num_layers=2, ff_dim=16, dropout=0.0
  )
  short = numpy(layer(np.array([[3, 4, 7, 0]])))
  long = numpy(layer(np.array([[3, 4, 7, 0, 0, 0, 0, 0]])))
  np.testing.assert_allclose(short, long, rtol=1e-5, atol=1e-6)
  other = numpy(layer(np.array([[3, 4, 8, 0]])))
  assert np.abs(other - short).max() > 1e-4


def test_compiled_encoder_layer():
  layer = TransformerTextEncoder(
    10, 4, embedding_dim=8, num_heads=2, num_layers=1, ff_dim=8, dropout=0.0, output_dim=3
  )
  ids = np.array([[3, 4, 0, 0], [5, 0, 0, 0]])
  eager = numpy(layer(ids))
  assert eager.shape == (2, 3)
  for mode in compile_modes():
    got = numpy(compiled(layer, mode)(ids))
    np.testing.assert_allclose(got, eager, rtol=1e-5, atol=1e-6, err_msg=mode)


@pytest.mark.tensorflow_only
def test_adapted_layer_and_get_vocabulary_output_are_accepted(tf):
  adapted = tf.keras.layers.TextVectorization(output_sequence_length=6)
  adapted.adapt(["good good film", "bad film", "good plot"])
  vocab = adapted.get_vocabulary()  # ['', '[UNK]', 'good', 'film', ...]
  a = transformer(text_vectorization=adapted, **SMALL)
  b = transformer(vocabulary=vocab, **SMALL)
  texts = tf.constant([["good plot"], ["film noir"]])
  ids_a = a.get_layer(adapted.name)(texts).numpy()
  ids_b = b.get_layer("text_vectorization")(texts).numpy()
  np.testing.assert_array_equal(ids_a, ids_b)
  np.testing.assert_array_equal(
    ids_a[:, :2], [[vocab.index("good"), vocab.index("plot")], [vocab.index("film"), 1]]
  )


@pytest.mark.tensorflow_only
def test_round_trips_with_raw_string_inputs(tmp_path, tf):
  enc = transformer(vocabulary=VOCAB, **SMALL)
  model = build_model(enc, 3, interaction="latent_cross", hidden_units=(4,))
  texts = tf.constant([["good film"], ["bad plot"]])
  expected = model(texts).numpy()
  model.save(tmp_path / "m.keras")
  loaded = tf.keras.models.load_model(tmp_path / "m.keras")
  np.testing.assert_allclose(loaded(texts).numpy(), expected, rtol=1e-5, atol=1e-6)
  assert loaded.inputs[0].dtype == tf.string
  # SavedModel export for serving: a signature that takes raw strings.
  tf.saved_model.save(model, str(tmp_path / "sm"))
  serve = tf.saved_model.load(str(tmp_path / "sm")).signatures["serving_default"]
  (scores,) = serve(texts).values()
  np.testing.assert_allclose(scores.numpy(), expected, rtol=1e-5, atol=1e-6)
  config = enc.get_layer("transformer").get_config()
  assert TransformerTextEncoder.from_config(config).get_config() == config


@pytest.mark.tensorflow_only
def test_trains_under_mirrored_strategy(mirrored_strategy, tf):
  from tfrank4class import losses  # noqa: PLC0415

  tf.keras.utils.set_random_seed(0)  # deterministic initial weights
  texts = np.array(["good film", "bad film", "good plot", "bad plot"] * 4)
  labels = np.array([0, 1, 0, 1] * 4)
  # Keras 3 (3.7+) cannot fit string inputs under a MirroredStrategy: it averages a first input
  # batch across replicas to build the model (keras-team/keras#21172, tensorflow#80951).
  strategy = tf.distribute.get_strategy() if compat.KERAS_3 else mirrored_strategy
  with strategy.scope():
    model = build_model(transformer(vocabulary=VOCAB, **SMALL), 2, interaction="dot")
    model.compile(optimizer=tf.keras.optimizers.Adam(0.01), loss=losses.get("softmax_loss"))
  # A dataset: Keras 3 does not take numpy string arrays in `fit`.
  data = tf.data.Dataset.from_tensor_slices((texts, labels)).batch(8)
  history = model.fit(data, epochs=4, verbose=0).history["loss"]
  assert np.all(np.isfinite(history)) and history[-1] < history[0]


@pytest.mark.tensorflow_only
def test_bad_input(tf):
  with pytest.raises(ValueError, match=r"Pass exactly one of `vocabulary`"):
    transformer()
  with pytest.raises(ValueError, match=r"Pass exactly one of `vocabulary`"):
    transformer(vocabulary=VOCAB, text_vectorization=tf.keras.layers.TextVectorization())
  with pytest.raises(ValueError, match=r"`vocabulary` must be a list of tokens, got the string"):
    transformer(vocabulary="good bad")
  with pytest.raises(ValueError, match=r"`text_vectorization` has an empty vocabulary"):
    transformer(text_vectorization=tf.keras.layers.TextVectorization())
  with pytest.raises(
    ValueError,
    match=r"`text_vectorization` must have output_mode='int', got "
    r"'multi_hot'",
  ):
    transformer(
      text_vectorization=tf.keras.layers.TextVectorization(
        vocabulary=VOCAB, output_mode="multi_hot"
      )
    )
  with pytest.raises(
    ValueError,
    match=r"`text_vectorization` must be a "
    r"(tf\.)?keras\.layers\.TextVectorization, got list",
  ):
    transformer(text_vectorization=["a"])
  with pytest.raises(ValueError, match=r"`embedding_dim` must be divisible by num_heads=3, got 8"):
    transformer(vocabulary=VOCAB, embedding_dim=8, num_heads=3)
  with pytest.raises(ValueError, match=r"`dropout` must be in \[0, 1\), got 1.5"):
    TransformerTextEncoder(10, 4, dropout=1.5)
