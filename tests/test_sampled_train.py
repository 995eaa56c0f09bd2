"""``tfrank4class-train --sampled_negatives``: sampled lists from ``tf.data`` input, and the flag's
errors."""

import subprocess

import numpy as np
import pytest
from _training import env as train_env
from _training import tiny, train_cmd
from absl import app, flags
from absl.testing import flagsaver

from tfrank4class import heads
from tfrank4class.train import experiment, serving, train

pytestmark = pytest.mark.tensorflow_only  # the training binary reads tf.data


def test_sampled_negatives_train_evaluate_reload_and_export(tmp_path):
  config = tiny(
    interaction="dot",
    hidden_units=None,
    sampled_negatives=5,
    sampler="log_uniform",
    steps=2,
    model_dir=str(tmp_path / "run"),
  ).validate()
  result = experiment.train(config)
  assert isinstance(result.model, heads.SampledClassifier)
  assert result.model.head.num_negatives == 5 and result.model.head.distribution == "log_uniform"
  assert np.isfinite(result.history.history["loss"]).all()
  model = experiment.best_model(config, result)  # best.keras, reloaded
  assert isinstance(model, heads.SampledClassifier)
  rows = dict(experiment.evaluate_splits(model, config, result.info))
  assert set(rows) == {"validation", "test"} and all(0 <= v <= 1 for v in rows["test"].values())
  serving.export_saved_model(model, config.dataset, result.info.class_names, str(tmp_path / "e"))
  assert (tmp_path / "e" / "saved_model.pb").is_file()


@pytest.mark.parametrize(
  "fields, message",
  [
    ({"sampled_negatives": 0}, "`sampled_negatives` must be an integer >= 1 or None, got 0."),
    ({"sampled_negatives": 4, "sampler": "zipf"}, "`sampler` must be one of"),
    ({"sampler": "log_uniform"}, "`sampler` 'log_uniform' draws the negatives of"),
    ({"sampled_negatives": 4, "interaction": "concat"}, "got `interaction` 'concat'"),
  ],
)
def test_bad_sampling_fields_are_refused_naming_them(fields, message):
  with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
    tiny(**fields).validate()


def test_sampled_flags_reach_the_config_and_bad_ones_are_usage_errors():
  argv = ["tfrank4class-train", "--interaction=dot", "--sampled_negatives=7"]
  with flagsaver.flagsaver():
    train.FLAGS(argv + ["--sampler=log_uniform"])
    config = train.config_from_flags()
  assert (config.sampled_negatives, config.sampler) == (7, "log_uniform")
  with flagsaver.flagsaver():
    train.FLAGS(argv + ["--interaction=latent_cross"])
    with pytest.raises(app.UsageError, match="got `interaction` 'latent_cross'; set `interact"):
      train.config_from_flags()
  with flagsaver.flagsaver(), pytest.raises(flags.IllegalFlagValueError, match="--sampler=zipf"):
    train.FLAGS(argv + ["--sampler=zipf"])


@pytest.mark.slow  # a process (about 10 s); the test above is its fast counterpart
def test_bad_sampled_negatives_flags_end_in_one_line(tmp_path):
  result = subprocess.run(
    train_cmd(tmp_path / "run", "--sampled_negatives=0"),
    env=train_env(),
    capture_output=True,
    text=True,
  )
  assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
  last = result.stderr.rstrip("\n").splitlines()[-1]
  flag_error = "flag --sampled_negatives=0: 0 is not a positive integer"
  assert last == f"tfrank4class-train: error: {flag_error}"
