"""Training a Rank4Class model end to end: the library behind ``tfrank4class-train``.

    data.load -> encoder -> Rank4ClassHead -> scores -> registry loss; registry metrics

``ExperimentConfig`` holds every choice (the binary's flags map onto it one to one) and is
validated before any data is read. ``train(config)`` builds the strategy, the input stream, the
model and the callbacks and calls ``fit``; ``model_dir`` receives:

    checkpoints/epoch_NNN.weights.h5   the weights after every epoch
    best.keras                         the whole model at the best validation ``best_metric``
    logs/                              TensorBoard
    backup/                            BackupAndRestore and ``EpochMetricsBackup`` (removed when
                                       training ends)
    config.json, class_names.txt       what the run was, for evaluate and export
    results.json                       the training binary's final table
    train.lock                         the process training there (``lock_model_dir``)

One run per directory. ``train`` takes ``model_dir`` for its process (``lock_model_dir``): a
second run on the same directory refuses at once, naming the run that holds it; a lock left by a
killed run is taken over. A directory that holds a run (its ``config.json``) is only reused with
the same configuration, but for the fields in ``RESUMABLE_CHANGES`` (how the run executes, not
what it trains): anything else is refused with the differing fields named, unless ``start_over``
deletes the old run's files (``RUN_FILES``) first.

Resuming. A killed run started again with the same command resumes from ``backup/`` and says so
(the epoch and step it continues at). Keras restores the weights, the optimizer and its (epoch,
step) counters, but reads the input from its start; so the training input is one seeded,
repeated shuffle of the training split and, on a restart, this module reads the saved counters
first and skips exactly the batches already trained on. ``EpochMetricsBackup`` carries the
interrupted epoch's metric accumulators and the best validation value so far across the
restart, so the epoch's logs, History, TensorBoard scalars and the best-checkpoint choice are
those of the whole epoch. With the same seed, deterministic ops (``tf.config.experimental.
enable_op_determinism``) and no dropout, a resumed run ends with the same weights and metrics as
an uninterrupted one; with dropout it is statistically, not bitwise, the same run (the dropout
random state is not in the backup).
"""

import atexit
import collections
import dataclasses
import datetime
import json
import os
import re
import shutil
import socket
import sys
import tempfile

import numpy as np
import tensorflow as tf
from absl import logging as absl_logging

from tfrank4class import _validation, compat, errors
from tfrank4class import data as data_lib
from tfrank4class import encoders as encoders_lib
from tfrank4class import heads as heads_lib
from tfrank4class import losses as losses_lib
from tfrank4class import metrics as metrics_lib
from tfrank4class.compat import keras
from tfrank4class.registry import Registry
from tfrank4class.train import strategy as strategy_lib

#: The optimizers by name: ``OPTIMIZERS.get(name, learning_rate=...)``.
OPTIMIZERS = Registry("optimizer", argument="optimizer")
OPTIMIZERS.add("adam", keras.optimizers.Adam)
OPTIMIZERS.add("adagrad", keras.optimizers.Adagrad)
#: The interaction names (of the one interaction registry, ``heads.INTERACTIONS``).
INTERACTIONS = heads_lib.INTERACTIONS.names()
#: MLP widths of the latent_cross and concat interactions when ``hidden_units`` is not given.
DEFAULT_HIDDEN_UNITS = (128, 128)
#: Encoders chosen by ``encoder="auto"``, per modality.
AUTO_ENCODERS = {"text": "transformer", "image": "small_cnn"}
#: Defaults of the auto text encoder: small enough to train from scratch on a CPU in minutes.
TEXT_DEFAULTS = {
  "max_tokens": 20_000,
  "sequence_length": 48,
  "embedding_dim": 64,
  "num_heads": 2,
  "num_layers": 1,
  "ff_dim": 128,
  "dropout": 0.0,
}


@dataclasses.dataclass
class ExperimentConfig:
  """Everything a training run needs; see ``tfrank4class-train --helpfull`` for each field.

  ``hidden_units=None`` means ``DEFAULT_HIDDEN_UNITS`` for the MLP interactions (latent_cross,
  concat) and ``()`` for ``dot``, which has no MLP (explicit units with ``dot`` are refused).
  """

  dataset: str = "goemotions_sample"
  data_dir: str = None
  on_corrupt: str = "error"
  encoder: str = "auto"
  encoder_kwargs: dict = dataclasses.field(default_factory=dict)
  interaction: str = "latent_cross"
  hidden_units: tuple = None
  loss: str = "softmax_loss"
  loss_kwargs: dict = dataclasses.field(default_factory=dict)
  metrics: tuple = ("top_1", "top_5", "ndcg_5", "mrr")
  batch_size: int = 64
  epochs: int = 3
  steps: int = None
  optimizer: str = "adam"
  learning_rate: float = 1e-3
  strategy: str = "default"
  tpu: str = None
  devices: tuple = None
  model_dir: str = None
  export_dir: str = None
  seed: int = 0
  best_metric: str = "ndcg_5"
  backup_every: int = 100
  start_over: bool = False
  verbose: int = 1

  def __post_init__(self):
    if self.hidden_units is None:
      self.hidden_units = () if self.interaction == "dot" else DEFAULT_HIDDEN_UNITS

  def validate(self):
    """Checks every field; raises ``ValueError`` naming the field, the value and what is allowed.

    Pure Python: it creates no TensorFlow object, so it may run before a multi-worker strategy
    (which must be created before TensorFlow's runtime starts). Loss arguments are checked when
    ``train`` first builds the loss, right after the strategy and still before any data is read.
    """
    _validation.check_choice("dataset", self.dataset, data_lib.names())
    _validation.check_choice("on_corrupt", self.on_corrupt, data_lib.ON_CORRUPT)
    if self.encoder != "auto":
      _validation.check_choice("encoder", self.encoder, ["auto"] + list(encoders_lib.names()))
    _validation.check_choice("interaction", self.interaction, INTERACTIONS)
    _validation.check_choice("loss", self.loss, losses_lib.names())
    for name in self.metrics:
      metrics_lib.registry.parse(name)
    metrics_lib.registry.parse(self.best_metric)
    if self.best_metric not in self.metrics:
      raise ValueError(
        f"`best_metric` {self.best_metric!r} must be one of `metrics` {list(self.metrics)}."
      )
    for units in self.hidden_units:
      _validation.check_int("hidden_units", units, minimum=1)
    if self.interaction == "dot" and len(self.hidden_units):
      raise ValueError(
        f"`hidden_units` {tuple(self.hidden_units)} is not used by `interaction` "
        "'dot' (a dot product has no MLP); only 'latent_cross' and 'concat' take "
        "it. Leave `hidden_units` unset with 'dot'."
      )
    _validation.check_int("batch_size", self.batch_size, minimum=1)
    _validation.check_int("epochs", self.epochs, minimum=1)
    _validation.check_int("steps", self.steps, minimum=1, allow_none=True)
    _validation.check_choice("optimizer", self.optimizer, OPTIMIZERS)
    _validation.check_float("learning_rate", self.learning_rate, minimum=0.0, strict=True)
    _validation.check_choice("strategy", self.strategy, strategy_lib.STRATEGIES)
    if self.strategy == "tpu" and not self.tpu:
      raise ValueError(
        "`tpu` must name a TPU (a name, or grpc://host:port) when `strategy` is 'tpu'."
      )
    if self.strategy == "multi_worker_mirrored" and not self.model_dir:
      raise ValueError(
        "`model_dir` is required when `strategy` is 'multi_worker_mirrored': the "
        "chief evaluates and exports the best.keras it writes there."
      )
    _validation.check_int("seed", self.seed, minimum=0)
    _validation.check_int("backup_every", self.backup_every, minimum=1)
    if not isinstance(self.start_over, bool):
      raise ValueError(f"`start_over` must be True or False, got {self.start_over!r}.")
    return self

  def to_json(self):
    return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

  @classmethod
  def from_model_dir(cls, model_dir):
    """The config a run wrote to ``model_dir/config.json``."""
    path = os.path.join(model_dir, "config.json")
    if not os.path.exists(path):
      raise errors.NotFoundError(
        f"No training run in `model_dir` {model_dir!r}: {path} is missing."
      )
    with open(path) as f:
      return cls(**json.load(f))


def quiet_tensorflow_logs():
  """Hides TensorFlow's Python INFO lines (SavedModel tracing chatter); warnings still show.

  TensorFlow logs through both its ``tensorflow`` logger and ``absl.logging``.
  """
  tf.get_logger().setLevel("WARNING")
  absl_logging.set_verbosity(absl_logging.WARNING)


#: The lock file of a run in ``model_dir``.
LOCK_FILE = "train.lock"
#: What a run writes in ``model_dir`` (``start_over`` deletes them; ``export_dir`` is left alone).
RUN_FILES = (
  "backup",
  "checkpoints",
  "logs",
  "best.keras",
  "config.json",
  "class_names.txt",
  "results.json",
)
#: Config fields that say how a run executes, not what it trains: a resumed run may change them.
RESUMABLE_CHANGES = (
  "model_dir",
  "export_dir",
  "strategy",
  "tpu",
  "devices",
  "backup_every",
  "start_over",
  "verbose",
)
_LOCKS_HELD = set()
#: Keras 3's backup of the weights and the optimizer after ``S`` training steps (``S``: group 1).
_STEP_WEIGHTS = re.compile(r"step_(\d+)\.weights\.h5")


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
  _LOCKS_HELD.add(os.path.realpath(path))
  atexit.register(_release_lock, path, mine)
  return path


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

  With ``start_over`` it deletes the ``RUN_FILES`` of a previous run there (and says so).
  Otherwise a previous run's ``config.json`` must match ``config`` but for
  ``RESUMABLE_CHANGES``: the same run resumes (or, finished, trains again from scratch).

  Raises:
    ConfigMismatchError: ``model_dir`` holds a run with another configuration; the message
      names each differing field with both values.
  """
  model_dir = config.model_dir
  if config.start_over:
    removed = [name for name in RUN_FILES if os.path.lexists(os.path.join(model_dir, name))]
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


class EpochMetricsBackup(keras.callbacks.Callback):
  """Carries an interrupted epoch's metrics, and the best validation value, across a resume.

  ``keras.callbacks.BackupAndRestore(backup_dir, save_freq=n)`` of Keras 2 backs up the weights,
  the optimizer and the (epoch, step) counters every ``n`` steps, but a resumed ``fit`` starts
  the interrupted epoch's metric accumulators from zero, so that epoch's logs, History and
  TensorBoard scalars would cover only the steps after the restart; and a new
  ``ModelCheckpoint(save_best_only=True)`` has forgotten the best value so far.

  Placed before ``BackupAndRestore`` in the callback list with the same ``save_freq``, this
  callback writes the metrics' accumulators (``metric.variables`` of ``model.metrics``) to the
  JSON file ``path`` at the same steps, counted the same way (from the start of ``fit``, every
  ``save_freq`` batches); it keeps the last two writes, so that one matches the backup even if
  the process dies between the two. After the first resumed step it adds the accumulators saved
  at the backup's step to the current ones. Adding is exact for metrics whose state is a sum
  over batches, as for every ``keras.metrics.Mean`` (total and count): the loss and every
  metric of this package. It also records ``monitor`` at the end of every epoch, for
  ``best_so_far``. The chief writes; every worker reads the same values; the file is removed
  when training ends.

  Keras 3 (``weights=True``). Keras 3's ``BackupAndRestore`` keeps no step counter: it restores
  a mid-epoch backup, then trains the interrupted epoch again from its first step (a resumed run
  is then not the uninterrupted one), and every worker of a multi-worker run writes the same
  files. So on Keras 3 this callback is the whole backup: at each of its saves the chief also
  writes the weights and the optimizer state (``model.save_weights``) to
  ``step_<S>.weights.h5`` beside ``path``, ``S`` being the number of steps trained (the
  metrics first, so a kill in between leaves a matching pair), and deletes the older one (the
  other workers save too, to a scratch file: a Keras 3 save creates variables, which are
  collective ops under a multi-worker strategy);
  ``resume_position`` reads ``S``, ``train`` loads the file before ``fit(initial_epoch=...)``,
  and this callback ends the resumed epoch after its remaining steps (``fit`` would run
  ``steps_per_epoch`` more): it sets ``model.stop_training`` after the epoch's last step, which
  ends that epoch's step loop, and clears it at the epoch's end, so the next epochs run whole.

  Args:
    path: the JSON file (in the backup directory).
    save_freq: ``BackupAndRestore``'s ``save_freq`` (an integer number of batches).
    resume_at: ``(epoch, step)`` at which ``fit`` resumes (``resume_position``).
    monitor: the logged value to record per epoch, e.g. ``"val_ndcg_5"``.
    chief: whether this process writes the files.
    steps_per_epoch: the steps of an epoch (needed with ``weights``).
    weights: also back up the weights and resume mid-epoch (Keras 3), as above.
  """

  def __init__(
    self, path, save_freq, resume_at, monitor, chief=True, steps_per_epoch=None, weights=False
  ):
    super().__init__()
    self.path = path
    self.save_freq = save_freq
    self.resume_at = tuple(resume_at)
    self.monitor = monitor
    self.chief = chief
    self.steps_per_epoch = steps_per_epoch
    self.weights = weights

  @staticmethod
  def read(path):
    """The saved state ``{"saves": [...], "best": {epoch: value}}`` (empty if there is none)."""
    if not os.path.exists(path):
      return {"saves": [], "best": {}}
    with open(path) as f:
      return json.load(f)

  def _write(self):
    if self.chief:
      os.makedirs(os.path.dirname(self.path), exist_ok=True)
      with open(self.path + ".tmp", "w") as f:
        json.dump(self._state, f)
      os.replace(self.path + ".tmp", self.path)

  def _save_weights(self, steps_done):
    if not self.chief:
      # Every worker saves: Keras 3 saving creates variables, which under a multi-worker
      # strategy are collective ops that all workers must run. The others save to a scratch file.
      with tempfile.TemporaryDirectory() as scratch:
        self.model.save_weights(os.path.join(scratch, "step.weights.h5"))
      return
    backup_dir = os.path.dirname(self.path)
    path = os.path.join(backup_dir, f"step_{steps_done:09d}.weights.h5")
    partial = path + ".partial.weights.h5"  # Keras names weight files *.weights.h5
    self.model.save_weights(partial, overwrite=True)
    os.replace(partial, path)
    for name, _ in _step_weights(backup_dir):
      if os.path.join(backup_dir, name) != path:
        os.remove(os.path.join(backup_dir, name))

  def on_train_begin(self, logs=None):
    self._state = self.read(self.path)
    self._count = 0
    self._epoch = 0
    self._offset = 0
    self._pending = self.resume_at if self.resume_at[1] > 0 else None

  def on_epoch_begin(self, epoch, logs=None):
    self._epoch = epoch
    # Keras 3 numbers the resumed epoch's batches from 0; Keras 2 from the resumed step.
    self._offset = self.resume_at[1] if self.weights and self._pending is not None else 0

  def on_train_batch_end(self, batch, logs=None):
    if self._pending is not None:
      self._restore(*self._pending)
      self._pending = None
    step = int(batch) + self._offset
    self._count += 1
    if self._count >= self.save_freq:
      self._count = 0
      values = {m.name: [v.numpy().tolist() for v in m.variables] for m in self.model.metrics}
      save = {"epoch": self._epoch, "batch": step, "metrics": values}
      self._state["saves"] = (self._state["saves"] + [save])[-2:]
      self._write()
      if self.weights:
        self._save_weights(self._epoch * self.steps_per_epoch + step + 1)
    if self._offset and step == self.steps_per_epoch - 1:
      self.model.stop_training = True  # the resumed epoch's last step

  def _restore(self, epoch, step):
    saved = [s for s in self._state["saves"] if (s["epoch"], s["batch"]) == (epoch, step - 1)]
    if not saved:
      print(
        f"No metric backup for epoch {epoch + 1}, step {step} in {self.path}: the training "
        f"metrics of epoch {epoch + 1} cover only the steps after the restart.",
        file=sys.stderr,
        flush=True,
      )
      return
    for metric in self.model.metrics:
      for variable, value in zip(metric.variables, saved[0]["metrics"][metric.name]):
        variable.assign(
          variable.numpy() + np.asarray(value, tf.as_dtype(variable.dtype).as_numpy_dtype)
        )

  def on_epoch_end(self, epoch, logs=None):
    if self._offset:
      self._offset = 0
      self.model.stop_training = False  # the next epochs run whole
    if logs and self.monitor in logs:
      self._state["best"][str(epoch)] = float(logs[self.monitor])
      self._write()

  def on_train_end(self, logs=None):
    if not self.chief:
      return
    if os.path.exists(self.path):
      os.remove(self.path)
    if self.weights:
      backup_dir = os.path.dirname(self.path)
      for name, _ in _step_weights(backup_dir):
        os.remove(os.path.join(backup_dir, name))
      if os.path.isdir(backup_dir) and not os.listdir(backup_dir):
        os.rmdir(backup_dir)


def _step_weights(backup_dir):
  """``[(file name, steps trained)]`` of the Keras 3 weight backups in ``backup_dir``."""
  if not os.path.isdir(backup_dir):
    return []
  found = [(name, _STEP_WEIGHTS.fullmatch(name)) for name in sorted(os.listdir(backup_dir))]
  return [(name, int(match.group(1))) for name, match in found if match]


def best_so_far(path, epoch):
  """The highest value ``EpochMetricsBackup`` recorded at ``path`` for the epochs before ``epoch``
  (``None`` if none): a resumed run's ``ModelCheckpoint(initial_value_threshold=...)``."""
  values = [v for e, v in EpochMetricsBackup.read(path)["best"].items() if int(e) < epoch]
  return max(values) if values else None


def validation_split(dataset):
  """The split used to pick the best checkpoint: ``validation`` where the dataset has one."""
  return "test" if dataset.startswith("cifar") else "validation"


def build_model(config, info):
  """The Rank4Class model for ``info`` (a ``DatasetInfo``), compiled as ``config`` says."""
  name = AUTO_ENCODERS[info.modality] if config.encoder == "auto" else config.encoder
  kwargs = dict(config.encoder_kwargs)
  if name == "transformer":
    kwargs = {**TEXT_DEFAULTS, **kwargs}
    vectorizer = data_lib.adapt_text_vectorization(
      config.dataset,
      config.data_dir,
      max_tokens=kwargs.pop("max_tokens"),
      output_sequence_length=kwargs["sequence_length"],
      on_corrupt=config.on_corrupt,
    )
    encoder = encoders_lib.get(name, text_vectorization=vectorizer, **kwargs)
  elif info.modality == "image":
    kwargs.setdefault("input_shape", tuple(info.image_size) + (3,))
    encoder = encoders_lib.get(name, **kwargs)
  else:
    encoder = encoders_lib.get(name, **kwargs)
  model = heads_lib.build_model(
    encoder,
    info.num_classes,
    interaction=config.interaction,
    hidden_units=tuple(config.hidden_units),
  )
  model.compile(
    optimizer=OPTIMIZERS.get(config.optimizer, learning_rate=config.learning_rate),
    loss=losses_lib.get(config.loss, **config.loss_kwargs),
    metrics=[metrics_lib.get(m) for m in config.metrics],
  )
  return model


def _count_batches(dataset):
  cardinality = int(dataset.cardinality())
  if cardinality >= 0:
    return cardinality
  return int(dataset.reduce(0, lambda count, _: count + 1))


def resume_position(backup_dir, steps_per_epoch):
  """``(epoch, step)`` at which training resumes from ``backup_dir``, or ``(0, 0)``.

  Keras 3: from the steps trained, ``S``, of the newest ``step_<S>.weights.h5`` written by
  ``EpochMetricsBackup``: ``divmod(S, steps_per_epoch)``. Keras 2: Keras 2.15's own rule for
  its ``BackupAndRestore`` step-level backups, whose counters name the last finished batch.
  """
  if compat.KERAS_3:
    saved = _step_weights(backup_dir)
    return divmod(saved[-1][1], steps_per_epoch) if saved else (0, 0)
  latest = tf.train.latest_checkpoint(os.path.join(backup_dir, "chief"))
  if latest is None:
    return 0, 0
  reader = tf.train.load_checkpoint(latest)
  epoch = int(reader.get_tensor("ckpt_saved_epoch/.ATTRIBUTES/VARIABLE_VALUE"))
  batch = int(reader.get_tensor("ckpt_saved_batch/.ATTRIBUTES/VARIABLE_VALUE"))
  if epoch < 0:
    return 0, 0
  if batch < 0 or batch == steps_per_epoch - 1:
    return epoch + 1, 0
  return epoch, batch + 1


def _input_fn(config, split, training):
  def make(input_context=None):
    return data_lib.load(
      config.dataset,
      split,
      config.data_dir,
      batch_size=config.batch_size,
      training=training,
      shuffle=training,
      shuffle_seed=config.seed,
      deterministic=True,
      repeat=training,
      drop_remainder=training,
      input_context=input_context,
      on_corrupt=config.on_corrupt,
    )

  return make


def _is_multi_worker(strategy):
  return isinstance(
    strategy, (tf.distribute.MultiWorkerMirroredStrategy, tf.distribute.TPUStrategy)
  )


def _full_batches(config, split):
  """Full global batches in one pass over ``split``."""
  return _count_batches(
    data_lib.load(
      config.dataset,
      split,
      config.data_dir,
      batch_size=config.batch_size,
      training=False,
      shuffle=False,
      drop_remainder=True,
      on_corrupt=config.on_corrupt,
    )
  )


def _distribute(strategy, config, make):
  """Plain dataset for one worker (Keras splits each global batch); per-worker shards otherwise."""
  if _is_multi_worker(strategy):
    # `load` divides the global batch size per replica itself when given the input context.
    return strategy.distribute_datasets_from_function(make)
  return make()


def _log_vectors(model):
  """Makes a Keras 3 model's train and test steps log ``[1]`` vectors instead of scalars.

  Keras 3 (3.15) averages a step's logged values over the workers of a multi-worker strategy
  with ``strategy.reduce("MEAN", value, axis=0)``, which fails on scalars ("Invalid reduction
  dimension 0", tensorflow/tensorflow#72388), and its ``distribute_reduction_method`` does not
  reach that call. Over ``[1]`` vectors the same reduction is the mean over workers, a scalar.
  This changes only the per-step logs; epoch-end logs (what checkpoints and
  ``EpochMetricsBackup`` read) are the metrics' results read across replicas, as before.
  """
  for name in ("train_step", "test_step"):
    step = getattr(model, name)

    def vector_step(data, step=step):
      return {k: tf.reshape(v, [1]) for k, v in step(data).items()}

    setattr(model, name, vector_step)


def _fit(model, strategy, data, **kwargs):
  """``model.fit(data, **kwargs)`` in ``strategy``'s scope; returns the History.

  Keras 3 (3.15) builds a model created in a strategy's scope before its first step from the
  first input batch averaged over the replicas (``strategy.reduce("MEAN", batch)``), which fails
  for string inputs (text models: no sum of strings). A Keras 3 model whose private
  ``_distribute_strategy`` is unset builds while its train step is traced instead, and still
  trains on every replica of ``strategy``, which ``fit`` then takes from the scope. Only such
  models are changed.
  """
  if (
    compat.KERAS_3
    and strategy.num_replicas_in_sync > 1
    and any(tf.as_dtype(x.dtype) == tf.string for x in model.inputs)
  ):
    model._distribute_strategy = None  # pylint: disable=protected-access
  with strategy.scope():
    return model.fit(data, **kwargs)


TrainResult = collections.namedtuple("TrainResult", ["model", "history", "info", "strategy"])


def _barrier(strategy):
  """Returns once every worker of a multi-worker strategy has reached it (a 1-number all-reduce)."""
  strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.constant(1.0)), axis=None)


def train(config):
  """Trains as ``config`` says; returns a ``TrainResult(model, history, info, strategy)``.

  Raises ``ValueError`` for a bad config, ``ModelDirInUseError`` when another run holds
  ``model_dir`` and ``ConfigMismatchError`` when ``model_dir`` holds a run with another
  configuration, all before reading any data; then the data pipeline's ``DataNotFoundError`` for
  a missing ``data_dir`` and ``MalformedRowError`` for a malformed line (with
  ``on_corrupt="error"``). Op determinism is on while it runs; the process's setting is restored
  after.
  """
  with compat.op_determinism():
    return _train(config)


def _train(config):
  config.validate()
  strategy = strategy_lib.make_strategy(config.strategy, config.tpu, config.devices)
  chief = strategy_lib.is_chief(strategy)
  keras.utils.set_random_seed(config.seed)
  with strategy.scope():
    try:  # bad loss arguments fail before any data is read
      losses_lib.get(config.loss, **config.loss_kwargs)
    except (TypeError, ValueError) as e:
      raise errors.InvalidConfigError(f"`loss_kwargs` of {config.loss!r}: {e}") from e
  model_dir = config.model_dir
  if model_dir:
    os.makedirs(model_dir, exist_ok=True)
    if chief:
      lock_model_dir(model_dir)
      prepare_model_dir(config)
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
      _barrier(strategy)  # the other workers read the backup after the chief's start_over

  info = data_lib.info(config.dataset, config.data_dir)
  val_split = validation_split(config.dataset)

  steps_per_epoch = config.steps or _full_batches(config, "train")
  if steps_per_epoch < 1:
    raise errors.InvalidConfigError(
      f"The training split of {config.dataset!r} has fewer examples than one "
      f"batch ({config.batch_size})."
    )
  callbacks = []
  epoch = skip = 0
  scratch_dir = None
  if model_dir:
    backup_dir = os.path.join(model_dir, "backup")
    epoch, step = resume_position(backup_dir, steps_per_epoch)
    skip = epoch * steps_per_epoch + step
    monitor = f"val_{config.best_metric}"
    state_path = os.path.join(backup_dir, "epoch_metrics.json")
    callbacks = [
      EpochMetricsBackup(
        state_path,
        config.backup_every,
        (epoch, step),
        monitor,
        chief,
        steps_per_epoch=steps_per_epoch,
        weights=compat.KERAS_3,
      )
    ]
    if not compat.KERAS_3:
      callbacks.append(keras.callbacks.BackupAndRestore(backup_dir, save_freq=config.backup_every))
    # Every worker runs the file-writing callbacks: a Keras 3 save creates variables (its
    # reference `Optimizer` in `saving_lib.get_attr_skipset`), collective ops under a
    # multi-worker strategy, so a save on the chief alone would wait for the others forever or
    # pair with another collective. Keras 2's callbacks give each non-chief worker a
    # temporary directory of its own; Keras 3's would write the chief's files, so here the
    # non-chief workers write into `scratch_dir`, deleted after `fit`.
    if not chief and compat.KERAS_3:
      scratch_dir = tempfile.mkdtemp(prefix="tfrank4class_worker_")
    files_dir = scratch_dir or model_dir
    callbacks += [
      keras.callbacks.ModelCheckpoint(
        os.path.join(files_dir, "checkpoints", "epoch_{epoch:03d}.weights.h5"),
        save_weights_only=True,
      ),
      keras.callbacks.ModelCheckpoint(
        os.path.join(files_dir, "best.keras"),
        monitor=monitor,
        mode="max",
        save_best_only=True,
        initial_value_threshold=best_so_far(state_path, epoch),
      ),
      keras.callbacks.TensorBoard(os.path.join(files_dir, "logs")),
    ]
    if chief:
      if skip:
        print(
          f"Resuming the run in {model_dir} from its backup: at epoch {epoch + 1} of "
          f"{config.epochs}, step {step + 1} of {steps_per_epoch} ({skip} steps trained "
          "before the restart).",
          flush=True,
        )
      with open(os.path.join(model_dir, "config.json"), "w") as f:
        f.write(config.to_json())
      with open(os.path.join(model_dir, "class_names.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(info.class_names) + "\n")

  make_train = _input_fn(config, "train", training=True)
  make_val = _input_fn(config, val_split, training=False)
  train_data = _distribute(
    strategy, config, lambda *a: make_train(*a).skip(skip) if skip else make_train(*a)
  )
  val_data = _distribute(strategy, config, make_val)
  with strategy.scope():
    model = build_model(config, info)
    if compat.KERAS_3 and isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
      _log_vectors(model)
    if compat.KERAS_3 and skip:  # Keras 2's BackupAndRestore restores its own backup
      model.optimizer.build(model.trainable_variables)
      model.load_weights(os.path.join(backup_dir, _step_weights(backup_dir)[-1][0]))
  # Sharded validation sets need a step count; every worker has at least this many batches.
  validation_steps = (
    max(1, _full_batches(config, val_split)) if _is_multi_worker(strategy) else None
  )
  try:
    history = _fit(
      model,
      strategy,
      train_data,
      epochs=config.epochs,
      initial_epoch=epoch,
      steps_per_epoch=steps_per_epoch,
      validation_data=val_data,
      validation_steps=validation_steps,
      callbacks=callbacks,
      verbose=config.verbose,
    )
  finally:
    if scratch_dir:
      shutil.rmtree(scratch_dir, ignore_errors=True)
  return TrainResult(model, history, info, strategy)


def best_model(config, result):
  """The model of ``model_dir/best.keras`` if the run wrote one, else ``result.model``.

  Under multi-worker training only the chief calls this: the loaded copy is not distributed, so
  evaluating and exporting it needs no collective op from the other workers.
  """
  if config.model_dir and os.path.exists(os.path.join(config.model_dir, "best.keras")):
    return load_checkpoint(config.model_dir)
  return result.model


def load_checkpoint(model_dir=None, checkpoint=None):
  """The Keras model of ``checkpoint`` (a ``.keras`` file), else of ``model_dir/best.keras``."""
  path = checkpoint or os.path.join(model_dir or "", "best.keras")
  if not os.path.isfile(path):
    raise errors.NotFoundError(
      f"No model file at {path}: pass a .keras `checkpoint` or the "
      "`model_dir` of a finished training run."
    )
  return keras.models.load_model(path)


def evaluate_splits(model, config):
  """``[(split, {metric: value})]`` on the validation split and the test split."""
  splits = dict.fromkeys([validation_split(config.dataset), "test"])
  return [
    (split, evaluate(model, config.dataset, split, config.data_dir, on_corrupt=config.on_corrupt))
    for split in splits
  ]


def evaluate(
  model, dataset, split, data_dir=None, batch_size=256, metric_names=None, on_corrupt="error"
):
  """``{metric name: value}`` of a scores model on a split (Top-1, Top-5, NDCG@5, MRR by default).

  ``on_corrupt`` (``"error"`` or ``"skip"``) is passed to ``tfrank4class.data.load``.
  """
  metric_names = metric_names or ("top_1", "top_5", "ndcg_5", "mrr")
  metric_objects = [metrics_lib.get(m) for m in metric_names]
  for features, labels in data_lib.load(
    dataset,
    split,
    data_dir,
    batch_size=batch_size,
    training=False,
    shuffle=False,
    on_corrupt=on_corrupt,
  ):
    scores = model(features, training=False)
    for metric in metric_objects:
      metric.update_state(labels, scores)
  return {name: float(m.result()) for name, m in zip(metric_names, metric_objects)}


def format_table(rows, columns):
  """A plain-text table: ``rows`` is a list of (label, {column: value})."""
  width = max([len("run")] + [len(label) for label, _ in rows])
  head = f"{'run':<{width}}  " + "  ".join(f"{c:>8}" for c in columns)
  lines = [head, "-" * len(head)]
  for label, values in rows:
    lines.append(f"{label:<{width}}  " + "  ".join(f"{values[c]:>8.4f}" for c in columns))
  return "\n".join(lines)
