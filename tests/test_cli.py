"""The tfrank4class-* programs end a user error with one line on stderr, and no traceback.

Each test runs a real program as a subprocess, on mistakes that are found before any training.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from _training import TINY_TEXT

from tfrank4class.compat import keras
from tfrank4class.train import config as config_lib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "NO_GCE_CHECK": "true", "PYTHONPATH": ROOT}
PROGRAMS = {
  "train": "tfrank4class-train",
  "evaluate": "tfrank4class-evaluate",
  "export": "tfrank4class-export",
  "pretrain_sorter": "tfrank4class-pretrain-sorter",
}


def _run(module, *args):
  return subprocess.run(
    [sys.executable, "-m", f"tfrank4class.train.{module}", *args],
    env=ENV,
    capture_output=True,
    text=True,
  )


def _assert_one_line_error(result, module, status, message):
  """Exit ``status``; the last line of stderr is ``<program>: error: ...message...``; no
  traceback (TensorFlow's C++ start-up lines may come before it)."""
  assert result.returncode == status, result.stderr[-3000:]
  assert "Traceback" not in result.stderr, result.stderr[-3000:]
  last = result.stderr.rstrip("\n").splitlines()[-1]
  assert last.startswith(f"{PROGRAMS[module]}: error: "), last
  assert message in last, last


def _goemotions_dir(path, rows):
  """A GoEmotions TSV folder: 28 emotions, every split holding ``rows``."""
  path.mkdir()
  (path / "emotions.txt").write_text("\n".join(f"e{i}" for i in range(28)) + "\n")
  for split in ("train", "dev", "test"):
    (path / f"{split}.tsv").write_text(rows)
  return path


#: Flags of absl and TensorFlow that --helpfull lists and --help must not.
INTERNAL_FLAGS = ("--logtostderr", "--alsologtostderr", "--verbosity", "--test_tmpdir", "--pdb")


@pytest.mark.parametrize(
  "module",
  # One process each (about 6 s, more under load): two stay in the default run.
  [
    "train",
    "export",
    pytest.param("evaluate", marks=pytest.mark.slow),
    pytest.param("pretrain_sorter", marks=pytest.mark.slow),
  ],
)
def test_help_lists_the_programs_own_flags_grouped_and_exits_0(module):
  # The entry point of setup.cfg (`run`), after printing the flags absl holds for the module.
  script = (
    "import json, sys; from absl import flags; "
    f"import tfrank4class.train.{module} as m; "
    "print(json.dumps([f.name for f in flags.FLAGS.get_flags_for_module(m.__name__)])); "
    f"sys.argv = ['{PROGRAMS[module]}', '{'-h' if module == 'export' else '--help'}']; m.run()"
  )
  result = subprocess.run([sys.executable, "-c", script], env=ENV, capture_output=True, text=True)
  assert result.returncode == 0, result.stderr[-3000:]
  first, *lines = result.stdout.splitlines()
  own = json.loads(first)
  assert len(own) >= 5
  listed = [line.split(":")[0].strip() for line in lines if line.startswith("  --")]
  assert sorted(flag.replace("[no]", "") for flag in listed) == sorted(f"--{f}" for f in own)
  assert lines[2] == f"usage: {PROGRAMS[module]} [--flag=value ...]"
  titles = [line for line in lines if line.endswith(":") and not line.startswith(" ")]
  assert len(titles) >= 2  # grouped
  assert not any(flag in result.stdout for flag in INTERNAL_FLAGS)


def test_missing_data_dir(tmp_path):
  missing = tmp_path / "missing"
  result = _run("train", "--dataset=goemotions", f"--data_dir={missing}")
  _assert_one_line_error(result, "train", 1, f"No GoEmotions data found at '{missing}'.")


def test_label_id_out_of_range_names_the_file_and_line(tmp_path):
  data = _goemotions_dir(tmp_path / "ge", "one\t1\tid1\ntwo\t30\tid2\n")
  result = _run("train", "--dataset=goemotions", f"--data_dir={data}")
  _assert_one_line_error(
    result, "train", 1, f"{data / 'train.tsv'}, line 2: label ids must be in [0, 28), got [30]."
  )


@pytest.mark.parametrize(
  "module, args, message",
  [
    ("train", ["--batch_size=0"], "flag --batch_size=0: 0 is not a positive integer"),
    ("train", ["--loss=no_such_loss"], "flag --loss=no_such_loss: value should be one of <"),
    ("evaluate", ["--model_dir=x", "--metrics=top_1,no_such"], "Unknown metric name 'no_such'"),
    ("export", ["--model_dir=x"], "Flag --export_dir must have a value"),
    ("pretrain_sorter", ["--output=x", "--min_list_size=1"], "`min_list_size` must be an"),
    # TensorFlow aborted the process (SIGABRT) on a negative thread count.
    ("pretrain_sorter", ["--output=x", "--threads=-1"], "flag --threads=-1: -1 is not"),
  ],
)
def test_flag_errors_exit_2(module, args, message):
  _assert_one_line_error(_run(module, *args), module, 2, message)


def test_unknown_loss_argument_is_refused_before_reading_data(tmp_path):
  missing = tmp_path / "missing"
  result = _run("train", '--loss_kwargs={"no_such": 1}', f"--data_dir={missing}")
  _assert_one_line_error(
    result, "train", 1, "`loss_kwargs` of 'softmax_loss': Invalid keyword arguments ['no_such']"
  )


@pytest.mark.parametrize(
  "args,message",
  [
    (
      ("--loss=smooth_topk_svm_loss", '--loss_kwargs={"k": 40}'),
      "`loss_kwargs` of 'smooth_topk_svm_loss' on 'goemotions' (28 classes): `k` must be smaller "
      "than the number of classes, got k=40 for 28 classes",
    ),
    (
      ("--metrics=top_1,top_40", "--best_metric=top_1"),
      "'goemotions' has 28 classes: `metrics` names 'top_40', Top-40 accuracy of lists of 28 "
      "classes (1 for every list); name a top_K with K at most 28.",
    ),
  ],
)
def test_a_top_k_beyond_the_classes_is_refused_before_reading_examples(tmp_path, args, message):
  # 28 emotions; the rows are malformed, so reading one would end in another error.
  data = _goemotions_dir(tmp_path / "goemotions", "not a row\n")
  result = _run("train", "--dataset=goemotions", f"--data_dir={data}", *args)
  _assert_one_line_error(result, "train", 1, message)


def test_train_refuses_an_existing_export_before_reading_data(tmp_path):
  export = tmp_path / "export"
  export.mkdir()
  (export / "saved_model.pb").write_bytes(b"")
  missing = tmp_path / "missing"
  args = ("--dataset=goemotions", f"--data_dir={missing}", f"--export_dir={export}")
  _assert_one_line_error(
    _run("train", *args),
    "train",
    1,
    f"`export_dir` '{export}' already holds an export; pass --start_over to replace it.",
  )
  # --start_over allows it: the run goes on to read the data
  _assert_one_line_error(
    _run("train", *args, "--start_over"), "train", 1, "No GoEmotions data found"
  )


def test_missing_run_of_evaluate_and_export(tmp_path):
  run = tmp_path / "run"
  message = f"No training run in `model_dir` '{run}': {run / 'config.json'} is missing."
  _assert_one_line_error(_run("evaluate", f"--model_dir={run}"), "evaluate", 1, message)
  result = _run("export", f"--model_dir={run}", f"--export_dir={tmp_path / 'export'}")
  _assert_one_line_error(result, "export", 1, message)


def test_evaluate_on_corrupt_stops_or_skips(tmp_path):
  data = _goemotions_dir(tmp_path / "ge", "one\t1\tid1\ntwo\t30\tid2\n")
  # A tiny scores model on raw strings: the class scores of a word are its embedding.
  text = keras.Input(shape=(), dtype="string")
  ids = keras.layers.StringLookup(vocabulary=["one", "two"])(text)
  scores = keras.layers.Embedding(3, 28)(ids)
  checkpoint = str(tmp_path / "model.keras")
  keras.Model(text, scores).save(checkpoint)
  args = (f"--checkpoint={checkpoint}", "--dataset=goemotions", f"--data_dir={data}")
  result = _run("evaluate", *args)
  _assert_one_line_error(
    result, "evaluate", 1, f"{data / 'test.tsv'}, line 2: label ids must be in [0, 28), got [30]."
  )
  result = _run("evaluate", *args, "--on_corrupt=skip", "--metrics=top_28")
  assert result.returncode == 0, result.stderr[-3000:]
  assert (
    f"Skipped 1 malformed line(s) of {data / 'test.tsv'} (kept 1 rows): line 2: label ids"
  ) in result.stderr
  # One row left, and every class is in its top 28.
  assert result.stdout.splitlines()[-1].split() == ["test", "1.0000"]


def _cifar_checkpoint_and_folder(tmp_path):
  """A tiny CIFAR-10 scores model and an image folder whose one test image is not an image."""
  images = keras.Input(shape=(32, 32, 3))
  pooled = keras.layers.GlobalAveragePooling2D()(images)
  checkpoint = str(tmp_path / "model.keras")
  keras.Model(images, keras.layers.Dense(10)(pooled)).save(checkpoint)
  bad = tmp_path / "cifar" / "test" / "cat" / "bad.jpg"
  bad.parent.mkdir(parents=True)
  bad.write_bytes(b"not a JPEG")
  return (f"--checkpoint={checkpoint}", "--dataset=cifar10", f"--data_dir={bad.parents[2]}"), bad


def test_evaluate_split_the_dataset_does_not_have(tmp_path):
  args, _ = _cifar_checkpoint_and_folder(tmp_path)
  # every split is checked before any is evaluated: the test split's undecodable image (the
  # error the test split would raise) is never read
  result = _run("evaluate", *args, "--split=test,holdout")
  _assert_one_line_error(
    result,
    "evaluate",
    1,
    "`split` must be one of ['dev', 'test', 'train', 'val', 'valid', 'validation'], got 'holdout'.",
  )


def test_evaluate_validation_and_test_of_cifar_says_what_validation_is(tmp_path):
  # The README's `--split=validation,test` on a CIFAR folder with train/ and test/ only: the
  # validation split is the hold-out of train/, and the program says so.
  args, bad = _cifar_checkpoint_and_folder(tmp_path)
  bad.unlink()
  png = tf.io.encode_png(np.zeros((32, 32, 3), np.uint8)).numpy()
  for split, count in (("train", 40), ("test", 2)):
    for c in ("cat", "dog"):
      for i in range(count):
        (tmp_path / "cifar" / split / c).mkdir(parents=True, exist_ok=True)
        (tmp_path / "cifar" / split / c / f"{i}.png").write_bytes(png)
  result = _run("evaluate", *args, "--split=validation,test", "--metrics=top_1")
  assert result.returncode == 0, result.stderr[-3000:]
  assert "The validation split of cifar10: a fixed hold-out of 10% of the training" in result.stdout
  assert [line.split()[0] for line in result.stdout.splitlines()[-2:]] == ["validation", "test"]


def test_evaluate_undecodable_image_names_the_file(tmp_path):
  args, bad = _cifar_checkpoint_and_folder(tmp_path)
  result = _run("evaluate", *args)
  _assert_one_line_error(
    result,
    "evaluate",
    1,
    f"Could not decode image file {bad} (on_corrupt=skip drops undecodable images instead of "
    "stopping)",
  )


def test_train_on_an_image_folder_of_one_class(tmp_path):
  image = tmp_path / "cifar" / "train" / "cat" / "a.jpg"
  image.parent.mkdir(parents=True)
  image.write_bytes(b"never read")
  result = _run("train", "--dataset=cifar10", f"--data_dir={image.parents[2]}")
  _assert_one_line_error(
    result, "train", 1, "has 1 class(es) ['cat']; classification as ranking needs at least 2"
  )


def _run_dir(path, **fields):
  """A run directory holding the config.json of ``tfrank4class-train`` with the tiny flags of
  ``_training.train_cmd`` (so that such a command resumes it)."""
  path.mkdir()
  config = config_lib.ExperimentConfig(
    encoder_kwargs=TINY_TEXT, hidden_units=(16,), batch_size=32, model_dir=str(path), **fields
  )
  (path / "config.json").write_text(config.to_json())
  return path


def _train_in(run, *args):
  return _run(
    "train",
    f"--model_dir={run}",
    f"--encoder_kwargs={json.dumps(TINY_TEXT)}",
    "--hidden_units=16",
    "--batch_size=32",
    *args,
  )


def test_a_damaged_model_file_ends_evaluate_in_one_line(tmp_path):
  run = _run_dir(tmp_path / "run")
  (run / "best.keras").write_bytes(b"PK\x03\x04 cut short by a kill")
  _assert_one_line_error(
    _run("evaluate", f"--model_dir={run}"),
    "evaluate",
    1,
    f"The model file {run / 'best.keras'} is damaged (ValueError: not a whole .keras zip "
    "archive). Delete it and run tfrank4class-train on its `model_dir` again",
  )


def test_a_damaged_metrics_backup_ends_train_in_one_line(tmp_path):
  run = _run_dir(tmp_path / "run")
  (run / "backup").mkdir()
  (run / "backup" / "epoch_metrics.json").write_text('{"saves": [], "be')
  _assert_one_line_error(
    _train_in(run),
    "train",
    1,
    f"The metrics backup {run / 'backup' / 'epoch_metrics.json'} is damaged (JSONDecodeError: "
    "Unterminated string starting at: line 1 column 15 (char 14)). Delete it: the run then "
    "resumes",
  )


# One process each (about 5 s) for errors that the in-process tests check in full:
# test_config.py (a damaged config.json), test_serving.py (a foreign SavedModel) and
# test_experiment.py (an unusable model_dir); the other cases here keep the one-line path of each
# program in the default suite.
@pytest.mark.slow
def test_damaged_or_foreign_files_end_in_one_line(tmp_path):
  run = tmp_path / "run"
  run.mkdir()
  (run / "config.json").write_text('{"dataset": "goemo')
  message = f"The run configuration {run / 'config.json'} is damaged (JSONDecodeError"
  _assert_one_line_error(_run("evaluate", f"--model_dir={run}"), "evaluate", 1, message)
  _assert_one_line_error(_train_in(run), "train", 1, message)
  module = tf.Module()
  module.f = tf.function(lambda x: x, input_signature=[tf.TensorSpec([None], tf.float32)])
  tf.saved_model.save(module, str(tmp_path / "foreign"))
  result = _run("evaluate", f"--saved_model={tmp_path / 'foreign'}", "--dataset=goemotions_sample")
  _assert_one_line_error(
    result, "evaluate", 1, "has no 'scores' signature (it has ['serving_default'])"
  )
  file = tmp_path / "a_file"
  file.write_text("")
  _assert_one_line_error(
    _train_in(file / "run"),
    "train",
    1,
    f"`model_dir` '{file / 'run'}' cannot be created: '{file}' is a file, not a folder.",
  )


def test_programs_check_their_arguments_before_reading_data(tmp_path):
  missing = f"--data_dir={tmp_path / 'missing'}"
  result = _run("train", "--dataset=goemotions", missing, '--encoder_kwargs={"num_heads": 0}')
  _assert_one_line_error(
    result, "train", 1, "`encoder_kwargs` of 'transformer': `num_heads` must be an integer >= 1"
  )
  result = _run("evaluate", f"--saved_model={tmp_path / 'none'}", "--dataset=goemotions", missing)
  _assert_one_line_error(
    result, "evaluate", 1, f"No SavedModel at `saved_model` '{tmp_path / 'none'}'"
  )
  run = _run_dir(tmp_path / "run")  # no best.keras: the export_dir is checked first
  (tmp_path / "a_file").write_text("")
  result = _run("export", f"--model_dir={run}", f"--export_dir={tmp_path / 'a_file'}")
  _assert_one_line_error(
    result, "export", 1, f"`export_dir` '{tmp_path / 'a_file'}' is a file, not a folder."
  )
