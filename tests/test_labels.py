"""tfrank4class.labels: the one label parser; to_relevance: class ids to one-hot relevance.

Backend-neutral (runs on every leg); the tf.function assertions are TensorFlow only.
"""

import backend_testing as bt
import numpy as np
import pytest
from backend_testing import compile_modes, compiled, numpy

from tfrank4class import backend
from tfrank4class import labels as labels_module
from tfrank4class.compat import BACKEND, ops
from tfrank4class.labels import check_batch_size, class_ids, parse_labels, to_relevance
from tfrank4class.losses import SmoothTopKSVMLoss


def test_class_ids_become_one_hot():
  want = np.array([[0, 0, 1], [1, 0, 0]], np.float32)
  np.testing.assert_array_equal(numpy(to_relevance([2, 0], 3)), want)
  np.testing.assert_array_equal(numpy(to_relevance([[2], [0]], 3)), want)
  np.testing.assert_array_equal(numpy(to_relevance(np.array([2.0, 0.0]), 3)), want)


def test_dense_relevance_passes_through():
  graded = np.array([[0, 2, 1], [1, -1, 0]], np.float32)  # -1 marks padding
  np.testing.assert_array_equal(numpy(to_relevance(graded, 3)), graded)
  multi_hot = np.array([[1, 1, 0]], np.int32)
  np.testing.assert_array_equal(numpy(to_relevance(multi_hot, 3)), multi_hot.astype(np.float32))


def test_bad_input_raises_the_same_value_error_on_every_backend():
  with pytest.raises(
    ValueError, match=r"`labels` must be class ids in \[0, num_classes=3\), got \[3\]\."
  ):
    to_relevance([3], 3)
  with pytest.raises(ValueError, match=r"got \[-1\]\."):
    to_relevance(np.array([0, -1]), 3)
  with pytest.raises(ValueError, match=r"whole numbers, got \[0\.5\]\."):
    to_relevance([0.5], 3)
  with pytest.raises(ValueError, match=r"shape \(2, 4\).*3 scores per list"):
    to_relevance(np.zeros((2, 4)), 3)
  with pytest.raises(ValueError, match=r"got shape \(2, 3, 1\)"):
    to_relevance(np.zeros((2, 3, 1)), 3)
  with pytest.raises(ValueError, match=r"`num_classes` must be an integer >= 2, got 1"):
    to_relevance([0], 1)
  with pytest.raises(TypeError, match="`labels` must be numeric"):
    to_relevance(np.array(["a"]), 3)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_dense_relevance_and_float_ids_are_refused(bad):
  with pytest.raises(ValueError, match=r"dense relevance must be finite"):
    to_relevance(np.array([[1.0, bad, 0.0]]), 3)
  with pytest.raises(ValueError, match=r"whole numbers, got \[(nan|inf|-inf)\]"):
    parse_labels(np.array([0.0, bad]), 3)


def test_class_ids_are_whole_non_negative_int32():
  np.testing.assert_array_equal(numpy(class_ids([[2.0], [0.0]])), [2, 0])
  assert backend.dtype_name(class_ids([3, 1])) == "int32"
  with pytest.raises(ValueError, match=r"`ids` must be class ids >= 0, got \[-2\]\."):
    class_ids(np.array([1, -2]), name="ids")
  with pytest.raises(
    ValueError, match=r"`ids` given as class ids must be whole numbers, got \[1\.5\]"
  ):
    class_ids(np.array([1.5]), name="ids")
  with pytest.raises(ValueError, match=r"\[0, num_classes=4\), got \[4\]"):
    class_ids([4], 4)
  with pytest.raises(
    ValueError, match=r"`y` must be class ids of shape \[B\] or \[B, 1\], got shape \(2, 2\)"
  ):
    class_ids(np.eye(2), name="y")


def test_float64_class_ids_beyond_float32_integers_are_whole():
  # 2**24 + 1 is no float32 number: a float32 step in the check would round it and refuse it.
  ids = np.array([2.0**24 + 1, 2.0**24 + 3], np.float64)
  with bt.float64():
    np.testing.assert_array_equal(numpy(class_ids(ids)), [2**24 + 1, 2**24 + 3])
    with pytest.raises(ValueError, match=r"must be whole numbers, got \[16777217\.5\]"):
      class_ids(np.array([2.0**24 + 1.5]))


def test_parse_labels_canonical_form():
  for labels in ([2, 0], [[2], [0]], np.array([2.0, 0.0], np.float32), np.array([2, 0], np.int64)):
    parsed = parse_labels(labels, 3)
    assert parsed.is_class_ids and parsed.relevance is None and parsed.invalid is None
    assert backend.dtype_name(parsed.ids) == "int32"
    np.testing.assert_array_equal(numpy(parsed.ids), [2, 0])
  dense = parse_labels(np.array([[0, 2, -1]], np.int32), 3, dtype="float64")
  assert not dense.is_class_ids and dense.ids is None
  if BACKEND != "jax":  # JAX without x64 has no float64
    assert backend.dtype_name(dense.relevance) == "float64"
  np.testing.assert_array_equal(numpy(dense.relevance), [[0, 2, -1]])
  np.testing.assert_array_equal(numpy(parse_labels(np.array([True, False])).ids), [1, 0])
  np.testing.assert_array_equal(
    numpy(parse_labels([1, 2], 3).to_relevance(3)), [[0, 1, 0], [0, 0, 1]]
  )


def test_parse_labels_class_ids_only_and_size_letter():
  with pytest.raises(
    ValueError, match=r"`y` must be class ids of shape \[N\] or \[N, 1\], got shape \(2, 3\)\."
  ):
    parse_labels(np.zeros((2, 3)), name="y", dense=False, size="N")
  with pytest.raises(
    ValueError,
    match=r"`labels` must be class ids of shape \[B\] or \[B, 1\], or "
    r"dense relevance \[B, C\]; got shape \(\)",
  ):
    parse_labels(1.0)


def test_parsed_labels_pass_through_once(monkeypatch):
  parsed = parse_labels([2, 0], 3)
  assert parse_labels(parsed, 3) is parsed
  assert parse_labels(parsed, 3, dense=False) is parsed
  dense = parse_labels(np.array([[0.0, 1.0, 0.0]]), 3)
  assert parse_labels(dense, 3) is dense
  with pytest.raises(ValueError, match=r"`y` must be class ids of shape \[B\] or \[B, 1\]"):
    parse_labels(dense, 3, name="y", dense=False)
  # A Top-K loss's Keras form hands its parse to its function: the raw labels are read once.
  reads = []
  numeric = labels_module._numeric
  monkeypatch.setattr(labels_module, "_numeric", lambda *a: reads.append(1) or numeric(*a))
  SmoothTopKSVMLoss(k=2)(np.array([2, 0]), np.zeros((2, 4), np.float32))
  assert len(reads) == 1


@pytest.mark.parametrize("mode", [m for m in compile_modes() if m != "eager"] or ["none"])
def test_bad_lists_become_nan_where_no_check_can_run(mode):
  """Compiled (XLA, jax.jit), a bad id or a non-finite relevance row makes its list's relevance
  NaN and a bad id 0 (TensorFlow's tf.function raises instead: tested below), other lists
  untouched."""
  if mode in ("none", "function"):
    pytest.skip("no compiled mode without checks on this backend")
  fn = compiled(lambda y: parse_labels(y, 3).to_relevance(3), mode)
  out = numpy(fn(np.array([4, 1, 0.5, -1], np.float32)))
  assert np.isnan(out[[0, 2, 3]]).all()
  np.testing.assert_array_equal(out[1], [0, 1, 0])
  dense = numpy(fn(np.array([[1.0, np.inf, 0.0], [0.0, 1.0, 0.0]], np.float32)))
  assert np.isnan(dense[0]).all()
  np.testing.assert_array_equal(dense[1], [0, 1, 0])
  marked = compiled(lambda y: parse_labels(y, 3).mark_invalid(ops.ones([2])), mode)
  np.testing.assert_array_equal(numpy(marked(np.array([0, 3], np.int32))), [1.0, np.nan])
  # The ids of bad lists become 0, so that a gather by them stays in range.
  ids = compiled(lambda y: parse_labels(y, 3).ids, mode)
  np.testing.assert_array_equal(numpy(ids(np.array([7, 2, -3, 1], np.int32))), [0, 2, 0, 1])


def test_check_batch_size():
  with pytest.raises(
    ValueError,
    match=r"`labels` and `scores` must have the same batch size, got 3 labels for 2 score lists\.",
  ):
    check_batch_size(np.array([0, 1, 2]), np.zeros([2, 4]))
  with pytest.raises(
    ValueError,
    match=r"`labels` and `embeddings` must have the same length, got 3 labels for 4 embeddings\.",
  ):
    check_batch_size(
      parse_labels([0, 1, 2]),
      np.zeros((4, 2)),
      other_name="embeddings",
      items="embeddings",
      dimension="length",
    )
  check_batch_size([0, 1], [[0.0], [1.0]])  # plain lists have a shape too


# --- TensorFlow: the checks inside tf.function ---------------------------------------------------


@pytest.mark.tensorflow_only
def test_tf_function_raises_with_the_message_and_a_dynamic_num_classes():
  import tensorflow as tf  # noqa: PLC0415

  fn = tf.function(lambda y, s: to_relevance(y, tf.shape(s)[-1]))
  np.testing.assert_array_equal(fn(tf.constant([1]), tf.zeros([1, 4])).numpy(), [[0, 1, 0, 0]])
  with pytest.raises(tf.errors.InvalidArgumentError, match=r"labels.*\[0, num_classes=3\)"):
    tf.function(lambda y: to_relevance(y, 3))(tf.constant([-1]))
  with pytest.raises(tf.errors.InvalidArgumentError, match=r"\[0, num_classes=3\),\] \[0 7 1\]"):
    tf.function(lambda y: parse_labels(y, 3))(tf.constant([0, 7, 1], tf.int32))
  with pytest.raises(tf.errors.InvalidArgumentError, match=r"whole numbers"):
    tf.function(parse_labels)(tf.constant([1.0, 2.5, 0.5]))
  sized = tf.function(
    lambda y, s: check_batch_size(y, s),
    input_signature=[tf.TensorSpec([None], tf.int64), tf.TensorSpec([None, 3])],
  )
  sized(tf.constant([0, 1], tf.int64), tf.zeros([2, 3]))
  with pytest.raises(tf.errors.InvalidArgumentError, match=r"same batch size; they differ"):
    sized(tf.constant([0, 1, 2], tf.int64), tf.zeros([2, 3]))


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("dtype", ["int32", "int64", "float32"])
def test_parse_labels_asserts_need_no_cond_guard(dtype):
  """The run-time checks are plain Assert ops with string / int32 data: no tf.cond per batch."""
  import tensorflow as tf  # noqa: PLC0415

  signature = [tf.TensorSpec([None], dtype)]
  graph = tf.function(lambda y: parse_labels(y, 5).ids).get_concrete_function(*signature).graph
  types = {op.type for op in graph.get_operations()}
  assert "Assert" in types
  assert not types & {"If", "StatelessIf", "CheckNumerics"}, types


def test_one_parser_one_set_of_errors():
  """A loss, a metric and the retrieval metrics raise the parser's errors for the same bad ids."""
  from tfrank4class.losses import RecallLoss  # noqa: PLC0415
  from tfrank4class.metrics import functional  # noqa: PLC0415
  from tfrank4class.retrieval import retrieval_metrics  # noqa: PLC0415

  embeddings = np.eye(3, dtype=np.float32)
  calls = [
    lambda y: RecallLoss(from_embeddings=True)(y, embeddings),
    lambda y: functional.top_k_accuracy(y, embeddings, k=1),
    lambda y: retrieval_metrics(embeddings, y, ks=1),
  ]
  for call in calls:
    with pytest.raises(ValueError, match=r"given as class ids must be whole numbers, got \[0\.5\]"):
      call(np.array([0.0, 0.5, 1.0]))
    with pytest.raises(ValueError, match=r"must be class ids (>= 0|in \[0, num_classes=3\)), got"):
      call(np.array([0, -1, 1]))
    with pytest.raises(TypeError, match=r"must be numeric"):
      call(np.array(["a", "b", "c"]))


@pytest.mark.parametrize("huge", [2**32 + 3, 2**40, 2**31])
def test_class_ids_beyond_int32_are_refused_not_wrapped(huge):
  # Cast to int32 first, 2**32 + 3 would read as class 3 and 2**40 as class 0.
  ids = np.array([0, huge], np.int64)
  with pytest.raises(ValueError, match=r"`labels` must be class ids in \[0, num_classes=4\), got"):
    parse_labels(ids, 4)
  with pytest.raises(ValueError, match=r"`labels` must be class ids below 2\*\*31 \(int32\), got"):
    class_ids(ids)
  with pytest.raises(ValueError, match=r"`labels` must be class ids in \[0, num_classes=4\), got"):
    parse_labels(ids.astype(np.float64), 4)
