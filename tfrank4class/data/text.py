"""Text vectorisation inside the model, so text models train from and export with raw strings.

Two ways to turn a batch of raw strings ``tf.string [B]`` into token ids ``int64 [B, L]``:

* ``adapt_text_vectorization(data)``: a ``keras.layers.TextVectorization`` whose word vocabulary
  is adapted on a dataset's training split (the ``max_tokens - 2`` most frequent words after
  lower-casing and stripping punctuation; id 0 = padding, id 1 = out of vocabulary).
* ``WordPieceVectorizer(vocabulary)``: BERT-style WordPiece with a given vocabulary (a
  ``vocab.txt`` path or a list, one token per line / entry), in pure TensorFlow ops (no
  tensorflow-text). Text is lower-cased (optional), split on white space and around punctuation,
  and every word is split greedily into the longest vocabulary pieces from the left, pieces after
  the first carrying the ``##`` prefix; a word with no such split becomes ``[UNK]``. Ids are the
  vocabulary line numbers; sequences are cut or padded (with ``[PAD]``'s id) to
  ``output_sequence_length``. BERT's basic tokenizer also cleans the text, spaces out CJK
  ideographs and strips accents: the options ``clean_text``, ``handle_chinese_chars`` and
  ``strip_accents`` do the same (off by default).

Both are Keras layers that live inside the model: ``model.save`` keeps the vocabulary, and the
served model takes raw strings.

Example:
  >>> layer = WordPieceVectorizer(["[PAD]", "[UNK]", "un", "##aff", "##able"],
  ...                             output_sequence_length=4)
  >>> layer(tf.constant(["unaffable"])).numpy().tolist()
  [[2, 3, 4, 0]]
"""

import functools
import os
import unicodedata

import tensorflow as tf

from tfrank4class import checks, compat
from tfrank4class.compat import keras

# ASCII punctuation and symbols (as BERT's basic tokenizer) and Unicode punctuation.
_PUNCTUATION = r"([!-/:-@\[-`{-~]|\pP)"
# BERT's text cleaning: tab, new line, carriage return and space separators become a space; other
# control and format characters, NUL and the replacement character U+FFFD are dropped.
_WHITE_SPACE = r"[\t\n\r\p{Zs}]"
_CONTROL = r"[\p{Cc}\p{Cf}\x{FFFD}]"
# The CJK Unified Ideographs blocks BERT puts spaces around (its _is_chinese_char).
_CJK = (
  r"([\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{20000}-\x{2A6DF}\x{2A700}-\x{2B73F}"
  r"\x{2B740}-\x{2B81F}\x{2B820}-\x{2CEAF}\x{F900}-\x{FAFF}\x{2F800}-\x{2FA1F}])"
)


@functools.lru_cache(maxsize=1)
def _canonical_decompositions():
  """Code points whose canonical decomposition (NFD) differs from them, and that decomposition.

  Returns ``(code_points [K], splits [K + 1], values [V])``: the decomposition of
  ``code_points[k]`` is ``values[splits[k]:splits[k + 1]]``.
  """
  keys, splits, values = [], [0], []
  for cp in range(0x110000):
    char = chr(cp)
    decomposition = unicodedata.decomposition(char)
    hangul = 0xAC00 <= cp <= 0xD7A3  # decomposed algorithmically, not listed
    if hangul or (decomposition and not decomposition.startswith("<")):
      parts = unicodedata.normalize("NFD", char)
      if parts != char:
        keys.append(cp)
        values.extend(ord(c) for c in parts)
        splits.append(len(values))
  return keys, splits, values


def _texts_of(data, data_dir, split, on_corrupt):
  """A dataset of text batches from a dataset name, a dataset of (text, label) or of texts."""
  if isinstance(data, str):
    from tfrank4class import data as data_lib  # pylint: disable=g-import-not-at-top

    if data_lib.modality(data) != "text":
      raise ValueError(
        f"`data` {data!r} is not a text dataset; the text datasets are "
        f"{[n for n in data_lib.names() if data_lib.modality(n) == 'text']}."
      )
    ds = data_lib.load(
      data, split, data_dir, batch_size=1024, training=False, shuffle=False, on_corrupt=on_corrupt
    )
    return ds.map(lambda x, y: x)
  if isinstance(data, tf.data.Dataset):
    spec = data.element_spec
    if isinstance(spec, tuple):
      data = data.map(lambda x, *rest: x)
      spec = data.element_spec
    if not isinstance(spec, tf.TensorSpec) or spec.dtype != tf.string:
      raise ValueError(f"`data` must yield strings or (strings, labels), got element_spec {spec}.")
    return data
  if isinstance(data, (list, tuple)) and all(isinstance(t, str) for t in data):
    return tf.data.Dataset.from_tensor_slices(list(data)).batch(1024)
  raise ValueError(
    "`data` must be a text dataset name, a tf.data.Dataset of strings or (strings, labels), "
    f"or a list of strings; got {data!r}."
  )


def adapt_text_vectorization(
  data,
  data_dir=None,
  max_tokens=20_000,
  output_sequence_length=128,
  vocabulary=None,
  wordpiece_vocabulary=None,
  split="train",
  on_corrupt="error",
  **kwargs,
):
  """Returns a text vectoriser for a model that takes raw strings.

  Args:
    data: a text dataset name (``"goemotions"``, ``"goemotions_sample"``, ``"mind"``; its
      ``split`` is read from ``data_dir``), a ``tf.data.Dataset`` of strings or
      ``(strings, labels)``, or a list of strings. Ignored when a vocabulary is given.
    data_dir: passed to ``tfrank4class.data.load`` with a dataset name.
    max_tokens: vocabulary size of the adapted layer, including padding and OOV (>= 3).
    output_sequence_length: length ``L`` of the output ids ``[B, L]`` (>= 1).
    vocabulary: a fixed word vocabulary (list) for ``TextVectorization``: no adapting.
    wordpiece_vocabulary: a WordPiece ``vocab.txt`` path or token list: returns a
      ``WordPieceVectorizer`` instead.
    split: the split adapted on (default ``"train"``; never adapt on evaluation data).
    on_corrupt: with a dataset name, what its reader does with a malformed line: ``"error"`` or
      ``"skip"`` (see ``tfrank4class.data.load``).
    **kwargs: more ``TextVectorization`` (or ``WordPieceVectorizer``) arguments.

  Returns:
    A Keras layer mapping ``tf.string [B]`` to ``int64 [B, L]``.
  """
  checks.check_int("max_tokens", max_tokens, minimum=3)
  checks.check_int("output_sequence_length", output_sequence_length, minimum=1)
  if vocabulary is not None and wordpiece_vocabulary is not None:
    raise ValueError("Pass at most one of `vocabulary` and `wordpiece_vocabulary`.")
  if wordpiece_vocabulary is not None:
    return WordPieceVectorizer(
      wordpiece_vocabulary, output_sequence_length=output_sequence_length, **kwargs
    )
  if vocabulary is not None:
    return keras.layers.TextVectorization(
      vocabulary=list(vocabulary), output_sequence_length=output_sequence_length, **kwargs
    )
  layer = keras.layers.TextVectorization(
    max_tokens=max_tokens, output_sequence_length=output_sequence_length, **kwargs
  )
  layer.adapt(_texts_of(data, data_dir, split, on_corrupt))
  return layer


def read_vocabulary(vocabulary):
  """A WordPiece vocabulary as a list of tokens, from a list or a ``vocab.txt`` path (UTF-8 with
  or without a byte order mark; lines end with ``\\n``, ``\\r\\n`` or ``\\r``)."""
  if isinstance(vocabulary, (str, os.PathLike)):
    path = os.fspath(vocabulary)
    if not os.path.isfile(path):
      raise FileNotFoundError(f"`vocabulary` file {path!r} does not exist.")
    with open(path, encoding="utf-8-sig") as f:  # with or without a byte order mark
      tokens = [line.rstrip("\r\n") for line in f]
    while tokens and not tokens[-1]:
      tokens.pop()
  else:
    tokens = list(vocabulary)
  if not tokens or not all(isinstance(t, str) and t for t in tokens):
    raise ValueError(
      "`vocabulary` must be a non-empty list of non-empty token strings (or a vocab.txt path)."
    )
  if len(set(tokens)) != len(tokens):
    dup = sorted({t for t in tokens if tokens.count(t) > 1})[:5]
    raise ValueError(f"`vocabulary` has duplicate tokens, e.g. {dup}.")
  return tokens


@compat.register_serializable  # TensorFlow by nature: not in the keras.ops public API list
class WordPieceVectorizer(keras.layers.Layer):
  """Raw strings ``[B]`` -> WordPiece ids ``int64 [B, output_sequence_length]``; see module doc.

  Greedy longest-match-first WordPiece (Wu et al. 2016; BERT, Devlin et al. 2019): for a word
  ``w``, repeatedly take the longest prefix ``p`` of the rest such that ``p`` (``"##" + p`` after
  the first piece) is in the vocabulary.

  Args:
    vocabulary: list of tokens or ``vocab.txt`` path; a token's id is its position.
    output_sequence_length: length of the output (cut or padded).
    lowercase: lower-case the text first.
    unk_token, pad_token: tokens for unknown words and padding (must be in the vocabulary).
    cls_token, sep_token: if given, put before / after each sequence (must be in the vocabulary).
    max_chars_per_word: longer words become ``unk_token``.
    clean_text: as BERT, turn tabs, new lines and Unicode space separators into spaces and drop
      other control and format characters and U+FFFD.
    handle_chinese_chars: as BERT, put spaces around CJK ideographs (each becomes a word).
    strip_accents: as BERT, decompose the text (NFD) and drop the non-spacing marks
      (category ``Mn``): ``"Café"`` becomes ``"Cafe"``.

  Example:
    >>> vocab = ["[PAD]", "[UNK]", "un", "##aff", "##able", "play"]
    >>> vectorize = WordPieceVectorizer(vocab, output_sequence_length=7)
    >>> # un ##aff ##able | play | "!" is split off and unknown | padding
    >>> vectorize(tf.constant(["Unaffable play!"])).numpy()
    array([[2, 3, 4, 5, 1, 0, 0]])
    >>> bert_like = WordPieceVectorizer(vocab + ["cafe"], output_sequence_length=3,
    ...                                 clean_text=True, strip_accents=True)
    >>> bert_like(tf.constant(["Caf\u00e9\tplay"])).numpy()
    array([[6, 5, 0]])
  """

  def __init__(
    self,
    vocabulary,
    output_sequence_length=128,
    lowercase=True,
    unk_token="[UNK]",
    pad_token="[PAD]",
    cls_token=None,
    sep_token=None,
    max_chars_per_word=100,
    clean_text=False,
    handle_chinese_chars=False,
    strip_accents=False,
    **kwargs,
  ):
    super().__init__(**kwargs)
    self.vocabulary = read_vocabulary(vocabulary)
    self.output_sequence_length = checks.check_int(
      "output_sequence_length", output_sequence_length, minimum=1
    )
    self.max_chars_per_word = checks.check_int("max_chars_per_word", max_chars_per_word, minimum=1)
    self.lowercase = bool(lowercase)
    self.clean_text = bool(clean_text)
    self.handle_chinese_chars = bool(handle_chinese_chars)
    self.strip_accents = bool(strip_accents)
    self.unk_token, self.pad_token = unk_token, pad_token
    self.cls_token, self.sep_token = cls_token, sep_token
    index = {t: i for i, t in enumerate(self.vocabulary)}
    for arg in ("unk_token", "pad_token", "cls_token", "sep_token"):
      token = getattr(self, arg)
      if token is not None and token not in index:
        raise ValueError(f"`{arg}` {token!r} is not in the vocabulary.")
    self._unk_id = index[unk_token]
    self._pad_id = index[pad_token]
    self._cls_id = None if cls_token is None else index[cls_token]
    self._sep_id = None if sep_token is None else index[sep_token]
    self._table = tf.lookup.StaticHashTable(
      tf.lookup.KeyValueTensorInitializer(
        tf.constant(self.vocabulary), tf.range(len(self.vocabulary), dtype=tf.int64)
      ),
      default_value=-1,
    )
    if self.strip_accents:
      keys, splits, values = _canonical_decompositions()
      self._decomposed = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
          tf.constant(keys, tf.int32), tf.range(len(keys), dtype=tf.int32)
        ),
        default_value=-1,
      )
      self._decomposition_splits = tf.constant(splits, tf.int32)
      self._decomposition_values = tf.constant(values, tf.int32)

  def _remove_accents(self, texts):
    """NFD-decomposes ``texts [B]`` (code point by code point) and drops non-spacing marks."""
    chars = tf.strings.unicode_decode(texts, "UTF-8", errors="replace")  # [B, (C)]
    flat = chars.flat_values
    index = self._decomposed.lookup(flat)
    table_size = tf.size(self._decomposition_values)
    # Row k of [decomposition values; the text's own code points]: a mapped code point reads its
    # decomposition, any other one itself.
    pool = tf.concat([self._decomposition_values, flat], 0)
    safe = tf.maximum(index, 0)
    starts = tf.where(
      index >= 0,
      tf.gather(self._decomposition_splits, safe),
      table_size + tf.range(tf.size(flat)),
    )
    ends = tf.where(index >= 0, tf.gather(self._decomposition_splits, safe + 1), starts + 1)
    pieces = tf.gather(pool, tf.ragged.range(starts, ends))  # [N, (k)]
    chars = tf.RaggedTensor.from_row_splits(pieces, chars.row_splits).merge_dims(1, 2)
    texts = tf.strings.unicode_encode(chars, "UTF-8")
    return tf.strings.regex_replace(texts, r"\p{Mn}", "")

  @tf.autograph.experimental.do_not_convert
  def _word_pieces(self, words):
    """Flat words ``[N]`` -> WordPiece ids ``RaggedTensor [N, (pieces)]``."""
    n = tf.size(words)
    lengths = tf.strings.length(words, unit="UTF8_CHAR")
    too_long = lengths > self.max_chars_per_word
    max_len = tf.minimum(tf.reduce_max(tf.concat([lengths, [0]], 0)), self.max_chars_per_word)
    piece_lens = tf.range(1, max_len + 1)  # candidate piece lengths [Lmax]

    def body(step, start, failed, pieces):
      active = tf.logical_and(start < lengths, tf.logical_not(failed))
      pos = tf.broadcast_to(start[:, None], [n, max_len])
      size = tf.broadcast_to(piece_lens[None, :], [n, max_len])
      fits = pos + size <= lengths[:, None]
      cand = tf.strings.substr(
        tf.broadcast_to(words[:, None], [n, max_len]),
        pos,
        tf.where(fits, size, 0),
        unit="UTF8_CHAR",
      )
      cand = tf.where(pos > 0, tf.strings.join(["##", cand]), cand)
      ids = tf.where(fits, self._table.lookup(cand), -1)
      found = ids >= 0
      # Longest match: the last True along the candidate lengths.
      best = (
        max_len
        - 1
        - tf.argmax(tf.reverse(tf.cast(found, tf.int32), [1]), axis=1, output_type=tf.int32)
      )
      any_found = tf.reduce_any(found, axis=1)
      best_id = tf.gather(ids, best, batch_dims=1)
      piece = tf.where(tf.logical_and(active, any_found), best_id, -1)
      new_failed = tf.logical_or(failed, tf.logical_and(active, tf.logical_not(any_found)))
      new_start = tf.where(tf.logical_and(active, any_found), start + best + 1, start)
      return step + 1, new_start, new_failed, pieces.write(step, piece)

    def cond(step, start, failed, pieces):
      del step, pieces
      return tf.reduce_any(tf.logical_and(start < lengths, tf.logical_not(failed)))

    pieces = tf.TensorArray(tf.int64, size=0, dynamic_size=True, element_shape=[None])
    _, _, failed, pieces = tf.while_loop(
      cond, body, (tf.constant(0), tf.zeros_like(lengths), too_long, pieces)
    )
    ids = tf.transpose(tf.reshape(pieces.stack(), [pieces.size(), n]))  # [N, steps]
    ids = tf.concat([ids, -tf.ones([n, 1], tf.int64)], axis=1)  # at least one column
    unk = tf.concat([[self._unk_id], -tf.ones([tf.shape(ids)[1] - 1], tf.int64)], 0)
    ids = tf.where(failed[:, None], unk[None, :], ids)
    return tf.RaggedTensor.from_tensor(ids, padding=-1)

  def call(self, inputs):
    return self._vectorize(inputs)

  @tf.autograph.experimental.do_not_convert
  def _vectorize(self, inputs):
    """``call`` without autograph (no tensor-dependent Python control flow; faster tracing)."""
    texts = tf.convert_to_tensor(inputs)
    if texts.dtype != tf.string:
      raise TypeError(f"WordPieceVectorizer inputs must be tf.string, got {texts.dtype.name}.")
    if texts.shape.rank == 2:
      texts = tf.squeeze(texts, axis=1)
    if self.clean_text:
      texts = tf.strings.regex_replace(texts, _WHITE_SPACE, " ")
      texts = tf.strings.regex_replace(texts, _CONTROL, "")
    if self.handle_chinese_chars:
      texts = tf.strings.regex_replace(texts, _CJK, r" \1 ")
    if self.lowercase:
      texts = tf.strings.lower(texts, encoding="utf-8")
    if self.strip_accents:
      texts = self._remove_accents(texts)
    texts = tf.strings.regex_replace(texts, _PUNCTUATION, r" \1 ")
    words = tf.strings.split(texts)  # [B, (W)]
    pieces = self._word_pieces(words.flat_values)  # [N, (P)]
    tokens = tf.RaggedTensor.from_row_splits(pieces, words.row_splits).merge_dims(1, 2)
    b = tf.shape(texts, out_type=tf.int64)[0]
    length = self.output_sequence_length
    if self._cls_id is not None:
      tokens = tf.concat([tf.fill([b, 1], tf.constant(self._cls_id, tf.int64)), tokens], axis=1)
    if self._sep_id is not None:
      tokens = tokens[:, : length - 1]
      tokens = tf.concat([tokens, tf.fill([b, 1], tf.constant(self._sep_id, tf.int64))], axis=1)
    tokens = tokens[:, :length]
    return tokens.to_tensor(default_value=self._pad_id, shape=[None, length])

  def compute_output_shape(self, input_shape):
    return tf.TensorShape([input_shape[0], self.output_sequence_length])

  def get_config(self):
    config = super().get_config()
    config.update(
      vocabulary=list(self.vocabulary),
      output_sequence_length=self.output_sequence_length,
      lowercase=self.lowercase,
      unk_token=self.unk_token,
      pad_token=self.pad_token,
      cls_token=self.cls_token,
      sep_token=self.sep_token,
      max_chars_per_word=self.max_chars_per_word,
      clean_text=self.clean_text,
      handle_chinese_chars=self.handle_chinese_chars,
      strip_accents=self.strip_accents,
    )
    return config
