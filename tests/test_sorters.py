"""Tests of tfrank4class.ranking.sorters: the learned sorters and their shipped weights by name."""

import doctest

import backend_testing
import numpy as np
import pytest

from tfrank4class.ranking import AttentionSorter, ConvSorter, LSTMSorter, sorters, synthetic
from tfrank4class.registry import Registry


def test_doctests():
  result = doctest.testmod(sorters, optionflags=doctest.ELLIPSIS)
  assert result.attempted >= 2 and result.failed == 0


def test_sorter_kinds_build_untrained_sorters_with_their_hyper_parameters():
  assert isinstance(sorters.SORTERS, Registry)
  assert sorters.SORTERS.names() == ("attention", "conv", "lstm")
  lstm = sorters.SORTERS.get("lstm", units=3, num_layers=1)
  assert type(lstm) is LSTMSorter and lstm.units == 3 and lstm.num_layers == 1
  assert type(sorters.SORTERS.get("conv", list_size=5)) is ConvSorter
  with pytest.raises(
    ValueError,
    match=r"`sorter` must be one of \['attention', 'conv', 'lstm'\], "
    r"got 'gru'",
  ):
    sorters.SORTERS.get("gru")


@pytest.mark.parametrize("cls", [AttentionSorter, ConvSorter, LSTMSorter])
def test_pretrained_sorters_are_the_shipped_weights(cls):
  sorter = sorters.PRETRAINED_SORTERS.get(cls.KIND)
  reference = cls.pretrained()
  assert type(sorter) is cls and sorter.pretrained_kind == cls.KIND and not sorter.trainable
  assert sorters.PRETRAINED_SORTERS.get(cls.KIND, trainable=True).trainable
  n = getattr(reference, "list_size", None) or 12
  scores, _ = synthetic.synthetic_batch(3, n, seed=[5, n])
  np.testing.assert_array_equal(
    backend_testing.numpy(sorter(scores)), backend_testing.numpy(reference(scores))
  )


def test_unknown_pretrained_sorter():
  with pytest.raises(
    ValueError,
    match=r"`kind` must be one of \['attention', 'conv', 'lstm'\], "
    r"got 'pairwise_sigmoid'",
  ):
    sorters.PRETRAINED_SORTERS.get("pairwise_sigmoid")
