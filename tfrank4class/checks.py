"""Argument checks shared by every module, and public: the benchmarks, the tools and a user's own
loss or metric check their arguments with the same functions and messages.

Each check raises a ``ValueError`` (or ``TypeError``) whose message names the argument, the value
received and what is allowed, so that a bad call fails at construction time with a readable error.
Tensor checks run on every backend. Static facts (dtype, rank, known sizes) are checked in Python
when the call is traced. Facts about values (NaN scores, a negative weight, a class id out of
range: :func:`check_values`) raise a ``ValueError`` with the same message on every backend when
the values are at hand (eager calls); inside ``tf.function`` they become ``tf.debugging``
assertions with that message (the call fails when it runs); where no check can run (XLA,
``jax.jit``, ``torch.compile``) the result is made NaN instead of silently wrong (see
:meth:`tfrank4class.labels.Labels.mark_invalid` and :func:`check_sample_weight`).
"""

import numbers
import os

import numpy as np

from tfrank4class import backend
from tfrank4class.compat import ops


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


def check_bool(name, value):
  """Returns ``value`` if it is a bool (Python's or numpy's), else raises: ``bool("False")`` is
  ``True``, so a string or a number is refused rather than read as a truth value.

  Example:
    >>> check_bool("normalize", "False")
    Traceback (most recent call last):
    ...
    ValueError: `normalize` must be True or False, got 'False'.
  """
  if not isinstance(value, (bool, np.bool_)):
    raise ValueError(f"`{name}` must be True or False, got {value!r}.")
  return bool(value)


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


#: How many offending values a message shows.
SHOWN = 10


def check_values(ok, message, shown=None):
  """The one data-dependent check: ``ok`` (a bool tensor) must be all true.

  Eagerly (:func:`tfrank4class.backend.is_concrete`), ``ValueError(message + " got <values>.")``
  when it is not, on every backend, ``<values>`` being the entries of ``shown`` where ``ok`` is
  false (at most :data:`SHOWN`), or nothing when ``shown`` is ``None``. Traced on TensorFlow: a
  ``tf.debugging.Assert`` with the message (the function fails when it runs; XLA drops it).
  Traced elsewhere: nothing here; the caller makes the result NaN (on JAX after
  :func:`set_compiled_checks`, a host callback raises the same ``ValueError`` when the compiled
  function runs).

  Example:
    >>> check_values(ops.convert_to_tensor([True, False]), "`w` must be >= 0,",
    ...              ops.convert_to_tensor([1.0, -2.0]))
    Traceback (most recent call last):
    ...
    ValueError: `w` must be >= 0, got [-2.0].
  """
  if backend.is_concrete(ok):
    _raise_unless(ops.convert_to_numpy(ok), message, shown)
    return
  if _COMPILED_CHECKS[0] and backend.BACKEND == "jax":
    backend.host_callback(
      lambda *a: _raise_unless(a[0], message, a[1] if a[1:] else None),
      ok,
      *([] if shown is None else [shown]),
    )
  # Integer data only: a float tensor in an assertion's data makes TensorFlow guard it with a
  # tf.cond, which costs more than the check.
  show = shown is not None and backend.dtype_name(ops.convert_to_tensor(shown)) == "int32"
  backend.graph_assert(ops.all(ok), [message] + ([shown] if show else []))


def _raise_unless(ok, message, shown):
  """The ``ValueError`` of :func:`check_values` for numpy ``ok`` (``shown``: read only then)."""
  ok = np.asarray(ok, bool)
  if ok.all():
    return
  if shown is None:
    raise ValueError(message.rstrip(",") + ".")
  values = np.broadcast_to(np.asarray(ops.convert_to_numpy(shown)), ok.shape)[~ok]
  raise ValueError(f"{message} got {values[:SHOWN].tolist()}.")


#: Whether :func:`check_values` also raises inside compiled JAX code (:func:`set_compiled_checks`).
_COMPILED_CHECKS = [False]


def set_compiled_checks(enabled):
  """Makes the value checks (:func:`check_values`: NaN scores, bad labels, bad weights) raise
  inside compiled JAX code too (``jax.jit``, Keras's JAX ``fit``), for debugging a run whose loss
  became NaN; returns the previous setting.

  Off (the default), a compiled step cannot raise and the list's value becomes NaN. On, each
  check runs on the host through ``jax.debug.callback`` and the step fails with the check's
  message (inside JAX's runtime error), at the cost of a round trip to the host per check. On
  TensorFlow, ``tf.function`` already asserts and XLA (``jit_compile=True``) cannot: compile with
  ``jit_compile=False`` or ``run_eagerly=True`` there (docs/losses.md, "Non-finite scores").

  Example:
    >>> previous = set_compiled_checks(True)
    >>> _ = set_compiled_checks(previous)
  """
  previous = _COMPILED_CHECKS[0]
  _COMPILED_CHECKS[0] = check_bool("enabled", enabled)
  return previous


def check_scores(name, scores, rank=2, min_length=1, finite=True, cast="at_least_float32"):
  """The one score check: converts ``scores`` to a real tensor and checks its dtype, rank, list
  length and values.

  Every loss, metric and rank operator of the package checks its scores here. The list axis is
  the last one.

  Args:
    name: the argument name used in error messages.
    scores: array-like or tensor.
    rank: ``2`` for a matrix ``[batch_size, list_size]`` (losses, metrics, sorters; an unknown
      rank, possible for a TensorFlow graph input, passes), or ``None``
      for any known rank ``>= 1`` (the rank operators, whose lists lie along an axis the caller
      chooses).
    min_length: the smallest allowed list length; checked when the call is traced, or by
      :func:`check_values` when the length is only known at run time (``0``: not checked).
    finite: ``True``: NaN and +-inf raise (``"`name` must be finite (no NaN or Inf)."``);
      ``"no_nan"``: only NaN raises, +-inf are ordinary scores (exact ranks: ``-inf`` is a common
      way to push an item to the bottom); ``False``: the values are not checked here (losses
      whose padded entries may hold anything check after masking, or leave it to the ranker).
      Traced where no check can run, a NaN score makes the result NaN by itself.
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
    ValueError: a wrong rank, lists shorter than ``min_length``, or NaN (or +-inf) scores (see
      :func:`check_values` for when values are checked).

  Example:
    >>> from tfrank4class import backend
    >>> backend.dtype_name(check_scores("scores", np.array([[1.0, 2.0]], "float16")))
    'float32'
    >>> check_scores("y_pred", [[1.0, float("nan")]])
    Traceback (most recent call last):
    ...
    ValueError: `y_pred` must be finite (no NaN or Inf), got [nan].
  """
  # Over 60 lines by its docstring, which documents every option of the one score check.
  for option, value, choices in (("finite", finite, FINITE), ("cast", cast, CASTS)):
    if not any(value is c or (isinstance(c, str) and value == c) for c in choices):
      raise ValueError(f"`{option}` must be one of {list(choices)}, got {value!r}.")
  scores = _numeric_tensor(name, scores, "a numeric tensor", allow_bool=False)
  dtype = backend.dtype_name(scores)
  if (cast == "at_least_float32" and dtype not in ("float32", "float64")) or (
    cast == "to_float" and "int" in dtype
  ):
    scores = ops.cast(scores, "float32")
  shape = _shape(scores)
  if rank is None:
    if not shape:
      raise ValueError(f"`{name}` must have a known rank >= 1, got shape {shape}.")
  elif shape is not None and len(shape) != rank:
    raise ValueError(f"`{name}` must have shape [batch_size, list_size], got shape {shape}.")
  if shape is not None:  # an unknown rank (a TensorFlow graph input) passes
    _check_list_length(name, scores, min_length)
  if "float" in backend.dtype_name(scores):
    if finite is True:
      check_values(ops.isfinite(scores), f"`{name}` must be finite (no NaN or Inf),", scores)
    elif finite == "no_nan":
      check_values(
        ops.logical_not(ops.isnan(scores)),
        f"`{name}` must not contain NaN (finite numbers and +-inf are allowed),",
        scores,
      )
  return scores


def check_item_scores(name, scores, valid=None):
  """The one rule for the scores of labelled lists, which every loss and metric base applies
  after :func:`check_scores` and the label parser: an item's score must be finite unless the
  item is padding, and a padded item's score may be anything.

  * A NaN or +-inf score at an item that is not padding raises (:func:`check_values`: eagerly a
    ``ValueError`` naming ``name`` and the values; inside ``tf.function`` an assertion); where no
    check can run (XLA, ``jax.jit``, ``torch.compile``) the lists holding one are returned in
    ``invalid``, and the caller makes their value NaN (never a finite number computed from it).
  * A padded item's score (``valid`` false) becomes ``0``, so no loss or metric sees a NaN,
    +-inf or huge score there, whatever it does with padded items.

  Args:
    name: the argument name used in error messages.
    scores: float scores ``[B, C]``, checked by :func:`check_scores`.
    valid: bool ``[B, C]``, false at padded items; ``None`` when no item is padding.

  Returns:
    ``(scores, invalid)``: the scores with padded items at 0, and bool ``[B]`` marking the lists
    with a non-finite score at a valid item where that could not raise (``None`` when the values
    were checked).

  Example:
    >>> scores, _ = check_item_scores(
    ...   "y_pred", np.array([[1.0, np.nan]], "float32"), np.array([[True, False]]))
    >>> ops.convert_to_numpy(scores).tolist()
    [[1.0, 0.0]]
    >>> check_item_scores("s", np.array([[np.inf, 1.0]], "float32"), np.array([[1, 0]]) > 0)
    Traceback (most recent call last):
    ...
    ValueError: `s` must be finite (no NaN or Inf) at every item that is not padding, got [inf].
  """
  scores = ops.convert_to_tensor(scores)
  if valid is not None:
    scores_at_valid = backend.where(valid, scores, ops.zeros_like(scores))
  else:
    scores_at_valid = scores
  if backend.is_concrete(scores) and np.isfinite(ops.convert_to_numpy(ops.sum(scores_at_valid))):
    # Eagerly, one sum: finite only if every term is (a NaN or an infinity among them makes it
    # NaN or infinite); a sum that overflows takes the test of each score below.
    return scores_at_valid, None
  finite = ops.isfinite(scores)
  if valid is not None:
    finite = ops.logical_or(finite, ops.logical_not(valid))
  scores = scores_at_valid
  padding = "" if valid is None else " at every item that is not padding"
  message = f"`{name}` must be finite (no NaN or Inf){padding},"
  check_values(finite, message, scores)
  if backend.is_concrete(finite):
    return scores, None
  return scores, ops.logical_not(ops.all(finite, axis=-1))


def check_finite_rows(name, row_sums, scores, exact=False):
  """:func:`check_scores`'s refusal of NaN and +-inf scores, from per-row sums that a caller
  computed in its own pass over the scores, so that the check does not read them again. The sums
  of the scores themselves are finite when the row's scores are, and only then unless they
  overflow: only where a sum is not finite are the scores tested, in a conditional, so large
  finite scores pass. With ``exact=True`` the sums are NaN exactly for the rows holding a NaN or
  +-inf (a sum of finite terms plus ``0 * scores``) and no conditional is built: the form for
  XLA (:func:`tfrank4class.backend.compiled_by_xla`), which fuses the product into the sum's
  pass and would compile and hold memory for the conditional, and for small inputs, where the
  conditional's ops cost more than the product.

  A non-finite score raises as :func:`check_scores` does (:func:`check_values`: eagerly a
  ``ValueError`` naming ``name`` and the bad values; inside ``tf.function`` an assertion with the
  same message; on JAX after :func:`set_compiled_checks`, the same ``ValueError`` from the
  compiled function, which then tests every score); where no check can run (XLA, ``jax.jit``,
  ``torch.compile``) the rows holding one are returned, for the caller to make their value NaN.

  Args:
    name: the argument name used in error messages.
    row_sums: float ``[B]``: ``sum(scores, axis=-1)``, or with ``exact``, NaN exactly for the
      rows holding a non-finite score.
    scores: float scores ``[B, C]``, checked by :func:`check_scores` with ``finite=False``.
    exact: whether ``row_sums`` are exact (see above).

  Returns:
    Bool ``[B]`` marking the rows with a non-finite score where that could not raise, ``None``
    when the values were checked.

  Example:
    >>> scores = np.array([[3e38, 3e38], [np.inf, 0.0]], "float32")
    >>> check_finite_rows("s", ops.sum(scores, axis=-1), scores)
    Traceback (most recent call last):
    ...
    ValueError: `s` must be finite (no NaN or Inf), got [inf].
  """
  message = f"`{name}` must be finite (no NaN or Inf),"
  finite = ops.isfinite(row_sums)
  if backend.is_concrete(finite):
    if not np.all(ops.convert_to_numpy(finite)):
      check_values(ops.isfinite(scores), message, scores)  # raises, showing the bad scores
    return None
  if not exact:  # the sums may have overflowed: test those rows' scores
    finite = ops.cond(
      ops.all(finite), lambda: finite, lambda: ops.all(ops.isfinite(scores), axis=-1)
    )
  if _COMPILED_CHECKS[0] and backend.BACKEND == "jax":  # the host callback shows the scores
    check_values(ops.isfinite(scores), message, scores)
  else:
    check_values(finite, message)
  return ops.logical_not(finite)


def _shape(x):
  """The shape of ``x`` as a tuple (``None`` for an unknown size), or ``None`` for an unknown
  rank (possible for a TensorFlow graph input only)."""
  try:
    return tuple(x.shape)
  except ValueError:
    return None


def _numeric_tensor(name, value, what, allow_bool):
  """``value`` as a tensor, or ``TypeError`` naming ``name`` when it is not numeric."""
  try:
    tensor = ops.convert_to_tensor(value)
  except (TypeError, ValueError) as e:
    raise TypeError(f"`{name}` must be {what}, got {value!r}: {e}") from None
  dtype = backend.dtype_name(tensor)
  numeric = "float" in dtype or "int" in dtype or (allow_bool and dtype == "bool")
  if not numeric:
    real = "" if allow_bool else " (a real tensor: integer or floating point)"
    raise TypeError(f"`{name}` must be {what}{real}, got dtype {dtype}.")
  return tensor


def _check_list_length(name, scores, min_length):
  """Raises (known length) or checks at run time that the last axis holds ``>= min_length``."""
  if min_length <= 0:
    return
  allowed = (
    "a non-empty list" if min_length == 1 else f"lists of at least {min_length} items to be ranked"
  )
  n = scores.shape[-1]
  if n is not None:
    if n < min_length:
      raise ValueError(f"`{name}` must hold {allowed}, got shape {tuple(scores.shape)}.")
    return
  length = ops.shape(scores)[-1]
  check_values(ops.convert_to_tensor(length >= min_length), f"`{name}` must hold {allowed},")


def check_sample_weight(sample_weight, batch_size, list_size=None, dtype="float32"):
  """The one sample-weight check of the losses and metrics: per-example (or per-item) weights.

  Allowed shapes: ``[B]`` and ``[B, 1]`` (one weight per example, as ``fit(sample_weight=...)``,
  ``fit(class_weight=...)`` and a dataset of ``(x, y, w)`` give them), and ``[B, C]`` (one weight
  per item of each list) where ``list_size`` is given. Weights must be finite and ``>= 0`` (a
  weight of 0 removes an example): a NaN, an infinity or a negative weight raises
  (:func:`check_values`), and where no check can run (XLA, ``jax.jit``) such a weight becomes
  NaN, so that the loss shows it. Keras itself multiplies by any weight; negative ones are
  refused here on purpose: TF-Ranking's listwise losses multiply the labels by the weights and
  renormalise them, so a negative weight would not negate a loss but invert which items are
  relevant, and a batch-level loss (see :mod:`tfrank4class.losses.base`) keeps the examples of
  non-zero weight.

  Args:
    sample_weight: array-like or tensor.
    batch_size: ``B``, an int or a scalar tensor (the static size is checked when known, the
      dynamic one at run time).
    list_size: ``C`` if per-item weights ``[B, C]`` are allowed, else ``None``.
    dtype: the dtype of the returned weights.

  Returns:
    The weights as a ``dtype`` tensor, ``[B]`` per example or ``[B, C]`` per item.

  Raises:
    TypeError: non-numeric weights.
    ValueError: a shape other than the allowed ones, or NaN, +-inf or negative weights.

  Example:
    >>> ops.convert_to_numpy(check_sample_weight([[2.0], [0.5]], batch_size=2))
    array([2. , 0.5], dtype=float32)
    >>> try:
    ...   check_sample_weight([[1.0, 2.0], [3.0, 4.0]], batch_size=2)
    ... except ValueError as e:
    ...   print(e)
    `sample_weight` must have shape [batch_size] or [batch_size, 1] (one weight per example) \
with batch_size 2, got shape (2, 2).
  """
  # Over 60 lines by its docstring: the shapes and rules of the one sample-weight check.
  weights = _numeric_tensor("sample_weight", sample_weight, "a numeric tensor", allow_bool=True)
  static_batch = _static_int(batch_size)
  static_list = _static_int(list_size) if list_size is not None else None
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
  shape = tuple(weights.shape)
  per_item = len(shape) == 2 and shape[1] is not None and shape[1] != 1
  bad = (
    len(shape) not in (1, 2)
    or (static_batch is not None and shape[0] is not None and shape[0] != static_batch)
    or (per_item and list_size is None)
    or (per_item and None not in (shape[1], static_list) and shape[1] != static_list)
  )
  if bad:
    raise ValueError(f"{message}, got shape {shape}.")
  if len(shape) == 2 and (shape[1] == 1 or (shape[1] is None and list_size is None)):
    weights = ops.reshape(weights, [-1])  # [B, 1]; a batch of any other size fails below
  weights = ops.cast(weights, dtype)
  if static_batch is None or weights.shape[0] is None:
    check_values(
      ops.convert_to_tensor(ops.shape(weights)[0] == batch_size),
      f"{message}; the batch sizes of the weights and the examples differ,",
    )
  valid = ops.logical_and(ops.isfinite(weights), weights >= 0)
  check_values(
    valid, "`sample_weight` must be finite and >= 0 (no NaN, Inf or negative weight),", weights
  )
  if not backend.is_concrete(weights):
    weights = backend.where(valid, weights, ops.cast(float("nan"), weights.dtype))
  return weights


def _static_int(value):
  """``value`` as a Python int if it is known now, else ``None``."""
  known = backend.static_value(value)
  return None if known is None else int(known)
