"""Pytest set-up shared by the tests (``tests/``) and the doctests of every package module.

``pytest -q`` from the repository root collects ``tests`` and, with ``--doctest-modules``, the
docstring examples of every module of ``tfrank4class/`` (``[tool:pytest]`` in ``setup.cfg``).
This file is loaded before either, so:

* the environment is set before TensorFlow is imported: no GCE metadata probe (no network),
  and quiet logs. The Keras flavour is the environment's: Keras 3 (``make test``), or tf-keras when
  ``TF_USE_LEGACY_KERAS=1`` (``make test-legacy``);
* on TensorFlow, the CPU is split into two logical devices before TensorFlow initialises them,
  so that ``tf.distribute.MirroredStrategy(["CPU:0", "CPU:1"])`` can run on this machine;
* on Keras 3's JAX and PyTorch backends (``KERAS_BACKEND``; no TensorFlow installed there), only
  what runs on that backend is collected (:func:`pytest_ignore_collect`): the test files and
  package modules that import neither TensorFlow nor a TensorFlow-by-nature part of the package
  (tf.data pipelines, binaries, SavedModel, the evidence grid); tests marked
  ``tensorflow_only`` inside the other files are skipped there;
* the absl binaries of ``tfrank4class/train/`` (modules that define flags at import) have their
  doctests run in a process of their own: they define flags of the same names in absl's global
  registry, so two of them cannot be imported into one process (``DuplicateFlagError``). Such a
  module is imported only if its docstrings hold examples, and no flag is parsed;
* the modules whose doctests were collected are recorded, for ``tests/test_doctests.py``.
"""

import ast
import doctest
import json
import os
import pathlib
import re
import subprocess
import sys

os.environ.setdefault("NO_GCE_CHECK", "true")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import pytest  # noqa: E402

from tfrank4class import compat  # noqa: E402

if compat.BACKEND == "tensorflow":
  import tensorflow as tf  # noqa: E402

  _cpus = tf.config.list_physical_devices("CPU")
  tf.config.set_logical_device_configuration(_cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)


def _module_name(path):
  """``tfrank4class.x.y`` for a package module's path, else ``None``."""
  path = pathlib.Path(path)
  if PACKAGE not in path.parents:
    return None
  parts = path.relative_to(ROOT).with_suffix("").parts
  return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


_FENCED = "|".join(re.escape(m) for m in compat.TENSORFLOW_MODULES)
#: A test module that needs TensorFlow: it imports it, tf-keras, a TensorFlow-by-nature module
#: of the package (``compat.TENSORFLOW_MODULES``) or the evidence grid.
_NEEDS_TENSORFLOW = re.compile(
  rf"^(?:import|from) (?:tensorflow|tf_keras|experiments|(?:{_FENCED})\b"
  r"|tfrank4class import [^\n]*\b(?:data|train)\b)",
  re.MULTILINE,
)


def needs_tensorflow(path):
  """Whether the module at ``path`` needs TensorFlow: a TensorFlow-by-nature package module, or
  a module that imports one (see :data:`_NEEDS_TENSORFLOW`)."""
  name = _module_name(path)
  if name is not None:
    return any(name == m or name.startswith(m + ".") for m in compat.TENSORFLOW_MODULES)
  return bool(_NEEDS_TENSORFLOW.search(pathlib.Path(path).read_text(encoding="utf-8")))


#: Test files that check the repository, not a backend (the layout, packaging, doctest coverage,
#: the two Keras flavours, the examples over tf.data): run once, on the TensorFlow leg.
TENSORFLOW_LEG_ONLY = (
  "tests/test_layout.py",
  "tests/test_packaging.py",
  "tests/test_doctests.py",
  "tests/test_front_ends.py",
  "tests/test_examples.py",
)
#: Docstring examples of core modules that show a TensorFlow-only path (raw strings, tf.data).
TENSORFLOW_DOCTESTS = (
  "tfrank4class.encoders.text_transformer.transformer",
  "tfrank4class.ranking.synthetic.synthetic_dataset",
)


def pytest_ignore_collect(collection_path, config):
  """On the JAX and PyTorch backends, leaves out the modules that need TensorFlow and the
  repository checks of :data:`TENSORFLOW_LEG_ONLY`."""
  del config
  if compat.BACKEND == "tensorflow" or collection_path.suffix != ".py":
    return None
  if collection_path.relative_to(ROOT).as_posix() in TENSORFLOW_LEG_ONLY:
    return True
  return True if needs_tensorflow(collection_path) else None


#: Modules whose docstring examples need Keras 3 (``keras.random``, ``keras.Variable``, which
#: tf-keras lacks): skipped on the tf-keras leg.
KERAS_3_DOCTESTS = (
  "tfrank4class.heads.sampled",
  "tfrank4class.heads.sampled_classifier",
  "tfrank4class.heads.sampled_rank4class",
)


def pytest_collection_modifyitems(items):
  """Skips :data:`KERAS_3_DOCTESTS` on tf-keras, and the ``tensorflow_only`` tests and
  :data:`TENSORFLOW_DOCTESTS` on the JAX and PyTorch backends."""
  if compat.legacy_keras_requested():
    keras_3 = pytest.mark.skip(reason="Keras 3 only; this suite runs tf-keras")
    for item in items:
      if any(item.name == m or item.name.startswith(m + ".") for m in KERAS_3_DOCTESTS):
        item.add_marker(keras_3)
  if compat.BACKEND == "tensorflow":
    return
  skip = pytest.mark.skip(reason=f"TensorFlow only; this suite runs on {compat.BACKEND}")
  for item in items:
    if "tensorflow_only" in item.keywords or item.name in TENSORFLOW_DOCTESTS:
      item.add_marker(skip)


ROOT = pathlib.Path(__file__).resolve().parent
PACKAGE = ROOT / "tfrank4class"
# Set in the child process that runs one absl binary's doctests (it collects them as usual).
_IN_OWN_PROCESS = "TFRANK4CLASS_DOCTEST_OWN_PROCESS"
# When set, the path of a JSON file that receives the doctest-collected modules of the session.
RECORD_ENV = "TFRANK4CLASS_DOCTEST_RECORD"
RECORDER = "tfrank4class-doctest-recorder"
_DEFINES_FLAGS = re.compile(r"^flags\.DEFINE_", re.MULTILINE)


def defines_absl_flags(path):
  """Whether the module at ``path`` defines absl flags when imported (a training binary)."""
  return bool(_DEFINES_FLAGS.search(pathlib.Path(path).read_text(encoding="utf-8")))


def docstring_examples(path):
  """Number of doctest examples in the docstrings of the module at ``path``, without importing it.

  The docstrings are those ``doctest.DocTestFinder`` searches: the module's, and those of the
  classes and functions (methods included) it defines.
  """
  tree = ast.parse(pathlib.Path(path).read_text(encoding="utf-8"))
  nodes = [tree] + [
    n
    for n in ast.walk(tree)
    if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
  ]
  parser = doctest.DocTestParser()
  return sum(len(parser.get_examples(ast.get_docstring(n, clean=True) or "")) for n in nodes)


class OwnProcessDoctests(pytest.Item):
  """The doctests of one absl binary, run by pytest in a child process."""

  def runtest(self):
    env = {**os.environ, _IN_OWN_PROCESS: "1"}
    env.pop(RECORD_ENV, None)
    result = subprocess.run(
      [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        str(self.path.relative_to(ROOT)),
      ],
      cwd=ROOT,
      env=env,
      capture_output=True,
      text=True,
      check=False,
    )
    if result.returncode != 0:
      pytest.fail(
        f"Doctests of {self.path.relative_to(ROOT)} (own process) failed:\n"
        f"{result.stdout}\n{result.stderr}",
        pytrace=False,
      )

  def reportinfo(self):
    return self.path, None, f"[doctests in own process] {self.path.relative_to(ROOT)}"


class OwnProcessDoctestModule(pytest.File):
  """Collects an absl binary's doctests as one item run in a child process (none if it has no
  docstring examples, in which case the module is not imported at all)."""

  def collect(self):
    if docstring_examples(self.path):
      yield OwnProcessDoctests.from_parent(self, name="doctests")


@pytest.hookimpl(wrapper=True)
def pytest_collect_file(file_path, parent):
  """Swaps the doctest collector of an absl binary for :class:`OwnProcessDoctestModule`."""
  collectors = yield
  if (
    os.environ.get(_IN_OWN_PROCESS)
    or file_path.suffix != ".py"
    or PACKAGE not in file_path.parents
    or not defines_absl_flags(file_path)
  ):
    return collectors
  kept = [c for c in collectors if not isinstance(c, pytest.File)]
  if len(kept) == len(collectors):  # --doctest-modules is off: nothing to swap.
    return collectors
  return kept + [OwnProcessDoctestModule.from_parent(parent, path=file_path)]


class _Recorder:
  """Records, for this session, the package modules whose doctests were collected without error
  (``modules``) and those that yielded at least one doctest item (``with_items``)."""

  def __init__(self):
    self.modules = set()
    self.with_items = set()

  @pytest.hookimpl(wrapper=True)
  def pytest_make_collect_report(self, collector):
    report = yield
    path = _package_module(collector)
    if path and isinstance(collector, pytest.File) and report.passed:
      self.modules.add(path)
    return report

  def pytest_itemcollected(self, item):
    path = _package_module(item)
    if path:
      self.with_items.add(path)

  def pytest_collection_finish(self, session):
    del session
    out = os.environ.get(RECORD_ENV)
    if out:
      pathlib.Path(out).write_text(
        json.dumps({"modules": sorted(self.modules), "with_items": sorted(self.with_items)}),
        encoding="utf-8",
      )


def _package_module(node):
  """The path (relative to the repository) of the package module ``node`` stands for, or None."""
  path = getattr(node, "path", None)
  if path is None or PACKAGE not in pathlib.Path(path).parents:
    return None
  return pathlib.Path(path).relative_to(ROOT).as_posix()


def pytest_configure(config):
  config.pluginmanager.register(_Recorder(), RECORDER)
