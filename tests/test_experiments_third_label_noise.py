"""experiments/third/label_noise.py: labels stay in their group, the flip rate is p (g - 1) / g,
classes in no group or alone never change, the draw is fixed by its seed."""

import numpy as np
import pytest

from experiments.third import label_noise


def test_group_noise_stays_in_the_group_at_the_expected_rate():
  groups = [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
  y = np.repeat(np.arange(10), 2000)
  noisy = label_noise.group_noise(y, 0.6, groups, seed=0)
  assert np.all((noisy < 5) == (y < 5))
  # Berrada et al.'s effective rate 0.8 p for groups of 5; binomial sd ~ 0.0035 at N = 20000
  assert label_noise.flip_rate(y, noisy) == pytest.approx(0.8 * 0.6, abs=0.015)
  assert np.array_equal(noisy, label_noise.group_noise(y, 0.6, groups, seed=0))
  assert not np.array_equal(noisy, label_noise.group_noise(y, 0.6, groups, seed=1))


def test_classes_in_no_group_or_alone_never_change():
  y = np.repeat(np.arange(4), 500)
  noisy = label_noise.group_noise(y, 1.0, [[0], [1, 2]], seed=0)  # 3 is in no group
  assert np.array_equal(noisy[y == 0], y[y == 0]) and np.array_equal(noisy[y == 3], y[y == 3])
  changed = noisy[(y == 1)]
  assert set(changed.tolist()) == {1, 2} and 0.4 < np.mean(changed == 2) < 0.6


def test_uniform_noise_rate_and_zero_noise():
  y = np.repeat(np.arange(20), 1000)
  noisy = label_noise.uniform_noise(y, 0.4, 20, seed=0)
  assert label_noise.flip_rate(y, noisy) == pytest.approx(0.4 * 19 / 20, abs=0.015)
  assert np.array_equal(label_noise.uniform_noise(y, 0.0, 20), y)


def test_bad_arguments_are_named():
  with pytest.raises(ValueError, match="`p` must be a probability"):
    label_noise.group_noise([0, 1], 1.5, [[0, 1]])
  with pytest.raises(ValueError, match="two groups"):
    label_noise.group_noise([0, 1], 0.5, [[0, 1], [1]])
  with pytest.raises(ValueError, match="integer class ids"):
    label_noise.group_noise([0.5], 0.5, [[0]])
  with pytest.raises(ValueError, match="one shape"):
    label_noise.flip_rate([0, 1], [0])
