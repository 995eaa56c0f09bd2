"""Adapters from classification labels to ranking relevance.

A classifier's labels are class ids; a ranking loss wants one relevance value per item (class).

    to_relevance(y, C)[b, c] = 1[y_b == c]          for integer class ids y of shape [B] or [B, 1]
    to_relevance(R, C)       = R                    for dense relevance R of shape [B, C]

Dense relevance may be one-hot, multi-hot or graded; entries below 0 mark padded items, as in
TF-Ranking.
"""
import tensorflow as tf

from tfrank4class import _validation


def to_relevance(labels, num_classes, dtype=tf.float32):
  """Returns float relevance ``[B, num_classes]`` for class ids or dense relevance.

  Args:
    labels: integer (or whole-valued float) class ids of shape ``[B]`` or ``[B, 1]`` in
      ``[0, num_classes)``, or dense relevance of shape ``[B, num_classes]``.
    num_classes: the number of classes ``C >= 2`` (a Python int or a scalar tensor).
    dtype: the float dtype of the result.

  Raises:
    ValueError: a shape that is neither ``[B]``, ``[B, 1]`` nor ``[B, C]``; class ids outside
      ``[0, C)`` (raised as ``InvalidArgumentError`` when only known at run time).
  """
  if isinstance(num_classes, int):
    _validation.check_int("num_classes", num_classes, minimum=2)
  try:
    labels = tf.convert_to_tensor(labels)
  except (TypeError, ValueError) as e:
    raise TypeError(f"`labels` must be a numeric tensor, got {labels!r}: {e}") from None
  if not (labels.dtype.is_floating or labels.dtype.is_integer or labels.dtype.is_bool):
    raise TypeError(f"`labels` must be numeric, got dtype {labels.dtype.name}.")
  rank = labels.shape.rank
  static_c = num_classes if isinstance(num_classes, int) else tf.get_static_value(num_classes)
  if rank == 2 and labels.shape[-1] is not None and labels.shape[-1] != 1:
    if static_c is not None and labels.shape[-1] != static_c:
      raise ValueError(
          f"`labels` of shape {labels.shape} do not match the {static_c} scores per list: "
          f"expected class ids of shape [B] or [B, 1], or dense relevance [B, {static_c}].")
    return tf.cast(labels, dtype)
  if rank not in (1, 2):
    raise ValueError(
        f"`labels` must be class ids of shape [B] or [B, 1], or dense relevance [B, C]; "
        f"got shape {labels.shape}.")
  if rank == 2:
    labels = tf.squeeze(labels, axis=-1)
  if labels.dtype.is_floating:
    whole = tf.debugging.assert_equal(
        labels, tf.round(labels),
        message="`labels` given as class ids must be whole numbers")
    with tf.control_dependencies([whole]):
      labels = tf.cast(labels, tf.int64)
  else:
    labels = tf.cast(labels, tf.int64)
  c = tf.cast(num_classes, tf.int64)
  checks = [
      tf.debugging.assert_greater_equal(
          labels, tf.constant(0, tf.int64),
          message=f"`labels` must be class ids in [0, num_classes={static_c if static_c is not None else 'C'})"),
      tf.debugging.assert_less(
          labels, c,
          message=f"`labels` must be class ids in [0, num_classes={static_c if static_c is not None else 'C'})"),
  ]
  with tf.control_dependencies(checks):
    return tf.one_hot(labels, tf.cast(c, tf.int32), dtype=dtype)


def num_items(scores):
  """The static list size of ``scores`` ``[B, C]`` if known, else a scalar tensor."""
  size = scores.shape[-1]
  return int(size) if size is not None else tf.shape(scores)[-1]
