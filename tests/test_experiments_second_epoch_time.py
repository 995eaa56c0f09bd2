"""experiments/second/epoch_time.py: the random features of the primary's shape, one timed
configuration, and the command line on the smoke configuration."""

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from experiments.second import epoch_time, plan
from tfrank4class import losses

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_random_splits_have_the_primary_experiments_shape():
  splits = epoch_time.random_splits(50, 20)
  x, y = splits["train"]
  assert x.shape == (50, epoch_time.FEATURE_DIM) and x.dtype == np.float32
  assert y.min() >= 0 and y.max() < epoch_time.NUM_CLASSES
  assert splits["test"] is splits["validation"] and splits["validation"][0].shape == (20, 384)


def test_epoch_seconds_trains_exactly_the_epochs_asked():
  settings = plan.grid_settings(losses.names(), smoke=True)
  splits = epoch_time.random_splits(64, 32)
  wall, cpu, result = epoch_time.epoch_seconds(
    splits, epoch_time.NUM_CLASSES, "softmax_loss", "dot", 3, settings
  )
  assert wall > 0 and cpu > 0 and result["epochs_run"] == 3  # patience off: every epoch runs


def _run(*args, cwd):
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "NO_GCE_CHECK": "true", "PYTHONPATH": str(ROOT)}
  return subprocess.run(
    [sys.executable, "-m", "experiments.second.epoch_time", "run", *args],
    env=env,
    capture_output=True,
    text=True,
    cwd=cwd,
  )


@pytest.mark.slow  # two processes importing TensorFlow; epoch_seconds is checked above
@pytest.mark.parametrize("experiment", ["clean", "cifar10_e2e"])
def test_the_command_line_prints_and_writes_the_table(experiment, tmp_path, datasets_dir):
  result = _run("--smoke", f"--experiment={experiment}", f"--data_dir={datasets_dir}", cwd=tmp_path)
  assert result.returncode == 0, result.stderr[-3000:]
  assert "| softmax_loss | dot |" in result.stdout, result.stdout[-2000:]
  assert "| softmax_loss | dot |" in (tmp_path / "epoch_time.md").read_text()
