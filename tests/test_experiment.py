"""The training library: validation before data, strategies, resume after SIGKILL, multi-worker."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.framework import config as tf_config  # no public query of the setting

from tfrank4class import data as data_lib
from tfrank4class.data import goemotions
from tfrank4class.train import experiment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY_TEXT = {
  "max_tokens": 2000,
  "sequence_length": 16,
  "embedding_dim": 16,
  "num_heads": 1,
  "ff_dim": 16,
}


def tiny(**kwargs):
  defaults = dict(
    encoder_kwargs=TINY_TEXT, hidden_units=(16,), batch_size=32, epochs=1, steps=4, verbose=0
  )
  return experiment.ExperimentConfig(**{**defaults, **kwargs})


@pytest.mark.parametrize(
  "field, value, allowed",
  [
    ("dataset", "mnist", r"\['cifar10', 'cifar100', 'goemotions'"),
    ("encoder", "bert", r"\['auto', 'resnet50', 'saved_model', 'small_cnn'"),
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


def test_dot_interaction_refuses_hidden_units_it_would_ignore():
  assert experiment.ExperimentConfig().hidden_units == (128, 128)
  assert experiment.ExperimentConfig(interaction="concat").hidden_units == (128, 128)
  assert experiment.ExperimentConfig(interaction="dot").validate().hidden_units == ()
  with pytest.raises(
    ValueError, match=r"`hidden_units` \(16,\) is not used by `interaction` 'dot'"
  ):
    tiny(interaction="dot").validate()


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
    result.model, tiny(dataset="goemotions", data_dir=data_dir, on_corrupt="skip")
  )
  assert [split for split, _ in rows] == ["validation", "test"]
  err = capsys.readouterr().err
  # Counting batches, adapting the vocabulary and the input stream read train.tsv: one report.
  assert err.count("Skipped 1 malformed line(s) of") == 1
  assert f"of {tmp_path / 'train.tsv'} (kept 120 rows): line 3: not valid UTF-8" in err


def test_mirrored_matches_default_strategy_for_the_same_global_batch():
  losses = {}
  for name, devices in (("default", None), ("mirrored", ("/cpu:0", "/cpu:1"))):
    result = experiment.train(tiny(strategy=name, devices=devices, epochs=2, steps=3))
    losses[name] = result.history.history["loss"] + result.history.history["val_loss"]
    assert result.strategy.num_replicas_in_sync == (1 if name == "default" else 2)
  np.testing.assert_allclose(losses["mirrored"], losses["default"], rtol=2e-4)
  # Op determinism is on during a run only (Keras 3 compiles nothing with XLA while it is on).
  assert not tf_config.is_op_determinism_enabled()


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
  assert experiment.lock_model_dir(str(run)) == str(lock)
  err = capsys.readouterr().err
  assert f"Taking over the lock {lock} of a run that no longer runs (pid {dead} on " in err
  holder = json.loads(lock.read_text())
  assert holder["pid"] == os.getpid() and holder["host"] == socket.gethostname()
  assert holder["started"] and holder["command"]
  assert experiment.lock_model_dir(str(run)) == str(lock)  # the holder may take it again
  # A lock of another host cannot be checked from here; an unreadable one names no run.
  other = tmp_path / "other"
  other.mkdir()
  (other / "train.lock").write_text(
    json.dumps({"pid": dead, "host": "elsewhere", "started": "then", "command": "c"})
  )
  with pytest.raises(
    experiment.ModelDirInUseError,
    match=rf"`model_dir` '{other}' is in use by another training run: pid "
    rf"{dead} on host elsewhere, started then \(c\).*delete {other}",
  ):
    experiment.lock_model_dir(str(other))
  (other / "train.lock").write_text("")
  with pytest.raises(experiment.ModelDirInUseError, match="which does not name its run"):
    experiment.lock_model_dir(str(other))


def test_second_run_on_a_model_dir_refuses_at_once_naming_the_holder(tmp_path):
  run = tmp_path / "run"
  run.mkdir()
  experiment.lock_model_dir(str(run))  # this test process is the run holding it
  result = subprocess.run(
    _train_cmd(run, "--dataset=goemotions", f"--data_dir={tmp_path / 'missing'}"),
    env=_env(),
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
  assert experiment.config_differences(old, new) == {
    "interaction": ("latent_cross", "concat"),
    "loss": ("softmax_loss", "approx_ndcg_loss"),
  }
  with pytest.raises(
    experiment.ConfigMismatchError,
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


def test_best_so_far_reads_the_epochs_before_the_resumed_one(tmp_path):
  path = tmp_path / "epoch_metrics.json"
  assert experiment.best_so_far(str(path), 3) is None  # nothing recorded: no threshold
  path.write_text(json.dumps({"saves": [], "best": {"0": 0.25, "1": 0.5, "2": 0.75}}))
  assert experiment.best_so_far(str(path), 0) is None
  assert experiment.best_so_far(str(path), 2) == 0.5  # epoch 2 is trained again
  assert experiment.best_so_far(str(path), 3) == 0.75


def _epoch_scalars(model_dir):
  """``{(tag, epoch): value}`` of the epoch scalars TensorBoard holds for training."""
  values = {}
  for path in sorted((model_dir / "logs" / "train").glob("events.out.tfevents.*")):
    for record in tf.data.TFRecordDataset(str(path)):
      event = tf.compat.v1.Event.FromString(record.numpy())
      for value in event.summary.value:
        if value.tag.startswith("epoch_"):
          values[(value.tag, event.step)] = float(tf.make_ndarray(value.tensor))
  return values


def _train_cmd(model_dir, *extra):
  return [
    sys.executable,
    "-m",
    "tfrank4class.train",
    f"--model_dir={model_dir}",
    f"--encoder_kwargs={json.dumps(TINY_TEXT)}",
    "--hidden_units=16",
    "--batch_size=32",
    "--keras_verbose=0",
    *extra,
  ]


def _env(**extra):
  return {
    **os.environ,
    "TF_CPP_MIN_LOG_LEVEL": "3",
    "NO_GCE_CHECK": "true",
    "PYTHONPATH": ROOT,
    **extra,
  }


def test_sigkilled_run_resumes_and_matches_an_uninterrupted_one(tmp_path):
  args = ("--epochs=2", "--steps=12", "--backup_every=4")
  whole, killed = tmp_path / "whole", tmp_path / "killed"
  first = subprocess.Popen(
    _train_cmd(killed, *args), env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
  )
  deadline = time.time() + 300
  while (
    experiment.resume_position(str(killed / "backup"), 12) == (0, 0)
    and first.poll() is None
    and time.time() < deadline
  ):
    time.sleep(0.05)
  assert first.poll() is None, first.stderr.read().decode()[-3000:]
  first.send_signal(signal.SIGKILL)
  first.wait()
  first.stderr.close()
  assert not (killed / "results.json").exists()  # it died before finishing
  epoch, step = experiment.resume_position(str(killed / "backup"), 12)
  assert (epoch, step) != (0, 0)
  again = subprocess.run(
    _train_cmd(killed, *args), env=_env(), check=True, capture_output=True, text=True
  )
  subprocess.run(_train_cmd(whole, *args), env=_env(), check=True, capture_output=True)
  # It says that it resumed, and where; it took over the killed run's lock and released its own.
  assert (
    f"Resuming the run in {killed} from its backup: at epoch {epoch + 1} of 2, step "
    f"{step + 1} of 12 ({epoch * 12 + step} steps trained before the restart)."
  ) in again.stdout
  assert f"of a run that no longer runs (pid {first.pid} on" in again.stderr
  assert not (killed / "train.lock").exists() and not (whole / "train.lock").exists()
  resumed = json.loads((killed / "results.json").read_text())
  uninterrupted = json.loads((whole / "results.json").read_text())
  for split in uninterrupted:
    for metric, value in uninterrupted[split].items():
      assert resumed[split][metric] == pytest.approx(value, abs=1e-6), (split, metric)
  # The interrupted epoch's training metrics (TensorBoard, hence the logs and History) cover the
  # whole epoch: the same as the uninterrupted run's, not only the steps after the restart.
  expected = _epoch_scalars(whole)
  assert {tag for tag, _ in expected} >= {
    "epoch_loss",
    "epoch_top_1_accuracy",
    "epoch_ndcg_5",
    "epoch_mrr",
  }
  assert {e for _, e in expected} == {0, 1}
  assert _epoch_scalars(killed) == pytest.approx(expected, rel=1e-5)
  # The evaluate binary reads the same run back and prints the same test figures.
  out = subprocess.run(
    [sys.executable, "-m", "tfrank4class.train.evaluate", f"--model_dir={whole}"],
    env=_env(),
    check=True,
    capture_output=True,
    text=True,
  ).stdout
  test_row = [line for line in out.splitlines() if line.startswith("test")][0].split()
  assert [float(v) for v in test_row[1:]] == pytest.approx(
    [uninterrupted["test"][m] for m in ("top_1", "top_5", "ndcg_5", "mrr")], abs=1e-4
  )


def _free_ports(n):
  sockets = [socket.socket() for _ in range(n)]
  for s in sockets:
    s.bind(("127.0.0.1", 0))
  ports = [s.getsockname()[1] for s in sockets]
  for s in sockets:
    s.close()
  return ports


def test_multi_worker_mirrored_two_local_workers(tmp_path):
  workers = [f"127.0.0.1:{p}" for p in _free_ports(2)]
  model_dir, export_dir = tmp_path / "run", tmp_path / "export"
  procs = []
  for index in range(2):
    tf_config = json.dumps(
      {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
    )
    procs.append(
      subprocess.Popen(
        _train_cmd(
          model_dir,
          "--strategy=multi_worker_mirrored",
          "--epochs=1",
          "--steps=3",
          "--backup_every=2",
          f"--export_dir={export_dir}",
        ),
        env=_env(TF_CONFIG=tf_config),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
      )
    )
  outputs = [p.communicate(timeout=600)[0] for p in procs]
  assert [p.returncode for p in procs] == [0, 0], outputs[0][-3000:] + outputs[1][-3000:]
  assert (export_dir / "saved_model.pb").exists()
  assert sum("Exported the serving SavedModel" in out for out in outputs) == 1
  assert json.loads((model_dir / "results.json").read_text())["test"]["top_5"] > 0
  # No stray export from the second worker beside the chief's.
  assert sorted(p.name for p in tmp_path.iterdir()) == ["export", "run"]
