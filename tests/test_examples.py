"""The scripts in examples/ run as a user would run them."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "NO_GCE_CHECK": "true", "PYTHONPATH": ROOT}


def test_classify_goemotions_example():
  out = subprocess.run(
    [
      sys.executable,
      os.path.join(ROOT, "examples", "classify_goemotions.py"),
      "--epochs",
      "1",
      "--steps",
      "5",
    ],
    env=ENV,
    check=True,
    capture_output=True,
    text=True,
  ).stdout
  values = {
    line.split(":")[0]: float(line.split(":")[1])
    for line in out.splitlines()
    if line.startswith("test ")
  }
  assert set(values) >= {"test top_1_accuracy", "test top_5_accuracy", "test ndcg_5", "test mrr"}
  assert all(0.0 <= v <= 1.0 for k, v in values.items() if k != "test loss")
