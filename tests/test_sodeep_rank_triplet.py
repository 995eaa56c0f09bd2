"""Tests of tfrank4class.losses.sodeep.rank_triplet.RankTripletLoss: hand-computed values with
exact ranks (normalised ranks, hardest negative, padding) and bad input."""

import backend_testing
import numpy as np
import pytest

from tfrank4class.losses.sodeep.rank_triplet import RankTripletLoss

NONE = "none"


def test_rank_triplet_hand_computed():
  # n = 5, normalised ranks r = (rank - 1) / 4.
  s = np.array([[0.9, 0.1, 0.5, 0.7, 0.3]], np.float32)  # ranks 1 5 3 2 4 -> r 0 1 .5 .25 .75
  rel = np.array([[0.0, 1.0, 1.0, 0.0, 0.0]], np.float32)  # positives r = 1, .5; hardest neg 0
  ref = (max(0, 0.2 + 1 - 0) + max(0, 0.2 + 0.5 - 0)) / 2
  got = backend_testing.numpy(RankTripletLoss(ranker="exact", alpha=0.2, reduction=NONE)(rel, s))
  np.testing.assert_allclose(got, [ref], rtol=1e-6)
  good = RankTripletLoss(ranker="exact", alpha=0.2, reduction=NONE)([[1.0, 0.0, 0.0, 0.0, 0.0]], s)
  good = backend_testing.numpy(good)  # r_p = 0, hardest neg .25 -> 0
  np.testing.assert_allclose(good, [0.0], atol=1e-7)
  all_pos = backend_testing.numpy(
    RankTripletLoss(ranker="exact", reduction=NONE)(np.ones([1, 5]), s)
  )
  np.testing.assert_array_equal(all_pos, [0.0])
  # A padded item (relevance -1, best score) is excluded: n = 5 valid items as above.
  s_pad = np.array([[0.9, 0.1, 5.0, 0.5, 0.7, 0.3]], np.float32)
  rel_pad = np.array([[0.0, 1.0, -1.0, 1.0, 0.0, 0.0]], np.float32)
  got = backend_testing.numpy(
    RankTripletLoss(ranker="exact", alpha=0.2, reduction=NONE)(rel_pad, s_pad)
  )
  np.testing.assert_allclose(got, [ref], rtol=1e-6)


def test_bad_input():
  with pytest.raises(ValueError, match=r"`alpha` must be a finite number >= 0.0"):
    RankTripletLoss(ranker="exact", alpha=-0.1)
