"""Tests of tfrank4class.encoders.saved_model_text with tiny SavedModels built offline here."""

import numpy as np
import pytest
import tensorflow as tf

from tfrank4class import compat, losses
from tfrank4class.encoders import SavedModelEncoder, saved_model
from tfrank4class.heads import build_model

BUCKETS, DIM, LENGTH = 16, 4, 5


class _HashEncoder(tf.Module):
  """strings [B] -> {"pooled_output": table[hash(text)], "other": ...}."""

  def __init__(self):
    super().__init__()
    self.table = tf.Variable(np.random.default_rng(0).normal(size=(BUCKETS, DIM)), dtype=tf.float32)

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
  def __call__(self, texts):
    rows = tf.gather(self.table, tf.strings.to_hash_bucket_fast(texts, BUCKETS))
    return {"pooled_output": rows, "other": rows * 2.0}


_BERT_SPEC = {
  k: tf.TensorSpec([None, None], tf.int32)
  for k in ("input_word_ids", "input_mask", "input_type_ids")
}


class _BertLike(tf.Module):
  """TF Hub BERT convention: dict of ids/mask/type ids -> pooled masked mean of a table."""

  def __init__(self):
    super().__init__()
    self.table = tf.Variable(np.random.default_rng(1).normal(size=(BUCKETS, DIM)), dtype=tf.float32)

  @tf.function(input_signature=[_BERT_SPEC])
  def __call__(self, inputs):
    mask = tf.cast(inputs["input_mask"], tf.float32)[:, :, None]
    seq = tf.gather(self.table, inputs["input_word_ids"])
    pooled = tf.reduce_sum(seq * mask, 1) / tf.maximum(tf.reduce_sum(mask, 1), 1.0)
    return {"pooled_output": pooled, "sequence_output": seq}


class _Preprocess(tf.Module):
  """strings [B] -> BERT inputs: whitespace tokens hashed to [1, BUCKETS), padded to LENGTH."""

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
  def __call__(self, texts):
    tokens = tf.strings.split(texts)
    ids = tf.strings.to_hash_bucket_fast(tokens, BUCKETS - 1) + 1
    ids = tf.cast(ids.to_tensor(shape=[None, LENGTH]), tf.int32)
    return {
      "input_word_ids": ids,
      "input_mask": tf.cast(ids > 0, tf.int32),
      "input_type_ids": tf.zeros_like(ids),
    }


@pytest.fixture(scope="module")
def models(tmp_path_factory):
  root = tmp_path_factory.mktemp("saved_models")
  paths = {}
  for name, module in (
    ("hash", _HashEncoder()),
    ("bert", _BertLike()),
    ("preprocess", _Preprocess()),
  ):
    paths[name] = str(root / name)
    tf.saved_model.save(module, paths[name])
  return paths


def _bert_reference(table, ids):
  ids = np.asarray(ids)
  mask = (ids > 0).astype(np.float32)[:, :, None]
  return (table[ids] * mask).sum(1) / np.maximum(mask.sum(1), 1.0)


def test_string_encoder_output(models):
  enc = saved_model(models["hash"], output_key="pooled_output")
  texts = ["a cat", "dog", ""]
  table = tf.saved_model.load(models["hash"]).table.numpy()
  buckets = [tf.strings.to_hash_bucket_fast(t, BUCKETS).numpy() for t in texts]
  np.testing.assert_allclose(enc(tf.constant(texts)).numpy(), table[buckets], rtol=1e-6)
  np.testing.assert_allclose(enc(tf.constant([[t] for t in texts])).numpy(), table[buckets])


def test_bert_style_with_preprocessor_and_token_ids(models):
  table = tf.saved_model.load(models["bert"]).table.numpy()
  with_pre = saved_model(
    models["bert"], preprocessor_path=models["preprocess"], output_key="pooled_output"
  )
  texts = ["a b c", "d"]
  ids = [
    [tf.strings.to_hash_bucket_fast(w, BUCKETS - 1).numpy() + 1 for w in t.split()] for t in texts
  ]
  padded = [row + [0] * (LENGTH - len(row)) for row in ids]
  np.testing.assert_allclose(
    with_pre(tf.constant(texts)).numpy(), _bert_reference(table, padded), rtol=1e-5
  )
  from_ids = saved_model(
    models["bert"],
    input_type="token_ids",
    sequence_length=LENGTH,
    bert_inputs=True,
    output_key="pooled_output",
  )
  np.testing.assert_allclose(
    from_ids(np.array(padded, np.int32)).numpy(), _bert_reference(table, padded), rtol=1e-5
  )


def test_fine_tunes_under_mirrored_strategy_and_round_trips(models, tmp_path, mirrored_strategy):
  tf.keras.utils.set_random_seed(0)  # deterministic initial weights
  texts = np.array(["a b", "c d", "a c", "b d"] * 4)
  labels = np.array([0, 1, 0, 1] * 4)
  # Keras 3 (3.7+) cannot fit string inputs under a MirroredStrategy: it averages a first input
  # batch across replicas to build the model (keras-team/keras#21172, tensorflow#80951).
  strategy = tf.distribute.get_strategy() if compat.KERAS_3 else mirrored_strategy
  with strategy.scope():
    encoder = saved_model(
      models["bert"],
      preprocessor_path=models["preprocess"],
      output_key="pooled_output",
      trainable=True,
    )
    model = build_model(encoder, 2, interaction="concat", hidden_units=(4,))
    model.compile(optimizer=tf.keras.optimizers.Adam(0.05), loss=losses.get("softmax_loss"))
  layer = encoder.get_layer("saved_model_encoder")
  assert len(layer.trainable_weights) == 1
  before = layer.trainable_weights[0].numpy().copy()
  # A dataset: Keras 3 does not take numpy string arrays in `fit`.
  data = tf.data.Dataset.from_tensor_slices((texts, labels)).batch(8)
  history = model.fit(data, epochs=3, verbose=0).history["loss"]
  assert np.all(np.isfinite(history)) and history[-1] < history[0]
  tuned = layer.trainable_weights[0].numpy()
  assert np.abs(tuned - before).max() > 1e-3
  expected = model(texts[:4]).numpy()
  model.save(tmp_path / "m.keras")
  loaded = tf.keras.models.load_model(tmp_path / "m.keras")  # reloads path, then tuned weights
  np.testing.assert_allclose(loaded(texts[:4]).numpy(), expected, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(
    loaded.get_layer("saved_model_text_encoder")
    .get_layer("saved_model_encoder")
    .weights[0]
    .numpy(),
    tuned,
  )


def test_frozen_by_default(models):
  layer = SavedModelEncoder(models["hash"], output_key="pooled_output")
  assert layer.trainable_weights == [] and len(layer.weights) == 1
  assert SavedModelEncoder.from_config(layer.get_config()).get_config() == layer.get_config()


def test_bad_input(models, tmp_path):
  with pytest.raises(
    ValueError,
    match=r"`path` must be a local SavedModel directory.*never "
    r"downloads",
  ):
    SavedModelEncoder(str(tmp_path / "nothing"))
  with pytest.raises(ValueError, match=r"set `output_key` to one of them"):
    saved_model(models["hash"])
  with pytest.raises(
    ValueError,
    match=r"`output_key` must be one of \['other', 'pooled_output'\]"
    r", got 'cls'",
  ):
    saved_model(models["hash"], output_key="cls")
  with pytest.raises(ValueError, match=r"must have shape \[B, d\], got shape \(None, 5, 4\)"):
    saved_model(
      models["bert"],
      input_type="token_ids",
      sequence_length=LENGTH,
      bert_inputs=True,
      output_key="sequence_output",
    )
  with pytest.raises(ValueError, match=r"`input_type` must be one of \['string', 'token_ids'\]"):
    saved_model(models["hash"], input_type="bytes")
  with pytest.raises(ValueError, match=r"`signature` must be one of"):
    SavedModelEncoder(models["hash"], signature="serving_default_x")
