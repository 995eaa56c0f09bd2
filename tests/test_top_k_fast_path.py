"""Top-K accuracy of class ids when no list can hit (TensorFlow: Keras's ``in_top_k`` answers and
the O(B*C) counts are skipped) and when one does (ties at the cut-off), against the float64
reference and hand-computed values, in every compile mode, on every backend."""

import numpy as np
import pytest
from backend_testing import compile_modes, compiled, numpy

from tfrank4class.compat import ops
from tfrank4class.metrics import functional as F
from tfrank4class.metrics import reference as R

RNG = np.random.default_rng(56)


def _no_hit(batch=6, classes=9, k=3):
  """Tied integer scores where at least ``k`` classes beat each true class strictly."""
  scores = RNG.integers(0, 3, (batch, classes)).astype(np.float32)
  ids = RNG.integers(0, classes, batch)
  scores[np.arange(batch), ids] = -1.0
  scores[:, :k] = np.maximum(scores[:, :k], 0.0)
  ids = np.where(ids < k, k, ids)
  scores[np.arange(batch), ids] = -1.0
  scores[0, -1] = -1.0 if ids[0] != classes - 1 else scores[0, -1]  # a tie below the cut-off
  return scores, ids


@pytest.mark.parametrize("mode", compile_modes())
def test_batches_with_and_without_a_hit_equal_the_reference(mode):
  k = 3
  scores, ids = _no_hit(k=k)
  call = compiled(lambda y, s: F.top_k_accuracy(y, s, k=k), mode)
  got = numpy(call(ops.convert_to_tensor(ids), ops.convert_to_tensor(scores)))
  np.testing.assert_array_equal(got, np.zeros(len(ids), np.float32))
  np.testing.assert_allclose(got, R.top_k_accuracy(ids, scores, k=k), atol=1e-7)
  # One list now ranks its true class among 4 tied items from place 2: P(place <= 3) = 2 / 4.
  scores[1] = [5.0, 2.0, 2.0, 2.0, 2.0, 0.0, 0.0, 0.0, 0.0]
  ids[1] = 3
  got = numpy(call(ops.convert_to_tensor(ids), ops.convert_to_tensor(scores)))
  want = np.zeros(len(ids))
  want[1] = 0.5
  np.testing.assert_allclose(got, want, atol=1e-7)
  np.testing.assert_allclose(got, R.top_k_accuracy(ids, scores, k=k), atol=1e-7)


def test_random_large_lists_equal_the_reference():
  scores = RNG.standard_normal((8, 3000)).astype(np.float32)
  ids = RNG.integers(0, 3000, 8)
  ids[:2] = np.argsort(-scores[:2], axis=-1)[:, 2]  # two hits among misses
  for k in (1, 5):
    np.testing.assert_allclose(
      numpy(F.top_k_accuracy(ids, scores, k=k)), R.top_k_accuracy(ids, scores, k=k), atol=1e-7
    )


def test_non_finite_scores_in_a_batch_without_a_hit():
  """Eagerly and in tf.function the score check raises; where nothing can raise (XLA, jax.jit)
  the list with the NaN is NaN, not the 0 of a miss."""
  scores, ids = _no_hit()
  scores[2, 5] = np.nan
  with pytest.raises(ValueError, match=r"`scores` must be finite"):
    F.top_k_accuracy(ids, scores, k=3)
  for mode in compile_modes()[1:]:
    call = compiled(lambda y, s: F.top_k_accuracy(y, s, k=3), mode)
    if mode == "function":
      with pytest.raises(Exception, match=r"must be finite"):
        call(ops.convert_to_tensor(ids), ops.convert_to_tensor(scores))
      continue
    got = numpy(call(ops.convert_to_tensor(ids), ops.convert_to_tensor(scores)))
    assert np.isnan(got[2]) and np.all(got[[0, 1, 3, 4, 5]] == 0.0)
