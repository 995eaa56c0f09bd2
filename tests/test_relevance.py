"""to_relevance: class ids to one-hot relevance, dense relevance passed through."""
import numpy as np
import pytest
import tensorflow as tf

from tfrank4class.losses import to_relevance
from tfrank4class.losses.relevance import class_ids


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
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"(?s)`ids` must be class ids >= 0.*-2"):
      fn(tf.constant([1, -2]), name="ids")
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"(?s)`ids` given as class ids must be whole numbers.*1\.5"):
      fn(tf.constant([1.5]), name="ids")
  with pytest.raises(tf.errors.InvalidArgumentError, match=r"(?s)\[0, num_classes=4\).*4"):
    class_ids([4], 4)
  with pytest.raises(ValueError,
                     match=r"`y` must be class ids of shape \[B\] or \[B, 1\], got shape \(2, 2\)"):
    class_ids(np.eye(2), name="y")
