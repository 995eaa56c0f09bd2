"""The one true class per example that a single-label Top-K loss needs, from either label form.

Top-K losses for single-label classification (the smooth top-k SVM, the soft-rank top-k loss)
compare the score of *the* true class with the other classes. Labels reach them in the package's
two forms (:func:`tfrank4class.labels.parse_labels`):

* integer class ids ``[B]`` / ``[B, 1]``: the id is the true class, every class is a valid item;
* dense relevance ``[B, C]``: the true class is the one entry ``> 0``; entries ``< 0`` mark
  padded classes, which take no part in the loss (neither as the true class nor as a rival).
  A row without an entry ``> 0`` has no true class and its loss is 0 (as a list without a
  relevant item in the ranking losses). A row with two or more entries ``> 0`` is multi-label,
  for which these losses are not defined: it raises an ``InvalidArgumentError`` (eagerly and
  inside ``tf.function``; XLA drops assertions, and then the first such entry is the true class).
"""

import typing

import tensorflow as tf

from tfrank4class.labels import check_batch_size, num_items, parse_labels


class SingleLabel(typing.NamedTuple):
  """The true class of each row (see :func:`single_label`).

  Attributes:
    ids: int32 true class ``[B]`` (0 for a row without one).
    has_true: bool ``[B]``, whether the row has a true class.
    valid: bool ``[B, C]``, the classes that are not padding.
  """

  ids: tf.Tensor
  has_true: tf.Tensor
  valid: tf.Tensor


def single_label(labels, scores, name="y_true"):
  """The true class, its presence and the non-padded classes of each row of ``scores [B, C]``.

  Args:
    labels: class ids ``[B]`` / ``[B, 1]`` or dense relevance ``[B, C]`` (see the module
      docstring).
    scores: the scores ``[B, C]`` (for the number of classes and the batch size).
    name: the argument name used in error messages.

  Returns:
    A :class:`SingleLabel`.

  Example:
    >>> parsed = single_label([[0.0, 1.0, -1.0], [0.0, 0.0, 0.0]], tf.zeros([2, 3]))
    >>> parsed.ids.numpy(), parsed.has_true.numpy()
    (array([1, 0], dtype=int32), array([ True, False]))
    >>> parsed.valid.numpy()
    array([[ True,  True, False],
           [ True,  True,  True]])
  """
  num_classes = num_items(scores)
  parsed = parse_labels(labels, num_classes, name=name, dtype=scores.dtype)
  check_batch_size(parsed.tensor, scores, name=name, other_name="y_pred")
  if parsed.is_class_ids:
    ids = tf.cast(parsed.ids, tf.int32)
    return SingleLabel(ids, tf.ones_like(ids, tf.bool), tf.ones_like(scores, tf.bool))
  relevance = parsed.relevance
  positive = relevance > 0
  count = tf.reduce_sum(tf.cast(positive, tf.int32), axis=-1)
  tf.debugging.Assert(
    tf.reduce_all(count <= 1),
    [
      f"`{name}` given as dense relevance must have at most one entry > 0 per row (one true "
      "class: these Top-K losses are single-label); rows with several:",
      tf.reduce_sum(tf.cast(count > 1, tf.int32)),
    ],
  )
  ids = tf.argmax(tf.cast(positive, tf.int32), axis=-1, output_type=tf.int32)
  return SingleLabel(ids, count > 0, relevance >= 0)
