"""A run's directory, ``model_dir``: its lock, its stored configuration and its files.

    checkpoints/epoch_NNN.weights.h5   the weights after every epoch
    best.keras                         the whole model at the best validation ``best_metric``
    logs/                              TensorBoard
    backup/                            the backup a killed run resumes from (removed when
                                       training ends; ``tfrank4class.train.backup``)
    config.json, class_names.txt       what the run was, for evaluate and export
    cluster.json                       a multi-worker run's cluster, written by the chief for
                                       every worker to read back (``train.cluster``)
    results.json                       the training binary's final table, written last: a run
                                       that has it is complete (``finished_results``)
    train.lock                         the process training there (``lock_model_dir``)

One run per directory. ``train`` takes ``model_dir`` for its process (``lock_model_dir``): a
second run on the same directory refuses at once, naming the run that holds it; a lock left by a
killed run is taken over. A directory that holds a run (its ``config.json``) is only reused with
the same configuration, but for the fields in ``RESUMABLE_CHANGES`` (how the run executes, not
what it trains): anything else is refused with the differing fields named, unless ``start_over``
deletes the old run's files (``RUN_FILES``) first.
"""

import atexit
import datetime
import json
import os
import shutil
import socket
import sys
import zipfile

from tfrank4class import atomic, errors
from tfrank4class.compat import keras
from tfrank4class.train import cluster
from tfrank4class.train.config import ExperimentConfig, read_json_object

#: The lock file of a run in ``model_dir``.
LOCK_FILE = "train.lock"
#: The training binary's final table; a run that has it is complete.
RESULTS_FILE = "results.json"
#: What a run writes in ``model_dir`` (``start_over`` deletes them; ``export_dir`` is left alone).
#: ``results.json`` comes first: a run whose deletion is cut short is no longer complete.
RUN_FILES = (
  RESULTS_FILE,
  "backup",
  "checkpoints",
  "logs",
  "best.keras",
  "config.json",
  "class_names.txt",
  cluster.MARKER_FILE,
)
#: Config fields that say how a run executes, not what it trains: a resumed run may change them.
RESUMABLE_CHANGES = (
  "model_dir",
  "export_dir",
  "strategy",
  "tpu",
  "devices",
  "cluster_timeout",
  "backup_every",
  "start_over",
  "verbose",
)
_LOCKS_HELD = set()


class ModelDirInUseError(errors.UserError, RuntimeError):
  """Another live training run holds ``model_dir``; the message names the directory and the run."""


class ConfigMismatchError(errors.UserError, ValueError):
  """``model_dir`` holds a run with another configuration; the message names the differences."""


def _pid_runs(pid):
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    pass  # it runs, as another user
  return True


def _read_lock(path):
  """The holder recorded in a lock file, or ``None`` if it cannot be read as one."""
  try:
    with open(path) as f:
      holder = json.load(f)
  except (OSError, ValueError):
    return None
  if isinstance(holder, dict) and isinstance(holder.get("pid"), int) and "host" in holder:
    return holder
  return None


def _create_lock(path, holder):
  """Writes ``holder`` to a new file ``path``; raises ``FileExistsError`` if it exists."""
  fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
  with os.fdopen(fd, "w") as f:
    json.dump(holder, f)


def _release_lock(path, holder):
  if _read_lock(path) == holder:
    os.remove(path)


def lock_model_dir(model_dir):
  """Takes ``model_dir`` for this process until it exits; returns the lock file's path.

  The lock is the file ``model_dir/train.lock`` holding the pid, host name, start time and
  command of the process; it is removed when the process exits. Another process that finds it
  raises ``ModelDirInUseError`` naming the directory and the holder, unless the holder is gone: a
  lock written on this host by a process that no longer runs (a killed run) is taken over, with
  a message on stderr. A lock from another host cannot be checked from here and is refused (the
  message says to delete it if that run is gone). Calling this again in the holding process
  does nothing. Under multi-worker training only the chief calls it: one lock per run.

  Raises:
    ModelDirInUseError: a live run (or one this host cannot check) holds ``model_dir``.

  Example:
    >>> import tempfile
    >>> path = lock_model_dir(tempfile.mkdtemp())
    >>> lock_model_dir(os.path.dirname(path)) == path  # the holder may take it again
    True
  """
  path = os.path.join(model_dir, LOCK_FILE)
  if os.path.realpath(path) in _LOCKS_HELD:
    return path
  mine = {
    "pid": os.getpid(),
    "host": socket.gethostname(),
    "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    "command": " ".join(sys.argv),
  }
  try:
    _create_lock(path, mine)
  except FileExistsError:
    _take_over_stale_lock(model_dir, path, mine)
  _LOCKS_HELD.add(os.path.realpath(path))
  atexit.register(_release_lock, path, mine)
  return path


def _take_over_stale_lock(model_dir, path, mine):
  """Takes the existing lock ``path`` over if its holder is gone (see :func:`lock_model_dir`),
  else raises ``ModelDirInUseError``."""
  holder = _read_lock(path)
  # A lock of this host whose pid is gone, or is this process's although it never took it (a
  # pid reused after a restart), was left by a killed run.
  stale = (
    holder is not None
    and holder["host"] == mine["host"]
    and (holder["pid"] == mine["pid"] or not _pid_runs(holder["pid"]))
  )
  if not stale:
    raise _in_use(model_dir, path, holder) from None
  print(
    f"Taking over the lock {path} of a run that no longer runs (pid {holder['pid']} on "
    f"{holder['host']}, started {holder.get('started')}).",
    file=sys.stderr,
    flush=True,
  )
  # Move it aside first: if another process took it over in between, put its lock back.
  aside = f"{path}.{mine['pid']}"
  try:
    os.rename(path, aside)
  except FileNotFoundError:
    pass
  else:
    if _read_lock(aside) != holder:
      os.replace(aside, path)
    else:
      os.remove(aside)
  try:
    _create_lock(path, mine)
  except FileExistsError:
    raise _in_use(model_dir, path, _read_lock(path)) from None


def _in_use(model_dir, path, holder):
  if holder is None:
    return ModelDirInUseError(
      f"`model_dir` {model_dir!r} is locked by {path}, which does not name its run. If no run "
      "uses the directory, delete that file; else pick another `model_dir`."
    )
  return ModelDirInUseError(
    f"`model_dir` {model_dir!r} is in use by another training run: pid {holder['pid']} on "
    f"host {holder['host']}, started {holder.get('started')} ({holder.get('command')}). Wait "
    f"for it to end or pick another `model_dir`; if that run is gone, delete {path}."
  )


def config_differences(saved, config):
  """``{field: (saved value, new value)}`` for the fields, but ``RESUMABLE_CHANGES``, that differ.

  Example:
    >>> config_differences(ExperimentConfig(), ExperimentConfig(loss="approx_ndcg_loss", verbose=0))
    {'loss': ('softmax_loss', 'approx_ndcg_loss')}
  """
  old, new = json.loads(saved.to_json()), json.loads(config.to_json())
  return {
    k: (old[k], new[k]) for k in sorted(new) if k not in RESUMABLE_CHANGES and old[k] != new[k]
  }


def prepare_model_dir(config):
  """Makes ``config.model_dir`` ready for ``config``'s run (the chief calls it, holding the lock).

  With ``start_over`` it deletes the ``RUN_FILES`` of a previous run there, and any partial
  write a killed run left (``tfrank4class.atomic``), and says so.
  Otherwise a previous run's ``config.json`` must match ``config`` but for
  ``RESUMABLE_CHANGES``: the same run resumes (or, finished, trains again from scratch, its
  ``results.json`` deleted first; the training binary stops before, see ``finished_results``).

  Raises:
    ConfigMismatchError: ``model_dir`` holds a run with another configuration; the message
      names each differing field with both values.
  """
  model_dir = config.model_dir
  if config.start_over:
    partial = [n for n in sorted(os.listdir(model_dir)) if n.startswith(atomic.PARTIAL_PREFIX)]
    removed = [n for n in RUN_FILES if os.path.lexists(os.path.join(model_dir, n))] + partial
    for name in removed:
      path = os.path.join(model_dir, name)
      if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
      else:
        os.remove(path)
    if removed:
      print(
        f"Starting over in {model_dir}: removed {', '.join(removed)} of the previous run.",
        flush=True,
      )
    return
  _check_same_run(config)
  results = os.path.join(model_dir, RESULTS_FILE)
  if os.path.exists(results):
    os.remove(results)


def _check_same_run(config):
  """Raises ``ConfigMismatchError`` if ``config.model_dir`` holds a run (its ``config.json``)
  whose configuration differs from ``config`` but for ``RESUMABLE_CHANGES``."""
  model_dir = config.model_dir
  if not os.path.exists(os.path.join(model_dir, "config.json")):
    return
  differences = config_differences(ExperimentConfig.from_model_dir(model_dir), config)
  if differences:
    listed = "; ".join(f"{k}: {old!r} there, {new!r} now" for k, (old, new) in differences.items())
    raise ConfigMismatchError(
      f"`model_dir` {model_dir!r} holds a run with another configuration (its config.json): "
      f"{listed}. Resume it with its own values, pick another `model_dir`, or set "
      f"`start_over` (--start_over) to delete that run's {', '.join(RUN_FILES)} and train "
      "from scratch."
    )


def finished_results(config):
  """The results (``{split: {metric: value}}``) of the complete run in ``config.model_dir``, or
  ``None``: without a ``model_dir``, with ``start_over``, or when no run there has finished.

  It reads and writes nothing else, takes no lock: ``results.json`` is written last, in one
  step, and ``start_over`` deletes it first.

  Raises:
    ConfigMismatchError: the finished run there has another configuration (see
      ``prepare_model_dir``).
  """
  if not config.model_dir or config.start_over:
    return None
  path = os.path.join(config.model_dir, RESULTS_FILE)
  if not os.path.exists(path):
    return None
  _check_same_run(config)
  return read_json_object(
    path,
    "results of the run",
    "Delete it to finish the run again from its last backup, or start the run again with "
    "tfrank4class-train --start_over on this `model_dir` (deletes the run's files).",
  )


def write_results(model_dir, rows):
  """Writes ``rows`` (``[(split, {metric: value})]``) to ``model_dir/results.json`` atomically
  (``tfrank4class.atomic``): the last file of a run, which marks it complete."""
  atomic.write_text(os.path.join(model_dir, RESULTS_FILE), json.dumps(dict(rows), indent=2))


def write_run_files(config, class_names):
  """Writes ``config.json`` and ``class_names.txt`` of ``config``'s run into its ``model_dir``
  (each atomically: ``tfrank4class.atomic``)."""
  atomic.write_text(os.path.join(config.model_dir, "config.json"), config.to_json())
  atomic.write_text(
    os.path.join(config.model_dir, "class_names.txt"), "\n".join(class_names) + "\n"
  )


def checkpoint_path(model_dir=None, checkpoint=None):
  """The model file ``checkpoint`` (a ``.keras`` file), else ``model_dir/best.keras``, checked to
  exist (a cheap check before any data is read; ``load_checkpoint`` reads it).

  Raises:
    NotFoundError: there is no such file.
  """
  path = checkpoint or os.path.join(model_dir or "", "best.keras")
  if not os.path.isfile(path):
    raise errors.NotFoundError(
      f"No model file at {path}: pass a .keras `checkpoint` or the "
      "`model_dir` of a finished training run."
    )
  return path


def load_checkpoint(model_dir=None, checkpoint=None):
  """The Keras model of ``checkpoint`` (a ``.keras`` file), else of ``model_dir/best.keras``.

  Raises:
    NotFoundError: there is no such file.
    DamagedFileError: the file is not a Keras model Keras can read (truncated by a kill before
      best.keras was written atomically, or not a model at all).
  """
  path = checkpoint_path(model_dir, checkpoint)
  try:
    if path.endswith(".keras") and not zipfile.is_zipfile(path):
      raise ValueError("not a whole .keras zip archive")  # Keras says "File not found"
    return keras.models.load_model(path)
  except Exception as e:  # Keras raises many kinds (zip, h5, JSON, deserialisation) for one cause
    fix = (
      "Delete it and run tfrank4class-train on its `model_dir` again (a finished run trains "
      "again; --start_over deletes the whole run)."
      if checkpoint is None
      else "Pass a .keras file saved by Keras (model.save)."
    )
    raise errors.DamagedFileError(path, "model file", e, fix) from None
