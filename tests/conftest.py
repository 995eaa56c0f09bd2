"""Test fixtures. The environment (no network, quiet TensorFlow, ``tf.keras`` = tf-keras on
TensorFlow 2.16+, two logical CPUs for MirroredStrategy tests) is set by the repository's root
``conftest.py``, before TensorFlow is imported, for the tests and the doctests alike.

The evidence grid's smoke runs (``smoke_grid``, ``cifar_grid``) are trained once per test process
and shared by the tests of ``experiments/`` that read records.
"""

import os
import pathlib

import pytest

from tfrank4class import compat

ROOT = pathlib.Path(__file__).resolve().parents[1]


def pytest_collection_modifyitems(items):
  """Skips the ``both_flavours`` tests in a tf-keras suite: they start a Keras 3 and a tf-keras
  process of their own whatever the suite's flavour, so the Keras 3 suite already ran them."""
  if not compat.legacy_keras_requested():
    return
  skip = pytest.mark.skip(reason="starts both Keras flavours itself; the Keras 3 suite runs it")
  for item in items:
    if "both_flavours" in item.keywords:
      item.add_marker(skip)


@pytest.fixture(scope="session")
def datasets_dir():
  """The real datasets in ../shared/datasets (or $TFRANK4CLASS_DATA)."""
  path = pathlib.Path(os.environ.get("TFRANK4CLASS_DATA", ROOT.parent / "shared" / "datasets"))
  if not path.is_dir():
    raise FileNotFoundError(
      f"Real test data not found at {path}; set TFRANK4CLASS_DATA to the shared/datasets folder."
    )
  return path


@pytest.fixture(scope="session")
def smoke_grid(tmp_path_factory):
  """``(records path, RecordStore)`` of the grid's smoke configuration (random features, 2
  losses, 1 head, 2 learning rates, 2 seeds, 2 epochs), run once."""
  from experiments.second import grid  # noqa: PLC0415  (TensorFlow only)

  tmp = tmp_path_factory.mktemp("grid")
  output = tmp / "grid.json"
  return output, grid.run_grid(str(output), str(tmp / "work"), None, smoke=True)


@pytest.fixture(scope="session")
def cifar_grid(tmp_path_factory, datasets_dir):
  """``(records path, RecordStore)`` of the grid's CIFAR-10 smoke configuration (a few real
  images per class, a tiny CNN), run once."""
  from experiments.second import grid  # noqa: PLC0415  (TensorFlow only)

  tmp = tmp_path_factory.mktemp("grid_cifar")
  output = tmp / "grid.json"
  records = grid.run_grid(
    str(output), str(tmp / "work"), str(datasets_dir), experiments=("cifar10_e2e",), smoke=True
  )
  return output, records


@pytest.fixture
def float64_inputs():
  """float64 inputs stay float64 for one test on every backend: JAX computes them in float32
  unless ``jax_enable_x64`` is on (``backend_testing.float64``). A module takes it for each of its
  tests with ``pytestmark = pytest.mark.usefixtures("float64_inputs")``."""
  import backend_testing  # noqa: PLC0415

  with backend_testing.float64():
    yield


@pytest.fixture
def mixed_float16():
  """The ``mixed_float16`` Keras policy for one test (``_sorter_checks.mixed_float16``)."""
  import _sorter_checks  # pylint: disable=g-import-not-at-top

  with _sorter_checks.mixed_float16():
    yield


@pytest.fixture
def mirrored_strategy():
  """A MirroredStrategy over the two logical CPU devices, as `make_strategy("mirrored")` builds it.

  Reduction goes through one device: with TensorFlow 2.15's default collective all-reduce,
  several MirroredStrategy objects training in one process can reuse collective instance keys
  and abort with "Shape mismatch in the collective instance".
  """
  from tfrank4class.train import strategy as strategy_lib  # pylint: disable=g-import-not-at-top

  return strategy_lib.make_strategy("mirrored", devices=["/cpu:0", "/cpu:1"])
