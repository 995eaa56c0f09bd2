"""The one true class per example that a single-label Top-K loss needs, from either label form.

Top-K losses for single-label classification (the smooth top-k SVM, the soft-rank top-k loss)
compare the score of *the* true class with the other classes. Labels reach them in the package's
two forms (:func:`tfrank4class.labels.parse_labels`):

* integer class ids ``[B]`` / ``[B, 1]``: the id is the true class, every class is a valid item;
* dense relevance ``[B, C]``: the true class is the one entry ``> 0``; entries ``< 0`` mark
  padded classes, which take no part in the loss (neither as the true class nor as a rival).
  A row without an entry ``> 0`` has no true class and its loss is 0 (as a list without a
  relevant item in the ranking losses). A row with two or more entries ``> 0`` is multi-label,
  for which these losses are not defined: eagerly it raises a ``ValueError`` (inside
  ``tf.function`` a ``tf.debugging`` assertion fails); where nothing can raise (XLA, ``jax.jit``)
  :attr:`SingleLabel.multi` marks it, and the losses return NaN for it.

``where`` (bool ``[B, C]``, optional) marks the classes that take part; a class where it is
False is padding, as a dense entry below 0.
"""

import numpy as np

from tfrank4class import backend, checks
from tfrank4class.compat import ops
from tfrank4class.labels import check_batch_size, num_items, parse_labels


class SingleLabel:
  """The true class of each row (see :func:`single_label`).

  Attributes:
    ids: int32 true class ``[B]`` (0 for a row without one).
    has_true: bool ``[B]``, whether the row has a true class.
    valid: bool ``[B, C]``, the classes that are not padding.
    parsed: the :class:`tfrank4class.labels.Labels` the parser returned.
    multi: bool ``[B]``, the rows with several entries ``> 0`` (compiled code only; ``None``
      where none can be, or where they raised).

  For class ids without ``where`` (every row has its class, no class is padding) ``has_true`` and
  ``valid`` are all True, built when first read: a loss that needs no mask then builds none (on
  eager PyTorch each costs about as much as a small op of the loss).
  """

  def __init__(self, ids, parsed, scores, has_true=None, valid=None, multi=None):
    """``has_true`` and ``valid`` ``None``: all True (``valid`` of the shape of ``scores``)."""
    self.ids, self.parsed, self.multi = ids, parsed, multi
    self._scores, self._has_true, self._valid = scores, has_true, valid

  @property
  def has_true(self):
    if self._has_true is None:
      self._has_true = ops.ones_like(self.ids, "bool")
    return self._has_true

  @property
  def valid(self):
    if self._valid is None:
      self._valid = ops.ones_like(self._scores, "bool")
    return self._valid

  def mark_invalid(self, values):
    """Per-list ``values`` ``[B]`` with NaN in the rows whose labels were bad (compiled code)."""
    values = self.parsed.mark_invalid(values)
    if self.multi is None:
      return values
    return backend.where(self.multi, ops.full_like(values, np.nan), values)


def single_label(labels, scores, name="y_true", where=None):
  """The true class, its presence and the non-padded classes of each row of ``scores [B, C]``.

  Args:
    labels: class ids ``[B]`` / ``[B, 1]`` or dense relevance ``[B, C]`` (see the module
      docstring).
    scores: the scores ``[B, C]`` (for the number of classes and the batch size).
    name: the argument name used in error messages.
    where: optional bool ``[B, C]``; classes where it is False are padding.

  Returns:
    A :class:`SingleLabel`.

  Example:
    >>> y = np.array([[0.0, 1.0, -1.0], [0.0, 0.0, 0.0]], np.float32)
    >>> parsed = single_label(y, np.zeros([2, 3], np.float32))
    >>> ops.convert_to_numpy(parsed.ids), ops.convert_to_numpy(parsed.has_true)
    (array([1, 0], dtype=int32), array([ True, False]))
    >>> ops.convert_to_numpy(parsed.valid)
    array([[ True,  True, False],
           [ True,  True,  True]])
  """
  scores = ops.convert_to_tensor(scores)
  num_classes = num_items(scores)
  parsed = parse_labels(labels, num_classes, name=name, dtype=scores.dtype)
  check_batch_size(parsed.tensor, scores, name=name, other_name="y_pred")
  if parsed.is_class_ids and where is None:
    return SingleLabel(parsed.ids, parsed, scores)  # int32 ids (parse_labels)
  relevance = parsed.to_relevance(num_classes, scores.dtype)
  if where is not None:
    relevance = backend.where(where, relevance, -ops.ones_like(relevance))
  positive = relevance > 0
  count = ops.sum(ops.cast(positive, "int32"), axis=-1)
  multi = count > 1
  rows = ops.arange(ops.shape(count)[0], dtype="int32")
  checks.check_values(
    ops.logical_not(multi),
    f"`{name}` given as dense relevance must have at most one entry > 0 per row (one true "
    "class: these Top-K losses are single-label); rows with several:",
    rows,
  )
  if backend.is_concrete(multi):
    multi = None  # checked
  ids = ops.cast(ops.argmax(ops.cast(positive, "int32"), axis=-1), "int32")
  return SingleLabel(ids, parsed, scores, count > 0, relevance >= 0, multi)
