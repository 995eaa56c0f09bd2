"""What every benchmark script shares: its paths, TensorFlow with a fixed thread count, and peak
memory measured on CPU.

Benchmarks run as scripts from a checkout (``python benchmarks/<name>.py``), installed or not, so
the repository root goes on ``sys.path``, first: a script imports this module before any module
that imports the package, so that it measures its own checkout's code even where another
``tfrank4class`` is installed (``tests/test_benchmarks.py`` plants a failing one to check).
Their tables, JSON and plots go to ``benchmarks/out``, or to the folder in the environment
variable ``TFRANK4CLASS_BENCHMARK_OUT`` (the smoke test, ``tests/test_benchmarks.py``, points it
at a temporary folder).
"""

import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = pathlib.Path(os.environ.get("TFRANK4CLASS_BENCHMARK_OUT") or ROOT / "benchmarks" / "out")
sys.path.insert(0, str(ROOT))

#: The environment of a process that measures peak memory with ``peak_rss_mb``: oneDNN off, so
#: TensorFlow allocates CPU tensors with plain ``malloc`` (oneDNN's allocator pools freed blocks
#: and keeps them resident), and glibc's mmap threshold fixed at 64 KiB, so every freed buffer
#: above it is returned to the kernel at once (by default the threshold grows with the blocks
#: freed, and freed memory stays resident for reuse). A buffer then counts in the resident set
#: exactly while it is live.
PEAK_MEMORY_ENV = {"TF_ENABLE_ONEDNN_OPTS": "0", "MALLOC_MMAP_THRESHOLD_": "65536"}
#: What ``peak_rss_mb`` counts, for the tables' headers.
PEAK_MEMORY_DESCRIPTION = (
  "peak MB = growth of the process's resident set (Linux VmHWM, reset through "
  "/proc/self/clear_refs) during one call, in a child process with oneDNN off and glibc's "
  "mmap threshold at 64 KiB: live tensor buffers plus any other memory the call touches"
)


def setup_tensorflow(threads):
  """Imports TensorFlow quietly and offline; ``threads > 0`` fixes its intra- and inter-op pools."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  os.environ.setdefault("NO_GCE_CHECK", "true")
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  if threads:
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
  return tf


def _status_bytes(key):
  with open("/proc/self/status") as f:
    for line in f:
      if line.startswith(key + ":"):
        return int(line.split()[1]) * 1024
  raise RuntimeError(f"/proc/self/status has no {key} line.")


def peak_rss_mb(fn):
  """MiB by which the resident set of this process peaked above its size before ``fn()``.

  Resets the kernel's high-water mark ``VmHWM`` by writing ``5`` to ``/proc/self/clear_refs``,
  calls ``fn`` and returns ``VmHWM`` minus ``VmRSS`` before the call (Linux only; 4 KiB pages).
  TensorFlow's CPU allocator statistics (``tf.config.experimental.reset_memory_stats``) are not
  available on CPU on every TensorFlow version, hence the resident set. Meaningful only in a
  process started with ``PEAK_MEMORY_ENV`` (see there), after one warm-up call of ``fn`` (the
  first call also traces and loads kernels); ``run_peak_memory_child`` starts one.
  """
  try:
    with open("/proc/self/clear_refs", "w") as f:
      f.write("5")
  except OSError as e:
    raise RuntimeError(
      f"Cannot reset the peak resident set through /proc/self/clear_refs ({e}); peak memory "
      "is measured on Linux only."
    ) from e
  before = _status_bytes("VmRSS")
  fn()
  return (_status_bytes("VmHWM") - before) / 2**20


def run_peak_memory_child(script, args):
  """Runs ``python <script> <args>`` with ``PEAK_MEMORY_ENV``; returns the JSON of its last
  stdout line (the child measures with ``peak_rss_mb`` and prints its results as JSON)."""
  result = subprocess.run(
    [sys.executable, str(script), *args],
    env={**os.environ, **PEAK_MEMORY_ENV},
    stdout=subprocess.PIPE,
    text=True,
    check=True,
  )
  return json.loads(result.stdout.strip().splitlines()[-1])


class WorkerProcess:
  """A benchmark's worker process, spoken to in JSON lines: ``ask(request)`` writes one request
  to its stdin and returns the reply, the first stdout line that starts with ``reply_mark``
  (other lines, such as a library's notice on import, are skipped); ``close()`` ends it."""

  def __init__(self, command, env, reply_mark):
    self.reply_mark = reply_mark
    self.process = subprocess.Popen(
      command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )

  def ask(self, request):
    self.process.stdin.write(json.dumps(request) + "\n")
    self.process.stdin.flush()
    for line in self.process.stdout:
      if line.startswith(self.reply_mark):
        return json.loads(line[len(self.reply_mark) :])
    raise RuntimeError(f"worker {self.process.args} ended (exit {self.process.wait()})")

  def close(self):
    self.process.stdin.close()
    self.process.wait()
