"""Argument checks shared by every module, and public: the benchmarks, the tools and a user's own
loss or metric check their arguments with the same functions and messages.

Each check raises a ``ValueError`` (or ``TypeError``) whose message names the argument, the value
received and what is allowed, so that a bad call fails at construction time with a readable error.
Tensor checks work eagerly and inside ``tf.function`` (static facts are checked in Python, dynamic
ones with ``tf.debugging`` assertions that carry the same message).
"""

import numbers
import os

import tensorflow as tf


def check_int(name, value, minimum=None, allow_none=False):
  """Returns ``value`` if it is an integer ``>= minimum`` (and not a bool), else raises."""
  if value is None and allow_none:
    return None
  allowed = "an integer" + (f" >= {minimum}" if minimum is not None else "")
  if allow_none:
    allowed += " or None"
  if isinstance(value, bool) or not isinstance(value, numbers.Integral):
    raise ValueError(f"`{name}` must be {allowed}, got {value!r}.")
  if minimum is not None and value < minimum:
    raise ValueError(f"`{name}` must be {allowed}, got {value!r}.")
  return int(value)


def check_float(name, value, minimum=None, strict=False, allow_none=False):
  """Returns ``float(value)`` if it is a finite real ``>= minimum`` (``>`` if strict), else
  raises."""
  if value is None and allow_none:
    return None
  op = ">" if strict else ">="
  allowed = "a finite number" + (f" {op} {minimum}" if minimum is not None else "")
  if isinstance(value, bool) or not isinstance(value, numbers.Real):
    raise ValueError(f"`{name}` must be {allowed}, got {value!r}.")
  value = float(value)
  if value != value or value in (float("inf"), float("-inf")):
    raise ValueError(f"`{name}` must be {allowed}, got {value!r}.")
  if minimum is not None and (value < minimum or (strict and value == minimum)):
    raise ValueError(f"`{name}` must be {allowed}, got {value!r}.")
  return value


def check_choice(name, value, choices):
  """Returns ``value`` if it is one of ``choices``, else raises listing them."""
  if value not in choices:
    raise ValueError(f"`{name}` must be one of {sorted(choices)}, got {value!r}.")
  return value


def check_writable_dir(name, path, allow_none=False):
  """Returns ``path`` if it is a folder this process can write in, or one it can create (its
  nearest existing ancestor is a writable folder), else raises naming the reason.

  Example:
    >>> import tempfile
    >>> file = tempfile.mkstemp()[1]
    >>> check_writable_dir("model_dir", os.path.join(file, "run"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: `model_dir` '.../run' cannot be created: '...' is a file, not a folder.
  """
  if path is None and allow_none:
    return None
  if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
    raise ValueError(f"`{name}` must be a folder path, got {path!r}.")
  path = os.fspath(path)
  existing = os.path.abspath(os.path.expanduser(path))
  while not os.path.lexists(existing):
    existing = os.path.dirname(existing)
  if not os.path.isdir(existing):
    what = "is" if existing == os.path.abspath(path) else f"cannot be created: {existing!r} is"
    raise ValueError(f"`{name}` {path!r} {what} a file, not a folder.")
  if not os.access(existing, os.W_OK | os.X_OK):
    what = "is not writable" if existing == os.path.abspath(path) else "cannot be created"
    where = "" if what == "is not writable" else f": {existing!r} is not writable"
    raise ValueError(f"`{name}` {path!r} {what}{where}.")
  return path


FINITE = (True, "no_nan", False)
CASTS = ("at_least_float32", "to_float", None)


def check_scores(name, scores, rank=2, min_length=1, finite=True, cast="at_least_float32"):
  """The one score check: converts ``scores`` to a real tensor and checks its dtype, rank, list
  length and values.

  Every loss, metric and rank operator of the package checks its scores here. The list axis is
  the last one.

  Args:
    name: the argument name used in error messages.
    scores: array-like or tensor.
    rank: ``2`` for a matrix ``[batch_size, list_size]`` (losses, metrics, sorters; an unknown
      rank passes), or ``None`` for any known rank ``>= 1`` (the rank operators, whose lists lie
      along an axis the caller chooses).
    min_length: the smallest allowed list length; checked when the graph is traced, or by an
      assertion when the length is only known at run time (``0``: not checked).
    finite: ``True``: NaN and +-inf raise (``"`name` must be finite (no NaN or Inf)."``);
      ``"no_nan"``: only NaN raises, +-inf are ordinary scores (exact ranks: ``-inf`` is a common
      way to push an item to the bottom), and the message counts the NaN entries; ``False``: the
      values are not checked here (losses whose padded entries may hold anything check after
      masking, or leave it to the ranker).
    cast: ``"at_least_float32"``: integer, ``float16`` and ``bfloat16`` scores become
      ``float32``, ``float32`` and ``float64`` are kept (losses and metrics: the rank maths
      always runs in at least single precision, so a model whose last layer computes in
      ``float16`` under the ``mixed_float16`` policy trains with every loss; ``float16`` holds
      whole numbers exactly only up to 2048 and overflows ``exp`` above ~11); ``"to_float"``:
      integers become ``float32``, floats keep their dtype (the blackbox ranker); ``None``: the
      dtype is kept (exact ranks sort integers exactly).

  Returns:
    The scores as a tensor.

  Raises:
    TypeError: non-numeric scores.
    ValueError: a wrong rank, or lists shorter than ``min_length`` (known when traced).
    InvalidArgumentError: NaN (or +-inf) scores, or lists shorter than ``min_length`` at run
      time, eagerly and inside ``tf.function``.

  The value check is ``tf.reduce_all(tf.math.is_finite(x))`` in a ``tf.debugging.Assert`` with
  string data beside the computation, not a gate on it (a quarter of the cost of the
  ``CheckNumerics`` kernel behind ``tf.debugging.assert_all_finite``, and no ``tf.cond``): eagerly
  it raises at once, inside ``tf.function`` it runs as a stateful op of the function, so the call
  fails. XLA drops assertions, so under ``jit_compile=True`` the values are not checked.

  Example:
    >>> check_scores("scores", tf.constant([[1.0, 2.0]], tf.float16)).dtype
    tf.float32
    >>> try:
    ...   check_scores("y_pred", [[1.0, float("nan")]])
    ... except tf.errors.InvalidArgumentError as e:
    ...   print("`y_pred` must be finite (no NaN or Inf)" in e.message)
    True
  """
  # Over 60 lines by its docstring, which documents every option of the one score check.
  for option, value, choices in (("finite", finite, FINITE), ("cast", cast, CASTS)):
    if not any(value is c or (isinstance(c, str) and value == c) for c in choices):
      raise ValueError(f"`{option}` must be one of {list(choices)}, got {value!r}.")
  try:
    scores = tf.convert_to_tensor(scores)
  except (TypeError, ValueError) as e:
    raise TypeError(f"`{name}` must be a numeric tensor, got {scores!r}: {e}") from None
  dtype = scores.dtype
  if not (dtype.is_floating or dtype.is_integer):
    raise TypeError(
      f"`{name}` must be a numeric tensor (a real tensor: integer or floating point), got dtype "
      f"{dtype.name}."
    )
  if (cast == "at_least_float32" and dtype not in (tf.float32, tf.float64)) or (
    cast == "to_float" and dtype.is_integer
  ):
    scores = tf.cast(scores, tf.float32)
  shape = scores.shape
  if rank is None:
    if shape.rank is None or shape.rank == 0:
      raise ValueError(f"`{name}` must have a known rank >= 1, got shape {shape}.")
  elif shape.rank is not None and shape.rank != rank:
    raise ValueError(f"`{name}` must have shape [batch_size, list_size], got shape {shape}.")
  _check_list_length(name, scores, min_length)
  if finite is True and scores.dtype.is_floating:
    tf.debugging.Assert(
      tf.reduce_all(tf.math.is_finite(scores)), [f"`{name}` must be finite (no NaN or Inf)."]
    )
  elif finite == "no_nan" and scores.dtype.is_floating:
    nan = tf.math.is_nan(scores)
    tf.debugging.Assert(
      tf.logical_not(tf.reduce_any(nan)),
      [
        f"`{name}` must not contain NaN (finite numbers and +-inf are allowed); NaN entries:",
        tf.reduce_sum(tf.cast(nan, tf.int32)),
      ],
    )
  return scores


def _check_list_length(name, scores, min_length):
  """Raises (statically) or asserts (at run time) that the last axis holds ``>= min_length``."""
  if scores.shape.rank is None or min_length <= 0:
    return
  allowed = (
    "a non-empty list" if min_length == 1 else f"lists of at least {min_length} items to be ranked"
  )
  n = scores.shape[-1]
  if n is not None:
    if n < min_length:
      raise ValueError(f"`{name}` must hold {allowed}, got shape {scores.shape}.")
    return
  tf.debugging.Assert(
    tf.shape(scores)[-1] >= min_length,
    [f"`{name}` must hold {allowed}, got lists of", tf.shape(scores)[-1], "items"],
  )


def check_sample_weight(sample_weight, batch_size, list_size=None, dtype=tf.float32):
  """The one sample-weight check of the losses and metrics: per-example (or per-item) weights.

  Allowed shapes: ``[B]`` and ``[B, 1]`` (one weight per example, as ``fit(sample_weight=...)``,
  ``fit(class_weight=...)`` and a dataset of ``(x, y, w)`` give them), and ``[B, C]`` (one weight
  per item of each list) where ``list_size`` is given. Weights must be finite and ``>= 0`` (a
  weight of 0 removes an example); a NaN, an infinity or a negative weight raises, eagerly and
  inside ``tf.function`` (XLA drops the assertion), so that no NaN reaches a loss silently.
  Keras itself multiplies by any weight; negative ones are refused here on purpose: TF-Ranking's
  listwise losses multiply the labels by the weights and renormalise them, so a negative weight
  would not negate a loss but invert which items are relevant, and a batch-level loss (see
  :mod:`tfrank4class.losses.base`) keeps the examples of non-zero weight.

  Args:
    sample_weight: array-like or tensor.
    batch_size: ``B``, an int or a scalar tensor (the static size is checked when known, the
      dynamic one by an assertion).
    list_size: ``C`` if per-item weights ``[B, C]`` are allowed, else ``None``.
    dtype: the dtype of the returned weights.

  Returns:
    The weights as a ``dtype`` tensor, ``[B]`` per example or ``[B, C]`` per item.

  Raises:
    TypeError: non-numeric weights.
    ValueError: a shape other than the allowed ones (known when traced).
    InvalidArgumentError: NaN, +-inf or negative weights, or a batch size that differs at run
      time.

  Example:
    >>> check_sample_weight([[2.0], [0.5]], batch_size=2).numpy()
    array([2. , 0.5], dtype=float32)
    >>> try:
    ...   check_sample_weight([[1.0, 2.0], [3.0, 4.0]], batch_size=2)
    ... except ValueError as e:
    ...   print(e)
    `sample_weight` must have shape [batch_size] or [batch_size, 1] (one weight per example) \
with batch_size 2, got shape (2, 2).
  """
  # Over 60 lines by its docstring: the shapes and rules of the one sample-weight check.
  try:
    weights = tf.convert_to_tensor(sample_weight)
  except (TypeError, ValueError) as e:
    raise TypeError(
      f"`sample_weight` must be a numeric tensor, got {sample_weight!r}: {e}"
    ) from None
  if not (weights.dtype.is_floating or weights.dtype.is_integer or weights.dtype == tf.bool):
    raise TypeError(f"`sample_weight` must be a numeric tensor, got dtype {weights.dtype.name}.")
  static_batch = tf.get_static_value(batch_size)
  static_list = tf.get_static_value(list_size) if list_size is not None else None
  allowed = "[batch_size] or [batch_size, 1] (one weight per example)"
  if list_size is not None:
    allowed = (
      "[batch_size], [batch_size, 1] (one weight per example) or [batch_size, list_size] "
      "(one weight per item)"
    )
  sizes = f"batch_size {static_batch}" if static_batch is not None else ""
  if static_list is not None:
    sizes += f" and list_size {static_list}"
  message = f"`sample_weight` must have shape {allowed}" + (f" with {sizes}" if sizes else "")
  shape = weights.shape
  if shape.rank is not None:
    per_item = shape.rank == 2 and shape[1] is not None and shape[1] != 1
    bad = (
      shape.rank not in (1, 2)
      or (static_batch is not None and shape[0] is not None and shape[0] != static_batch)
      or (per_item and list_size is None)
      or (per_item and None not in (shape[1], static_list) and shape[1] != static_list)
    )
    if bad:
      raise ValueError(f"{message}, got shape {tuple(shape)}.")
    if shape.rank == 2 and (shape[1] == 1 or (shape[1] is None and list_size is None)):
      weights = tf.reshape(weights, [-1])  # [B, 1]; a batch of any other size fails below
  weights = tf.cast(weights, dtype)
  tf.debugging.Assert(
    tf.equal(tf.shape(weights)[0], tf.cast(batch_size, tf.int32)),
    [f"{message}; got a batch of", tf.shape(weights)[0], "weights for", batch_size, "examples."],
  )
  tf.debugging.Assert(
    tf.reduce_all(tf.logical_and(tf.math.is_finite(weights), weights >= 0)),
    ["`sample_weight` must be finite and >= 0 (no NaN, Inf or negative weight)."],
  )
  return weights
