"""A small Transformer text encoder (Vaswani et al., NeurIPS 2017) that trains from scratch offline.

    ids = TextVectorization(text)                          [B, L], 0 = padding
    x_0 = E_tok[ids] + E_pos[0..L-1]                        learned token and position embeddings
    a_l = LayerNorm(x_{l-1} + MHA(x_{l-1}, mask))       post-norm block (Vaswani et al., Sec. 3.1)
    x_l = LayerNorm(a_l + W_2 relu(W_1 a_l + b_1) + b_2)
    h   = sum_t m_t x_{L,t} / max(1, sum_t m_t)         mean over non-padding tokens, m = ids != 0

The model of :func:`transformer` takes RAW STRINGS (``tf.string`` ``[B]`` or ``[B, 1]``) and
holds the ``TextVectorization`` layer, so a trained model exports with string inputs and
round-trips through ``model.save`` / ``keras.models.load_model``. String tensors and
``TextVectorization`` are TensorFlow's, so :func:`transformer` runs on the TensorFlow backend only
(elsewhere it raises ``ImportError``); :class:`TransformerTextEncoder`, the layer from token ids,
runs on every backend.
"""

from tfrank4class import checks, compat
from tfrank4class.compat import keras, ops
from tfrank4class.registry import export


@export()
class TransformerTextEncoder(keras.layers.Layer):
  """Token ids ``[B, L]`` (0 = padding) to a pooled text embedding ``[B, d]`` (see module doc).

  Args:
    vocab_size: number of token ids (``TextVectorization.vocabulary_size()``), ``>= 2``.
    sequence_length: maximum tokens; longer inputs are truncated.
    embedding_dim: model width ``d``; must be divisible by ``num_heads``.
    num_heads: attention heads.
    num_layers: Transformer blocks.
    ff_dim: feed-forward width.
    dropout: dropout rate in ``[0, 1)``.
    output_dim: optional final linear projection size.

  Example:
    >>> enc = TransformerTextEncoder(vocab_size=10, sequence_length=4, embedding_dim=8,
    ...                              num_heads=2, num_layers=1, ff_dim=16)
    >>> tuple(enc(ops.convert_to_tensor([[3, 4, 0, 0]])).shape)
    (1, 8)
  """

  def __init__(
    self,
    vocab_size,
    sequence_length,
    embedding_dim=128,
    num_heads=4,
    num_layers=2,
    ff_dim=256,
    dropout=0.1,
    output_dim=None,
    **kwargs,
  ):
    super().__init__(**kwargs)
    self.vocab_size = checks.check_int("vocab_size", vocab_size, minimum=2)
    self.sequence_length = checks.check_int("sequence_length", sequence_length, minimum=1)
    self.embedding_dim = checks.check_int("embedding_dim", embedding_dim, minimum=1)
    self.num_heads = checks.check_int("num_heads", num_heads, minimum=1)
    if self.embedding_dim % self.num_heads:
      raise ValueError(
        f"`embedding_dim` must be divisible by num_heads={self.num_heads}, got "
        f"{self.embedding_dim}."
      )
    self.num_layers = checks.check_int("num_layers", num_layers, minimum=0)
    self.ff_dim = checks.check_int("ff_dim", ff_dim, minimum=1)
    self.dropout = checks.check_float("dropout", dropout, minimum=0.0)
    if self.dropout >= 1.0:
      raise ValueError(f"`dropout` must be in [0, 1), got {dropout!r}.")
    self.output_dim = checks.check_int("output_dim", output_dim, minimum=1, allow_none=True)
    self.token_embedding = keras.layers.Embedding(
      self.vocab_size, self.embedding_dim, name="token_embedding"
    )
    dense = lambda units, name, act=None: keras.layers.Dense(units, activation=act, name=name)
    layers = range(self.num_layers)
    self.attention = [
      keras.layers.MultiHeadAttention(
        self.num_heads,
        self.embedding_dim // self.num_heads,
        dropout=self.dropout,
        name=f"block{i}_attention",
      )
      for i in layers
    ]
    self.norm1 = [
      keras.layers.LayerNormalization(epsilon=1e-6, name=f"block{i}_norm1") for i in layers
    ]
    self.ff1 = [dense(self.ff_dim, f"block{i}_ff1", "relu") for i in layers]
    self.ff2 = [dense(self.embedding_dim, f"block{i}_ff2") for i in layers]
    self.norm2 = [
      keras.layers.LayerNormalization(epsilon=1e-6, name=f"block{i}_norm2") for i in layers
    ]
    self.block_dropout = [
      keras.layers.Dropout(self.dropout, name=f"block{i}_dropout") for i in layers
    ]
    self.projection = (
      keras.layers.Dense(self.output_dim, name="projection") if self.output_dim else None
    )

  def build(self, input_shape):
    d = self.embedding_dim
    self.position_embedding = self.add_weight(
      name="position_embedding",
      shape=(self.sequence_length, d),
      initializer=keras.initializers.RandomNormal(stddev=0.02),
      trainable=True,
    )
    self.token_embedding.build((None, None))
    seq = (None, None, d)
    for i in range(self.num_layers):
      build_attention(self.attention[i], seq, seq)
      self.norm1[i].build(seq)
      self.ff1[i].build(seq)
      self.ff2[i].build((None, None, self.ff_dim))
      self.norm2[i].build(seq)
    if self.projection is not None:
      self.projection.build((None, d))
    super().build(input_shape)

  def call(self, token_ids, training=None):
    ids = ops.cast(token_ids, "int32")
    if len(ids.shape) != 2:
      raise ValueError(f"`token_ids` must have shape [B, L], got shape {tuple(ids.shape)}.")
    ids = ids[:, : self.sequence_length]
    length = ops.shape(ids)[1]
    mask = ops.not_equal(ids, 0)  # [B, L]
    positions = ops.convert_to_tensor(self.position_embedding)[:length]
    x = self.token_embedding(ids) + positions[None, :, :]
    attention_mask = ops.logical_and(mask[:, :, None], mask[:, None, :])
    for i in range(self.num_layers):
      attended = self.attention[i](x, x, attention_mask=attention_mask, training=training)
      x = self.norm1[i](x + self.block_dropout[i](attended, training=training))
      ff = self.ff2[i](self.ff1[i](x))
      x = self.norm2[i](x + self.block_dropout[i](ff, training=training))
    weights = ops.cast(mask, ops.dtype(x))[:, :, None]
    pooled = ops.sum(x * weights, axis=1) / ops.maximum(ops.sum(weights, axis=1), 1.0)
    if self.projection is not None:
      pooled = self.projection(pooled)
    return pooled

  def compute_output_shape(self, input_shape):
    return (input_shape[0], self.output_dim or self.embedding_dim)

  def get_config(self):
    config = super().get_config()
    config.update(
      {
        "vocab_size": self.vocab_size,
        "sequence_length": self.sequence_length,
        "embedding_dim": self.embedding_dim,
        "num_heads": self.num_heads,
        "num_layers": self.num_layers,
        "ff_dim": self.ff_dim,
        "dropout": self.dropout,
        "output_dim": self.output_dim,
      }
    )
    return config


def build_attention(layer, query_shape, value_shape):
  """Builds a ``keras.layers.MultiHeadAttention`` for inputs of these shapes (before any call).

  A layer that holds attention layers builds them in its own ``build``, so that a model loaded
  from a ``.keras`` file has every weight before its values are read (Keras 3 builds the loaded
  layers from their input shapes, without calling them). Keras 3 spells this
  ``build(query_shape, value_shape)`` and creates the weights; Keras 2 (tf-keras) only has
  ``_build_from_signature(query, value)``, which sets up the projections and leaves their weights
  to the first call (its loader restores them then).

  Example:
    >>> attention = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4)
    >>> build_attention(attention, (None, 5, 8), (None, 5, 8))
    >>> len(attention.weights) == (8 if compat.KERAS_3 else 0)
    True
    >>> x = ops.zeros((1, 5, 8))
    >>> tuple(attention(x, x).shape)
    (1, 5, 8)
  """
  if compat.KERAS_3:
    layer.build(query_shape, value_shape)
  else:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top  (tf-keras: TF by nature)

    layer._build_from_signature(  # pylint: disable=protected-access
      tf.TensorShape(query_shape), tf.TensorShape(value_shape)
    )


def _strip_reserved(vocabulary):
  """Drops a leading ``""`` / ``"[UNK]"`` (as in ``TextVectorization.get_vocabulary()``)."""
  vocabulary = list(vocabulary)
  if vocabulary[:1] == [""]:
    vocabulary = vocabulary[1:]
  if vocabulary[:1] == ["[UNK]"]:
    vocabulary = vocabulary[1:]
  return vocabulary


def _new_vectorizer(vocabulary, sequence_length, standardize):
  """A ``TextVectorization`` over the tokens of ``vocabulary`` (see :func:`transformer`)."""
  if isinstance(vocabulary, str):
    raise ValueError(f"`vocabulary` must be a list of tokens, got the string {vocabulary!r}.")
  tokens = _strip_reserved(vocabulary)
  if not tokens:
    raise ValueError("`vocabulary` must hold at least one token besides '' and '[UNK]'.")
  return keras.layers.TextVectorization(
    vocabulary=tokens,
    output_sequence_length=sequence_length,
    standardize=standardize,
    name="text_vectorization",
  )


def _checked_vectorizer(text_vectorization):
  """``text_vectorization`` after checking it is an adapted ``TextVectorization`` of ints."""
  if not isinstance(text_vectorization, keras.layers.TextVectorization):
    raise ValueError(
      f"`text_vectorization` must be a keras.layers.TextVectorization, got "
      f"{type(text_vectorization).__name__}."
    )
  config = text_vectorization.get_config()
  if config.get("output_mode") != "int":
    raise ValueError(
      f"`text_vectorization` must have output_mode='int', got {config.get('output_mode')!r}."
    )
  if text_vectorization.vocabulary_size() < 3:
    raise ValueError(
      "`text_vectorization` has an empty vocabulary; adapt it on the training "
      "texts (or set its vocabulary) first."
    )
  return text_vectorization


def transformer(
  vocabulary=None,
  text_vectorization=None,
  sequence_length=64,
  standardize="lower_and_strip_punctuation",
  name="transformer_text_encoder",
  **encoder_kwargs,
):
  """Builds a raw-string Transformer text encoder model ``tf.string [B] / [B, 1] -> [B, d]``.

  Exactly one of ``vocabulary`` and ``text_vectorization`` is given.

  Args:
    vocabulary: a list of tokens (e.g. from a ``TextVectorization`` adapted on the training
      split; a leading ``""`` and ``"[UNK]"`` as returned by ``get_vocabulary()`` are accepted).
    text_vectorization: an already adapted ``keras.layers.TextVectorization`` with
      ``output_mode="int"``; used as is (its ``output_sequence_length``, if set, should not
      exceed ``sequence_length``: longer outputs are truncated).
    sequence_length: tokens per text (padding/truncation length of a new ``TextVectorization``,
      and the size of the position table).
    standardize: ``TextVectorization`` standardisation when ``vocabulary`` is given.
    name: model name.
    **encoder_kwargs: ``embedding_dim``, ``num_heads``, ``num_layers``, ``ff_dim``, ``dropout``,
      ``output_dim`` of :class:`TransformerTextEncoder` (its defaults apply).

  Returns:
    A functional ``keras.Model`` whose input is a ``tf.string`` tensor ``[B, 1]`` (``[B]``
    is accepted too).

  Raises:
    ImportError: on the JAX and PyTorch backends (string tensors and ``TextVectorization`` are
      TensorFlow's); use :class:`TransformerTextEncoder` on token ids there.

  Example:
    >>> enc = transformer(vocabulary=["good", "bad"], sequence_length=4, embedding_dim=8,
    ...                   num_heads=2, num_layers=1, ff_dim=16)
    >>> tuple(enc(ops.convert_to_tensor(["good film", "bad"])).shape)
    (2, 8)
  """
  compat.require_tensorflow_backend("tfrank4class.encoders.transformer (raw strings)")
  if (vocabulary is None) == (text_vectorization is None):
    raise ValueError(
      "Pass exactly one of `vocabulary` (a list of tokens) and "
      "`text_vectorization` (an adapted TextVectorization layer); got "
      f"vocabulary={'None' if vocabulary is None else 'a list'} and "
      f"text_vectorization={text_vectorization!r}."
    )
  sequence_length = checks.check_int("sequence_length", sequence_length, minimum=1)
  if vocabulary is not None:
    vectorizer = _new_vectorizer(vocabulary, sequence_length, standardize)
  else:
    vectorizer = _checked_vectorizer(text_vectorization)
  texts = keras.Input(shape=(1,), dtype="string", name="text")
  ids = vectorizer(texts)
  pooled = TransformerTextEncoder(
    vectorizer.vocabulary_size(), sequence_length, name="transformer", **encoder_kwargs
  )(ids)
  return keras.Model(texts, pooled, name=name)
