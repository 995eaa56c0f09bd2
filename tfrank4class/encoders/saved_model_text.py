"""Plug in a local SavedModel text encoder (e.g. a BERT or ELECTRA from TF Hub, downloaded by the
user beforehand) as the instance encoder.

    h = pick(encoder(preprocessor(text)))     or     h = pick(encoder(ids))

``pick`` takes ``output_key`` from a dict output (``"pooled_output"`` for TF Hub BERT/ELECTRA
encoders). Nothing is downloaded: ``path`` must be a local SavedModel directory.

A SavedModel is TensorFlow's by nature: this module imports TensorFlow and is imported by
:mod:`tfrank4class.encoders` on the TensorFlow backend only (elsewhere ``encoders.get(
"saved_model")`` raises ``ImportError``).
"""

import os

from tfrank4class import compat

compat.require_tensorflow_backend("tfrank4class.encoders.saved_model_text")  # the fence

import tensorflow as tf  # noqa: E402

from tfrank4class.compat import keras  # noqa: E402
from tfrank4class.registry import export  # noqa: E402

#: Input names of the TF Hub BERT/ELECTRA encoder convention.
BERT_INPUT_KEYS = ("input_word_ids", "input_mask", "input_type_ids")


def _check_saved_model_dir(name, path):
  path = os.fspath(path)
  if not os.path.isfile(os.path.join(path, "saved_model.pb")):
    raise ValueError(
      f"`{name}` must be a local SavedModel directory (holding saved_model.pb), got "
      f"{path!r}. tfrank4class never downloads models: fetch it yourself first."
    )
  return path


def _saved_model_variables(obj):
  """(trainable, non-trainable) variables of a loaded SavedModel.

  Uses the ``trainable_variables`` / ``variables`` attributes of the Reusable SavedModel
  convention (TF Hub) when present, else every variable reachable in the object graph, split by
  its ``trainable`` flag.
  """
  trainable = getattr(obj, "trainable_variables", None)
  every = getattr(obj, "variables", None)
  if every is None:
    every = [t for t in tf.train.TrackableView(obj).descendants() if isinstance(t, tf.Variable)]
  every = list(every() if callable(every) else every)
  if trainable is None:
    trainable = [v for v in every if v.trainable]
  trainable = list(trainable() if callable(trainable) else trainable)
  ids = {id(v) for v in trainable}
  return trainable, [v for v in every if id(v) not in ids]


def track_variables(layer, trainable, non_trainable):
  """Makes existing ``tf.Variable``\\ s (e.g. a loaded SavedModel's) weights of ``layer``.

  ``trainable`` become ``layer.trainable_weights`` (while ``layer.trainable``), ``non_trainable``
  its non-trainable weights; both are saved and loaded with the layer. Keras has no public API
  for variables created outside ``add_weight``: Keras 2 keeps a layer's own weights in
  ``_trainable_weights`` / ``_non_trainable_weights``, Keras 3 in ``_trainable_variables`` /
  ``_non_trainable_variables`` (and files a variable by its own ``trainable`` flag), and reads
  a ``regularizer`` attribute from each, which this sets to ``None`` when missing.

  Example:
    >>> layer = keras.layers.Layer()
    >>> track_variables(layer, [tf.Variable(1.0)], [tf.Variable(2.0, trainable=False)])
    >>> [float(w.numpy()) for w in layer.weights]
    [1.0, 2.0]
  """
  if compat.KERAS_3:
    for variable in (*trainable, *non_trainable):
      if not hasattr(variable, "regularizer"):
        variable.regularizer = None  # Keras 3 reads it from every weight (add_weight sets it)
    layer._trainable_variables.extend(trainable)  # pylint: disable=protected-access
    layer._non_trainable_variables.extend(non_trainable)  # pylint: disable=protected-access
  else:
    layer._trainable_weights.extend(trainable)  # pylint: disable=protected-access
    layer._non_trainable_weights.extend(non_trainable)  # pylint: disable=protected-access


@export()
class SavedModelEncoder(keras.layers.Layer):
  """A Keras layer around ``tf.saved_model.load(path)`` (see module doc).

  The SavedModel is called as ``obj(inputs)`` (its ``__call__``), or through
  ``obj.signatures[signature]`` when ``signature`` is set (signature functions take keyword
  tensors: a dict input is passed as ``**inputs``; a single tensor under ``signature_input``). Its
  variables become the layer's weights (trainable when ``trainable=True`` and the SavedModel marks
  them trainable), so fine-tuned values are saved by ``model.save``; loading a saved model needs
  the same SavedModel directory at ``path``.

  Args:
    path: local SavedModel directory of the encoder.
    preprocessor_path: optional local SavedModel mapping strings ``[B]`` to the encoder's inputs
      (e.g. a BERT preprocessing model returning ``input_word_ids``/``input_mask``/
      ``input_type_ids``).
    output_key: entry of a dict output to use (``"pooled_output"`` for BERT/ELECTRA); ``None``
      accepts a tensor output or a dict with a single entry.
    bert_inputs: for integer token-id inputs ``[B, L]`` (0 = padding): pass them as
      ``{input_word_ids: ids, input_mask: ids != 0, input_type_ids: 0}``.
    signature: optional serving signature name instead of ``__call__``.
    signature_input: keyword of a single-tensor input for ``signature``.
    trainable: fine-tune the SavedModel's trainable variables.

  Call:
    strings ``[B]`` / ``[B, 1]`` (squeezed to ``[B]``) or integer ids ``[B, L]``; returns the
    ``[B, d]`` output.

  Example (a toy SavedModel written here stands in for a downloaded encoder; it maps a text to
  its length in characters and in words):
    >>> import tempfile
    >>> class Toy(tf.Module):
    ...   @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    ...   def __call__(self, texts):
    ...     chars = tf.cast(tf.strings.length(texts), tf.float32)
    ...     words = tf.cast(tf.strings.split(texts).row_lengths(), tf.float32)
    ...     return {"pooled_output": tf.stack([chars, words], axis=1)}
    >>> tmp = tempfile.TemporaryDirectory()
    >>> tf.saved_model.save(Toy(), tmp.name)
    >>> encoder = SavedModelEncoder(tmp.name, output_key="pooled_output")
    >>> encoder(tf.constant([["so happy"], ["sad"]])).numpy()
    array([[8., 2.],
           [3., 1.]], dtype=float32)
    >>> tmp.cleanup()

    With a TF Hub ELECTRA and its BERT preprocessing model downloaded beforehand:

    >>> enc = SavedModelEncoder("/models/electra_small",
    ...                         preprocessor_path="/models/bert_preprocess",
    ...                         output_key="pooled_output")            # doctest: +SKIP
  """

  def __init__(
    self,
    path,
    preprocessor_path=None,
    output_key=None,
    bert_inputs=False,
    signature=None,
    signature_input=None,
    trainable=False,
    **kwargs,
  ):
    super().__init__(trainable=trainable, **kwargs)
    # Not ``self.path``: Keras 3 layers have a read-only ``path`` (their place in the model).
    self.saved_model_path = _check_saved_model_dir("path", path)
    self.preprocessor_path = (
      None
      if preprocessor_path is None
      else _check_saved_model_dir("preprocessor_path", preprocessor_path)
    )
    if output_key is not None and not isinstance(output_key, str):
      raise ValueError(f"`output_key` must be a string or None, got {output_key!r}.")
    self.output_key = output_key
    if not isinstance(bert_inputs, bool):
      raise ValueError(f"`bert_inputs` must be True or False, got {bert_inputs!r}.")
    self.bert_inputs = bert_inputs
    self.signature = signature
    self.signature_input = signature_input
    self._encoder = tf.saved_model.load(self.saved_model_path)
    if signature is not None:
      if signature not in self._encoder.signatures:
        raise ValueError(
          f"`signature` must be one of {sorted(self._encoder.signatures)} for the "
          f"SavedModel at {self.saved_model_path!r}, got {signature!r}."
        )
      self._fn = self._encoder.signatures[signature]
    else:
      if not callable(self._encoder):
        raise ValueError(
          f"The SavedModel at {self.saved_model_path!r} has no __call__; pass `signature` (one "
          f"of {sorted(self._encoder.signatures)})."
        )
      self._fn = self._encoder
    self._preprocessor = (
      None if self.preprocessor_path is None else tf.saved_model.load(self.preprocessor_path)
    )
    trainable_vars, others = _saved_model_variables(self._encoder)
    # The SavedModel's variables become this layer's weights (saved by model.save, trained when
    # the layer is trainable).
    track_variables(self, trainable_vars, others)

  def _call_encoder(self, inputs):
    if self.signature is None:
      return self._fn(inputs)
    if isinstance(inputs, dict):
      return self._fn(**inputs)
    if self.signature_input is None:
      raise ValueError("`signature_input` must name the input keyword of the signature.")
    return self._fn(**{self.signature_input: inputs})

  def call(self, inputs):
    inputs = tf.convert_to_tensor(inputs)
    if inputs.dtype == tf.string:
      if inputs.shape.rank == 2 and inputs.shape[-1] == 1:
        inputs = tf.squeeze(inputs, axis=-1)
      if inputs.shape.rank != 1:
        raise ValueError(f"string inputs must have shape [B] or [B, 1], got shape {inputs.shape}.")
      if self._preprocessor is not None:
        inputs = self._preprocessor(inputs)
    elif self.bert_inputs:
      if inputs.shape.rank != 2:
        raise ValueError(f"token ids must have shape [B, L], got shape {inputs.shape}.")
      ids = tf.cast(inputs, tf.int32)
      inputs = {
        "input_word_ids": ids,
        "input_mask": tf.cast(tf.not_equal(ids, 0), tf.int32),
        "input_type_ids": tf.zeros_like(ids),
      }
    outputs = self._call_encoder(inputs)
    if isinstance(outputs, dict):
      if self.output_key is None:
        if len(outputs) != 1:
          raise ValueError(
            f"The SavedModel returns a dict with keys {sorted(outputs)}; set "
            f"`output_key` to one of them."
          )
        outputs = next(iter(outputs.values()))
      elif self.output_key not in outputs:
        raise ValueError(f"`output_key` must be one of {sorted(outputs)}, got {self.output_key!r}.")
      else:
        outputs = outputs[self.output_key]
    outputs = tf.convert_to_tensor(outputs)
    if outputs.shape.rank != 2:
      raise ValueError(
        f"The SavedModel output must have shape [B, d], got shape {outputs.shape}; "
        f"pick a pooled output with `output_key`."
      )
    return tf.cast(outputs, tf.float32)

  def get_config(self):
    config = super().get_config()
    config.update(
      {
        "path": self.saved_model_path,
        "preprocessor_path": self.preprocessor_path,
        "output_key": self.output_key,
        "bert_inputs": self.bert_inputs,
        "signature": self.signature,
        "signature_input": self.signature_input,
      }
    )
    return config


def saved_model(
  path,
  preprocessor_path=None,
  output_key=None,
  input_type="string",
  sequence_length=None,
  bert_inputs=False,
  signature=None,
  signature_input=None,
  trainable=False,
  name="saved_model_text_encoder",
):
  """Builds a model around a local SavedModel text encoder.

  Args:
    path, preprocessor_path, output_key, bert_inputs, signature, signature_input, trainable: see
      :class:`SavedModelEncoder`.
    input_type: ``"string"`` (model input ``tf.string [B, 1]``; ``[B]`` accepted too) or
      ``"token_ids"`` (model input ``int32 [B, sequence_length]``).
    sequence_length: length of token-id inputs (``None`` = variable).
    name: model name.

  Returns:
    A functional ``keras.Model`` from raw strings (or ids) to ``[B, d]``.

  Example:
    >>> enc = saved_model("/models/bert", preprocessor_path="/models/bert_preprocess",
    ...                   output_key="pooled_output")                  # doctest: +SKIP
  """
  if input_type not in ("string", "token_ids"):
    raise ValueError(f"`input_type` must be one of ['string', 'token_ids'], got {input_type!r}.")
  layer = SavedModelEncoder(
    path,
    preprocessor_path=preprocessor_path,
    output_key=output_key,
    bert_inputs=bert_inputs,
    signature=signature,
    signature_input=signature_input,
    trainable=trainable,
    name="saved_model_encoder",
  )
  if input_type == "string":
    inputs = keras.Input(shape=(1,), dtype=tf.string, name="text")
  else:
    inputs = keras.Input(shape=(sequence_length,), dtype=tf.int32, name="token_ids")
  return keras.Model(inputs, layer(inputs), name=name)
