"""tfrank4class.checks: the one score check (check_scores)."""

import os

import numpy as np
import pytest
import tensorflow as tf

from tfrank4class.checks import check_scores, check_writable_dir


def test_dtype_rules():
  half = [tf.float16, tf.bfloat16]
  for dtype in [tf.int32, tf.int64] + half:
    assert check_scores("s", tf.constant([[1, 2]], dtype)).dtype == tf.float32
  for dtype in (tf.float32, tf.float64):
    assert check_scores("s", tf.constant([[1, 2]], dtype)).dtype == dtype
  assert check_scores("s", tf.constant([[1, 2]], tf.int64), cast="to_float").dtype == tf.float32
  assert check_scores("s", tf.constant([[1, 2]], tf.float16), cast="to_float").dtype == tf.float16
  assert check_scores("s", tf.constant([[1, 2]], tf.int64), cast=None).dtype == tf.int64
  integers = check_scores("s", tf.constant([[1, 2]], tf.int64), cast=None, finite="no_nan")
  assert integers.dtype == tf.int64
  with pytest.raises(
    TypeError,
    match=r"`s` must be a numeric tensor \(a real tensor: integer or "
    r"floating point\), got dtype string",
  ):
    check_scores("s", [["a"]])
  with pytest.raises(
    TypeError,
    match=r"`s` must be a numeric tensor \(a real tensor: integer or "
    r"floating point\), got dtype bool",
  ):
    check_scores("s", [[True]])


def test_rank_and_length():
  with pytest.raises(
    ValueError, match=r"`s` must have shape \[batch_size, list_size\], got shape \(3,\)"
  ):
    check_scores("s", [1.0, 2.0, 3.0])
  with pytest.raises(ValueError, match=r"`s` must have a known rank >= 1, got shape \(\)"):
    check_scores("s", 1.0, rank=None)
  assert check_scores("s", tf.zeros([2, 3, 4]), rank=None).shape == (2, 3, 4)
  with pytest.raises(ValueError, match=r"`s` must hold a non-empty list, got shape \(2, 0\)"):
    check_scores("s", tf.zeros([2, 0]))
  assert check_scores("s", tf.zeros([2, 0]), min_length=0).shape == (2, 0)
  with pytest.raises(ValueError, match=r"`s` must hold lists of at least 3 items to be ranked"):
    check_scores("s", tf.zeros([2, 2]), min_length=3)
  fn = tf.function(
    lambda s: check_scores("s", s, min_length=3), input_signature=[tf.TensorSpec([None, None])]
  )
  assert fn(tf.zeros([1, 3])).shape == (1, 3)
  with pytest.raises(tf.errors.InvalidArgumentError, match=r"(?s)at least 3 items to be ranked.*2"):
    fn(tf.zeros([1, 2]))
  # An unknown rank passes the matrix check (a Keras symbolic input can have one).
  unknown = tf.function(
    lambda s: check_scores("s", s).shape.rank, input_signature=[tf.TensorSpec(None)]
  )
  assert unknown.get_concrete_function() is not None


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_finite_raises_eagerly_and_in_tf_function(bad):
  scores = tf.constant([[0.1, bad, 0.3]])
  check = lambda s: check_scores("y_pred", s)  # noqa: E731
  for call in (check, tf.function(check)):
    with pytest.raises(
      tf.errors.InvalidArgumentError, match=r"`y_pred` must be finite \(no NaN or Inf\)"
    ):
      call(scores)


def test_no_nan_allows_infinities_and_counts_nan():
  scores = tf.constant([[0.1, -np.inf, np.inf]])
  np.testing.assert_array_equal(check_scores("s", scores, finite="no_nan").numpy(), scores.numpy())
  for call in (
    lambda s: check_scores("s", s, finite="no_nan"),
    tf.function(lambda s: check_scores("s", s, finite="no_nan")),
  ):
    with pytest.raises(
      tf.errors.InvalidArgumentError,
      match=r"(?s)`s` must not contain NaN \(finite numbers and \+-inf are "
      r"allowed\); NaN entries:.*2",
    ):
      call(tf.constant([[np.nan, 1.0, np.nan]]))
  unchecked = check_scores("s", tf.constant([[np.nan, 1.0]]), finite=False).numpy()
  assert np.isnan(unchecked[0, 0])


def test_bad_options():
  with pytest.raises(ValueError, match=r"`finite` must be one of"):
    check_scores("s", [[1.0]], finite="yes")
  with pytest.raises(ValueError, match=r"`cast` must be one of"):
    check_scores("s", [[1.0]], cast="float16")


def test_the_check_is_cheap_and_dropped_by_xla():
  """is_finite + reduce_all in a plain Assert: no CheckNumerics kernel, no tf.cond guard."""
  graph = (
    tf.function(lambda s: check_scores("s", s) * 2.0)
    .get_concrete_function(tf.TensorSpec([None, 4]))
    .graph
  )
  types = {op.type for op in graph.get_operations()}
  assert {"IsFinite", "All", "Assert"} <= types
  assert not types & {"CheckNumerics", "If", "StatelessIf"}, types
  # Documented limitation: XLA drops tf.debugging assertions.
  jitted = tf.function(lambda s: check_scores("s", s) * 2.0, jit_compile=True)
  assert np.isnan(jitted(tf.constant([[np.nan, 1.0]])).numpy()[0, 0])


def test_nan_never_passes_silently_through_the_package():
  """Every entry point that checks its scores' values raises on NaN inside tf.function."""
  from tfrank4class import losses, ranking
  from tfrank4class.metrics import functional, reference

  nan = tf.constant([[0.2, np.nan, 0.1, 0.4]])
  ids = tf.constant([1])
  # (functional's class-id path is checked eagerly in tests/test_functional.py: in a graph its
  # table lookup can fail on a NaN rank before the assertion runs, an error too.)
  calls = {
    "functional.ndcg (dense)": lambda: functional.ndcg(tf.constant([[0.0, 1.0, 0.0, 0.0]]), nan),
    "functional.average_precision (dense)": lambda: functional.average_precision(
      tf.constant([[1.0, 0.0, 1.0, 0.0]]), nan
    ),
    "reference.ndcg": lambda: reference.ndcg(ids, nan),
    "exact rank": lambda: ranking.rank(nan),
    "blackbox_rank": lambda: ranking.blackbox_rank(nan, 1.0),
    "RecallLoss": lambda: losses.RecallLoss()(ids, nan),
    "AveragePrecisionLoss": lambda: losses.AveragePrecisionLoss()(ids, nan),
    "TripletLoss": lambda: losses.TripletLoss()(tf.constant([0, 0, 1, 1]), tf.tile(nan, [4, 1])),
    "SmoothedCrossEntropy": lambda: losses.SmoothedCrossEntropy()(ids, nan),
  }
  for name, call in calls.items():
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"must (be finite|not contain NaN)"):
      tf.function(call)()
      pytest.fail(f"{name} let NaN through")


def test_docstring_examples_run():
  import doctest

  from tfrank4class import checks

  result = doctest.testmod(checks, extraglobs={"tf": tf}, optionflags=doctest.NORMALIZE_WHITESPACE)
  assert result.attempted > 0 and result.failed == 0, result


def test_check_writable_dir_refuses_a_file_in_the_way(tmp_path):
  file = tmp_path / "a_file"
  file.write_text("")
  assert check_writable_dir("model_dir", str(tmp_path / "new" / "run")) == str(
    tmp_path / "new" / "run"
  )
  assert check_writable_dir("export_dir", None, allow_none=True) is None
  with pytest.raises(ValueError, match=rf"^`export_dir` '{file}' is a file, not a folder\.$"):
    check_writable_dir("export_dir", str(file))
  with pytest.raises(
    ValueError,
    match=rf"^`model_dir` '{file}/a/run' cannot be created: '{file}' is a file, not a folder\.$",
  ):
    check_writable_dir("model_dir", str(file / "a" / "run"))
  with pytest.raises(ValueError, match=r"^`model_dir` must be a folder path, got ''\.$"):
    check_writable_dir("model_dir", "")


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write in any folder")
def test_check_writable_dir_refuses_a_folder_it_cannot_write(tmp_path):
  locked = tmp_path / "locked"
  locked.mkdir(mode=0o500)
  with pytest.raises(ValueError, match=rf"`model_dir` '{locked}' is not writable\."):
    check_writable_dir("model_dir", str(locked))
  with pytest.raises(ValueError, match=rf"cannot be created: '{locked}' is not writable\."):
    check_writable_dir("model_dir", str(locked / "run"))
