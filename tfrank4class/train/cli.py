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

``run(main, program, help_groups)`` also answers ``--help`` and ``-h`` itself: it prints the
program's own flags, grouped by topic (``help_groups``, ``[(title, [flag names])]``), and exits
0; ``--helpfull`` stays absl's listing of every flag, absl's and TensorFlow's included.

Example:
  >>> from absl import app
  >>> def main(argv):
  ...   raise app.UsageError("Give exactly one of --a, --b.")
  >>> run(main, "tfrank4class-example", argv=["prog"])  # doctest: +SKIP
  tfrank4class-example: error: Give exactly one of --a, --b.
"""

import sys
import textwrap

from absl import app, flags

from tfrank4class import errors

#: Exit status of a flag error (usage) and of any other user error.
USAGE_ERROR_STATUS = 2
USER_ERROR_STATUS = 1
#: The arguments that ask for the grouped help (``--helpfull`` is absl's).
HELP_ARGUMENTS = ("--help", "-help", "-h")
_WIDTH = 100


def fail(program, message, status):
  """Prints ``<program>: error: <message>`` on one line to stderr and exits with ``status``."""
  print(f"{program}: error: {' '.join(str(message).split())}", file=sys.stderr, flush=True)
  sys.exit(status)


def help_text(program, summary, help_groups):
  """What ``--help`` prints: ``summary``, then each flag of ``help_groups`` under its title with
  its help, its allowed values and its default (the flags are those of ``absl.flags.FLAGS``)."""
  lines = [summary, "", f"usage: {program} [--flag=value ...]"]
  for title, names in help_groups:
    lines += ["", f"{title}:"]
    for name in names:
      lines += textwrap.wrap(
        _flag_line(flags.FLAGS[name]),
        _WIDTH,
        initial_indent="  ",
        subsequent_indent="      ",
        break_on_hyphens=False,
      )
  lines += ["", "--helpfull lists every flag, absl's and TensorFlow's included."]
  return "\n".join(lines)


def _flag_line(flag):
  label = f"--[no]{flag.name}" if flag.flag_type() == "bool" else f"--{flag.name}"
  text = flag.help
  values = getattr(flag.parser, "enum_values", None)
  if values:  # absl starts an enum's help with "<a|b|c>: "; a list of words wraps better
    text = text.removeprefix("<" + "|".join(values) + ">: ") + f" One of: {', '.join(values)}."
  if flag.default is not None:
    default = flag.default_as_str.strip("'")
    text += f" (default: {default})"
  return f"{label}: {text}"


def run(main, program, help_groups=None, argv=None):
  """``absl.app.run(main)``, with flag and user errors reported on one line, and ``--help``
  printing ``help_groups`` (see the module; without them, ``--help`` is absl's)."""
  args = sys.argv if argv is None else argv
  if help_groups is not None and any(a in HELP_ARGUMENTS for a in args[1:]):
    module_doc = sys.modules[main.__module__].__doc__ or program
    print(help_text(program, module_doc.strip().splitlines()[0], help_groups))
    sys.exit(0)

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
