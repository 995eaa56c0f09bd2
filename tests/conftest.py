"""Test set-up: no network, quiet TensorFlow, two logical CPUs for MirroredStrategy tests.

The tests build their models with ``tf.keras``; on TensorFlow 2.16+ that is tf-keras (the Keras
the package's objects are built on) only with TF_USE_LEGACY_KERAS=1, set here before TensorFlow
is imported. ``tests/test_compat.py`` checks the package in a process without it.
"""
import importlib.metadata
import os
import pathlib

os.environ.setdefault("NO_GCE_CHECK", "true")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# TensorFlow 2.15 has no tf-keras and would fail to find it if asked for it.
if tuple(int(p) for p in importlib.metadata.version("tensorflow").split(".")[:2]) >= (2, 16):
  os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")

import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

# Split the CPU into two logical devices before TensorFlow initialises them, so that
# tf.distribute.MirroredStrategy(["CPU:0", "CPU:1"]) can run on this machine.
_cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(
    _cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def datasets_dir():
  """The real datasets in ../shared/datasets (or $TFRANK4CLASS_DATA)."""
  path = pathlib.Path(os.environ.get("TFRANK4CLASS_DATA", ROOT.parent / "shared" / "datasets"))
  if not path.is_dir():
    raise FileNotFoundError(
        f"Real test data not found at {path}; set TFRANK4CLASS_DATA to the shared/datasets folder.")
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
