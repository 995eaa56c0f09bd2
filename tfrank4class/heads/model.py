"""``build_model``: an encoder followed by a :class:`Rank4ClassHead`.

scores = Rank4ClassHead(encoder(x))        [B, C]
"""

from tfrank4class import encoders as encoders_lib
from tfrank4class.compat import keras
from tfrank4class.heads.rank4class_head import Rank4ClassHead


def _new_inputs(encoder):
  """Fresh ``keras.Input``s matching a functional encoder's inputs."""
  inputs = []
  for i, t in enumerate(encoder.inputs):
    inputs.append(
      keras.Input(shape=t.shape[1:], dtype=t.dtype, name=t.name.split(":")[0] if i == 0 else None)
    )
  return inputs


def _encoder(encoder, encoder_kwargs):
  """The encoder itself, or the one of that name built with ``encoder_kwargs``."""
  if isinstance(encoder, str):
    encoder = encoders_lib.get(encoder, **(encoder_kwargs or {}))
  elif encoder_kwargs:
    raise ValueError(
      f"`encoder_kwargs` is only used when `encoder` is a name, got an encoder object {encoder!r}."
    )
  if not callable(encoder):
    raise ValueError(
      f"`encoder` must be a Keras model/layer or one of {encoders_lib.names()}, got {encoder!r}."
    )
  return encoder


def _model_inputs(encoder, input_shape, input_dtype):
  """New Keras inputs: of ``input_shape`` if given, else like the encoder's inputs."""
  if input_shape is not None:
    return keras.Input(shape=tuple(input_shape), dtype=input_dtype or "float32")
  if isinstance(encoder, keras.Model) and getattr(encoder, "inputs", None):
    inputs = _new_inputs(encoder)
    return inputs[0] if len(inputs) == 1 else inputs
  raise ValueError(
    "`input_shape` is required when `encoder` has no known inputs (a layer or "
    f"an unbuilt subclassed model), got encoder {encoder!r}."
  )


def build_model(
  encoder,
  num_classes,
  interaction="dot",
  hidden_units=(256, 256),
  class_features=None,
  class_chunk_size=None,
  input_shape=None,
  input_dtype=None,
  encoder_kwargs=None,
  name="rank4class",
  **head_kwargs,
):
  """Puts a Rank4Class head on an encoder: a Keras model from inputs to scores ``[B, C]``.

  Args:
    encoder: a ``keras.Model`` / layer mapping inputs to instance embeddings ``[B, d]``, or an
      encoder name of :func:`tfrank4class.encoders.get` (built with ``encoder_kwargs``).
    num_classes: number of classes ``C >= 2``.
    interaction: ``"dot"``, ``"latent_cross"`` or ``"concat"``.
    hidden_units: MLP widths of the MLP interactions.
    class_features: optional ``[C, p]`` per-class features for the class encoder.
    class_chunk_size: classes per chunk for the MLP interactions (memory), or ``None``.
    input_shape: input shape without the batch axis, required when ``encoder`` is a layer or a
      subclassed model without known inputs.
    input_dtype: dtype of that input (default float32).
    encoder_kwargs: keyword arguments when ``encoder`` is a name.
    name: model name.
    **head_kwargs: further :class:`Rank4ClassHead` arguments (``activation``, ``use_bias``,
      ``class_feature_units``, ``class_embedding_dim``, ...).

  Returns:
    A functional ``keras.Model``; ``model.get_layer("rank4class_head")`` is the head.

  Example:
    >>> model = build_model("small_cnn", 10, interaction="concat", hidden_units=(16, 16),
    ...                     encoder_kwargs=dict(input_shape=(8, 8, 3), filters=(4,)))
    >>> tuple(model(ops.zeros((2, 8, 8, 3))).shape)
    (2, 10)
  """
  encoder = _encoder(encoder, encoder_kwargs)
  head = Rank4ClassHead(
    num_classes,
    interaction=interaction,
    hidden_units=hidden_units,
    class_features=class_features,
    class_chunk_size=class_chunk_size,
    name="rank4class_head",
    **head_kwargs,
  )
  inputs = _model_inputs(encoder, input_shape, input_dtype)
  embeddings = encoder(inputs)
  if len(embeddings.shape) != 2:
    raise ValueError(
      f"The encoder must output instance embeddings [B, d], got shape "
      f"{embeddings.shape}; add pooling (e.g. GlobalAveragePooling2D)."
    )
  scores = head(embeddings)
  return keras.Model(inputs, scores, name=name)
