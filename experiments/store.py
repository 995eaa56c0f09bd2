"""The experiments' records: a JSON list of finished runs, resumable and shared by processes.

One *run* trains one model; when it finishes it becomes one JSON object (a *record*) appended to a
JSON list by :class:`RecordStore`, which rewrites the file atomically (a temporary file,
``fsync``, ``os.replace``) after each run: a grid killed at any moment leaves a valid file holding
every run finished so far, and a restarted grid skips the runs it finds there. Each kind of
record names the fields that identify a run (``key_fields``) and the check of one record
(``check``); :func:`software_versions` is what every record says ran it.
"""

import contextlib
import fcntl
import hashlib
import importlib.metadata
import json
import os
import pathlib
import platform
import subprocess

import numpy as np
import tensorflow as tf

from tfrank4class.compat import keras

#: The repository root (the experiments run from a checkout).
ROOT = pathlib.Path(__file__).resolve().parents[1]


class RecordStore:
  """The grid's records: a JSON list in ``path``, one object per finished run.

  Loading checks every record (``check``) and refuses two records of the same run (the same
  values of ``key_fields``). :meth:`add` appends one record and rewrites the file atomically,
  under an exclusive lock on ``<path>.lock`` and after taking in the records other processes
  added to the file meanwhile: several grid processes may share one file. :meth:`claim` holds a
  run for one process while it trains, so processes working through the same runs never train
  one twice.

  Args:
    path: the JSON file; it need not exist yet.
    key_fields: the record keys that identify a run.
    check: returns a valid record or raises ``ValueError`` naming the key, the value and what is
      allowed.

  Raises:
    ValueError: the file is not a JSON list of valid records, or holds a cell twice (naming
      the file and the cell).
  """

  def __init__(self, path, key_fields, check):
    self.path = str(path)
    self.key_fields, self._check = tuple(key_fields), check
    self._records = []
    self._keys = set()
    for record in self._read():
      self._append(record)

  def _read(self):
    """The records in ``path`` now (``[]`` when it does not exist)."""
    if not os.path.exists(self.path):
      return []
    with open(self.path, encoding="utf-8") as f:
      try:
        loaded = json.load(f)
      except ValueError as e:
        raise ValueError(
          f"The grid records file {self.path} is not valid JSON ({e}); "
          "restore it or move it away to start afresh."
        ) from None
    if not isinstance(loaded, list):
      raise ValueError(
        f"The grid records file {self.path} must hold a JSON list, got {type(loaded).__name__}."
      )
    return loaded

  def _key(self, record):
    return tuple(record[k] for k in self.key_fields)

  def _append(self, record):
    self._check(record)
    key = self._key(record)
    if key in self._keys:
      raise ValueError(
        f"{self.path} already holds a record of {dict(zip(self.key_fields, key))}: a run is "
        "recorded once."
      )
    self._records.append(record)
    self._keys.add(key)

  @property
  def records(self):
    """A copy of the list of records, in the order they were added."""
    return list(self._records)

  def __len__(self):
    return len(self._records)

  def __contains__(self, key):
    return tuple(key) in self._keys

  @contextlib.contextmanager
  def _locked(self):
    """Holds the exclusive lock on ``<path>.lock`` (released when the lock file closes)."""
    directory = os.path.dirname(os.path.abspath(self.path))
    os.makedirs(directory, exist_ok=True)
    with open(f"{self.path}.lock", "a", encoding="utf-8") as lock:
      fcntl.flock(lock, fcntl.LOCK_EX)
      yield

  def _take_in_others(self):
    """Appends the records other processes added to the file since this store last read it."""
    for found in self._read():
      if self._key(found) not in self._keys:
        self._append(found)

  def refresh(self):
    """Takes in, under the lock, the records other processes added to the file since this
    store last read it."""
    with self._locked():
      self._take_in_others()

  @contextlib.contextmanager
  def claim(self, key):
    """Holds the run ``key`` (its ``key_fields`` values) for this process while the block runs.

    Yields True when this process now holds the run and the file has no record of it (the caller
    trains it and :meth:`add` s the record inside the block), False when another process holds
    it or has recorded it meanwhile. The hold is a non-blocking exclusive ``flock`` on a file of
    ``<path>.claims/`` named by the SHA-1 of the key, released when the block ends or the process
    dies, so a killed process leaves no stale claim. Processes that share the records file and
    claim each run before training it never train the same run.
    """
    directory = f"{self.path}.claims"
    os.makedirs(directory, exist_ok=True)
    name = hashlib.sha1(json.dumps(list(key)).encode("utf-8")).hexdigest()
    with open(os.path.join(directory, name), "a", encoding="utf-8") as hold:
      try:
        fcntl.flock(hold, fcntl.LOCK_EX | fcntl.LOCK_NB)
      except BlockingIOError:
        yield False
        return
      self.refresh()  # a holder that just finished added its record before letting go
      yield tuple(key) not in self._keys

  def add(self, record):
    """Appends ``record`` (checked) to the records, with those other processes added to the
    file since this store last read it, and rewrites the file atomically, all under the lock."""
    with self._locked():
      self._take_in_others()
      self._append(dict(record))
      self.write()

  def write(self):
    """Writes every record to ``path`` through a temporary file, ``fsync`` and ``os.replace``."""
    directory = os.path.dirname(os.path.abspath(self.path))
    os.makedirs(directory, exist_ok=True)
    tmp = f"{self.path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
      json.dump(self._records, f, indent=1, sort_keys=True)
      f.write("\n")
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, self.path)


def software_versions():
  """What ran an experiment, for its records: Python, TensorFlow, the Keras package and version
  bound to the package (``tfrank4class.compat``), NumPy, and the checkout's git commit (``None``
  outside a git checkout), marked ``+modified`` when tracked files other than the records
  (``experiments/records``, which a running grid rewrites) differ from it."""

  def git(*args):
    result = subprocess.run(
      ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False
    )
    return result.stdout.strip() if result.returncode == 0 else None

  package = keras.__name__.split(".")[0]  # "keras" or "tf_keras"
  commit = git("rev-parse", "HEAD")
  if commit and git("status", "--porcelain", "--untracked-files=no", "--", ":!experiments/records"):
    commit += "+modified"
  return {
    "python": platform.python_version(),
    "tensorflow": tf.__version__,
    "keras": f"{package} {importlib.metadata.version(package)}",
    "numpy": np.__version__,
    "commit": commit,
  }
