"""benchmarks/grid_epoch_time.py: one tiny configuration runs and reports positive times."""

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_prints_one_row_per_configuration():
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "NO_GCE_CHECK": "true"}
  out = subprocess.run(
    [
      sys.executable,
      str(ROOT / "benchmarks" / "grid_epoch_time.py"),
      "--losses=softmax_loss,mean_squared_loss",
      "--heads=dot",
      "--epochs=1",
      "--train_size=64",
      "--validation_size=32",
    ],
    env=env,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert out.returncode == 0, out.stderr[-3000:]
  rows = [line.split("|")[1:-1] for line in out.stdout.splitlines()[2:]]
  assert [r[0].strip() for r in rows] == ["softmax_loss", "mean_squared_loss"]
  assert all(float(r[2]) > 0 and float(r[3]) > 0 for r in rows)
