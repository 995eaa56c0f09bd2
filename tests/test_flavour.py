"""The Keras flavour's training: chosen once, and a multi-worker run on two local workers."""

import json
import pathlib
import socket
import subprocess

import pytest
import tensorflow as tf
from _training import env, train_cmd

from tfrank4class import compat, errors
from tfrank4class.compat import keras
from tfrank4class.train import flavour


def test_the_flavour_is_the_one_of_the_keras_in_use(tmp_path):
  expected = flavour.Keras3Training if compat.KERAS_3 else flavour.Keras2Training
  assert type(flavour.TRAINING) is expected
  # No backup yet: training starts at the first step of the first epoch.
  assert flavour.TRAINING.resume_position(str(tmp_path / "backup"), 10) == (0, 0)


def test_the_keras_flavour_is_tested_in_one_place_for_training():
  """Training code reads the flavour from ``flavour.TRAINING``, never from ``compat.KERAS_3``.

  The other modules that test it are layers and losses below ``train/`` (they cannot import it),
  each for a difference of the Keras API itself, not of training:

  * ``heads/interactions.py``: an attribute alias that only Keras 2 ``.keras`` files need, part
    of that layer's saved format;
  * ``encoders/text_transformer.py`` (``build_attention``) and ``encoders/saved_model_text.py``
    (``track_variables``): the helpers that moved out of ``compat`` to their single users in the
    ``keras.ops`` port (Keras 3's ``build`` / weight lists against tf-keras' private ones);
  * ``losses/base.py`` and ``ranking/sorter_base.py``: a name scope (Keras 3 has
    ``keras.name_scope`` on every backend, tf-keras only TensorFlow's ``keras.backend.name_scope``).
  """
  package = pathlib.Path(flavour.__file__).resolve().parents[1]
  testing = sorted(
    p.relative_to(package).as_posix()
    for p in package.rglob("*.py")
    if "KERAS_3" in p.read_text(encoding="utf-8")
  )
  assert testing == [
    "compat.py",
    "encoders/saved_model_text.py",
    "encoders/text_transformer.py",
    "heads/interactions.py",
    "losses/base.py",
    "ranking/sorter_base.py",
    "train/flavour.py",
  ]


def test_keras3_resumes_after_the_steps_its_newest_weight_backup_names(tmp_path):
  # Written by EpochMetricsBackup(weights=True): 23 steps trained, 10 steps an epoch.
  for steps in (13, 23):
    (tmp_path / f"step_{steps:09d}.weights.h5").write_bytes(b"")
  (tmp_path / "epoch_metrics.json").write_text("{}")
  assert flavour.Keras3Training().resume_position(str(tmp_path), 10) == (2, 3)


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
        train_cmd(
          model_dir,
          "--strategy=multi_worker_mirrored",
          "--epochs=1",
          "--steps=3",
          "--backup_every=2",
          f"--export_dir={export_dir}",
        ),
        env=env(TF_CONFIG=tf_config),
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


def test_a_damaged_backup_is_named_with_what_to_do(tmp_path):
  backup_dir = tmp_path / "backup"
  inputs = keras.Input((3,))
  model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
  model.compile(optimizer="adam", loss="mse")
  if compat.KERAS_3:  # the weights of step 4 (of 10 a epoch), cut short
    backup_dir.mkdir()
    damaged = backup_dir / "step_000000004.weights.h5"
    damaged.write_bytes(b"\x89HDF\r\n\x1a\n")
    assert flavour.TRAINING.resume_position(str(backup_dir), 10) == (0, 4)
    resume = lambda: flavour.TRAINING.prepare_model(  # noqa: E731
      model, tf.distribute.get_strategy(), str(backup_dir), resumed=True
    )
  else:  # Keras 2's own BackupAndRestore checkpoint, whose index is garbled
    (backup_dir / "chief").mkdir(parents=True)
    (backup_dir / "chief" / "checkpoint").write_text('model_checkpoint_path: "ckpt-1"\n')
    damaged = backup_dir / "chief" / "ckpt-1"
    (backup_dir / "chief" / "ckpt-1.index").write_bytes(b"garbled")
    resume = lambda: flavour.TRAINING.resume_position(str(backup_dir), 10)  # noqa: E731
  with pytest.raises(errors.DamagedFileError) as raised:
    resume()
  message = errors.user_error_message(raised.value)
  assert message.startswith(f"The backup {damaged} is damaged (")
  assert message.endswith(
    f"Delete the folder {backup_dir} to train this run again from its first epoch (or start "
    "over with --start_over)."
  )
