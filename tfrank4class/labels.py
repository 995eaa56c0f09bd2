"""Classification labels: the one parser every loss, metric and retrieval function uses.

A classifier's labels come in two forms, and :func:`parse_labels` turns either into one canonical
form, a :class:`Labels` pair of which exactly one field is set:

    class ids        y  [B] or [B, 1], whole numbers in [0, C)  ->  Labels(ids=y as int32 [B])
    dense relevance  R  [B, C], any real numbers                ->  Labels(relevance=R as float)

Dense relevance may be one-hot, multi-hot or graded; entries below 0 mark padded items, as in
TF-Ranking. Class ids have no padding value: a negative id is an error. A ranking loss wants one
relevance value per item (class), which :func:`to_relevance` gives:

    to_relevance(y, C)[b, c] = 1[y_b == c]          (class ids)
    to_relevance(R, C)       = R                    (dense relevance)

One set of errors, each naming the argument, the value and what is allowed:

* ``TypeError``: labels that are not numeric (integer, floating point or bool);
* ``ValueError``: a shape other than ``[B]``, ``[B, 1]`` or ``[B, C]`` (``C`` the list size when
  it is known), dense relevance where only class ids are allowed, ``num_classes < 2``, labels
  and scores of different batch sizes (:func:`check_batch_size`); and, for the values
  (:func:`tfrank4class.checks.check_values`), class ids that are not whole numbers or lie
  outside ``[0, C)`` (``>= 0`` when ``C`` is not given), or dense relevance that is not finite.

The value checks raise eagerly on every backend, and inside ``tf.function`` run as
``tf.debugging`` assertions. Where no check can run (XLA, ``jax.jit``, ``torch.compile``), the
lists whose labels are bad are marked in :attr:`Labels.invalid`: their relevance rows are NaN and
:meth:`Labels.mark_invalid` makes a loss or metric of those lists NaN, so a bad label shows
instead of giving a silently wrong value (traced, a bad class id is also replaced by 0, so that a
gather by the ids stays in range).

This module imports only ``keras.ops`` and :mod:`tfrank4class.checks`, so that losses, metrics,
heads and retrieval can all use it without breaking the one-way flow of the package.
"""

import typing

import numpy as np

from tfrank4class import backend, checks
from tfrank4class.compat import ops


class Labels(typing.NamedTuple):
  """Parsed labels (see :func:`parse_labels`): exactly one of ``ids`` and ``relevance`` is set.

  Attributes:
    ids: int32 class ids ``[B]``, or ``None`` for dense relevance (0 for an id of an
      :attr:`invalid` list).
    relevance: float dense relevance ``[B, C]`` (``< 0`` = padding), or ``None`` for class ids.
    invalid: bool ``[B]``, the lists whose labels failed a value check that could not raise
      (traced code), or ``None`` when the values were checked (or could not be bad).
  """

  ids: typing.Any = None
  relevance: typing.Any = None
  invalid: typing.Any = None

  @property
  def is_class_ids(self):
    """Whether the labels were class ids (one relevant item per list)."""
    return self.ids is not None

  @property
  def tensor(self):
    """The set field: ``ids`` ``[B]`` or ``relevance`` ``[B, C]``."""
    return self.ids if self.ids is not None else self.relevance

  def to_relevance(self, num_classes, dtype="float32"):
    """Relevance ``[B, num_classes]``: the one-hot rows of class ids, or the dense relevance;
    NaN rows for :attr:`invalid` lists."""
    if self.ids is None:
      relevance = ops.cast(self.relevance, dtype)
    else:
      relevance = ops.one_hot(self.ids, num_classes, dtype=dtype)
    return self.mark_invalid(relevance)

  def mark_invalid(self, values):
    """``values`` (one row or value per list, ``[B, ...]``) with NaN for :attr:`invalid` lists;
    ``values`` unchanged when there are none to mark."""
    if self.invalid is None:
      return values
    invalid = ops.reshape(self.invalid, (-1,) + (1,) * (len(values.shape) - 1))
    return backend.where(invalid, ops.cast(float("nan"), values.dtype), values)

  def with_invalid(self, invalid):
    """These labels with the lists of ``invalid`` (bool ``[B]``, or ``None`` for none) marked
    :attr:`invalid` too."""
    if invalid is None:
      return self
    if self.invalid is not None:
      invalid = ops.logical_or(self.invalid, invalid)
    return self._replace(invalid=invalid)


def check_list_scores(labels, scores, name="y_pred"):
  """``(scores, labels)`` after the rule for the scores of labelled lists
  (:func:`tfrank4class.checks.check_item_scores`): a non-finite score at an item that is not
  padding raises eagerly, and where it cannot raise marks its list :attr:`Labels.invalid`; a
  padded item's score (dense relevance ``< 0``) becomes 0. Class ids have no padding.

  Every loss and metric base calls it after :func:`parse_labels`
  (:class:`tfrank4class.losses.ListwiseLoss`, :class:`tfrank4class.metrics.PerListMetric`).

  Example:
    >>> import numpy as np
    >>> scores, _ = check_list_scores(parse_labels([[1.0, -1.0]]), np.array([[2.0, np.nan]]))
    >>> ops.convert_to_numpy(scores).tolist()
    [[2.0, 0.0]]
  """
  valid = None if labels.is_class_ids else ops.greater_equal(labels.relevance, 0)
  scores, invalid = checks.check_item_scores(name, scores, valid)
  return scores, labels.with_invalid(invalid)


#: The largest class id (int32's largest value).
INT32_MAX = 2**31 - 1


def _fits_int32(low, high):
  return -INT32_MAX - 1 <= int(low) and int(high) <= INT32_MAX


def _numeric(name, labels):
  if isinstance(labels, (list, tuple, np.ndarray, np.generic)):
    array = np.asarray(labels)
    if array.dtype.kind in "iu" and array.size and not _fits_int32(array.min(), array.max()):
      # Beyond int32, which JAX's default tensors would wrap: float64 keeps them (up to 2**53)
      # for the range check.
      labels = array.astype(np.float64)
  try:
    labels = ops.convert_to_tensor(labels)
  except (TypeError, ValueError) as e:
    raise TypeError(f"`{name}` must be numeric, got {labels!r}: {e}") from None
  dtype = backend.dtype_name(labels)
  if not ("float" in dtype or "int" in dtype or dtype == "bool"):
    raise TypeError(f"`{name}` must be numeric, got dtype {dtype}.")
  return labels


def _static(value):
  """A Python int if ``value`` is one or a tensor of known value, else ``None``."""
  if value is None or isinstance(value, int):
    return value
  known = backend.static_value(value)
  return None if known is None else int(known)


def _check(labels, valid, message, shown):
  """:func:`checks.check_values` of ``valid`` ``[B]``; the labels marked where it cannot raise."""
  checks.check_values(valid, message, shown)
  if backend.is_concrete(valid):
    return labels
  return labels.with_invalid(ops.logical_not(valid))


def parse_labels(labels, num_classes=None, name="labels", dense=True, dtype="float32", size="B"):
  """Parses class ids ``[B]`` / ``[B, 1]`` or dense relevance ``[B, C]`` into :class:`Labels`.

  Rules (in this order):

  * rank 2 with a known last dimension other than 1: dense relevance, which must have
    ``num_classes`` columns when that is known; returned as ``Labels(relevance=...)`` in
    ``dtype``, unchanged otherwise (entries below 0 mark padding); every entry must be finite;
  * rank 1, or rank 2 with a last dimension of 1 (or unknown): class ids. Float ids must be
    whole (and finite); ids must be ``>= 0`` and ``< num_classes`` when that is given. Returned
    as ``Labels(ids=...)``, int32 ``[B]``;
  * anything else raises ``ValueError``.

  A dict ``{"labels": y, "mask": m}`` (keras-rs's form) is the labels ``y`` with the items where
  the boolean ``m`` ``[B, C]`` is false padded (:func:`apply_mask`); its ``"mask"`` may be left out.

  :class:`Labels` already parsed for the same ``num_classes`` pass through as they are (a Keras
  loss hands its parse to its loss function, which then checks nothing twice).

  Args:
    labels: integer, float or bool class ids, or dense relevance (array-like or tensor); or
      :class:`Labels`; or a dict ``{"labels": ..., "mask": ...}``.
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
    ValueError: a bad shape or ``num_classes``; class ids that are not whole numbers or lie
      outside ``[0, num_classes)``, or non-finite dense relevance (see the module docstring
      for when values are checked).

  Example:
    >>> ops.convert_to_numpy(parse_labels([[2.0], [0.0]], 3).ids)
    array([2, 0], dtype=int32)
    >>> ops.convert_to_numpy(parse_labels([[1.0, 0.0, -1.0]], 3).relevance)
    array([[ 1.,  0., -1.]], dtype=float32)
    >>> parse_labels([4, 1], 3)
    Traceback (most recent call last):
    ...
    ValueError: `labels` must be class ids in [0, num_classes=3), got [4].
  """
  # Over 60 lines by its docstring, which states the parsing rules in order.
  if isinstance(labels, Labels):
    if dense or labels.is_class_ids:
      return labels
    labels = labels.relevance  # refused below, as dense relevance given as a tensor is
  if isinstance(num_classes, int):
    checks.check_int("num_classes", num_classes, minimum=2)
  if isinstance(labels, dict):
    labels = apply_mask(labels, num_classes, name=name, dtype=dtype)
  labels = _numeric(name, labels)
  shape = tuple(labels.shape)
  ids_shape = f"class ids of shape [{size}] or [{size}, 1]"
  if len(shape) == 2 and shape[-1] is not None and shape[-1] != 1:
    if not dense:
      raise ValueError(f"`{name}` must be {ids_shape}, got shape {shape}.")
    static_c = _static(num_classes)
    if static_c is not None and shape[-1] != static_c:
      raise ValueError(
        f"`{name}` of shape {shape} do not match the {static_c} scores per list: expected "
        f"{ids_shape}, or dense relevance [{size}, {static_c}]."
      )
    relevance = ops.cast(labels, dtype)
    finite = ops.all(ops.isfinite(relevance), axis=-1)
    message = f"`{name}` given as dense relevance must be finite (no NaN or Inf),"
    return _check(Labels(relevance=relevance), finite, message, ops.min(relevance, axis=-1))
  if len(shape) == 2:
    labels = ops.squeeze(labels, axis=-1)
  elif len(shape) != 1:
    allowed = f"{ids_shape}, or dense relevance [{size}, C];" if dense else f"{ids_shape},"
    raise ValueError(f"`{name}` must be {allowed} got shape {shape}.")
  return _parse_ids(name, labels, num_classes)


def apply_mask(labels, num_classes=None, name="labels", dtype="float32"):
  """Dense relevance of keras-rs's labels dict ``{"labels": y, "mask": m}``: ``y`` (class ids
  become one-hot rows) where the boolean ``m`` ``[B, C]`` is true, ``-1`` (padding) where it is
  false. keras-rs ignores an item whose mask is false or whose label is below 0; so does every
  loss and metric here. Without ``"mask"`` the labels are returned as they are.

  Raises:
    ValueError: a key other than ``"labels"`` and ``"mask"``, no ``"labels"``, or a mask whose
      shape is not the relevance's ``[B, C]``.
    TypeError: a mask that is not boolean.

  Example:
    >>> masked = apply_mask({"labels": [[2.0, 0.0, 1.0]], "mask": [[True, True, False]]})
    >>> ops.convert_to_numpy(masked)
    array([[ 2.,  0., -1.]], dtype=float32)
    >>> ops.convert_to_numpy(apply_mask({"labels": [1], "mask": [[True, True, False]]}))
    array([[ 0.,  1., -1.]], dtype=float32)
  """
  unknown = sorted(set(labels) - {"labels", "mask"})
  if "labels" not in labels or unknown:
    raise ValueError(
      f"`{name}` given as a dict must have the key 'labels' and may have 'mask', got keys "
      f"{sorted(labels)}."
    )
  if labels.get("mask") is None:
    return labels["labels"]
  mask = ops.convert_to_tensor(labels["mask"])
  if backend.dtype_name(mask) != "bool":
    raise TypeError(f"`{name}['mask']` must be boolean, got dtype {backend.dtype_name(mask)}.")
  width = mask.shape[-1] if num_classes is None else num_classes
  relevance = to_relevance(labels["labels"], width, dtype=dtype)
  if tuple(mask.shape) != tuple(relevance.shape):
    raise ValueError(
      f"`{name}['mask']` must have the shape of the relevance {tuple(relevance.shape)}, got "
      f"{tuple(mask.shape)}."
    )
  return backend.where(mask, relevance, -ops.ones_like(relevance))


def _parse_ids(name, labels, num_classes):
  """:class:`Labels` of class ids ``labels`` ``[B]``, their values checked in their own dtype
  before the cast to int32 (which would read ``2**32 + 3`` as 3)."""
  if _valid_ids_now(labels, num_classes):
    return Labels(ids=ops.cast(labels, "int32"))
  dtype = backend.dtype_name(labels)
  floating = "float" in dtype
  if dtype in ("bool", "int8", "int16", "uint8", "uint16"):
    labels = ops.cast(labels, "int32")
  if floating:
    # False for fractions, NaN and +-inf.
    whole = ops.logical_and(ops.isfinite(labels), ops.equal(backend.floor(labels), labels))
  else:
    whole = None
  parsed = Labels(ids=labels)
  if whole is not None:
    message = f"`{name}` given as class ids must be whole numbers,"
    parsed = _check(parsed, whole, message, labels)
    labels = backend.where(whole, labels, ops.zeros_like(labels))
  valid = labels >= 0
  if num_classes is None:
    allowed = "class ids >= 0"
    if backend.dtype_name(labels) != "int32":  # 2**31 is exact in every float dtype
      fits = ops.logical_or(labels < ops.cast(2**31, labels.dtype), ops.logical_not(valid))
      if whole is not None:
        fits = ops.logical_or(fits, ops.logical_not(whole))  # reported above
      parsed = _check(parsed, fits, f"`{name}` must be class ids below 2**31 (int32),", labels)
  else:
    static_c = _static(num_classes)
    allowed = f"class ids in [0, num_classes={static_c if static_c is not None else 'C'})"
    valid = ops.logical_and(valid, labels < ops.cast(num_classes, labels.dtype))
  if whole is not None:
    valid = ops.logical_or(valid, ops.logical_not(whole))  # reported above
  parsed = _check(parsed, valid, f"`{name}` must be {allowed},", labels)
  if parsed.invalid is not None:
    # Traced: a bad id becomes 0, so that no gather by the ids fails (inside `tf.function` before
    # the assertion could report it) or reads out of range; its list is marked invalid.
    labels = backend.where(parsed.invalid, ops.zeros_like(labels), labels)
  return parsed._replace(ids=ops.cast(labels, "int32"))


def _valid_ids_now(labels, num_classes):
  """Whether the class ids ``labels`` ``[B]`` can be read now and pass every rule of
  :func:`_parse_ids` (whole, ``>= 0``, below ``num_classes`` or ``2**31``): one read of the ids
  and numpy's tests, in place of a tensor op per rule (an eager call's fixed cost). ``False``
  sends the ids through those ops, which raise naming what is wrong."""
  bound = 2**31 if num_classes is None else _static(num_classes)
  if bound is None or not backend.is_concrete(labels):
    return False
  ids = np.asarray(ops.convert_to_numpy(labels))
  if not ids.size:
    return True
  whole = ids.dtype.kind in "iub" or (np.isfinite(ids).all() and (np.floor(ids) == ids).all())
  return bool(whole and ids.min() >= 0 and ids.max() < bound)


def class_ids(labels, num_classes=None, name="labels"):
  """Validated int32 class ids ``[B]``: :func:`parse_labels` with ``dense=False``. (Where no
  value check can run, use :func:`parse_labels` and :meth:`Labels.mark_invalid`.)

  Example:
    >>> ops.convert_to_numpy(class_ids([[2.0], [0.0]], 3))
    array([2, 0], dtype=int32)
  """
  return parse_labels(labels, num_classes, name=name, dense=False).ids


def to_relevance(labels, num_classes, dtype="float32"):
  """Float relevance ``[B, num_classes]`` of class ids (one-hot rows) or dense relevance.

  :func:`parse_labels` followed by :meth:`Labels.to_relevance`. ``num_classes`` is the number of
  classes ``C >= 2`` (a Python int or a scalar tensor).

  Example:
    >>> ops.convert_to_numpy(to_relevance([2, 0], 3))
    array([[0., 0., 1.],
           [1., 0., 0.]], dtype=float32)
  """
  return parse_labels(labels, num_classes, dtype=dtype).to_relevance(num_classes, dtype)


def num_items(scores):
  """The static list size of ``scores`` ``[B, C]`` if known, else a scalar tensor.

  Example:
    >>> num_items(ops.zeros([2, 5]))
    5
  """
  size = scores.shape[-1]
  return int(size) if size is not None else ops.shape(scores)[-1]


def check_batch_size(
  labels, other, name="labels", other_name="scores", items="score lists", dimension="batch size"
):
  """Checks that ``labels`` and ``other`` hold the same number of lists (their first axis).

  Raises ``ValueError`` when both sizes are known when traced, else checks them at run time
  (:func:`tfrank4class.checks.check_values`).

  Args:
    labels: :class:`Labels`, or a tensor of labels (first axis: the lists).
    other: the tensor the labels belong to (scores ``[B, C]``, embeddings ``[B, D]``).
    name, other_name: the argument names in the message.
    items: what one row of ``other`` is, in the message ("score lists", "embeddings").
    dimension: what is compared, in the message ("batch size", "length").

  Example:
    >>> check_batch_size(ops.convert_to_tensor([0, 1, 2]), ops.zeros([2, 4]))
    Traceback (most recent call last):
    ...
    ValueError: `labels` and `scores` must have the same batch size, got 3 labels for 2 score lists.
  """
  labels, other = _with_shape(labels), _with_shape(other)
  n, m = tuple(labels.shape)[0], tuple(other.shape)[0]
  message = f"`{name}` and `{other_name}` must have the same {dimension}"
  if n is not None and m is not None:
    if n != m:
      raise ValueError(f"{message}, got {n} labels for {m} {items}.")
    return
  same = ops.convert_to_tensor(ops.shape(labels)[0] == ops.shape(other)[0])
  checks.check_values(same, f"{message}; they differ,")


def _with_shape(value):
  """``value`` itself if it has a shape (a tensor, a numpy array), else as a tensor."""
  if isinstance(value, Labels):
    return value.tensor
  return value if hasattr(value, "shape") else ops.convert_to_tensor(value)
