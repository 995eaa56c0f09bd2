"""SavedModel export of an embedding model: TensorFlow by nature, fenced.

:func:`export_embedding_model` writes a SavedModel, which only TensorFlow reads and writes, so
this module needs Keras's TensorFlow backend (or tf-keras) and raises an ``ImportError`` naming
the fix on JAX and PyTorch (:func:`tfrank4class.compat.require_tensorflow_backend`). The rest of
:mod:`tfrank4class.retrieval` runs on every backend; the name
``tfrank4class.retrieval.export_embedding_model`` imports this module when first used.
"""

from tfrank4class import compat

compat.require_tensorflow_backend("tfrank4class.retrieval.export")

import tensorflow as tf  # noqa: E402  (after the fence, which names the fix on other backends)

from tfrank4class.compat import keras  # noqa: E402


def export_embedding_model(embedding_model, export_dir):
  """Writes ``embedding_model`` as a SavedModel serving ``{"embedding": [B, D]}``.

  The classifier of the cross-entropy recipe is not part of ``embedding_model``, so it is dropped
  at export. Load with ``tf.saved_model.load(export_dir).signatures["serving_default"]``.

  Example:
    >>> export_embedding_model(built.embedding_model, "/tmp/emb")   # doctest: +SKIP
  """
  if not isinstance(embedding_model, keras.Model):
    raise ValueError(f"`embedding_model` must be a keras.Model, got {embedding_model!r}.")
  spec = tf.TensorSpec(
    [None, *embedding_model.input_shape[1:]], embedding_model.inputs[0].dtype, name="inputs"
  )

  @tf.function(input_signature=[spec])
  def serve(inputs):
    return {"embedding": embedding_model(inputs, training=False)}

  tf.saved_model.save(embedding_model, str(export_dir), signatures={"serving_default": serve})
  return export_dir
