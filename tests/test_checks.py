"""tfrank4class.checks: the argument checks, the one score check (check_scores), the one
sample-weight check and the one data-dependent check (check_values).

Backend-neutral (runs on every leg); the tf.function and XLA behaviour is TensorFlow only.
"""

import os

import numpy as np
import pytest
from backend_testing import compile_modes, compiled, numpy

from tfrank4class import backend, checks
from tfrank4class.checks import check_sample_weight, check_scores, check_values, check_writable_dir
from tfrank4class.compat import BACKEND, ops


def _dtype(x):
  return backend.dtype_name(x)


def test_dtype_rules():
  for dtype in ("int32", "int64", "float16", "bfloat16"):
    assert _dtype(check_scores("s", ops.cast([[1, 2]], dtype))) == "float32"
  for dtype in ("float32", "float64") if BACKEND != "jax" else ("float32",):
    assert _dtype(check_scores("s", ops.cast([[1, 2]], dtype))) == dtype
  assert _dtype(check_scores("s", np.array([[1, 2]], np.int32), cast="to_float")) == "float32"
  assert _dtype(check_scores("s", ops.cast([[1, 2]], "float16"), cast="to_float")) == "float16"
  assert _dtype(check_scores("s", np.array([[1, 2]], np.int32), cast=None)) == "int32"
  with pytest.raises(
    TypeError,
    match=r"`s` must be a numeric tensor( \(a real tensor: integer or floating point\), got "
    r"dtype (string|bool)|, got)",
  ):
    check_scores("s", np.array([["a"]]))
  with pytest.raises(
    TypeError,
    match=r"`s` must be a numeric tensor \(a real tensor: integer or floating point\), got "
    r"dtype bool",
  ):
    check_scores("s", np.array([[True]]))


def test_rank_and_length():
  with pytest.raises(
    ValueError, match=r"`s` must have shape \[batch_size, list_size\], got shape \(3,\)"
  ):
    check_scores("s", [1.0, 2.0, 3.0])
  with pytest.raises(ValueError, match=r"`s` must have a known rank >= 1, got shape \(\)"):
    check_scores("s", 1.0, rank=None)
  assert tuple(check_scores("s", np.zeros([2, 3, 4]), rank=None).shape) == (2, 3, 4)
  with pytest.raises(ValueError, match=r"`s` must hold a non-empty list, got shape \(2, 0\)"):
    check_scores("s", np.zeros([2, 0]))
  assert tuple(check_scores("s", np.zeros([2, 0]), min_length=0).shape) == (2, 0)
  with pytest.raises(ValueError, match=r"`s` must hold lists of at least 3 items to be ranked"):
    check_scores("s", np.zeros([2, 2]), min_length=3)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_finite_raises_the_same_value_error_on_every_backend(bad):
  with pytest.raises(
    ValueError, match=r"^`y_pred` must be finite \(no NaN or Inf\), got \[.*\]\.$"
  ):
    check_scores("y_pred", np.array([[0.1, bad, 0.3]], np.float32))


def test_no_nan_allows_infinities():
  scores = np.array([[0.1, -np.inf, np.inf]], np.float32)
  np.testing.assert_array_equal(numpy(check_scores("s", scores, finite="no_nan")), scores)
  with pytest.raises(
    ValueError,
    match=r"`s` must not contain NaN \(finite numbers and \+-inf are allowed\), got \[nan, nan\]",
  ):
    check_scores("s", np.array([[np.nan, 1.0, np.nan]]), finite="no_nan")
  unchecked = numpy(check_scores("s", np.array([[np.nan, 1.0]]), finite=False))
  assert np.isnan(unchecked[0, 0])


def test_bad_options():
  with pytest.raises(ValueError, match=r"`finite` must be one of"):
    check_scores("s", [[1.0]], finite="yes")
  with pytest.raises(ValueError, match=r"`cast` must be one of"):
    check_scores("s", [[1.0]], cast="float16")


def test_check_values_shows_the_offending_values():
  with pytest.raises(ValueError, match=r"^`w` must be >= 0, got \[-2\.0, -3\.0\]\.$"):
    check_values(np.array([True, False, False]), "`w` must be >= 0,", np.array([1.0, -2.0, -3.0]))
  with pytest.raises(ValueError, match=r"^`w` must be positive\.$"):
    check_values(np.array([False]), "`w` must be positive,")
  check_values(np.array([True, True]), "never shown,")


def test_sample_weight_shapes_and_values():
  np.testing.assert_array_equal(numpy(check_sample_weight([[2.0], [0.5]], batch_size=2)), [2, 0.5])
  per_item = check_sample_weight(np.ones([2, 3]), batch_size=2, list_size=3)
  assert tuple(per_item.shape) == (2, 3)
  with pytest.raises(ValueError, match=r"with batch_size 2, got shape \(2, 2\)\."):
    check_sample_weight(np.ones([2, 2]), batch_size=2)
  with pytest.raises(ValueError, match=r"with batch_size 3, got shape \(2,\)\."):
    check_sample_weight(np.ones([2]), batch_size=3)
  for bad in (-1.0, np.nan, np.inf):
    with pytest.raises(ValueError, match=r"`sample_weight` must be finite and >= 0"):
      check_sample_weight(np.array([1.0, bad]), batch_size=2)


@pytest.mark.parametrize("mode", [m for m in compile_modes() if m in ("xla", "jit")] or ["none"])
def test_where_no_check_can_run_bad_weights_become_nan(mode):
  if mode == "none":
    pytest.skip(f"no compiled mode without checks on {BACKEND}")
  fn = compiled(lambda w: check_sample_weight(w, batch_size=3), mode)
  out = numpy(fn(np.array([1.0, -1.0, 2.0], np.float32)))
  np.testing.assert_array_equal(np.isnan(out), [False, True, False])
  # NaN scores are not checked there, but they carry through: the result shows them.
  scored = compiled(lambda s: check_scores("s", s) * 2.0, mode)
  assert np.isnan(numpy(scored(np.array([[np.nan, 1.0]], np.float32)))[0, 0])


@pytest.mark.tensorflow_only
def test_tf_function_raises_and_the_check_is_cheap():
  """Inside tf.function: the message in a plain Assert, with no CheckNumerics kernel and no
  tf.cond guard; an unknown rank and length pass the static checks."""
  import tensorflow as tf  # noqa: PLC0415

  fn = tf.function(lambda s: check_scores("y_pred", s))
  with pytest.raises(tf.errors.InvalidArgumentError, match=r"`y_pred` must be finite"):
    fn(tf.constant([[0.1, np.nan]]))
  graph = fn.get_concrete_function(tf.TensorSpec([None, 4])).graph
  types = {op.type for op in graph.get_operations()}
  assert {"IsFinite", "All", "Assert"} <= types
  assert not types & {"CheckNumerics", "If", "StatelessIf"}, types
  short = tf.function(
    lambda s: check_scores("s", s, min_length=3), input_signature=[tf.TensorSpec([None, None])]
  )
  assert short(tf.zeros([1, 3])).shape == (1, 3)
  with pytest.raises(tf.errors.InvalidArgumentError, match=r"at least 3 items to be ranked"):
    short(tf.zeros([1, 2]))
  unknown = tf.function(lambda s: check_scores("s", s), input_signature=[tf.TensorSpec(None)])
  assert unknown.get_concrete_function() is not None


def test_nan_never_passes_silently_through_the_package():
  """Every entry point that checks its scores' values raises on NaN eagerly."""
  from tfrank4class import losses, ranking  # noqa: PLC0415
  from tfrank4class.metrics import functional, reference  # noqa: PLC0415

  nan = np.array([[0.2, np.nan, 0.1, 0.4]], np.float32)
  ids = np.array([1])
  calls = {
    "functional.ndcg (dense)": lambda: functional.ndcg(np.array([[0.0, 1.0, 0.0, 0.0]]), nan),
    "functional.average_precision (dense)": lambda: functional.average_precision(
      np.array([[1.0, 0.0, 1.0, 0.0]]), nan
    ),
    "reference.ndcg": lambda: reference.ndcg(ids, nan),
    "exact rank": lambda: ranking.rank(nan),
    "blackbox_rank": lambda: ranking.blackbox_rank(nan, 1.0),
    "RecallLoss": lambda: losses.RecallLoss()(ids, nan),
    "AveragePrecisionLoss": lambda: losses.AveragePrecisionLoss()(ids, nan),
    "TripletLoss": lambda: losses.TripletLoss()(np.array([0, 0, 1, 1]), np.tile(nan, [4, 1])),
    "SmoothedCrossEntropy": lambda: losses.SmoothedCrossEntropy()(ids, nan),
  }
  for name, call in calls.items():
    with pytest.raises(ValueError, match=r"must (be finite|not contain NaN)"):
      call()
      pytest.fail(f"{name} let NaN through")


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


def test_check_bool_refuses_what_bool_would_read_as_a_truth_value():
  assert checks.check_bool("flag", True) is True and checks.check_bool("flag", np.bool_(0)) is False
  for value in ("False", "True", 0, 1, None, [True]):
    with pytest.raises(ValueError, match=r"^`flag` must be True or False, got "):
      checks.check_bool("flag", value)


def test_check_item_scores_padded_items_become_zero_and_valid_ones_must_be_finite():
  scores = np.array([[1.0, np.nan, np.inf], [2.0, -np.inf, 1e30]], np.float32)
  valid = np.array([[True, False, False], [True, False, True]])
  got, invalid = checks.check_item_scores("y_pred", scores, valid)
  np.testing.assert_array_equal(numpy(got), np.array([[1, 0, 0], [2, 0, 1e30]], np.float32))
  assert invalid is None
  message = r"^`y_pred` must be finite \(no NaN or Inf\) at every item that is not padding, got"
  with pytest.raises(ValueError, match=message + r" \[nan, inf, -inf\]\.$"):
    checks.check_item_scores("y_pred", scores, np.ones_like(valid))
  with pytest.raises(ValueError, match=r"^`e` must be finite \(no NaN or Inf\), got \[-inf\]"):
    checks.check_item_scores("e", np.array([[0.0, -np.inf]], np.float32))
  for mode in compile_modes():
    if mode in ("jit", "xla"):  # nothing can raise: the lists are returned as invalid
      fn = compiled(lambda s, v: checks.check_item_scores("y_pred", s, v)[1], mode)
      np.testing.assert_array_equal(numpy(fn(scores, np.ones_like(valid))), [True, True])
      np.testing.assert_array_equal(numpy(fn(scores, valid)), [False, False])


@pytest.mark.skipif(BACKEND != "jax", reason="jax.debug.callback: the compiled check of JAX")
def test_set_compiled_checks_makes_a_jitted_loss_fail_with_the_message():
  import jax  # noqa: PLC0415

  from tfrank4class import losses  # noqa: PLC0415

  loss = losses.get("softmax_loss")
  scores = np.array([[0.0, np.nan, 1.0]], np.float32)
  assert np.isnan(numpy(jax.jit(lambda s: loss([0], s))(scores)))
  previous = checks.set_compiled_checks(True)
  try:
    with pytest.raises(Exception, match=r"`y_pred` must be finite \(no NaN or Inf\)"):
      numpy(jax.jit(lambda s: loss([2], s))(scores))
  finally:
    checks.set_compiled_checks(previous)
  with pytest.raises(ValueError, match=r"`enabled` must be True or False"):
    checks.set_compiled_checks("yes")
