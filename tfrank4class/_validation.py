"""Argument checks shared by every module.

Each check raises a ``ValueError`` (or ``TypeError``) whose message names the argument, the value
received and what is allowed, so that a bad call fails at construction time with a readable error.
Tensor checks work eagerly and inside ``tf.function`` (static facts are checked in Python, dynamic
ones with ``tf.debugging`` assertions that carry the same message).
"""
import numbers

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
    raise ValueError(
        f"`{name}` must be one of {sorted(choices)}, got {value!r}.")
  return value


def score_matrix(name, scores):
  """Converts ``scores`` to a float tensor of shape ``[B, n]`` with ``n >= 1``.

  Integer, ``float16`` and ``bfloat16`` scores become ``float32`` (``float32`` and ``float64`` are
  kept): the rank and loss maths always runs in at least single precision, so a model whose last
  layer computes in ``float16`` (the ``mixed_float16`` Keras policy) trains with every loss.
  ``float16`` holds whole numbers exactly only up to 2048 and overflows ``exp`` above ~11, which
  ranks, softmaxes and sums over lists would hit.

  Raises ``TypeError`` for non-numeric input and ``ValueError`` for a wrong rank or an empty list.

  Example:
    >>> score_matrix("scores", tf.constant([[1.0, 2.0]], tf.float16)).dtype
    tf.float32
  """
  try:
    scores = tf.convert_to_tensor(scores)
  except (TypeError, ValueError) as e:
    raise TypeError(f"`{name}` must be a numeric tensor, got {scores!r}: {e}") from None
  if not (scores.dtype.is_floating or scores.dtype.is_integer):
    raise TypeError(
        f"`{name}` must be a numeric tensor, got dtype {scores.dtype.name}.")
  if scores.dtype not in (tf.float32, tf.float64):
    scores = tf.cast(scores, tf.float32)
  if scores.shape.rank is not None and scores.shape.rank != 2:
    raise ValueError(
        f"`{name}` must have shape [batch_size, list_size], got shape {scores.shape}.")
  if scores.shape.rank is not None and scores.shape[-1] == 0:
    raise ValueError(f"`{name}` must hold a non-empty list, got shape {scores.shape}.")
  return scores


def assert_finite(name, tensor):
  """Returns ``tensor`` guarded by a check that raises ``InvalidArgumentError`` on NaN/Inf."""
  return tf.debugging.assert_all_finite(
      tensor, f"`{name}` must be finite (no NaN or Inf).")


def assert_no_nan(name, tensor):
  """Returns ``tensor`` guarded by a check that raises ``InvalidArgumentError`` on NaN.

  Infinities pass (``-inf`` is a common way to push an item to the bottom of a ranking). The
  message names the argument, what is allowed and how many entries are NaN. Like every
  ``tf.debugging`` assertion it runs eagerly and inside ``tf.function``, and XLA drops it
  (``jit_compile=True`` runs unchecked). Integer tensors are returned as they are.
  """
  tensor = tf.convert_to_tensor(tensor)
  if not tensor.dtype.is_floating:
    return tensor
  count = tf.reduce_sum(tf.cast(tf.math.is_nan(tensor), tf.int64))
  check = tf.debugging.Assert(
      tf.equal(count, 0),
      [f"`{name}` must not contain NaN (finite numbers and +-inf are allowed); NaN entries:",
       count])
  with tf.control_dependencies([check]):
    return tf.identity(tensor)
