"""Errors of what the user asked for (data, files, configuration), as opposed to bugs.

A ``UserError`` carries a message that says everything the user needs: what was wrong, where, and
what is allowed or how to fix it. The command-line programs of ``tfrank4class.train`` print it as
one line, ``tfrank4class-<program>: error: <message>``, with no traceback; any other exception is
a bug and keeps its traceback. Each concrete error also subclasses the built-in exception a caller
would expect (``FileNotFoundError``, ``ValueError``, ``RuntimeError``), so ``except ValueError``
still catches a malformed row.

TensorFlow turns a Python exception raised inside a ``tf.data`` pipeline (``from_generator``,
``py_function``) into an ``OpError`` whose message holds the original exception's class name,
message and traceback as text; ``user_error_message`` finds a ``UserError`` in such a message. A
check inside a graph (``tf.debugging.Assert``) names a user error the same way with its first data
item, ``"<UserError subclass name>: <message>"``, followed by the values that complete the
message; TensorFlow reports it as ``assertion failed: [<name>: <message>] [<value>] ...``.

Example:
  >>> class NoRunError(UserError, FileNotFoundError):
  ...   pass
  >>> user_error_message(NoRunError("No training run in 'runs/x'."))
  "No training run in 'runs/x'."
  >>> user_error_message(KeyError("a bug")) is None
  True
"""

import re

#: The last line of a Python traceback, ``[module.]Name: message``, inside a TensorFlow error.
_WRAPPED_EXCEPTION = re.compile(r"^(?:[\w.]+\.)?(\w+): (.+)$")
#: A failed ``tf.debugging.Assert`` whose first data item is ``Name: message``; then its values.
_FAILED_ASSERT = re.compile(r"assertion failed: \[(\w+): ([^\]]*)\] \[(.*)\]$")


class UserError(Exception):
  """Base of the errors caused by the user's data, files or configuration, not by a bug.

  Subclasses are known by class name, so that ``user_error_message`` recognises one that
  TensorFlow wrapped into an ``OpError``.
  """

  _names = set()

  def __init_subclass__(cls, **kwargs):
    super().__init_subclass__(**kwargs)
    UserError._names.add(cls.__name__)


class NotFoundError(UserError, FileNotFoundError):
  """A file or folder the user named (a run, a checkpoint, a SavedModel) is not there."""


class InvalidConfigError(UserError, ValueError):
  """A configuration that cannot run on the data or objects it names (e.g. a split the dataset
  does not have, a split with fewer examples than one batch, loss arguments the loss refuses)."""


class DamagedFileError(UserError, ValueError):
  """A file a run wrote (or someone edited) cannot be read as what it should be: truncated by a
  killed write, garbled by hand. The message names the file and what to do about it."""

  def __init__(self, path, what, reason, fix):
    """``reason``: a string, or the exception reading the file raised (its type and first line
    are given)."""
    if isinstance(reason, BaseException):
      first_line = (str(reason).strip().splitlines() or [""])[0][:200]
      reason = f"{type(reason).__name__}: {first_line}"
    super().__init__(f"The {what} {path} is damaged ({reason}). {fix}")
    self.path = path


def user_error_message(error):
  """The message of ``error`` if it is a user error, else ``None``.

  A user error is a ``UserError``, or a TensorFlow ``OpError`` (any exception with a ``message``
  attribute) whose text holds a line ``[module.]<UserError subclass name>: <message>``, which is how
  TensorFlow reports a Python exception raised inside a ``tf.data`` pipeline (the last such line
  is the original message), or a failed in-graph assertion
  ``assertion failed: [<UserError subclass name>: <message>] [<value>] ...`` (the message and the
  values, joined by spaces). Messages come back on one line (line breaks become spaces).

  Example:
    >>> class BadRowError(UserError, ValueError):
    ...   pass
    >>> class FakeOpError(Exception):
    ...   message = "{{node}} Error in map: BadRowError: a.tsv, line 2: bad\\nTraceback ...\\n"
    ...   message += "mod.BadRowError: a.tsv, line 2: bad\\n\\t [[{{node PyFunc}}]]"
    >>> user_error_message(FakeOpError())
    'a.tsv, line 2: bad'
    >>> class FakeAssertError(Exception):
    ...   message = "{{node}} assertion failed: [BadRowError: cannot read] [b.jpg] [(a hint)]"
    >>> user_error_message(FakeAssertError())
    'cannot read b.jpg (a hint)'
  """
  if isinstance(error, UserError):
    return " ".join(str(error).split())
  text = getattr(error, "message", None)
  if not isinstance(text, str):
    return None
  found = None
  for line in text.splitlines():
    match = _WRAPPED_EXCEPTION.match(line.strip())
    if match and match.group(1) in UserError._names:
      found = match.group(2)
    match = _FAILED_ASSERT.search(line.strip())
    if match and match.group(1) in UserError._names:
      found = " ".join([match.group(2), *match.group(3).split("] [")])
  return " ".join(found.split()) if found else None
