"""Tests of tfrank4class.losses.sodeep.spearman.SpearmanLoss: hand-computed values with exact
ranks against scipy's spearmanr (ties, the L1 term, over the batch, padding), bad input, and a
real-data check (Spearman correlation on the diabetes set rises when trained with the loss)."""

import backend_testing
import numpy as np
import pytest
from scipy.stats import spearmanr

from tfrank4class.compat import keras
from tfrank4class.losses.sodeep.spearman import SpearmanLoss

NONE = "none"


def test_spearman_exact_equals_one_minus_scipy_rho():
  rng = np.random.default_rng(0)
  y = rng.exponential(size=(5, 12)).astype(np.float32)  # graded targets (>= 0; < 0 is padding)
  s = rng.normal(size=(5, 12)).astype(np.float32)
  got = backend_testing.numpy(SpearmanLoss(ranker="exact", reduction=NONE)(y, s))
  ref = [1.0 - spearmanr(a, b).statistic for a, b in zip(y, s)]
  np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def test_spearman_tied_targets_use_average_ranks_and_l1_term():
  y = np.array([[2.0, 2.0, 0.0, 1.0]], np.float32)
  s = np.array([[0.1, 0.7, 0.3, 0.2]], np.float32)
  # Target ranks (1 = highest, ties averaged): [1.5, 1.5, 4, 3]; score ranks: [4, 1, 2, 3].
  d2 = (4 - 1.5) ** 2 + (1 - 1.5) ** 2 + (2 - 4) ** 2 + 0.0
  ref = 6 * d2 / (4 * 15) + 0.5 * np.mean(np.abs(s - y))
  got = backend_testing.numpy(SpearmanLoss(ranker="exact", l1_weight=0.5, reduction=NONE)(y, s))
  np.testing.assert_allclose(got, [ref], rtol=1e-6)


def test_spearman_over_batch():
  y = np.array([1.0, 3.0, 2.0, 5.0], np.float32)
  s = np.array([[0.2], [0.1], [0.3], [0.9]], np.float32)
  got = backend_testing.numpy(SpearmanLoss(ranker="exact", over_batch=True, reduction=NONE)(y, s))
  np.testing.assert_allclose(got, [1.0 - spearmanr(y, s[:, 0]).statistic], rtol=1e-6)
  with pytest.raises(ValueError, match=r"over_batch=True `y_pred` must have shape \[B\] or"):
    SpearmanLoss(ranker="exact", over_batch=True)(np.zeros([2, 3]), np.zeros([2, 3]))


def test_spearman_padding_is_excluded():
  rng = np.random.default_rng(7)
  y = rng.normal(size=(4, 9)).astype(np.float32) ** 2  # graded targets >= 0
  s = rng.normal(size=(4, 9)).astype(np.float32)
  y[0, [1, 5]] = -1.0
  y[1, 0] = -1.0
  y[3, 1:] = -1.0  # one valid item: loss 0
  got = backend_testing.numpy(SpearmanLoss(ranker="exact", reduction=NONE)(y, s))
  ref = [1.0 - spearmanr(a[a >= 0], b[a >= 0]).statistic for a, b in zip(y[:3], s[:3])] + [0.0]
  np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
  # Through a sorter, a padded item (whatever its score) changes the loss little.
  padded = backend_testing.numpy(SpearmanLoss(ranker="attention", reduction=NONE)(y[:1], s[:1]))
  valid = y[0] >= 0
  dropped = backend_testing.numpy(
    SpearmanLoss(ranker="attention", reduction=NONE)(y[:1, valid], s[:1, valid])
  )
  np.testing.assert_allclose(padded, dropped, atol=0.02)


def test_bad_input():
  with pytest.raises(ValueError, match=r"`l1_weight` must be a finite number >= 0.0, got -1"):
    SpearmanLoss(ranker="exact", l1_weight=-1)
  with pytest.raises(ValueError, match="at least 2 items"):
    SpearmanLoss(ranker="exact")(np.zeros([3, 1]), np.zeros([3, 1]))


def test_diabetes_spearman_rises_with_spearman_loss():
  from sklearn.datasets import load_diabetes

  x, y = load_diabetes(return_X_y=True)
  x = ((x - x.mean(0)) / x.std(0)).astype(np.float32)
  y = ((y - y.mean()) / y.std()).astype(np.float32)
  x_train, y_train, x_test, y_test = x[:342], y[:342], x[342:], y[342:]
  keras.utils.set_random_seed(0)
  model = keras.Sequential([keras.Input([10]), keras.layers.Dense(1)])
  # Start from a deliberately poor linear model.
  model.layers[0].set_weights(
    [
      -model.layers[0].get_weights()[0]
      - 0.3 * np.sign(np.corrcoef(x_train.T, y_train)[-1, :-1])[:, None],
      np.zeros(1),
    ]
  )
  rho_before = spearmanr(model.predict(x_test, verbose=0)[:, 0], y_test).statistic
  model.compile(keras.optimizers.Adam(0.05), loss=SpearmanLoss(ranker="attention", over_batch=True))
  model.fit(x_train, y_train, batch_size=64, epochs=15, verbose=0, shuffle=True)
  rho_after = spearmanr(model.predict(x_test, verbose=0)[:, 0], y_test).statistic
  assert rho_after > 0.5 and rho_after > rho_before + 0.3, (rho_before, rho_after)
