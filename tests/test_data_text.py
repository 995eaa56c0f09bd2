"""Tests of tfrank4class/data/text.py: TextVectorization adapting and in-graph WordPiece."""

import collections
import re
import unicodedata

import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

import tfrank4class.data as data
from tfrank4class.data import goemotions, text

VOCAB = [
  "[PAD]",
  "[UNK]",
  "[CLS]",
  "[SEP]",
  "un",
  "##aff",
  "##able",
  "a",
  "##b",
  "##c",
  "b",
  "c",
  "ab",
  "abc",
  "##bc",
  "!",
  ",",
  "hello",
  "world",
  "##s",
  "é",
  "##é",
]


def _reference_wordpiece(texts, vocab, length, cls=None, sep=None, max_chars=100):
  """Plain-Python greedy longest-match-first WordPiece (BERT's algorithm), for comparison."""
  index = {t: i for i, t in enumerate(vocab)}
  out = []
  for t in texts:
    t = re.sub(r"([!-/:-@\[-`{-~])", r" \1 ", t.lower())
    ids = [index[cls]] if cls else []
    for word in t.split():
      pieces, start = [], 0
      if len(word) > max_chars:
        pieces = None
      while pieces is not None and start < len(word):
        end = len(word)
        while end > start:
          piece = word[start:end] if start == 0 else "##" + word[start:end]
          if piece in index:
            break
          end -= 1
        if end == start:
          pieces = None
          break
        pieces.append(index[piece])
        start = end
      ids += [index["[UNK]"]] if pieces is None else pieces
    if sep:
      ids = ids[: length - 1] + [index[sep]]
    ids = ids[:length]
    out.append(ids + [index["[PAD]"]] * (length - len(ids)))
  return out


def test_wordpiece_hand_cases():
  layer = text.WordPieceVectorizer(VOCAB, output_sequence_length=8)
  out = layer(tf.constant(["unaffable", "Hello, worlds!", "xyz ab", "abcb", ""])).numpy()
  assert out.tolist() == [
    [4, 5, 6, 0, 0, 0, 0, 0],  # un ##aff ##able
    [17, 16, 18, 19, 15, 0, 0, 0],  # hello , world ##s !
    [1, 12, 0, 0, 0, 0, 0, 0],  # [UNK] ab
    [13, 8, 0, 0, 0, 0, 0, 0],  # abc ##b (longest first piece)
    [0] * 8,
  ]
  framed = text.WordPieceVectorizer(
    VOCAB, output_sequence_length=4, cls_token="[CLS]", sep_token="[SEP]"
  )
  assert framed(tf.constant(["hello world hello"])).numpy().tolist() == [[2, 17, 18, 3]]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.text(alphabet="abcé ,!unfl", max_size=20), min_size=1, max_size=4))
def test_wordpiece_matches_reference(texts):
  layer = text.WordPieceVectorizer(VOCAB, output_sequence_length=12, max_chars_per_word=6)
  got = layer(tf.constant(texts)).numpy().tolist()
  assert got == _reference_wordpiece(texts, VOCAB, 12, max_chars=6)


def _reference_bert_normalize(t):
  """BERT's basic-tokenizer text normalisation, character by character with unicodedata."""
  out = []
  for ch in t:
    cp, category = ord(ch), unicodedata.category(ch)
    if ch in "\t\n\r" or category == "Zs":
      out.append(" ")
    elif cp in (0, 0xFFFD) or category in ("Cc", "Cf"):
      continue
    elif 0x4E00 <= cp <= 0x9FFF:
      out.append(f" {ch} ")
    else:
      out.append(ch)
  decomposed = unicodedata.normalize("NFD", "".join(out).lower())
  return "".join(ch for ch in decomposed if unicodedata.category(ch) != "Mn")


def test_wordpiece_bert_normalization_hand_cases():
  layer = text.WordPieceVectorizer(
    VOCAB + ["e", "我", "爱"],
    output_sequence_length=8,
    clean_text=True,
    handle_chinese_chars=True,
    strip_accents=True,
  )
  out = layer(tf.constant(["É\u00a0a\u0301b\x00c", "我爱ab\u200bc"])).numpy().tolist()
  assert out == [
    [22, 13, 0, 0, 0, 0, 0, 0],  # e | abc (no-break space splits; accent and NUL dropped)
    [23, 24, 13, 0, 0, 0, 0, 0],  # 我 | 爱 | abc (zero-width space, a format char, dropped)
  ]
  assert text.WordPieceVectorizer.from_config(layer.get_config()).strip_accents


@settings(max_examples=30, deadline=None)
@given(
  st.lists(
    st.text(alphabet="abcé É\u0301\tö\u00a0\x00\u200b我,!unflÅ", max_size=20),
    min_size=1,
    max_size=4,
  )
)
def test_wordpiece_bert_normalization_matches_reference(texts):
  layer = text.WordPieceVectorizer(
    VOCAB,
    output_sequence_length=12,
    clean_text=True,
    handle_chinese_chars=True,
    strip_accents=True,
  )
  got = layer(tf.constant(texts)).numpy().tolist()
  normalized = [_reference_bert_normalize(t) for t in texts]
  assert got == _reference_wordpiece(normalized, VOCAB, 12)


def test_wordpiece_in_tf_function_and_dataset_map():
  layer = text.WordPieceVectorizer(VOCAB, output_sequence_length=5)
  fn = tf.function(layer)
  assert fn(tf.constant(["un ab"])).numpy().tolist() == [[4, 12, 0, 0, 0]]
  ds = tf.data.Dataset.from_tensor_slices(["a b", "c"]).batch(2).map(layer)
  assert next(iter(ds)).numpy().tolist() == [[7, 10, 0, 0, 0], [11, 0, 0, 0, 0]]


@pytest.mark.parametrize("ending", ["\n", "\r\n", "\r"])
def test_a_vocab_file_is_read_as_editors_save_it(tmp_path, ending):
  vocab_file = tmp_path / "vocab.txt"
  vocab_file.write_bytes(b"\xef\xbb\xbf" + (ending.join(VOCAB) + ending).encode("utf-8"))
  assert text.read_vocabulary(str(vocab_file)) == VOCAB


def test_wordpiece_vocab_file_config_and_keras_save(tmp_path):
  vocab_file = tmp_path / "vocab.txt"
  vocab_file.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
  layer = text.WordPieceVectorizer(str(vocab_file), output_sequence_length=6)
  assert layer.vocabulary == VOCAB
  clone = text.WordPieceVectorizer.from_config(layer.get_config())
  inp = tf.constant(["unaffable hello"])
  np.testing.assert_array_equal(clone(inp).numpy(), layer(inp).numpy())
  inputs = tf.keras.Input(shape=(), dtype=tf.string)
  x = tf.keras.layers.Embedding(len(VOCAB), 4)(layer(inputs))
  model = tf.keras.Model(inputs, tf.keras.layers.Dense(3)(tf.keras.layers.Flatten()(x)))
  expected = model(inp).numpy()
  model.save(tmp_path / "m.keras")
  loaded = tf.keras.models.load_model(tmp_path / "m.keras")
  np.testing.assert_allclose(loaded(inp).numpy(), expected, atol=1e-6)


@pytest.mark.slow
def test_wordpiece_savedmodel_serves_raw_strings(tmp_path):
  layer = text.WordPieceVectorizer(VOCAB, output_sequence_length=6)
  inputs = tf.keras.Input(shape=(), dtype=tf.string)
  x = tf.keras.layers.Embedding(len(VOCAB), 4)(layer(inputs))
  model = tf.keras.Model(inputs, tf.keras.layers.Dense(3)(tf.keras.layers.Flatten()(x)))
  inp = tf.constant(["unaffable hello", "abc"])
  expected = model(inp).numpy()
  tf.saved_model.save(model, str(tmp_path / "sm"))
  restored = tf.saved_model.load(str(tmp_path / "sm"))
  np.testing.assert_allclose(restored(inp).numpy(), expected, atol=1e-6)


def test_wordpiece_bad_vocabulary(tmp_path):
  with pytest.raises(ValueError, match="`unk_token` '\\[UNK\\]' is not in the vocabulary"):
    text.WordPieceVectorizer(["[PAD]", "a"])
  with pytest.raises(ValueError, match="duplicate tokens"):
    text.WordPieceVectorizer(["[PAD]", "[UNK]", "a", "a"])
  with pytest.raises(FileNotFoundError, match="vocab_missing.txt"):
    text.WordPieceVectorizer(str(tmp_path / "vocab_missing.txt"))
  with pytest.raises(ValueError, match="`output_sequence_length`"):
    text.WordPieceVectorizer(VOCAB, output_sequence_length=0)
  with pytest.raises(TypeError, match="tf.string"):
    text.WordPieceVectorizer(VOCAB)(tf.constant([1.0]))


def test_adapt_on_training_split_matches_word_counts():
  layer = data.adapt_text_vectorization(
    "goemotions_sample", max_tokens=50, output_sequence_length=16
  )
  texts, _ = goemotions.examples("train", goemotions.sample_dir())
  counts = collections.Counter()
  for t in texts:
    t = re.sub(r'[!"#$%&()\*\+,-\./:;<=>?@\[\\\]^_`{|}~\']', "", t.lower())
    counts.update(t.split())
  vocab = layer.get_vocabulary()
  assert vocab[:2] == ["", "[UNK]"] and len(vocab) == 50
  ranked = [w for w, _ in counts.most_common(48)]
  # The top words whose counts are not tied with the next one appear in the same order.
  top = counts.most_common(11)
  strict = [w for (w, c), (_, c2) in zip(top, top[1:]) if c > c2]
  assert [w for w in vocab[2:] if w in strict] == strict
  assert set(vocab[2:12]) <= set(ranked)


def test_adapted_model_trains_and_exports_with_raw_strings(tmp_path):
  vectorizer = data.adapt_text_vectorization(
    "goemotions_sample", max_tokens=500, output_sequence_length=12
  )
  inputs = tf.keras.Input(shape=(), dtype=tf.string)
  x = tf.keras.layers.Embedding(500, 8)(vectorizer(inputs))
  x = tf.keras.layers.GlobalAveragePooling1D()(x)
  model = tf.keras.Model(inputs, tf.keras.layers.Dense(28)(x))
  model.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  ds = data.load("goemotions_sample", "train", batch_size=64, deterministic=True).take(5)
  history = model.fit(ds, epochs=1, verbose=0)
  assert np.isfinite(history.history["loss"][0])
  probe = tf.constant(["I love this so much", "what?"])
  expected = model(probe).numpy()
  model.save(tmp_path / "text.keras")
  np.testing.assert_allclose(
    tf.keras.models.load_model(tmp_path / "text.keras")(probe).numpy(), expected, atol=1e-5
  )


def test_adapt_accepts_datasets_and_lists_and_rejects_others():
  layer = text.adapt_text_vectorization(["b a a", "a c"], max_tokens=10, output_sequence_length=3)
  assert layer.get_vocabulary()[:3] == ["", "[UNK]", "a"]
  ds = tf.data.Dataset.from_tensor_slices((["x y", "y"], [0, 1])).batch(2)
  assert text.adapt_text_vectorization(ds, max_tokens=10).get_vocabulary()[2] == "y"
  fixed = text.adapt_text_vectorization(None, vocabulary=["cat", "dog"], output_sequence_length=2)
  assert fixed(tf.constant(["dog cat"])).numpy().tolist() == [[3, 2]]
  assert isinstance(
    text.adapt_text_vectorization(None, wordpiece_vocabulary=VOCAB), text.WordPieceVectorizer
  )
  with pytest.raises(ValueError, match="`data` must be a text dataset name"):
    text.adapt_text_vectorization(42)
  with pytest.raises(ValueError, match="'cifar10' is not a text dataset"):
    text.adapt_text_vectorization("cifar10", data_dir="/nonexistent/cifar")
  with pytest.raises(ValueError, match="`max_tokens`"):
    text.adapt_text_vectorization(["a"], max_tokens=2)
