"""Classification labels: the one parser every loss, metric and retrieval function uses.

A classifier's labels come in two forms, and :func:`parse_labels` turns either into one canonical
form, a :class:`Labels` pair of which exactly one field is set:

    class ids        y  [B] or [B, 1], whole numbers in [0, C)  ->  Labels(ids=y as int64 [B])
    dense relevance  R  [B, C], any real numbers                ->  Labels(relevance=R as float)

Dense relevance may be one-hot, multi-hot or graded; entries below 0 mark padded items, as in
TF-Ranking. Class ids have no padding value: a negative id is an error. A ranking loss wants one
relevance value per item (class), which :func:`to_relevance` gives:

    to_relevance(y, C)[b, c] = 1[y_b == c]          (class ids)
    to_relevance(R, C)       = R                    (dense relevance)

One set of errors, each naming the argument, the value and what is allowed:

* ``TypeError``: labels that are not numeric (integer, floating point or bool);
* ``ValueError``: a shape other than ``[B]``, ``[B, 1]`` or ``[B, C]`` (``C`` the list size when
  it is known), dense relevance where only class ids are allowed, ``num_classes < 2``, or
  (:func:`check_batch_size`) labels and scores of different batch sizes known when traced;
* ``InvalidArgumentError``: class ids that are not whole numbers or lie outside ``[0, C)``
  (``>= 0`` when ``C`` is not given), or batch sizes that differ at run time.

Run-time checks are ``tf.debugging.Assert`` ops *beside* the computation, not gates on it. Eagerly
they raise at once; inside ``tf.function`` they run as stateful ops of the function (a
``tf.function`` runs every stateful op it traced), so the call fails with their message. Not
gating keeps the label computations of several metrics on one batch identical graph nodes, which
TensorFlow's graph optimiser merges (see :mod:`tfrank4class.metrics.functional`), and the data of
every assertion is a string or int32 tensor, which TensorFlow checks without a ``tf.cond`` guard.
XLA drops assertions: under ``jit_compile=True`` a bad id passes unchecked (a fractional id is
truncated towards zero, and :func:`to_relevance` turns an id outside ``[0, C)`` into an all-zero
row).

This module imports only TensorFlow and :mod:`tfrank4class.checks`, so that losses, metrics,
heads and retrieval can all use it without breaking the one-way flow of the package.
"""

import typing

import tensorflow as tf

from tfrank4class import checks

#: The number of label values an assertion message shows.
SUMMARIZE = 10


class Labels(typing.NamedTuple):
  """Parsed labels (see :func:`parse_labels`): exactly one of the two fields is set.

  Attributes:
    ids: int64 class ids ``[B]``, or ``None`` for dense relevance.
    relevance: float dense relevance ``[B, C]`` (``< 0`` = padding), or ``None`` for class ids.
  """

  ids: tf.Tensor | None = None
  relevance: tf.Tensor | None = None

  @property
  def is_class_ids(self):
    """Whether the labels were class ids (one relevant item per list)."""
    return self.ids is not None

  @property
  def tensor(self):
    """The set field: ``ids`` ``[B]`` or ``relevance`` ``[B, C]``."""
    return self.ids if self.ids is not None else self.relevance

  def to_relevance(self, num_classes, dtype=tf.float32):
    """Relevance ``[B, num_classes]``: the one-hot rows of class ids, or the dense relevance."""
    if self.ids is None:
      return tf.cast(self.relevance, dtype)
    return tf.one_hot(self.ids, tf.cast(num_classes, tf.int32), dtype=dtype)


def _numeric(name, labels):
  try:
    labels = tf.convert_to_tensor(labels)
  except (TypeError, ValueError) as e:
    raise TypeError(f"`{name}` must be a numeric tensor, got {labels!r}: {e}") from None
  if not (labels.dtype.is_floating or labels.dtype.is_integer or labels.dtype.is_bool):
    raise TypeError(f"`{name}` must be numeric, got dtype {labels.dtype.name}.")
  return labels


def _static(value):
  """A Python int if ``value`` is one or a tensor of known value, else ``None``."""
  if value is None or isinstance(value, int):
    return value
  static = tf.get_static_value(value)
  return None if static is None else int(static)


def _whole(values, ids):
  """Whether every float in ``values`` is a whole number (its int64 truncation ``ids`` converts
  back to it: false for fractions, NaN and +-inf), and the first one that is not, as a string
  (a value for an assertion message that needs no ``tf.cond`` guard)."""
  whole = tf.equal(tf.cast(ids, values.dtype), values)
  first = tf.argmin(tf.cast(whole, tf.int32), output_type=tf.int32)
  return tf.reduce_all(whole), tf.strings.as_string(tf.gather(values, first))


def parse_labels(labels, num_classes=None, name="labels", dense=True, dtype=tf.float32, size="B"):
  """Parses class ids ``[B]`` / ``[B, 1]`` or dense relevance ``[B, C]`` into :class:`Labels`.

  Rules (in this order):

  * rank 2 with a known last dimension other than 1: dense relevance, which must have
    ``num_classes`` columns when that is known; returned as ``Labels(relevance=...)`` in
    ``dtype``, unchanged otherwise (entries below 0 mark padding);
  * rank 1, or rank 2 with a last dimension of 1 (or unknown): class ids. Float ids must be
    whole (and finite); ids must be ``>= 0`` and ``< num_classes`` when that is given. Returned
    as ``Labels(ids=...)``, int64 ``[B]``;
  * anything else raises ``ValueError``.

  Args:
    labels: integer, float or bool class ids, or dense relevance (array-like or tensor).
    num_classes: ``None`` (class ids are only required to be ``>= 0``, dense relevance may have
      any width), a Python int ``>= 2`` or a scalar tensor (the list size ``C``).
    name: the argument name used in error messages.
    dense: whether dense relevance is allowed; ``False`` accepts class ids only.
    dtype: the float dtype of dense relevance.
    size: the letter naming the leading axis in messages (``"B"``: a batch, ``"N"``: a data set).

  Returns:
    A :class:`Labels`.

  Raises:
    TypeError: non-numeric labels.
    ValueError: a bad shape or ``num_classes`` (see the module docstring).
    InvalidArgumentError: class ids that are not whole numbers or lie outside
      ``[0, num_classes)``, eagerly and inside ``tf.function`` (not under XLA).

  Example:
    >>> parse_labels([[2.0], [0.0]], 3).ids.numpy()
    array([2, 0])
    >>> parse_labels([[1.0, 0.0, -1.0]], 3).relevance.numpy()
    array([[ 1.,  0., -1.]], dtype=float32)
  """
  # Over 60 lines by its docstring, which states the parsing rules in order.
  if isinstance(num_classes, int):
    checks.check_int("num_classes", num_classes, minimum=2)
  labels = _numeric(name, labels)
  shape = labels.shape
  ids_shape = f"class ids of shape [{size}] or [{size}, 1]"
  if shape.rank == 2 and shape[-1] is not None and shape[-1] != 1:
    if not dense:
      raise ValueError(f"`{name}` must be {ids_shape}, got shape {shape}.")
    static_c = _static(num_classes)
    if static_c is not None and shape[-1] != static_c:
      raise ValueError(
        f"`{name}` of shape {shape} do not match the {static_c} scores per list: expected "
        f"{ids_shape}, or dense relevance [{size}, {static_c}]."
      )
    return Labels(relevance=tf.cast(labels, dtype))
  if shape.rank == 2:
    labels = tf.squeeze(labels, axis=-1)
  elif shape.rank != 1:
    allowed = f"{ids_shape}, or dense relevance [{size}, C];" if dense else f"{ids_shape},"
    raise ValueError(f"`{name}` must be {allowed} got shape {shape}.")
  ids = tf.cast(labels, tf.int64)
  if labels.dtype.is_floating:
    whole, shown = _whole(labels, ids)
    tf.debugging.Assert(whole, [f"`{name}` given as class ids must be whole numbers, got", shown])
  valid = ids >= 0
  if num_classes is None:
    allowed = "class ids >= 0"
  else:
    static_c = _static(num_classes)
    allowed = f"class ids in [0, num_classes={static_c if static_c is not None else 'C'})"
    valid = valid & (ids < tf.cast(num_classes, tf.int64))
  shown = labels if labels.dtype == tf.int32 else tf.cast(ids, tf.int32)
  tf.debugging.Assert(
    tf.reduce_all(valid), [f"`{name}` must be {allowed}, got", shown], summarize=SUMMARIZE
  )
  return Labels(ids=ids)


def class_ids(labels, num_classes=None, name="labels"):
  """Validated int64 class ids ``[B]``: :func:`parse_labels` with ``dense=False``.

  Example:
    >>> class_ids([[2.0], [0.0]], 3).numpy()
    array([2, 0])
  """
  return parse_labels(labels, num_classes, name=name, dense=False).ids


def to_relevance(labels, num_classes, dtype=tf.float32):
  """Float relevance ``[B, num_classes]`` of class ids (one-hot rows) or dense relevance.

  :func:`parse_labels` followed by :meth:`Labels.to_relevance`. ``num_classes`` is the number of
  classes ``C >= 2`` (a Python int or a scalar tensor).

  Example:
    >>> to_relevance([2, 0], 3).numpy()
    array([[0., 0., 1.],
           [1., 0., 0.]], dtype=float32)
  """
  return parse_labels(labels, num_classes, dtype=dtype).to_relevance(num_classes, dtype)


def num_items(scores):
  """The static list size of ``scores`` ``[B, C]`` if known, else a scalar tensor.

  Example:
    >>> num_items(tf.zeros([2, 5]))
    5
  """
  size = scores.shape[-1]
  return int(size) if size is not None else tf.shape(scores)[-1]


def check_batch_size(
  labels, other, name="labels", other_name="scores", items="score lists", dimension="batch size"
):
  """Checks that ``labels`` and ``other`` hold the same number of lists (their first axis).

  Raises ``ValueError`` when both sizes are known when traced, else adds an assertion (see the
  module docstring).

  Args:
    labels: :class:`Labels`, or a tensor of labels (first axis: the lists).
    other: the tensor the labels belong to (scores ``[B, C]``, embeddings ``[B, D]``).
    name, other_name: the argument names in the message.
    items: what one row of ``other`` is, in the message ("score lists", "embeddings").
    dimension: what is compared, in the message ("batch size", "length").

  Example:
    >>> check_batch_size(tf.constant([0, 1, 2]), tf.zeros([2, 4]))
    Traceback (most recent call last):
    ...
    ValueError: `labels` and `scores` must have the same batch size, got 3 labels for 2 score lists.
  """
  labels, other = _with_shape(labels), _with_shape(other)
  n, m = tf.TensorShape(labels.shape)[0], tf.TensorShape(other.shape)[0]
  message = f"`{name}` and `{other_name}` must have the same {dimension}, got"
  if n is not None and m is not None:
    if n != m:
      raise ValueError(f"{message} {n} labels for {m} {items}.")
    return
  n, m = tf.shape(labels)[0], tf.shape(other)[0]
  tf.debugging.Assert(tf.equal(n, m), [message, n, "labels for", m, items])


def _with_shape(value):
  """``value`` itself if it has a shape (a tensor, a numpy array), else as a tensor."""
  if isinstance(value, Labels):
    return value.tensor
  return value if hasattr(value, "shape") else tf.convert_to_tensor(value)
