"""Tests of the synthetic list generator (SoDeep Sec. 3.1.2): numpy batches on every backend, the
tf.data pipeline on TensorFlow."""

import numpy as np
import pytest
from scipy.stats import rankdata

from tfrank4class.ranking import synthetic


def _ref_ranks(s):
  # 1 = highest; ordinal tie-breaking by position (scipy 'ordinal' on -s).
  return np.stack([rankdata(-row, method="ordinal") for row in s]).astype(np.float32)


def test_ranks_match_scipy_and_are_reproducible():
  s, r = synthetic.synthetic_batch(64, 20, seed=[3, 4])
  assert s.dtype == r.dtype == np.float32 and s.shape == (64, 20)
  np.testing.assert_array_equal(r, _ref_ranks(s))
  s2, _ = synthetic.synthetic_batch(64, 20, seed=[3, 4])
  np.testing.assert_array_equal(s, s2)
  s3, _ = synthetic.synthetic_batch(64, 20, seed=[3, 5])
  assert not np.allclose(s, s3)
  assert synthetic.synthetic_batch(2, 5, seed=3, dtype="float64")[0].dtype == np.float64


def test_each_family_has_its_distribution():
  u, _ = synthetic.synthetic_batch(200, 50, 1, families=["uniform"])
  assert u.min() >= -1 and u.max() <= 1
  assert abs(u.std() - 1 / np.sqrt(3)) < 0.02
  nrm, _ = synthetic.synthetic_batch(200, 50, 1, families=["normal"])
  assert abs(nrm.std() - 1.0) < 0.03 and abs(nrm.mean()) < 0.03
  sp, _ = synthetic.synthetic_batch(100, 30, 1, families=["spaced"])
  for row in sp:
    gaps = np.diff(np.sort(row))
    np.testing.assert_allclose(gaps, gaps.mean(), atol=1e-5)
    assert row.min() >= -1 and row.max() <= 1
  mix, _ = synthetic.synthetic_batch(100, 30, 1, families=["mixture"])
  assert np.isfinite(mix).all()
  # Each item of a mixture list comes from one of the families: with 3000 items, some are
  # outside [-1, 1] (normal) and some lists hold evenly spaced runs.
  assert (np.abs(mix) > 1).any() and (np.abs(mix) <= 1).mean() > 0.5


@pytest.mark.tensorflow_only
def test_dataset_fixed_and_ranged_lengths():
  ds = synthetic.synthetic_dataset(8, (5, 9), seed=2, num_batches=20)
  lengths = set()
  for s, r in ds:
    assert s.shape[0] == 8 and s.shape == r.shape
    lengths.add(s.shape[1])
    np.testing.assert_array_equal(r.numpy(), _ref_ranks(s.numpy()))
  first = next(iter(synthetic.synthetic_dataset(8, (5, 9), seed=2, num_batches=1)))[0].numpy()
  np.testing.assert_array_equal(first, synthetic.synthetic_batch(8, first.shape[1], (2, 0))[0])
  assert lengths <= set(range(5, 10)) and len(lengths) > 1
  fixed = [s.shape[1] for s, _ in synthetic.synthetic_dataset(4, 12, num_batches=3)]
  assert fixed == [12, 12, 12]


def test_bad_arguments():
  with pytest.raises(ValueError, match=r"`list_size` must be an integer >= 2, got 1"):
    synthetic.synthetic_dataset(4, 1)
  with pytest.raises(ValueError, match="min <= max"):
    synthetic.synthetic_dataset(4, (10, 5))
  with pytest.raises(ValueError, match="`families` must be one of"):
    synthetic.synthetic_batch(4, 5, 0, families=["cauchy"])
  with pytest.raises(ValueError, match="`batch_size`"):
    synthetic.synthetic_batch(0, 5, 0)
  with pytest.raises(ValueError, match=r"`seed\[1\]` must be an integer >= 0, got -1"):
    synthetic.synthetic_batch(2, 5, (1, -1))
  with pytest.raises(ValueError, match=r"`seed` must be an int >= 0 or a pair of them"):
    synthetic.synthetic_batch(2, 5, (1, 2, 3))
