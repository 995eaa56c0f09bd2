"""The absl binaries: flags, bad values refused before any data is read, and the demo."""

import json
import os
import subprocess
import sys

import pytest
from _training import env as train_env
from _training import train_cmd

from tfrank4class.train import demo

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "NO_GCE_CHECK": "true", "PYTHONPATH": ROOT}


def _run(*args, module="tfrank4class.train"):
  return subprocess.run(
    [sys.executable, "-m", module, *args], env=ENV, capture_output=True, text=True
  )


def test_helpfull_documents_every_flag():
  out = _run("--helpfull").stdout
  for flag in (
    "dataset",
    "data_dir",
    "encoder",
    "interaction",
    "loss",
    "loss_kwargs",
    "metrics",
    "batch_size",
    "epochs",
    "steps",
    "optimizer",
    "learning_rate",
    "strategy",
    "tpu",
    "model_dir",
    "export_dir",
    "seed",
    "on_corrupt",
    "start_over",
  ):
    assert f"--{flag}:" in out or f"--[no]{flag}:" in out, flag


@pytest.mark.parametrize(
  "flag, value, allowed",
  [
    ("loss", "softmax", "softmax_loss"),
    # One process each (about 5 s) for the same check, an unknown value refused before any data
    # is read with the allowed ones listed, which the first case keeps in the default suite;
    # tests/test_experiment.py checks the config fields' messages in-process.
    pytest.param(
      "strategy", "gpu", "default|mirrored|multi_worker_mirrored|tpu", marks=pytest.mark.slow
    ),
    pytest.param("optimizer", "sgd", "adagrad|adam", marks=pytest.mark.slow),
    pytest.param("dataset", "mnist", "cifar10", marks=pytest.mark.slow),
    pytest.param("on_corrupt", "drop", "error|skip", marks=pytest.mark.slow),
  ],
)
def test_unknown_flag_values_list_the_allowed_ones(flag, value, allowed, tmp_path):
  result = _run(f"--{flag}={value}", f"--data_dir={tmp_path / 'missing'}")
  assert result.returncode != 0
  assert f"--{flag}" in result.stderr and allowed in result.stderr
  assert "No GoEmotions data found" not in result.stderr  # refused before any data is read


def test_bad_json_and_config_values(tmp_path):
  result = _run("--loss_kwargs=[1]", f"--data_dir={tmp_path}")
  assert result.returncode != 0 and "--loss_kwargs must be a JSON object" in result.stderr
  result = _run("--metrics=top_1", "--best_metric=mrr")
  assert result.returncode != 0 and "`best_metric` 'mrr' must be one of `metrics`" in result.stderr
  result = _run("--strategy=tpu")
  assert result.returncode != 0 and "`tpu` must name a TPU" in result.stderr


def test_dot_interaction_refuses_an_explicit_hidden_units_flag(tmp_path):
  missing = f"--data_dir={tmp_path / 'missing'}"
  result = _run("--dataset=goemotions", "--interaction=dot", "--hidden_units=16", missing)
  assert result.returncode == 2 and "No GoEmotions data found" not in result.stderr
  assert "`hidden_units` (16,) is not used by `interaction` 'dot'" in result.stderr
  # Without the flag there is no conflict: the run goes on to read the data.
  result = _run("--dataset=goemotions", "--interaction=dot", missing)
  assert result.returncode == 1 and "No GoEmotions data found" in result.stderr


def test_malformed_line_stops_the_run_or_is_skipped_with_on_corrupt(tmp_path):
  (tmp_path / "emotions.txt").write_text("\n".join(f"e{i}" for i in range(28)) + "\n")
  (tmp_path / "train.tsv").write_bytes(b"one\t1\tid1\n\xff\t2\tid2\nthree\t3\tid3\n")
  args = ("--dataset=goemotions", f"--data_dir={tmp_path}", "--batch_size=64")
  result = _run(*args)
  assert result.returncode != 0
  assert (
    f"tfrank4class-train: error: {tmp_path / 'train.tsv'}, line 2: not valid UTF-8"
  ) in result.stderr
  # Skipped, the line is reported; the run then stops on the two rows left (< one batch).
  result = _run(*args, "--on_corrupt=skip")
  assert result.returncode != 0
  assert (
    f"Skipped 1 malformed line(s) of {tmp_path / 'train.tsv'} (kept 2 rows): line 2: not "
    "valid UTF-8"
  ) in result.stderr
  assert "has fewer examples than one batch (64)" in result.stderr


def test_evaluate_needs_exactly_one_model_source():
  result = _run("--dataset=goemotions_sample", module="tfrank4class.train.evaluate")
  assert result.returncode != 0
  assert "Give exactly one of --model_dir, --checkpoint, --saved_model" in result.stderr


def test_demo_hint_names_the_saved_model_cli_of_the_running_environment():
  # `make demo` runs .venv/bin/python, whose bin/ is not on PATH: a bare `saved_model_cli` in the
  # demo's closing hint is "command not found" there.
  cli = demo.beside_interpreter("saved_model_cli")
  assert os.path.isfile(cli) and os.access(cli, os.X_OK), cli
  assert os.path.samefile(os.path.dirname(cli), os.path.dirname(sys.executable))


@pytest.mark.slow
def test_demo_runs_end_to_end(tmp_path):
  result = subprocess.run(
    [
      sys.executable,
      "-m",
      "tfrank4class.train.demo",
      "--workdir",
      str(tmp_path / "demo"),
      "--epochs",
      "1",
    ],
    env=ENV,
    capture_output=True,
    text=True,
    check=True,
  )
  out = result.stdout
  for loss in ("softmax_loss", "pairwise_logistic_loss", "approx_ndcg_loss"):
    assert any(line.startswith(loss) for line in out.splitlines())
  assert "true emotion:" in out and "(tfrank4class imported by the server: False)" in out
  assert f"Inspect it with: {demo.beside_interpreter('saved_model_cli')} show --dir" in out


@pytest.mark.parametrize(
  "loss, kwargs",
  [
    ("topk_cross_entropy_loss", {"p_k": [0.5, 0, 0, 0, 0.5], "m": 8}),
    # The other two train in-process in their own tests; from the command line they are slow.
    pytest.param("smooth_topk_svm_loss", {"k": 5}, marks=pytest.mark.slow),
    pytest.param("soft_rank_topk_loss", {"k": 5}, marks=pytest.mark.slow),
  ],
)
def test_top_k_losses_train_from_the_command_line(loss, kwargs, tmp_path):
  result = subprocess.run(
    train_cmd(
      tmp_path / "run",
      f"--loss={loss}",
      f"--loss_kwargs={json.dumps(kwargs)}",
      "--epochs=1",
      "--steps=2",
      f"--export_dir={tmp_path / 'export'}",
    ),
    env=train_env(),
    capture_output=True,
    text=True,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  results = json.loads((tmp_path / "run" / "results.json").read_text())
  assert results  # evaluated on validation and test
  assert (tmp_path / "export" / "saved_model.pb").is_file()  # the loss is not in the export


def _files(root):
  """``{path: (mtime_ns, bytes)}`` of every file under ``root``."""
  return {
    path: (path.stat().st_mtime_ns, path.read_bytes()) for path in root.rglob("*") if path.is_file()
  }


def _table(stdout):
  """The result table printed last: its header's columns and its rows."""
  lines = stdout.splitlines()
  start = max(i for i, line in enumerate(lines) if line.startswith("run "))
  return [line.split() for line in lines[start:] if line and not line.startswith("-")][:3]


def test_metrics_are_reported_and_a_finished_run_run_again_is_complete(tmp_path):
  args = (
    "--epochs=1",
    "--steps=2",
    "--metrics=top_1,map,recall_5",
    "--best_metric=map",
    f"--export_dir={tmp_path / 'export'}",
  )
  first = subprocess.run(
    train_cmd(tmp_path / "run", *args), env=train_env(), capture_output=True, text=True
  )
  assert first.returncode == 0, first.stderr[-3000:]
  results = json.loads((tmp_path / "run" / "results.json").read_text())
  assert {split: list(values) for split, values in results.items()} == {
    "validation": ["top_1", "map", "recall_5"],
    "test": ["top_1", "map", "recall_5"],
  }
  table = _table(first.stdout)
  assert table[0] == ["run", "top_1", "map", "recall_5"]
  assert table[2] == ["test"] + [f"{results['test'][m]:.4f}" for m in ("top_1", "map", "recall_5")]
  before = _files(tmp_path)
  again = subprocess.run(
    train_cmd(tmp_path / "run", *args), env=train_env(), capture_output=True, text=True
  )
  assert again.returncode == 0, again.stderr[-3000:]
  assert f"{tmp_path / 'run'}: run already complete (its results.json)" in again.stdout
  assert _table(again.stdout) == table
  assert _files(tmp_path) == before  # nothing rewritten, no lock left


@pytest.mark.slow
def test_a_finished_run_trains_again_with_start_over(tmp_path):
  args = ("--epochs=1", "--steps=2")
  first = subprocess.run(
    train_cmd(tmp_path / "run", *args), env=train_env(), capture_output=True, text=True
  )
  assert first.returncode == 0, first.stderr[-3000:]
  best = tmp_path / "run" / "best.keras"
  written = best.stat().st_mtime_ns
  again = subprocess.run(
    train_cmd(tmp_path / "run", *args, "--start_over"),
    env=train_env(),
    capture_output=True,
    text=True,
  )
  assert again.returncode == 0, again.stderr[-3000:]
  assert "run already complete" not in again.stdout
  assert f"Starting over in {tmp_path / 'run'}: removed results.json, " in again.stdout
  assert best.stat().st_mtime_ns > written
  assert (tmp_path / "run" / "results.json").is_file()
