"""The training library: validation before data, strategies, the input stream, errors of data."""

import warnings

import numpy as np
import pytest
import tensorflow as tf
from _training import tiny
from tensorflow.python.framework import config as tf_config  # no public query of the setting

from tfrank4class import data as data_lib
from tfrank4class import errors
from tfrank4class import losses as losses_lib
from tfrank4class.compat import keras
from tfrank4class.data import goemotions
from tfrank4class.train import experiment
from tfrank4class.train.flavour import TRAINING


@pytest.mark.parametrize(
  "field, value, allowed",
  [
    ("dataset", "mnist", r"\['cifar10', 'cifar100', 'goemotions'"),
    ("encoder", "bert", r"\['auto', 'bert_checkpoint', 'resnet50', 'saved_model', 'small_cnn'"),
    ("interaction", "mlp", r"\['concat', 'dot', 'latent_cross'\]"),
    ("loss", "softmax", r"\[.*'softmax_loss'"),
    ("optimizer", "sgd", r"\['adagrad', 'adam'\]"),
    ("strategy", "gpu", r"\['default', 'mirrored', 'multi_worker_mirrored', 'tpu'\]"),
  ],
)
def test_unknown_values_are_refused_before_any_data_is_read(field, value, allowed, tmp_path):
  config = tiny(data_dir=str(tmp_path / "missing"), **{field: value})
  with pytest.raises(ValueError, match=rf"`{field}` must be one of {allowed}.*got '{value}'"):
    experiment.train(config)


def test_bad_loss_arguments_fail_before_any_data_is_read(tmp_path):
  missing = str(tmp_path / "missing")
  with pytest.raises(
    ValueError, match=r"Invalid keyword arguments \['bad'\] for loss 'softmax_loss'"
  ):
    experiment.train(tiny(dataset="goemotions", data_dir=missing, loss_kwargs={"bad": 1}))
  with pytest.raises(ValueError, match=r"lambda_"):
    experiment.train(
      tiny(
        dataset="goemotions", data_dir=missing, loss="recall_loss", loss_kwargs={"lambda_": -1.0}
      )
    )


@pytest.fixture
def no_data_read(monkeypatch):
  """Fails the test if a dataset is read (its info, its batches or, through them, its words)."""

  def read(*args, **kwargs):
    pytest.fail(f"data was read before the arguments were checked: {args}")

  monkeypatch.setattr(data_lib, "load", read)
  monkeypatch.setattr(data_lib, "info", read)


@pytest.mark.parametrize(
  "fields, message",
  [
    # Keras 3: "Unrecognized keyword arguments ... {'no_such': 1}"; Keras 2: "not understood".
    ({"encoder_kwargs": {"no_such": 1}}, "`encoder_kwargs` of 'transformer': *'no_such'"),
    ({"encoder_kwargs": {"num_heads": 0}}, "`num_heads` must be an integer >= 1, got 0"),
    ({"encoder_kwargs": {"max_tokens": 1}}, "`max_tokens` must be an integer >= 3, got 1"),
    (
      {"dataset": "cifar10", "encoder_kwargs": {"filters": [0]}},
      "`encoder_kwargs` of 'small_cnn': `filters` must be a non-empty sequence",
    ),
    ({"model_dir": "{file}/run"}, "`model_dir` '{file}/run' cannot be created: '{file}' is a file"),
    ({"export_dir": "{file}"}, "`export_dir` '{file}' is a file, not a folder."),
  ],
)
def test_bad_arguments_fail_before_any_data_is_read(fields, message, tmp_path, no_data_read):
  file = tmp_path / "a_file"
  file.write_text("")
  fields = {k: v.format(file=file) if isinstance(v, str) else v for k, v in fields.items()}
  with pytest.raises(errors.InvalidConfigError) as raised:
    experiment.train(tiny(dataset=fields.pop("dataset", "goemotions"), **fields))
  head, _, tail = message.format(file=file).partition("*")
  assert head in str(raised.value) and tail in str(raised.value).partition(head)[2]
  assert not (file.parent / "run").exists()


def test_a_run_writes_its_checkpoints_to_partial_files_and_commits_them(tmp_path):
  config = tiny(model_dir=str(tmp_path))
  info = data_lib.info(config.dataset)
  start = experiment._start_in_model_dir(config, info, chief=True, steps_per_epoch=4)
  epoch_file = str(tmp_path / "checkpoints" / "epoch_{epoch:03d}.weights.h5")
  best_file = str(tmp_path / "best.keras")
  names = [type(c).__name__ for c in start.callbacks]
  checkpoints = [c for c in start.callbacks if isinstance(c, keras.callbacks.ModelCheckpoint)]
  assert [c.filepath for c in checkpoints] == [
    str(tmp_path / "checkpoints" / ".partial-epoch_{epoch:03d}.weights.h5"),
    str(tmp_path / ".partial-best.keras"),
  ]
  commit = names.index("CommitCheckpoints")
  assert commit > max(i for i, n in enumerate(names) if n == "ModelCheckpoint")
  assert start.callbacks[commit].templates == [epoch_file, best_file]


def test_every_embedding_loss_of_the_registry_is_refused_naming_the_retrieval_path(tmp_path):
  # The losses over embeddings [B, D], by the docs (docs/retrieval.md, losses/metric_learning.py):
  # every other registered loss takes class scores [B, C].
  embedding_losses = {"contrastive_loss", "triplet_loss"}
  missing = str(tmp_path / "missing")
  for name in losses_lib.names():
    config = tiny(dataset="goemotions", data_dir=missing, loss=name)
    if name in embedding_losses:
      with pytest.raises(errors.InvalidConfigError) as raised:
        experiment.train(config)
      assert str(raised.value) == (
        f"`loss` {name!r} takes embeddings, not class scores, so it cannot train a "
        "classification run; train it on a retrieval model "
        "(tfrank4class.retrieval.build_retrieval_model, see docs/retrieval.md)."
      )
    else:  # accepted: the run goes on to read the (missing) data
      with pytest.raises(data_lib.DataNotFoundError):
        experiment.train(config)


def test_a_new_embedding_loss_is_refused_without_being_listed():
  class MeanDistance(losses_lib.EmbeddingLoss):
    def anchor_values(self, distances, positives, negatives):
      return tf.reduce_mean(distances, axis=1)

  with pytest.raises(errors.InvalidConfigError, match="'mean_distance' takes embeddings"):
    experiment._check_loss_takes_scores("mean_distance", MeanDistance())


@pytest.mark.parametrize("in_model_dir", [True, pytest.param(False, marks=pytest.mark.slow)])
def test_early_stopping_ends_a_run_patience_epochs_after_its_best(in_model_dir, tmp_path):
  # A learning rate of 1e-12 leaves the float32 weights as they are: the validation NDCG@5 never
  # improves on epoch 1's, so patience 1 stops the run after epoch 2 of 6.
  model_dir = str(tmp_path / "run") if in_model_dir else None
  config = tiny(epochs=6, steps=2, learning_rate=1e-12, early_stopping_patience=1)
  config.model_dir = model_dir
  result = experiment.train(config)
  assert result.history.epoch == [0, 1]
  if in_model_dir:
    assert (tmp_path / "run" / "best.keras").is_file()
    # the run ended: nothing to resume from
    assert TRAINING.resume_position(str(tmp_path / "run" / "backup"), 2) == (0, 0)


def test_unreadable_data_dir_gives_the_pipeline_error(tmp_path):
  missing = tmp_path / "nowhere"
  with pytest.raises(data_lib.DataNotFoundError, match=str(missing)):
    experiment.train(tiny(dataset="goemotions", data_dir=str(missing)))


def _small_goemotions(tmp_path, bad_line):
  """A copy of the first rows of the embedded sample, with ``bad_line`` as line 3 of train.tsv."""
  sample = goemotions.sample_dir()
  (tmp_path / "emotions.txt").write_bytes((sample / "emotions.txt").read_bytes())
  for name in ("train.tsv", "dev.tsv", "test.tsv"):
    lines = (sample / name).read_bytes().split(b"\n")[:120]
    if name == "train.tsv":
      lines.insert(2, bad_line)
    (tmp_path / name).write_bytes(b"\n".join(lines) + b"\n")
  return tmp_path


def test_on_corrupt_reaches_every_read_of_a_run(tmp_path, capsys):
  data_dir = str(_small_goemotions(tmp_path, b"caf\xe9\t1\tid_bad"))
  with pytest.raises(
    data_lib.MalformedRowError, match=r"train.tsv, line 3: not valid UTF-8 \(byte 0xe9 at byte 4"
  ):
    experiment.train(tiny(dataset="goemotions", data_dir=data_dir))
  result = experiment.train(
    tiny(dataset="goemotions", data_dir=data_dir, on_corrupt="skip", steps=1)
  )
  assert np.isfinite(result.history.history["loss"]).all()
  rows = experiment.evaluate_splits(
    result.model, tiny(dataset="goemotions", data_dir=data_dir, on_corrupt="skip"), result.info
  )
  assert [split for split, _ in rows] == ["validation", "test"]
  out, err = capsys.readouterr()
  assert (
    "The best checkpoint is chosen on the validation split of goemotions: the release's dev "
    "split (dev.tsv)."
  ) in out
  # Counting batches, adapting the vocabulary and the input stream read train.tsv: one report.
  assert err.count("Skipped 1 malformed line(s) of") == 1
  assert f"of {tmp_path / 'train.tsv'} (kept 120 rows): line 3: not valid UTF-8" in err


# Slow (about 30 s): training under MirroredStrategy stays in the default suite through the
# `fit` tests of the heads, encoders and loss families that take the `mirrored_strategy` fixture.
@pytest.mark.slow
def test_mirrored_matches_default_strategy_for_the_same_global_batch():
  losses = {}
  for name, devices in (("default", None), ("mirrored", ("/cpu:0", "/cpu:1"))):
    result = experiment.train(tiny(strategy=name, devices=devices, epochs=2, steps=3))
    losses[name] = result.history.history["loss"] + result.history.history["val_loss"]
    assert result.strategy.num_replicas_in_sync == (1 if name == "default" else 2)
  np.testing.assert_allclose(losses["mirrored"], losses["default"], rtol=2e-4)
  # Op determinism is on during a run only (Keras 3 compiles nothing with XLA while it is on).
  assert not tf_config.is_op_determinism_enabled()


def test_a_run_warns_nothing_about_shuffle():
  # Keras 3 warns "`shuffle=True` was passed, but will be ignored" when fit gets a dataset and
  # its default shuffle; the input pipeline does the shuffling.
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    experiment.train(tiny(steps=1))
  assert not [w for w in caught if "shuffle" in str(w.message)], [str(w.message) for w in caught]
