"""Adapters from classification labels to ranking relevance.

A classifier's labels are class ids; a ranking loss wants one relevance value per item (class).

    to_relevance(y, C)[b, c] = 1[y_b == c]          for integer class ids y of shape [B] or [B, 1]
    to_relevance(R, C)       = R                    for dense relevance R of shape [B, C]

Dense relevance may be one-hot, multi-hot or graded; entries below 0 mark padded items, as in
TF-Ranking.
"""
import tensorflow as tf

from tfrank4class import _validation


def _numeric(name, labels):
  try:
    labels = tf.convert_to_tensor(labels)
  except (TypeError, ValueError) as e:
    raise TypeError(f"`{name}` must be a numeric tensor, got {labels!r}: {e}") from None
  if not (labels.dtype.is_floating or labels.dtype.is_integer or labels.dtype.is_bool):
    raise TypeError(f"`{name}` must be numeric, got dtype {labels.dtype.name}.")
  return labels


def class_ids(labels, num_classes=None, name="labels"):
  """Returns validated int64 class ids ``[B]`` from class ids of shape ``[B]`` or ``[B, 1]``.

  Ids are whole numbers ``>= 0`` (and ``< num_classes`` when it is given); float ids such as
  ``2.0`` are accepted and converted. The range and whole-number checks are
  ``tf.debugging`` assertions: they raise ``InvalidArgumentError`` eagerly and inside
  ``tf.function``, with the offending values in the message, but XLA drops assertions, so under
  ``jit_compile=True`` a bad id passes unchecked (a fractional id is truncated, and
  :func:`to_relevance` turns an id outside ``[0, C)`` into an all-zero relevance row).

  Args:
    labels: integer (or whole-valued float) class ids of shape ``[B]`` or ``[B, 1]``.
    num_classes: ``None`` (ids are only required to be ``>= 0``), a Python int ``>= 2`` or a
      scalar tensor.
    name: the argument name used in error messages.

  Raises:
    ValueError: a shape other than ``[B]`` or ``[B, 1]``; ids that are not whole numbers in
      ``[0, num_classes)`` (raised as ``InvalidArgumentError`` when only known at run time).

  Example:
    >>> class_ids([[2.0], [0.0]], 3).numpy()
    array([2, 0])
  """
  if isinstance(num_classes, int):
    _validation.check_int("num_classes", num_classes, minimum=2)
  labels = _numeric(name, labels)
  if labels.shape.rank == 2 and labels.shape[-1] in (1, None):
    labels = tf.squeeze(labels, axis=-1)
  if labels.shape.rank != 1:
    raise ValueError(
        f"`{name}` must be class ids of shape [B] or [B, 1], got shape {labels.shape}.")
  if labels.dtype.is_floating:
    whole = tf.debugging.assert_equal(
        labels, tf.round(labels),
        message=f"`{name}` given as class ids must be whole numbers")
    with tf.control_dependencies([whole]):
      labels = tf.cast(labels, tf.int64)
  else:
    labels = tf.cast(labels, tf.int64)
  if num_classes is None:
    allowed = "class ids >= 0"
  else:
    static_c = (num_classes if isinstance(num_classes, int)
                else tf.get_static_value(num_classes))
    allowed = f"class ids in [0, num_classes={static_c if static_c is not None else 'C'})"
  checks = [tf.debugging.assert_greater_equal(
      labels, tf.constant(0, tf.int64), message=f"`{name}` must be {allowed}")]
  if num_classes is not None:
    checks.append(tf.debugging.assert_less(
        labels, tf.cast(num_classes, tf.int64), message=f"`{name}` must be {allowed}"))
  with tf.control_dependencies(checks):
    return tf.identity(labels)


def to_relevance(labels, num_classes, dtype=tf.float32):
  """Returns float relevance ``[B, num_classes]`` for class ids or dense relevance.

  Args:
    labels: integer (or whole-valued float) class ids of shape ``[B]`` or ``[B, 1]`` in
      ``[0, num_classes)`` (checked by :func:`class_ids`), or dense relevance of shape
      ``[B, num_classes]``, passed through unchanged (entries below 0 mark padding).
    num_classes: the number of classes ``C >= 2`` (a Python int or a scalar tensor).
    dtype: the float dtype of the result.

  Raises:
    ValueError: a shape that is neither ``[B]``, ``[B, 1]`` nor ``[B, C]``; class ids outside
      ``[0, C)`` (raised as ``InvalidArgumentError`` when only known at run time; under XLA the
      check is dropped and such an id gives an all-zero row, see :func:`class_ids`).

  Example:
    >>> to_relevance([2, 0], 3).numpy()
    array([[0., 0., 1.],
           [1., 0., 0.]], dtype=float32)
  """
  if isinstance(num_classes, int):
    _validation.check_int("num_classes", num_classes, minimum=2)
  labels = _numeric("labels", labels)
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
  ids = class_ids(labels, num_classes)
  return tf.one_hot(ids, tf.cast(num_classes, tf.int32), dtype=dtype)


def num_items(scores):
  """The static list size of ``scores`` ``[B, C]`` if known, else a scalar tensor."""
  size = scores.shape[-1]
  return int(size) if size is not None else tf.shape(scores)[-1]
