"""experiments/third/collapse.py: the push on a dominant wrong class against softmax's closed form
and finite differences of the Top-K losses."""

import numpy as np
import pytest
import tensorflow as tf

from experiments import training
from experiments.third import collapse


@pytest.mark.parametrize("scale", [0.5, 3.0, 12.0])
def test_softmax_against_its_closed_form(scale):
  expected = np.exp(scale) / (np.exp(scale) + 27)
  assert collapse.dominant_gradient("softmax_loss", {}, 28, scale) == pytest.approx(expected, 1e-5)


@pytest.mark.parametrize("name", ["topk_ce top1_mode=smce", "smooth_svm k=5 tau=1"])
def test_topk_losses_against_finite_differences(name):
  loss, kwargs = collapse.LOSSES[name]
  loss_object = training.build_loss(loss, kwargs)

  def value(s_d):
    scores = np.zeros((1, 12), np.float64)
    scores[0, 1] = s_d
    return float(loss_object(tf.constant([0]), tf.constant(scores)))

  eps = 1e-4
  expected = (value(5.0 + eps) - value(5.0 - eps)) / (2 * eps)
  assert collapse.dominant_gradient(loss, kwargs, 12, 5.0) == pytest.approx(expected, abs=1e-3)


def test_table_and_bad_arguments():
  lines = collapse.table_lines(10, scales=(1.0,))
  assert lines[0] == "| loss (10 classes) | scale 1 |" and len(lines) == 2 + len(collapse.LOSSES)
  with pytest.raises(ValueError, match="two different classes"):
    collapse.dominant_gradient("softmax_loss", {}, 10, 1.0, true_class=1, dominant=1)
