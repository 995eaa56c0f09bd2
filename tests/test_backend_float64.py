"""The float64-keeping ops of tfrank4class.backend (``maximum``, ``minimum``, ``matmul``,
``cumsum``, ``floor``, ``mean``) against numpy in float64, on every backend and compile mode:
float64 in, float64 out, to float64's resolution (Keras 3.15's own forms give float32 on
PyTorch)."""

import backend_testing as bt
import numpy as np
import pytest

from tfrank4class import backend
from tfrank4class.compat import ops

RNG = np.random.default_rng(7)
X = RNG.standard_normal((3, 5))
Y = RNG.standard_normal((3, 5))

#: ``(name, backend form on tensors, numpy float64 reference)``; 0.3 and 0.1 are not float32
#: numbers, and ``x * 1e8`` has fractions below float32's resolution, so a float32 step shows.
CASES = [
  ("maximum", lambda x, y: backend.maximum(x, y), np.maximum),
  ("maximum_number", lambda x, y: backend.maximum(x, 0.3), lambda x, y: np.maximum(x, 0.3)),
  ("minimum", lambda x, y: backend.minimum(x, y), np.minimum),
  ("minimum_number", lambda x, y: backend.minimum(0.1, y), lambda x, y: np.minimum(0.1, y)),
  ("matmul", lambda x, y: backend.matmul(x, ops.transpose(y)), lambda x, y: x @ y.T),
  ("cumsum", lambda x, y: backend.cumsum(x, axis=-1), lambda x, y: np.cumsum(x, axis=-1)),
  ("cumsum_axis0", lambda x, y: backend.cumsum(y, axis=0), lambda x, y: np.cumsum(y, axis=0)),
  ("floor", lambda x, y: backend.floor(x * 1e8), lambda x, y: np.floor(x * 1e8)),
  ("mean", lambda x, y: backend.mean(x), lambda x, y: np.mean(x)),
  (
    "mean_keepdims",
    lambda x, y: backend.mean(x, axis=1, keepdims=True),
    lambda x, y: np.mean(x, axis=1, keepdims=True),
  ),
]


@pytest.mark.parametrize("mode", bt.compile_modes())
@pytest.mark.parametrize("name,fn,reference", CASES, ids=[c[0] for c in CASES])
def test_float64_in_float64_out(name, fn, reference, mode):
  with bt.float64():
    got = bt.numpy(bt.compiled(fn, mode)(ops.convert_to_tensor(X), ops.convert_to_tensor(Y)))
  assert got.dtype == np.float64, name
  np.testing.assert_allclose(got, reference(X, Y), rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("name,fn,reference", CASES, ids=[c[0] for c in CASES])
def test_float32_stays_float32(name, fn, reference):
  x, y = X.astype(np.float32), Y.astype(np.float32)
  got = bt.numpy(fn(ops.convert_to_tensor(x), ops.convert_to_tensor(y)))
  assert got.dtype == np.float32, name
  np.testing.assert_allclose(got, reference(X, Y), rtol=1e-5, atol=1e-6)
