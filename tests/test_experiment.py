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

from tfrank4class import data as data_lib
from tfrank4class.train import experiment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY_TEXT = {"max_tokens": 2000, "sequence_length": 16, "embedding_dim": 16, "num_heads": 1,
             "ff_dim": 16}


def tiny(**kwargs):
  defaults = dict(encoder_kwargs=TINY_TEXT, hidden_units=(16,), batch_size=32, epochs=1, steps=4,
                  verbose=0)
  return experiment.ExperimentConfig(**{**defaults, **kwargs})


@pytest.mark.parametrize("field, value, allowed", [
    ("dataset", "mnist", r"\['cifar10', 'cifar100', 'goemotions'"),
    ("encoder", "bert", r"\['auto', 'resnet50', 'saved_model', 'small_cnn'"),
    ("interaction", "mlp", r"\['concat', 'dot', 'latent_cross'\]"),
    ("loss", "softmax", r"\[.*'softmax_loss'"),
    ("optimizer", "sgd", r"\['adagrad', 'adam'\]"),
    ("strategy", "gpu", r"\['default', 'mirrored', 'multi_worker_mirrored', 'tpu'\]"),
])
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
  with pytest.raises(ValueError, match=r"`model_dir` is required when `strategy` is 'multi_worker_mirrored'"):
    tiny(strategy="multi_worker_mirrored").validate()



def test_bad_loss_arguments_fail_before_any_data_is_read(tmp_path):
  missing = str(tmp_path / "missing")
  with pytest.raises(ValueError, match=r"Invalid keyword arguments \['bad'\] for loss 'softmax_loss'"):
    experiment.train(tiny(dataset="goemotions", data_dir=missing, loss_kwargs={"bad": 1}))
  with pytest.raises(ValueError, match=r"lambda_"):
    experiment.train(tiny(dataset="goemotions", data_dir=missing, loss="recall_loss",
                          loss_kwargs={"lambda_": -1.0}))


def test_unreadable_data_dir_gives_the_pipeline_error(tmp_path):
  missing = tmp_path / "nowhere"
  with pytest.raises(data_lib.DataNotFoundError, match=str(missing)):
    experiment.train(tiny(dataset="goemotions", data_dir=str(missing)))


def test_mirrored_matches_default_strategy_for_the_same_global_batch():
  losses = {}
  for name, devices in (("default", None), ("mirrored", ("/cpu:0", "/cpu:1"))):
    result = experiment.train(tiny(strategy=name, devices=devices, epochs=2, steps=3))
    losses[name] = result.history.history["loss"] + result.history.history["val_loss"]
    assert result.strategy.num_replicas_in_sync == (1 if name == "default" else 2)
  np.testing.assert_allclose(losses["mirrored"], losses["default"], rtol=2e-4)


def _train_cmd(model_dir, *extra):
  return [sys.executable, "-m", "tfrank4class.train", f"--model_dir={model_dir}",
          f"--encoder_kwargs={json.dumps(TINY_TEXT)}", "--hidden_units=16", "--batch_size=32",
          "--keras_verbose=0", *extra]


def _env(**extra):
  return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "NO_GCE_CHECK": "true",
          "PYTHONPATH": ROOT, **extra}


def test_sigkilled_run_resumes_and_matches_an_uninterrupted_one(tmp_path):
  args = ("--epochs=2", "--steps=12", "--backup_every=4")
  whole, killed = tmp_path / "whole", tmp_path / "killed"
  first = subprocess.Popen(_train_cmd(killed, *args), env=_env(), stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE)
  backup = killed / "backup" / "chief" / "checkpoint"
  deadline = time.time() + 300
  while not backup.exists() and first.poll() is None and time.time() < deadline:
    time.sleep(0.05)
  assert first.poll() is None, first.stderr.read().decode()[-3000:]
  first.send_signal(signal.SIGKILL)
  first.wait()
  first.stderr.close()
  assert not (killed / "results.json").exists()  # it died before finishing
  epoch, step = experiment.resume_position(str(killed / "backup"), 12)
  assert (epoch, step) != (0, 0)
  subprocess.run(_train_cmd(killed, *args), env=_env(), check=True, capture_output=True)
  subprocess.run(_train_cmd(whole, *args), env=_env(), check=True, capture_output=True)
  resumed = json.loads((killed / "results.json").read_text())
  uninterrupted = json.loads((whole / "results.json").read_text())
  for split in uninterrupted:
    for metric, value in uninterrupted[split].items():
      assert resumed[split][metric] == pytest.approx(value, abs=1e-6), (split, metric)
  # The evaluate binary reads the same run back and prints the same test figures.
  out = subprocess.run([sys.executable, "-m", "tfrank4class.train.evaluate", f"--model_dir={whole}"],
                       env=_env(), check=True, capture_output=True, text=True).stdout
  test_row = [line for line in out.splitlines() if line.startswith("test")][0].split()
  assert [float(v) for v in test_row[1:]] == pytest.approx(
      [uninterrupted["test"][m] for m in ("top_1", "top_5", "ndcg_5", "mrr")], abs=1e-4)


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
    tf_config = json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})
    procs.append(subprocess.Popen(
        _train_cmd(model_dir, "--strategy=multi_worker_mirrored", "--epochs=1", "--steps=3",
                   f"--export_dir={export_dir}"),
        env=_env(TF_CONFIG=tf_config), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
  outputs = [p.communicate(timeout=600)[0] for p in procs]
  assert [p.returncode for p in procs] == [0, 0], outputs[0][-3000:] + outputs[1][-3000:]
  assert (export_dir / "saved_model.pb").exists()
  assert sum("Exported the serving SavedModel" in out for out in outputs) == 1
  assert json.loads((model_dir / "results.json").read_text())["test"]["top_5"] > 0
  # No stray export from the second worker beside the chief's.
  assert sorted(p.name for p in tmp_path.iterdir()) == ["export", "run"]
