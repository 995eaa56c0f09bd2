"""Tests of tfrank4class.losses.topk.single_label: the true class from ids and dense relevance, on
every backend (the assertion inside tf.function: TensorFlow only)."""

import backend_testing as bt
import numpy as np
import pytest

from tfrank4class.losses.topk.single_label import single_label


def test_class_ids_and_dense_rows():
  scores = np.zeros([3, 4], np.float32)
  parsed = single_label([[3], [0], [1]], scores)
  np.testing.assert_array_equal(bt.numpy(parsed.ids), [3, 0, 1])
  assert bt.numpy(parsed.has_true).all() and bt.numpy(parsed.valid).all()
  dense = [[0.0, 0.0, 2.0, -1.0], [0.0, 0.0, 0.0, 0.0], [-1.0, 1.0, 0.0, 0.0]]
  parsed = single_label(dense, scores)
  np.testing.assert_array_equal(bt.numpy(parsed.ids), [2, 0, 1])
  np.testing.assert_array_equal(bt.numpy(parsed.has_true), [True, False, True])
  np.testing.assert_array_equal(bt.numpy(parsed.valid), np.array(dense) >= 0)


def test_refuses_multi_label_rows_and_bad_shapes():
  with pytest.raises(ValueError, match="at most one entry > 0 per row"):
    single_label([[1.0, 1.0, 0.0]], np.zeros([1, 3], np.float32))
  with pytest.raises(ValueError, match="must have the same batch size"):
    single_label([0, 1], np.zeros([3, 3], np.float32))
  with pytest.raises(ValueError, match="do not match the 3 scores per list"):
    single_label([[0.0, 1.0]], np.zeros([1, 3], np.float32))


@pytest.mark.parametrize("mode", [m for m in bt.compile_modes() if m != "eager"])
def test_compiled(mode):
  f = bt.compiled(lambda y: single_label(y, np.zeros([2, 3], np.float32)).ids, mode)
  np.testing.assert_array_equal(
    bt.numpy(f(np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0]], np.float32))), [2, 1]
  )


@pytest.mark.tensorflow_only
def test_multi_label_row_fails_the_assertion_inside_tf_function():
  import tensorflow as tf  # noqa: PLC0415

  f = tf.function(lambda y: single_label(y, tf.zeros([2, 3])).ids)
  with pytest.raises(tf.errors.InvalidArgumentError, match="at most one entry > 0"):
    f(tf.constant([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]]))
