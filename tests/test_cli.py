"""The tfrank4class-* programs end a user error with one line on stderr, and no traceback.

Each test runs a real program as a subprocess, on mistakes that are found before any training.
"""

import json
import os
import subprocess
import sys

import pytest

from tfrank4class.compat import keras

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
  result = _run("evaluate", *args, "--split=test,dev")
  _assert_one_line_error(
    result, "evaluate", 1, "`split` must be one of ['test', 'train'], got 'dev'."
  )


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
