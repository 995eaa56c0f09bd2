"""How every ``tfrank4class-*`` program starts and fails: absl flags, and one-line user errors.

``run(main, program)`` replaces ``absl.app.run(main)``. A mistake of the user ends the program
with one line on stderr, ``<program>: error: <message>``, and no traceback:

  * a flag error (an unknown flag, a value a flag refuses, or ``absl.app.UsageError`` raised by
    ``main`` for a combination of flags it refuses): exit status 2, the command-line usage error
    status of ``argparse`` and of most Unix tools (absl's own default is 1 with two lines);
  * a ``tfrank4class.errors.UserError`` (missing data, a malformed row, a run already holding
    ``model_dir``, a configuration that cannot run), also when TensorFlow wrapped it in an
    ``OpError`` raised from inside a ``tf.data`` pipeline: exit status 1.

Any other exception is a bug: it propagates with its traceback.

Example:
  >>> from absl import app
  >>> def main(argv):
  ...   raise app.UsageError("Give exactly one of --a, --b.")
  >>> run(main, "tfrank4class-example", argv=["prog"])  # doctest: +SKIP
  tfrank4class-example: error: Give exactly one of --a, --b.
"""

import sys

from absl import app, flags

from tfrank4class import errors

#: Exit status of a flag error (usage) and of any other user error.
USAGE_ERROR_STATUS = 2
USER_ERROR_STATUS = 1


def fail(program, message, status):
  """Prints ``<program>: error: <message>`` on one line to stderr and exits with ``status``."""
  print(f"{program}: error: {' '.join(str(message).split())}", file=sys.stderr, flush=True)
  sys.exit(status)


def run(main, program, argv=None):
  """``absl.app.run(main)``, with flag and user errors reported on one line (see the module)."""

  def parse_flags(args):
    try:
      return flags.FLAGS(args)
    except flags.Error as e:
      fail(program, e, USAGE_ERROR_STATUS)

  def guarded_main(args):
    try:
      return main(args)
    except app.UsageError as e:
      fail(program, e, USAGE_ERROR_STATUS)
    except Exception as e:
      message = errors.user_error_message(e)
      if message is None:
        raise
      fail(program, message, USER_ERROR_STATUS)

  app.run(guarded_main, argv=argv, flags_parser=parse_flags)
