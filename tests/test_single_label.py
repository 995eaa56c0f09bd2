"""Tests of tfrank4class.losses.topk.single_label: the true class from ids and dense relevance."""

import backend_testing as bt
import numpy as np
import pytest
import tensorflow as tf

from tfrank4class.losses.topk.single_label import single_label


def test_class_ids_and_dense_rows():
  scores = tf.zeros([3, 4])
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
    single_label([[1.0, 1.0, 0.0]], tf.zeros([1, 3]))
  with pytest.raises(ValueError, match="must have the same batch size"):
    single_label([0, 1], tf.zeros([3, 3]))
  with pytest.raises(ValueError, match="do not match the 3 scores per list"):
    single_label([[0.0, 1.0]], tf.zeros([1, 3]))


def test_traced():
  f = tf.function(lambda y: single_label(y, tf.zeros([2, 3])).ids)
  np.testing.assert_array_equal(
    bt.numpy(f(tf.constant([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0]]))), [2, 1]
  )
  with pytest.raises(tf.errors.InvalidArgumentError, match="at most one entry > 0"):
    f(tf.constant([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]]))
