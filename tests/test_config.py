"""The configuration of a training run: every field checked, with the allowed values named."""

import pytest
from _training import tiny

from tfrank4class.train import config as config_lib


def test_other_bad_config_values():
  with pytest.raises(ValueError, match=r"Unknown metric name 'acc'"):
    tiny(metrics=("acc",)).validate()
  with pytest.raises(ValueError, match=r"`best_metric` 'mrr' must be one of `metrics` \['top_1'\]"):
    tiny(metrics=("top_1",), best_metric="mrr").validate()
  with pytest.raises(ValueError, match=r"`learning_rate` must be a finite number > 0.0, got 0"):
    tiny(learning_rate=0).validate()
  with pytest.raises(ValueError, match=r"`tpu` must name a TPU"):
    tiny(strategy="tpu").validate()
  with pytest.raises(
    ValueError,
    match=r"`model_dir` is required when `strategy` is "
    r"'multi_worker_mirrored'",
  ):
    tiny(strategy="multi_worker_mirrored").validate()
  with pytest.raises(
    ValueError, match=r"`on_corrupt` must be one of \['error', 'skip'\], got 'drop'"
  ):
    tiny(on_corrupt="drop").validate()
  with pytest.raises(ValueError, match=r"`start_over` must be True or False, got 'yes'"):
    tiny(start_over="yes").validate()
  with pytest.raises(
    ValueError, match=r"`early_stopping_patience` must be an integer >= 1 or None, got 0"
  ):
    tiny(early_stopping_patience=0).validate()
  assert tiny(early_stopping_patience=None).validate().early_stopping_patience is None


def test_dot_interaction_refuses_hidden_units_it_would_ignore():
  assert config_lib.ExperimentConfig().hidden_units == (128, 128)
  assert config_lib.ExperimentConfig(interaction="concat").hidden_units == (128, 128)
  assert config_lib.ExperimentConfig(interaction="dot").validate().hidden_units == ()
  with pytest.raises(
    ValueError, match=r"`hidden_units` \(16,\) is not used by `interaction` 'dot'"
  ):
    tiny(interaction="dot").validate()
