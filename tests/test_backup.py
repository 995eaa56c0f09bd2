"""The mid-run backup: a SIGKILLed run resumes and ends as an uninterrupted one."""

import json
import signal
import subprocess
import sys
import time

import pytest
import tensorflow as tf
from _training import env, train_cmd

from tfrank4class import atomic, errors
from tfrank4class.train import backup
from tfrank4class.train.flavour import TRAINING


def test_best_so_far_reads_the_epochs_before_the_resumed_one(tmp_path):
  path = tmp_path / "epoch_metrics.json"
  assert backup.best_so_far(str(path), 3) is None  # nothing recorded: no threshold
  path.write_text(json.dumps({"saves": [], "best": {"0": 0.25, "1": 0.5, "2": 0.75}}))
  assert backup.best_so_far(str(path), 0) is None
  assert backup.best_so_far(str(path), 2) == 0.5  # epoch 2 is trained again
  assert backup.best_so_far(str(path), 3) == 0.75


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


# Slow (three training processes, about 50 s): the default suite checks the resume position read
# from a backup (tests/test_flavour.py) and the best-so-far bookkeeping above.
@pytest.mark.slow
def test_sigkilled_run_resumes_and_matches_an_uninterrupted_one(tmp_path):
  args = ("--epochs=2", "--steps=12", "--backup_every=4")
  whole, killed = tmp_path / "whole", tmp_path / "killed"
  first = subprocess.Popen(
    train_cmd(killed, *args), env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
  )
  deadline = time.time() + 300
  while (
    TRAINING.resume_position(str(killed / "backup"), 12) == (0, 0)
    and first.poll() is None
    and time.time() < deadline
  ):
    time.sleep(0.05)
  assert first.poll() is None, first.stderr.read().decode()[-3000:]
  first.send_signal(signal.SIGKILL)
  first.wait()
  first.stderr.close()
  assert not (killed / "results.json").exists()  # it died before finishing
  epoch, step = TRAINING.resume_position(str(killed / "backup"), 12)
  assert (epoch, step) != (0, 0)
  again = subprocess.run(
    train_cmd(killed, *args), env=env(), check=True, capture_output=True, text=True
  )
  subprocess.run(train_cmd(whole, *args), env=env(), check=True, capture_output=True)
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
    env=env(),
    check=True,
    capture_output=True,
    text=True,
  ).stdout
  test_row = [line for line in out.splitlines() if line.startswith("test")][0].split()
  assert [float(v) for v in test_row[1:]] == pytest.approx(
    [uninterrupted["test"][m] for m in ("top_1", "top_5", "ndcg_5", "mrr")], abs=1e-4
  )


@pytest.mark.parametrize(
  "content, reason",
  [
    ('{"saves": [], "best": {"0": 0.2', "JSONDecodeError"),  # cut by a kill, or a full disk
    ('{"saves": []}', 'the keys "saves" and "best" is expected'),
    ('{"saves": [{"epoch": 0}], "best": {}}', "KeyError: 'batch'"),
    ('{"saves": [], "best": {"first": 0.5}}', "\"best\" must map epochs to numbers, got 'first'"),
  ],
)
def test_a_damaged_metrics_backup_is_named_with_what_to_do(tmp_path, content, reason):
  path = tmp_path / backup.STATE_FILE
  path.write_text(content)
  for read in (
    lambda: backup.EpochMetricsBackup.read(str(path)),
    lambda: backup.best_so_far(str(path), 1),
  ):
    with pytest.raises(errors.DamagedFileError) as raised:
      read()
    message = errors.user_error_message(raised.value)
    assert message.startswith(f"The metrics backup {path} is damaged (") and reason in message
    assert (
      "Delete it: the run then resumes without the interrupted epoch's training metrics" in message
    )


class Killed(BaseException):
  """Stands for the process being killed."""


def test_a_metrics_backup_killed_while_written_leaves_the_previous_one(tmp_path, monkeypatch):
  path = tmp_path / "backup" / backup.STATE_FILE
  callback = backup.EpochMetricsBackup(str(path), 1, (0, 0), "val_mrr")
  callback._state = {"saves": [], "best": {"0": 0.5}}
  callback._write()

  def killed(partial, final):
    raise Killed()

  monkeypatch.setattr(atomic, "commit", killed)
  callback._state = {"saves": [], "best": {"0": 0.5, "1": 0.75}}
  with pytest.raises(Killed):
    callback._write()
  assert backup.EpochMetricsBackup.read(str(path)) == {"saves": [], "best": {"0": 0.5}}
