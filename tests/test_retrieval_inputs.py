"""tfrank4class.retrieval.inputs: host-side checks of the retrieval metrics' arguments."""

import numpy as np
import pytest

from tfrank4class.compat import ops
from tfrank4class.retrieval import inputs


def test_as_embeddings_normalises_rows_in_float64():
  rows = np.array([[3.0, 4.0], [0.0, 0.0], [1.0, 1.0]], np.float32)
  e = inputs.as_embeddings(ops.convert_to_tensor(rows))
  assert e.dtype == np.float64
  np.testing.assert_allclose(e, [[0.6, 0.8], [0.0, 0.0], [2**-0.5, 2**-0.5]], rtol=1e-15)
  with pytest.raises(
    ValueError, match=r"`embeddings` must hold at least 2 items of dimension >= 1"
  ):
    inputs.as_embeddings(np.ones((1, 3)))
  with pytest.raises(TypeError, match=r"`embeddings` must be numeric, got dtype"):
    inputs.as_embeddings(np.array([["a", "b"], ["c", "d"]]))


def test_as_labels_uses_the_one_parser():
  e = np.eye(3)
  np.testing.assert_array_equal(inputs.as_labels(np.array([[2.0], [0.0], [1.0]]), e), [2, 0, 1])
  assert inputs.as_labels(ops.convert_to_tensor([1, 0, 1]), e).dtype == np.int64
  # Stricter than before the one parser: fractional and negative ids are refused, not truncated
  # or taken as a class.
  with pytest.raises(
    ValueError,
    match=r"(?s)`labels` given as class ids must "
    r"be whole numbers, got.*0\.5",
  ):
    inputs.as_labels([0.0, 0.5, 1.0], e)
  with pytest.raises(ValueError, match=r"(?s)`labels` must be class ids >= 0, got.*-1"):
    inputs.as_labels([0, -1, 1], e)
  with pytest.raises(
    ValueError,
    match=r"`labels` must be class ids of shape \[N\] or \[N, 1\], got "
    r"shape \(3, 2\)",
  ):
    inputs.as_labels(np.zeros((3, 2)), e)
  with pytest.raises(
    ValueError,
    match=r"`labels` and `embeddings` must have the same length, got 2 "
    r"labels for 3 embeddings",
  ):
    inputs.as_labels([0, 1], e)


def test_as_subset():
  np.testing.assert_array_equal(inputs.as_subset("query", None, 3), [0, 1, 2])
  np.testing.assert_array_equal(inputs.as_subset("query", np.array([2, 0]), 3), [2, 0])
  np.testing.assert_array_equal(
    inputs.as_subset("gallery", ops.convert_to_tensor([False, True, True]), 3), [1, 2]
  )
  with pytest.raises(ValueError, match=r"`query` must not repeat row indices"):
    inputs.as_subset("query", [1, 1], 3)
  with pytest.raises(
    ValueError,
    match=r"`gallery` must be a 1-D array of row indices or a boolean "
    r"mask of length 3",
  ):
    inputs.as_subset("gallery", [0.5], 3)


def test_check_ks():
  assert inputs.check_ks(3) == (3,) and inputs.check_ks([1, 2, 4]) == (1, 2, 4)
  with pytest.raises(
    ValueError, match=r"`ks` must be a positive integer or a sequence of them, got 1.5"
  ):
    inputs.check_ks(1.5)
  with pytest.raises(ValueError, match=r"`ks` must be an integer >= 1, got True"):
    inputs.check_ks([True])


def test_docstring_examples_run():
  import doctest

  result = doctest.testmod(inputs, optionflags=doctest.NORMALIZE_WHITESPACE)
  assert result.attempted > 0 and result.failed == 0, result
