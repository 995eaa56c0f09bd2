"""A run's directory: one run per directory (its lock), and its stored configuration."""

import json
import os
import socket
import subprocess
import sys

import pytest
from _training import env, tiny, train_cmd

from tfrank4class import atomic, errors
from tfrank4class import data as data_lib
from tfrank4class.compat import keras
from tfrank4class.train import experiment, run_dir


def _dead_pid():
  process = subprocess.Popen([sys.executable, "-c", "pass"])
  process.wait()
  return process.pid


def test_lock_is_taken_once_and_a_stale_one_is_taken_over(tmp_path, capsys):
  run = tmp_path / "run"
  run.mkdir()
  lock = run / "train.lock"
  dead = _dead_pid()
  lock.write_text(
    json.dumps(
      {"pid": dead, "host": socket.gethostname(), "started": "earlier", "command": "killed run"}
    )
  )
  assert run_dir.lock_model_dir(str(run)) == str(lock)
  err = capsys.readouterr().err
  assert f"Taking over the lock {lock} of a run that no longer runs (pid {dead} on " in err
  holder = json.loads(lock.read_text())
  assert holder["pid"] == os.getpid() and holder["host"] == socket.gethostname()
  assert holder["started"] and holder["command"]
  assert run_dir.lock_model_dir(str(run)) == str(lock)  # the holder may take it again
  # A lock of another host cannot be checked from here; an unreadable one names no run.
  other = tmp_path / "other"
  other.mkdir()
  (other / "train.lock").write_text(
    json.dumps({"pid": dead, "host": "elsewhere", "started": "then", "command": "c"})
  )
  with pytest.raises(
    run_dir.ModelDirInUseError,
    match=rf"`model_dir` '{other}' is in use by another training run: pid "
    rf"{dead} on host elsewhere, started then \(c\).*delete {other}",
  ):
    run_dir.lock_model_dir(str(other))
  (other / "train.lock").write_text("")
  with pytest.raises(run_dir.ModelDirInUseError, match="which does not name its run"):
    run_dir.lock_model_dir(str(other))


def test_second_run_on_a_model_dir_refuses_at_once_naming_the_holder(tmp_path):
  run = tmp_path / "run"
  run.mkdir()
  run_dir.lock_model_dir(str(run))  # this test process is the run holding it
  result = subprocess.run(
    train_cmd(run, "--dataset=goemotions", f"--data_dir={tmp_path / 'missing'}"),
    env=env(),
    capture_output=True,
    text=True,
  )
  assert result.returncode != 0
  assert (
    f"`model_dir` '{run}' is in use by another training run: pid {os.getpid()} on host "
    f"{socket.gethostname()}"
  ) in result.stderr
  assert "No GoEmotions data found" not in result.stderr  # refused before reading any data
  assert json.loads((run / "train.lock").read_text())["pid"] == os.getpid()


def test_a_run_with_another_configuration_is_refused_unless_starting_over(tmp_path, capsys):
  run, missing = tmp_path / "run", str(tmp_path / "missing")
  old = tiny(dataset="goemotions", data_dir=missing, model_dir=str(run))
  run.mkdir()
  (run / "config.json").write_text(old.to_json())
  for name in ("backup", "checkpoints", "logs"):
    (run / name).mkdir()
  (run / "best.keras").write_text("old")
  new = tiny(
    dataset="goemotions",
    data_dir=missing,
    model_dir=str(run),
    loss="approx_ndcg_loss",
    interaction="concat",
    verbose=1,
    backup_every=7,
  )
  assert run_dir.config_differences(old, new) == {
    "interaction": ("latent_cross", "concat"),
    "loss": ("softmax_loss", "approx_ndcg_loss"),
  }
  with pytest.raises(
    run_dir.ConfigMismatchError,
    match=rf"`model_dir` '{run}' holds a run with another configuration \(its "
    r"config.json\): interaction: 'latent_cross' there, 'concat' now; "
    r"loss: 'softmax_loss' there, 'approx_ndcg_loss' now\..*start_over",
  ):
    experiment.train(new)
  assert json.loads((run / "config.json").read_text())["loss"] == "softmax_loss"  # untouched
  # The same configuration (but for how it runs) goes on to read the data.
  with pytest.raises(data_lib.DataNotFoundError):
    experiment.train(
      tiny(dataset="goemotions", data_dir=missing, model_dir=str(run), verbose=1, backup_every=7)
    )
  new.start_over = True
  with pytest.raises(data_lib.DataNotFoundError):
    experiment.train(new)
  assert f"Starting over in {run}: removed backup, checkpoints, logs, best.keras, config.json" in (
    capsys.readouterr().out
  )
  assert sorted(p.name for p in run.iterdir()) == ["train.lock"]


def test_a_run_is_complete_once_its_results_are_written(tmp_path):
  run, missing = tmp_path / "run", str(tmp_path / "missing")
  config = tiny(dataset="goemotions", data_dir=missing, model_dir=str(run))
  assert run_dir.finished_results(tiny()) is None  # no model_dir
  run.mkdir()
  run_dir.write_run_files(config, ["a", "b"])
  assert run_dir.finished_results(config) is None  # a run that has not finished
  rows = [("validation", {"top_1": 0.5, "map": 0.25}), ("test", {"top_1": 0.75, "map": 0.5})]
  run_dir.write_results(str(run), rows)
  assert json.loads((run / "results.json").read_text()) == dict(rows)
  assert not (run / "results.json.tmp").exists()
  assert list(run_dir.finished_results(config).items()) == rows
  # how it runs may change; what it trains may not
  assert run_dir.finished_results(tiny(**{**vars(config), "verbose": 1})) == dict(rows)
  with pytest.raises(run_dir.ConfigMismatchError, match=r"loss: 'softmax_loss' there"):
    run_dir.finished_results(tiny(**{**vars(config), "loss": "approx_ndcg_loss"}))
  assert run_dir.finished_results(tiny(**{**vars(config), "start_over": True})) is None
  # The library trains a finished run again (the binary stops before): no longer complete.
  with pytest.raises(data_lib.DataNotFoundError):
    experiment.train(config)
  assert run_dir.finished_results(config) is None


def test_load_checkpoint_names_the_missing_file(tmp_path):
  with pytest.raises(FileNotFoundError, match=rf"No model file at {tmp_path}/best.keras: pass"):
    run_dir.load_checkpoint(str(tmp_path))
  with pytest.raises(FileNotFoundError, match=r"No model file at nowhere.keras"):
    run_dir.load_checkpoint(checkpoint="nowhere.keras")


class Killed(BaseException):
  """Stands for the process being killed."""


def test_run_files_killed_while_written_leave_the_previous_ones(tmp_path, monkeypatch):
  old = tiny(model_dir=str(tmp_path))
  run_dir.write_run_files(old, ["a", "b"])

  def killed(partial, path):
    raise Killed()  # the new file is written whole beside the old one, then the process dies

  monkeypatch.setattr(atomic, "commit", killed)
  with pytest.raises(Killed):
    run_dir.write_run_files(tiny(model_dir=str(tmp_path), loss="approx_ndcg_loss"), ["c"])
  assert json.loads((tmp_path / "config.json").read_text())["loss"] == "softmax_loss"
  assert (tmp_path / "class_names.txt").read_text() == "a\nb\n"


def _model_file(path):
  inputs = keras.Input((3,))
  keras.Model(inputs, keras.layers.Dense(2)(inputs)).save(str(path))
  return path.read_bytes()


def test_a_damaged_model_file_is_named_with_what_to_do(tmp_path):
  best = tmp_path / "best.keras"
  whole = _model_file(best)
  assert run_dir.load_checkpoint(str(tmp_path)).output_shape == (None, 2)
  for content in (whole[: len(whole) // 2], b"", b"PK\x05\x06" + bytes(18)):  # empty zip last
    best.write_bytes(content)
    with pytest.raises(errors.DamagedFileError) as raised:
      run_dir.load_checkpoint(str(tmp_path))
    message = errors.user_error_message(raised.value)
    assert message.startswith(f"The model file {best} is damaged (")
    assert message.endswith(
      "Delete it and run tfrank4class-train on its `model_dir` again (a finished run trains "
      "again; --start_over deletes the whole run)."
    )
  with pytest.raises(errors.DamagedFileError, match=r"Pass a \.keras file saved by Keras"):
    run_dir.load_checkpoint(checkpoint=str(best))


def test_start_over_removes_partial_writes_of_a_killed_run(tmp_path, capsys):
  (tmp_path / "best.keras").write_text("old")
  (tmp_path / ".partial-best.keras").write_text("half")
  (tmp_path / "keep.txt").write_text("the user's")
  run_dir.prepare_model_dir(tiny(model_dir=str(tmp_path), start_over=True))
  assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]
  assert "removed best.keras, .partial-best.keras of the previous run" in capsys.readouterr().out
