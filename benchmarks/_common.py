"""What every benchmark script shares: its paths, and TensorFlow with a fixed thread count.

Benchmarks run as scripts from a checkout (``python benchmarks/<name>.py``), installed or not, so
the repository root goes on ``sys.path``.
"""

import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "out"
sys.path.insert(0, str(ROOT))


def setup_tensorflow(threads):
  """Imports TensorFlow quietly and offline; ``threads > 0`` fixes its intra- and inter-op pools."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  os.environ.setdefault("NO_GCE_CHECK", "true")
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  if threads:
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
  return tf
