"""The mid-run backup a killed training run resumes from: ``EpochMetricsBackup``.

A killed run started again with the same command resumes from ``model_dir/backup/`` and says so
(the epoch and step it continues at). Keras restores the weights, the optimizer and its (epoch,
step) counters, but reads the input from its start; so the training input is one seeded,
repeated shuffle of the training split and, on a restart, ``tfrank4class.train.experiment``
reads the saved counters first and skips exactly the batches already trained on.
``EpochMetricsBackup`` carries the interrupted epoch's metric accumulators and the best
validation value so far across the restart, so the epoch's logs, History, TensorBoard scalars
and the best-checkpoint choice are those of the whole epoch. With the same seed, deterministic
ops (``tf.config.experimental.enable_op_determinism``) and no dropout, a resumed run ends with
the same weights and metrics as an uninterrupted one; with dropout it is statistically, not
bitwise, the same run (the dropout random state is not in the backup). How each Keras flavour
backs up the weights is ``tfrank4class.train.flavour``'s business.
"""

import json
import os
import re
import sys
import tempfile

import numpy as np
import tensorflow as tf

from tfrank4class import atomic, errors
from tfrank4class.compat import keras

#: The file of ``EpochMetricsBackup`` in the backup directory.
STATE_FILE = "epoch_metrics.json"
#: Keras 3's backup of the weights and the optimizer after ``S`` training steps (``S``: group 1).
_STEP_WEIGHTS = re.compile(r"step_(\d+)\.weights\.h5")


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
  ``flavour.Keras3Training`` reads ``S`` and loads the file before ``fit(initial_epoch=...)``,
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
    """The saved state ``{"saves": [...], "best": {epoch: value}}`` (empty if there is none).

    Raises:
      DamagedFileError: the file is not such a state (garbled, or edited by hand); the message
        names it and says what to do.
    """
    if not os.path.exists(path):
      return {"saves": [], "best": {}}
    try:
      with open(path, encoding="utf-8") as f:
        state = json.load(f)
      _check_state(state)
    except (ValueError, TypeError, KeyError) as e:
      raise errors.DamagedFileError(
        path,
        "metrics backup",
        e,
        "Delete it: the run then resumes without the interrupted epoch's training metrics and "
        "the best validation value so far (or start over with --start_over).",
      ) from None
    return state

  def _write(self):
    if self.chief:
      os.makedirs(os.path.dirname(self.path), exist_ok=True)
      atomic.write_text(self.path, json.dumps(self._state))

  def _save_weights(self, steps_done):
    if not self.chief:
      # Every worker saves: Keras 3 saving creates variables, which under a multi-worker
      # strategy are collective ops that all workers must run. The others save to a scratch file.
      with tempfile.TemporaryDirectory() as scratch:
        self.model.save_weights(os.path.join(scratch, "step.weights.h5"))
      return
    backup_dir = os.path.dirname(self.path)
    path = os.path.join(backup_dir, f"step_{steps_done:09d}.weights.h5")
    with atomic.writing(path) as partial:  # it keeps the ending Keras requires, .weights.h5
      self.model.save_weights(partial, overwrite=True)
    for name, _ in step_weight_files(backup_dir):
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
      for name, _ in step_weight_files(backup_dir):
        os.remove(os.path.join(backup_dir, name))
      if os.path.isdir(backup_dir) and not os.listdir(backup_dir):
        os.rmdir(backup_dir)


def _check_state(state):
  """Raises ``ValueError`` (``TypeError``, ``KeyError``) unless ``state`` is what
  ``EpochMetricsBackup`` writes."""
  if not isinstance(state, dict) or set(state) != {"saves", "best"}:
    raise ValueError('a JSON object with the keys "saves" and "best" is expected')
  for save in state["saves"]:
    if not (isinstance(save["epoch"], int) and isinstance(save["batch"], int)):
      raise ValueError(f"a save's epoch and batch must be integers, got {save!r}")
    if not isinstance(save["metrics"], dict):
      raise ValueError(f"a save's metrics must be a JSON object, got {save['metrics']!r}")
  for epoch, value in state["best"].items():
    if not epoch.isdigit() or isinstance(value, bool) or not isinstance(value, (int, float)):
      raise ValueError(f'"best" must map epochs to numbers, got {epoch!r}: {value!r}')


def step_weight_files(backup_dir):
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
