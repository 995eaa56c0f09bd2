"""SavedModel export of an embedding model and of a top-k classifier: TensorFlow, fenced.

:func:`export_embedding_model` and :func:`export_top_k_model` write a SavedModel, which only
TensorFlow reads and writes, so this module needs Keras's TensorFlow backend (or tf-keras) and
raises an ``ImportError`` naming the fix on JAX and PyTorch
(:func:`tfrank4class.compat.require_tensorflow_backend`). The rest of
:mod:`tfrank4class.retrieval` runs on every backend; the names
``tfrank4class.retrieval.export_embedding_model`` and ``export_top_k_model`` import this module
when first used.
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


def export_top_k_model(encoder, head, export_dir, k, block_size=1024):
  """Writes ``encoder`` then ``head`` as a SavedModel serving the ``k`` best classes.

  The signature ``serving_default`` takes ``inputs`` (the encoder's input, any batch size) and
  returns ``top_k_ids`` (int32 ``[B, k]``) and ``top_k_scores`` (``[B, k]``), best first, ties by
  the lower class id: the head's brute-force scan of every class in blocks of ``block_size``
  (:meth:`tfrank4class.heads.SampledDotProduct.top_k`,
  :meth:`tfrank4class.heads.SampledRank4ClassHead.top_k`), so serving never holds the
  ``[B, C]`` scores. The SavedModel needs TensorFlow only: a process that never imports
  ``tfrank4class`` serves it.

  Args:
    encoder: a built ``keras.Model``, ``x -> h`` ``[B, d]``.
    head: a head with ``top_k(queries, k, block_size)``
      (:class:`~tfrank4class.heads.SampledDotProduct`,
      :class:`~tfrank4class.heads.SampledRank4ClassHead`).
    export_dir: where to write.
    k: classes returned per example.
    block_size: classes scored at a time.

  Example:
    >>> export_top_k_model(encoder, head, "/tmp/top_k", k=10)   # doctest: +SKIP
  """
  if not isinstance(encoder, keras.Model):
    raise ValueError(f"`encoder` must be a keras.Model, got {encoder!r}.")
  if not callable(getattr(head, "top_k", None)):
    raise ValueError(f"`head` must have a top_k(queries, k, block_size) method, got {head!r}.")
  spec = tf.TensorSpec([None, *encoder.input_shape[1:]], encoder.inputs[0].dtype, name="inputs")
  module = tf.Module()
  module.encoder, module.head = encoder, head

  @tf.function(input_signature=[spec])
  def serve(inputs):
    scores, ids = head.top_k(encoder(inputs, training=False), k, block_size)
    return {"top_k_ids": ids, "top_k_scores": scores}

  module.serve = serve
  tf.saved_model.save(module, str(export_dir), signatures={"serving_default": serve})
  return export_dir
