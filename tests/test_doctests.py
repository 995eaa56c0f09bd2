"""The default ``pytest -q`` runs the docstring examples of every module of the package.

The doctests themselves are collected by pytest (``--doctest-modules`` over ``testpaths``, see the
root ``conftest.py``); these tests make the rule impossible to lose silently: a module left out of
the collection, a configuration that stops collecting the package, or a public loss, metric or
layer without a runnable example fails here.
"""

import configparser
import doctest
import importlib
import inspect
import json
import os
import pathlib
import re
import subprocess
import sys

from tfrank4class.compat import keras

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tfrank4class"
RECORDER = "tfrank4class-doctest-recorder"  # registered by the root conftest.py
RECORD_ENV = "TFRANK4CLASS_DOCTEST_RECORD"


def _modules():
  """Every module file of the package, as a path relative to the repository root.

  ``__main__.py`` is left out: importing it runs the program, so pytest never collects it (see
  :func:`test_main_modules_hold_no_examples`).
  """
  return sorted(
    p.relative_to(ROOT).as_posix() for p in PACKAGE.rglob("*.py") if p.name != "__main__.py"
  )


def _collection(request, tmp_path):
  """``(modules, with_items)``: the package modules the default ``pytest`` collects doctests from,
  and those of them that yield doctest items (see ``_Recorder`` in the root conftest.py).

  In a default run this is the run's own collection; otherwise (one test file run alone) a child
  ``pytest --collect-only`` with default arguments records it.
  """
  recorder = request.config.pluginmanager.get_plugin(RECORDER)
  if set(_modules()) <= recorder.modules:
    return recorder.modules, recorder.with_items
  out = tmp_path / "collected.json"
  result = subprocess.run(
    [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
    cwd=ROOT,
    env={**os.environ, RECORD_ENV: str(out)},
    capture_output=True,
    text=True,
    check=False,
  )
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  record = json.loads(out.read_text())
  return set(record["modules"]), set(record["with_items"])


def test_default_command_collects_the_package():
  """``testpaths`` holds the package and ``addopts`` turns on ``--doctest-modules``."""
  config = configparser.ConfigParser()
  config.read(ROOT / "setup.cfg")
  assert "tfrank4class" in config["tool:pytest"]["testpaths"].split()
  assert "--doctest-modules" in config["tool:pytest"]["addopts"].split()


def test_every_module_is_doctest_collected(request, tmp_path):
  """Every module's doctests are collected by the default command, and every module whose
  source holds an example (a ``>>>`` line; the absl binaries too) yields doctest items."""
  expected = set(_modules())
  assert len(expected) > 50, expected
  modules, with_items = _collection(request, tmp_path)
  assert not expected - modules, f"Not doctest-collected: {sorted(expected - modules)}"
  with_examples = {m for m in expected if re.search(r"^\s*>>> ", (ROOT / m).read_text(), re.M)}
  assert len(with_examples) > 40 and "tfrank4class/train/evaluate.py" in with_examples
  assert not with_examples - with_items, (
    f"Examples but no doctest item: {sorted(with_examples - with_items)}"
  )


def test_main_modules_hold_no_examples():
  """A ``__main__.py`` cannot be collected (importing it runs the program): keep it example-free."""
  for path in PACKAGE.rglob("__main__.py"):
    assert ">>>" not in path.read_text(), path


def _public_objects():
  """``(qualified name, object)`` of the public classes and functions defined in the package,
  binaries of ``train/`` left out (they are not imported here)."""
  found = []
  for path in _modules():
    name = path[: -len(".py")].replace("/", ".").removesuffix(".__init__")
    if name.startswith("tfrank4class.train."):
      continue
    module = importlib.import_module(name)
    for attr, obj in vars(module).items():
      if (
        not attr.startswith("_")
        and getattr(obj, "__module__", None) == module.__name__
        and (inspect.isclass(obj) or inspect.isfunction(obj))
      ):
        found.append((f"{name}.{attr}", obj))
  return found


def _kind(obj):
  for base, kind in (
    (keras.losses.Loss, "loss"),
    (keras.metrics.Metric, "metric"),
    (keras.layers.Layer, "layer"),
  ):
    if inspect.isclass(obj) and issubclass(obj, base):
      return kind
  return None


def test_every_loss_metric_and_layer_has_an_example():
  """Public losses, metrics and layers, and the per-list metric functions, show an example that
  runs (not ``+SKIP``); losses and metrics show it inside ``model.compile(...)``."""
  public = _public_objects()
  checked, missing, no_compile = [], [], []
  for name, obj in public:
    kind = _kind(obj)
    if kind is None and not name.startswith("tfrank4class.metrics.functional."):
      continue
    checked.append(name)
    doc = inspect.getdoc(obj) or ""
    examples = doctest.DocTestParser().get_examples(doc)
    if not any(not e.options.get(doctest.SKIP) for e in examples):  # none, or all skipped
      missing.append(name)
    elif kind in ("loss", "metric") and "compile(" not in doc:
      no_compile.append(name)
  assert len(checked) > 40, checked
  assert not missing, f"No runnable docstring example: {missing}"
  assert not no_compile, f"No model.compile(...) line in the example: {no_compile}"
