"""``tfrank4class-train --sampled_negatives``: sampled lists from ``tf.data`` input, and the flag's
errors."""

import subprocess

import numpy as np
import pytest
import tensorflow as tf
from _training import env as train_env
from _training import tiny, train_cmd

from tfrank4class import compat, heads
from tfrank4class.train import experiment, serving

pytestmark = pytest.mark.tensorflow_only  # the training binary reads tf.data
keras_3_only = pytest.mark.skipif(not compat.KERAS_3, reason="SampledClassifier is Keras 3's")


@keras_3_only
@pytest.mark.parametrize(
  "interaction",
  # concat takes the latent_cross path of the binary (one SampledRank4ClassHead); its head is
  # tested on every backend in test_sampled_rank4class.py, so its binary run is the slow one.
  ["dot", "latent_cross", pytest.param("concat", marks=pytest.mark.slow)],
)
def test_sampled_negatives_train_evaluate_reload_and_export(interaction, tmp_path):
  config = tiny(
    interaction=interaction,
    hidden_units=None if interaction == "dot" else (8,),
    sampled_negatives=5,
    sampler="log_uniform",
    steps=2,
    model_dir=str(tmp_path / "run"),
  ).validate()
  result = experiment.train(config)
  head = result.model.head
  if interaction == "dot":
    assert type(head) is heads.SampledDotProduct
  else:  # the MLP interaction on the sampled candidates
    assert type(head) is heads.SampledRank4ClassHead
    assert (head.interaction_name, head.hidden_units) == (interaction, (8,))
  assert head.num_negatives == 5 and head.distribution == "log_uniform"
  assert np.isfinite(result.history.history["loss"]).all()
  model = experiment.best_model(config, result)  # best.keras, reloaded
  assert isinstance(model, heads.SampledClassifier) and type(model.head) is type(head)
  rows = dict(experiment.evaluate_splits(model, config, result.info))
  assert set(rows) == {"validation", "test"} and all(0 <= v <= 1 for v in rows["test"].values())
  export_dir = str(tmp_path / "e")
  serving.export_saved_model(model, config.dataset, result.info.class_names, export_dir)
  features = tf.constant(["a fine day", "i am so angry at this", "thanks!"])
  scores = serving.saved_model_scorer(export_dir)(features).numpy()  # every class's score
  assert scores.shape == (3, result.info.num_classes)
  np.testing.assert_allclose(scores, model(features[:, None]).numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
  "fields, message",
  [
    ({"sampled_negatives": 0}, "`sampled_negatives` must be an integer >= 1 or None, got 0."),
    ({"sampled_negatives": 4, "sampler": "zipf"}, "`sampler` must be one of"),
    ({"sampler": "log_uniform"}, "`sampler` 'log_uniform' draws the negatives of"),
  ],
)
def test_bad_sampling_fields_are_refused_naming_them(fields, message):
  with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
    tiny(**fields).validate()


def test_sampled_negatives_need_keras_3():
  config = tiny(interaction="dot", hidden_units=None, sampled_negatives=4)
  if compat.KERAS_3:
    assert config.validate().sampled_negatives == 4
  else:
    with pytest.raises(ValueError, match=r"`sampled_negatives` needs Keras 3 \(its sampler"):
      config.validate()


def _train_error(tmp_path, *flags):
  """The last stderr line of a ``tfrank4class-train`` run that must end in a usage error."""
  result = subprocess.run(
    train_cmd(tmp_path / "run", *flags), env=train_env(), capture_output=True, text=True
  )
  assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-3000:]
  return result.stderr.rstrip("\n").splitlines()[-1]


@pytest.mark.slow  # three processes (about 10 s each); the tests above are the fast counterpart
def test_bad_sampled_negatives_flags_end_in_one_line(tmp_path):
  for flag, error in (
    ("--sampled_negatives=0", "flag --sampled_negatives=0: 0 is not a positive integer"),
    ("--sampler=zipf", "flag --sampler=zipf: value should be one of <uniform|log_uniform>"),
    # the flags reach the config, whose error ends the program before any data is read
    (
      "--sampler=log_uniform",
      "`sampler` 'log_uniform' draws the negatives of `sampled_negatives`, which is not set; set "
      "`sampled_negatives` or leave `sampler` unset.",
    ),
  ):
    assert _train_error(tmp_path, flag) == f"tfrank4class-train: error: {error}"
