"""tfrank4class.labels: the one label parser; to_relevance: class ids to one-hot relevance."""

import numpy as np
import pytest
import tensorflow as tf

from tfrank4class.labels import check_batch_size, class_ids, parse_labels, to_relevance


def test_class_ids_become_one_hot():
  want = np.array([[0, 0, 1], [1, 0, 0]], np.float32)
  np.testing.assert_array_equal(to_relevance([2, 0], 3).numpy(), want)
  np.testing.assert_array_equal(to_relevance([[2], [0]], 3).numpy(), want)
  np.testing.assert_array_equal(to_relevance(np.array([2.0, 0.0]), 3).numpy(), want)


def test_dense_relevance_passes_through():
  graded = np.array([[0, 2, 1], [1, -1, 0]], np.float32)  # -1 marks padding
  np.testing.assert_array_equal(to_relevance(graded, 3).numpy(), graded)
  multi_hot = np.array([[1, 1, 0]], np.int32)
  np.testing.assert_array_equal(to_relevance(multi_hot, 3).numpy(), multi_hot.astype(np.float32))


def test_dynamic_num_classes_in_tf_function():
  fn = tf.function(lambda y, s: to_relevance(y, tf.shape(s)[-1]))
  out = fn(tf.constant([1]), tf.zeros([1, 4]))
  np.testing.assert_array_equal(out.numpy(), [[0, 1, 0, 0]])


def test_bad_input():
  with pytest.raises(tf.errors.InvalidArgumentError, match=r"labels.*\[0, num_classes=3\)"):
    to_relevance([3], 3)
  with pytest.raises(tf.errors.InvalidArgumentError, match=r"labels.*\[0, num_classes=3\)"):
    tf.function(lambda y: to_relevance(y, 3))(tf.constant([-1]))
  with pytest.raises(tf.errors.InvalidArgumentError, match="whole numbers"):
    to_relevance([0.5], 3)
  with pytest.raises(ValueError, match=r"shape \(2, 4\).*3 scores per list"):
    to_relevance(np.zeros((2, 4)), 3)
  with pytest.raises(ValueError, match=r"got shape \(2, 3, 1\)"):
    to_relevance(np.zeros((2, 3, 1)), 3)
  with pytest.raises(ValueError, match=r"`num_classes` must be an integer >= 2, got 1"):
    to_relevance([0], 1)
  with pytest.raises(TypeError, match="`labels` must be numeric"):
    to_relevance(["a"], 3)


def test_class_ids_checks_whole_non_negative_ids_eagerly_and_in_tf_function():
  np.testing.assert_array_equal(class_ids([[2.0], [0.0]]).numpy(), [2, 0])
  assert class_ids([3, 1]).dtype == tf.int64
  for fn in (class_ids, tf.function(class_ids)):
    with pytest.raises(
      tf.errors.InvalidArgumentError, match=r"(?s)`ids` must be class ids >= 0.*-2"
    ):
      fn(tf.constant([1, -2]), name="ids")
    with pytest.raises(
      tf.errors.InvalidArgumentError,
      match=r"(?s)`ids` given as class ids must be whole numbers.*1\.5",
    ):
      fn(tf.constant([1.5]), name="ids")
  with pytest.raises(tf.errors.InvalidArgumentError, match=r"(?s)\[0, num_classes=4\).*4"):
    class_ids([4], 4)
  with pytest.raises(
    ValueError, match=r"`y` must be class ids of shape \[B\] or \[B, 1\], got shape \(2, 2\)"
  ):
    class_ids(np.eye(2), name="y")


# --- parse_labels: the canonical form ------------------------------------------------------------


def test_parse_labels_canonical_form():
  for labels in (
    [2, 0],
    [[2], [0]],
    np.array([2.0, 0.0], np.float32),
    tf.constant([2, 0], tf.int32),
  ):
    parsed = parse_labels(labels, 3)
    assert parsed.is_class_ids and parsed.relevance is None
    assert parsed.ids.dtype == tf.int64
    np.testing.assert_array_equal(parsed.ids.numpy(), [2, 0])
  dense = parse_labels(np.array([[0, 2, -1]], np.int32), 3, dtype=tf.float64)
  assert not dense.is_class_ids and dense.ids is None and dense.relevance.dtype == tf.float64
  np.testing.assert_array_equal(dense.relevance.numpy(), [[0, 2, -1]])
  np.testing.assert_array_equal(parse_labels([True, False]).ids.numpy(), [1, 0])
  np.testing.assert_array_equal(
    parse_labels([1, 2], 3).to_relevance(3).numpy(), [[0, 1, 0], [0, 0, 1]]
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


def test_parse_labels_refuses_non_finite_float_ids():
  """NaN and +-inf are not whole numbers: they never pass as a class id."""
  for bad in (np.nan, np.inf, -np.inf):
    for fn in (parse_labels, tf.function(parse_labels)):
      with pytest.raises(
        tf.errors.InvalidArgumentError, match=r"(?s)whole numbers, got.*(nan|inf)"
      ):
        fn(tf.constant([0.0, bad]), 3)


def test_parse_labels_shows_the_first_offending_float_and_the_ids():
  with pytest.raises(tf.errors.InvalidArgumentError, match=r"whole numbers, got\] \[2\.5"):
    tf.function(parse_labels)(tf.constant([1.0, 2.5, 0.5]))
  with pytest.raises(
    tf.errors.InvalidArgumentError, match=r"\[0, num_classes=3\), got\] \[0 7 1\]"
  ):
    tf.function(lambda y: parse_labels(y, 3))(tf.constant([0, 7, 1], tf.int64))


def _op_types(fn, signature):
  graph = tf.function(fn).get_concrete_function(*signature).graph
  return {op.type for op in graph.get_operations()}


@pytest.mark.parametrize("dtype", [tf.int32, tf.int64, tf.float32])
def test_parse_labels_asserts_need_no_cond_guard(dtype):
  """The run-time checks are plain Assert ops with string / int32 data: no tf.cond per batch."""
  types = _op_types(lambda y: parse_labels(y, 5).ids, [tf.TensorSpec([None], dtype)])
  assert "Assert" in types
  assert not types & {"If", "StatelessIf", "CheckNumerics"}, types


def test_check_batch_size():
  with pytest.raises(
    ValueError,
    match=r"`labels` and `scores` must have the same batch size, got 3 "
    r"labels for 2 score lists\.",
  ):
    check_batch_size(tf.constant([0, 1, 2]), tf.zeros([2, 4]))
  with pytest.raises(
    ValueError,
    match=r"`labels` and `embeddings` must have the same length, got 3 "
    r"labels for 4 embeddings\.",
  ):
    check_batch_size(
      parse_labels([0, 1, 2]),
      np.zeros((4, 2)),
      other_name="embeddings",
      items="embeddings",
      dimension="length",
    )
  fn = tf.function(
    lambda y, s: check_batch_size(y, s),
    input_signature=[tf.TensorSpec([None], tf.int64), tf.TensorSpec([None, 3])],
  )
  fn(tf.constant([0, 1], tf.int64), tf.zeros([2, 3]))
  with pytest.raises(
    tf.errors.InvalidArgumentError, match=r"(?s)same batch size, got.*3.*labels for.*2"
  ):
    fn(tf.constant([0, 1, 2], tf.int64), tf.zeros([2, 3]))
  check_batch_size([0, 1], [[0.0], [1.0]])  # plain lists have a shape too


def test_one_parser_one_set_of_errors():
  """A loss, a metric and the retrieval metrics raise the parser's errors for the same bad ids."""
  from tfrank4class.losses import RecallLoss
  from tfrank4class.metrics import functional
  from tfrank4class.retrieval import retrieval_metrics

  embeddings = np.eye(3, dtype=np.float32)
  calls = [
    lambda y: RecallLoss(from_embeddings=True)(y, embeddings),
    lambda y: functional.top_k_accuracy(y, embeddings, k=1),
    lambda y: retrieval_metrics(embeddings, y, ks=1),
  ]
  for call in calls:
    with pytest.raises(
      tf.errors.InvalidArgumentError, match=r"given as class ids must be whole numbers, got"
    ):
      call(np.array([0.0, 0.5, 1.0]))
    with pytest.raises(
      tf.errors.InvalidArgumentError, match=r"must be class ids (>= 0|in \[0, num_classes=3\)), got"
    ):
      call(np.array([0, -1, 1]))
    with pytest.raises(TypeError, match=r"must be numeric, got dtype string"):
      call(np.array(["a", "b", "c"]))


def test_docstring_examples_run():
  import doctest

  import tfrank4class.labels as module

  result = doctest.testmod(module, extraglobs={"tf": tf}, optionflags=doctest.NORMALIZE_WHITESPACE)
  assert result.attempted > 0 and result.failed == 0, result
