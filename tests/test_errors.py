"""User errors: their types, and finding one that TensorFlow wrapped inside a tf.data error."""

import pytest
import tensorflow as tf

from tfrank4class import data as data_lib
from tfrank4class import errors
from tfrank4class.train import experiment


@pytest.mark.parametrize(
  "error, builtin",
  [
    (data_lib.DataNotFoundError, FileNotFoundError),
    (data_lib.MalformedRowError, ValueError),
    (experiment.ModelDirInUseError, RuntimeError),
    (experiment.ConfigMismatchError, ValueError),
    (errors.NotFoundError, FileNotFoundError),
    (errors.InvalidConfigError, ValueError),
    (data_lib.EmptySplitError, ValueError),
  ],
)
def test_user_errors_are_also_the_builtin_a_caller_expects(error, builtin):
  assert issubclass(error, errors.UserError) and issubclass(error, builtin)
  assert errors.user_error_message(error("a.tsv, line 2:\n  bad")) == "a.tsv, line 2: bad"


def test_other_exceptions_are_not_user_errors():
  assert errors.user_error_message(ValueError("a bug")) is None
  assert errors.user_error_message(tf.errors.InvalidArgumentError(None, None, "x: y")) is None


def _iterate(dataset):
  with pytest.raises(tf.errors.OpError) as caught:
    for _ in dataset:
      pass
  return caught.value


def test_a_user_error_raised_inside_tf_data_is_found_in_the_op_error():
  def rows():
    yield 1
    raise data_lib.MalformedRowError("a.tsv, line 2: label ids must be in [0, 28), got [30].")

  spec = tf.TensorSpec([], tf.int32)
  wrapped = _iterate(tf.data.Dataset.from_generator(rows, output_signature=spec).map(tf.identity))
  assert errors.user_error_message(wrapped) == (
    "a.tsv, line 2: label ids must be in [0, 28), got [30]."
  )

  def parse(x):
    raise data_lib.MalformedRowError(f"a.tsv, line {int(x) + 1}: bad")

  mapped = tf.data.Dataset.range(3).map(lambda x: tf.py_function(parse, [x], tf.int64))
  assert errors.user_error_message(_iterate(mapped)) == "a.tsv, line 1: bad"


def test_a_bug_raised_inside_tf_data_is_not_a_user_error():
  def rows():
    raise KeyError("a bug")
    yield 1

  spec = tf.TensorSpec([], tf.int32)
  wrapped = _iterate(tf.data.Dataset.from_generator(rows, output_signature=spec))
  assert errors.user_error_message(wrapped) is None


def test_a_damaged_file_is_named_with_its_reason_and_what_to_do():
  error = errors.DamagedFileError("run/x.json", "metrics backup", "cut short", "Delete it.")
  assert isinstance(error, ValueError) and error.path == "run/x.json"
  assert errors.user_error_message(error) == (
    "The metrics backup run/x.json is damaged (cut short). Delete it."
  )
  # An exception as the reason: its type and the first line of its message.
  reason = OSError("Unable to open file\n(truncated file: eof = 96, sblock->base_addr = 0)")
  error = errors.DamagedFileError("b.h5", "backup", reason, "Delete it.")
  assert errors.user_error_message(error) == (
    "The backup b.h5 is damaged (OSError: Unable to open file). Delete it."
  )
