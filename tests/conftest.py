"""Test fixtures. The environment (no network, quiet TensorFlow, ``tf.keras`` = tf-keras on
TensorFlow 2.16+, two logical CPUs for MirroredStrategy tests) is set by the repository's root
``conftest.py``, before TensorFlow is imported, for the tests and the doctests alike.

The benchmarks' own modules (``benchmarks/grid_store.py``, ...) are not part of the package; they
import each other by bare name, as when a benchmark script runs. ``benchmarks/`` goes at the end
of ``sys.path`` so that their tests import them the same way (``import grid_store``), and no
installed package is shadowed by a benchmark script's name.
"""

import os
import pathlib
import sys

import pytest

from tfrank4class import compat

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT / "benchmarks") not in sys.path:
  sys.path.append(str(ROOT / "benchmarks"))


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
