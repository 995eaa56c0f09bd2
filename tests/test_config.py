"""The configuration of a training run: every field checked, with the allowed values named."""

import pytest
from _training import tiny

from tfrank4class import errors
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
  with pytest.raises(ValueError, match=r"`select_on_test` must be True or False, got 1"):
    tiny(select_on_test=1).validate()
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


@pytest.mark.parametrize(
  "content, reason",
  [
    (b'{"dataset": "goemotions_sample", "loss": "soft', "JSONDecodeError: Unterminated string"),
    (b"", "JSONDecodeError: Expecting value"),
    (b"\xff\xfe{}", "UnicodeDecodeError"),
    (b"[1, 2]", "a JSON object is expected, got list"),
    (b'{"no_such_field": 1}', "unexpected keyword argument 'no_such_field'"),
    (b'{"batch_size": "64"}', "`batch_size` must be an integer >= 1, got '64'"),
  ],
)
def test_a_damaged_config_json_is_named_with_what_to_do(tmp_path, content, reason):
  (tmp_path / "config.json").write_bytes(content)
  with pytest.raises(errors.DamagedFileError) as raised:
    config_lib.ExperimentConfig.from_model_dir(str(tmp_path))
  message = errors.user_error_message(raised.value)
  assert message.startswith(f"The run configuration {tmp_path / 'config.json'} is damaged (")
  assert reason in message
  assert message.endswith(
    "or start the run again with tfrank4class-train --start_over on this "
    "`model_dir` (deletes the run's files)."
  )


def test_a_config_json_saved_by_an_editor_with_a_byte_order_mark_loads(tmp_path):
  config = tiny(loss="approx_ndcg_loss")
  (tmp_path / "config.json").write_bytes(b"\xef\xbb\xbf" + config.to_json().encode())
  assert config_lib.ExperimentConfig.from_model_dir(str(tmp_path)).loss == "approx_ndcg_loss"
