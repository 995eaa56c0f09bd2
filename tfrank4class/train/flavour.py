"""What training does differently on Keras 3 and on Keras 2, in one place: ``TRAINING``.

Keras 3 and Keras 2 (tf-keras) differ in how a run backs up
and resumes mid-epoch, how a multi-worker run logs its steps, where the workers other than the
chief write their files, how a model whose inputs are strings is built under a strategy, and how
a SavedModel is written. Each flavour is one class with the same methods; ``TRAINING`` is the
one for the Keras ``tfrank4class.compat`` chose, picked once here. The rest of ``train/`` calls
``TRAINING`` and tests no Keras version.

Example:
  >>> TRAINING.resume_position("/nonexistent/backup", steps_per_epoch=10)
  (0, 0)
"""

import os
import tempfile

import tensorflow as tf

from tfrank4class import compat, errors
from tfrank4class.compat import keras
from tfrank4class.train import backup
from tfrank4class.train import strategy as strategy_lib


def _metrics_backup(backup_dir, save_freq, resume_at, monitor, chief, steps_per_epoch, **kwargs):
  """The ``EpochMetricsBackup`` of a run, writing its state file into ``backup_dir``."""
  return backup.EpochMetricsBackup(
    os.path.join(backup_dir, backup.STATE_FILE),
    save_freq,
    resume_at,
    monitor,
    chief,
    steps_per_epoch=steps_per_epoch,
    **kwargs,
  )


def damaged_backup(path, backup_dir, error):
  """The ``DamagedFileError`` of a backup file the run cannot resume from."""
  return errors.DamagedFileError(
    path,
    "backup",
    error,
    f"Delete the folder {backup_dir} to train this run again from its first epoch (or start "
    "over with --start_over).",
  )


def _symbolic_inputs(model):
  """The symbolic inputs of ``model``: a functional model's own, else those of the functional
  ``encoder`` a subclassed model wraps (:class:`tfrank4class.heads.SampledClassifier`), else
  none."""
  for holder in (model, getattr(model, "encoder", None)):
    inputs = getattr(holder, "inputs", None)
    if inputs:
      return inputs
  return []


def _fit_in_scope(model, strategy, data, **kwargs):
  with strategy.scope():
    return model.fit(data, **kwargs)


class Keras2Training:
  """Training on Keras 2: Keras's own ``BackupAndRestore`` holds the mid-epoch backup.

  ``BackupAndRestore(backup_dir, save_freq=n)`` backs up the weights, the optimizer and the
  (epoch, step) counters every ``n`` steps and restores them itself; ``EpochMetricsBackup``
  beside it carries the metric accumulators. Each non-chief worker's file-writing callbacks
  write into a temporary directory of their own, and ``tf.saved_model.save`` writes exports.
  """

  #: Whether ``--sampled_negatives`` can train (its sampler draws with ``keras.random``).
  SAMPLED_TRAINING = False

  def resume_position(self, backup_dir, steps_per_epoch):
    """``(epoch, step)`` at which training resumes from ``backup_dir``, or ``(0, 0)``.

    Keras 2's own rule for its ``BackupAndRestore`` step-level backups, whose counters name
    the last finished batch.
    """
    latest = tf.train.latest_checkpoint(os.path.join(backup_dir, "chief"))
    if latest is None:
      return 0, 0
    try:
      reader = tf.train.load_checkpoint(latest)
      epoch = int(reader.get_tensor("ckpt_saved_epoch/.ATTRIBUTES/VARIABLE_VALUE"))
      batch = int(reader.get_tensor("ckpt_saved_batch/.ATTRIBUTES/VARIABLE_VALUE"))
    except (tf.errors.OpError, ValueError) as e:
      raise damaged_backup(latest, backup_dir, e) from None
    if epoch < 0:
      return 0, 0
    if batch < 0 or batch == steps_per_epoch - 1:
      return epoch + 1, 0
    return epoch, batch + 1

  def backup_callbacks(self, backup_dir, save_freq, resume_at, monitor, chief, steps_per_epoch):
    """The callbacks that back up a run every ``save_freq`` steps into ``backup_dir``."""
    return [
      _metrics_backup(backup_dir, save_freq, resume_at, monitor, chief, steps_per_epoch),
      keras.callbacks.BackupAndRestore(backup_dir, save_freq=save_freq),
    ]

  def scratch_dir(self, chief):
    """A directory for a non-chief worker's files (the caller deletes it), or ``None``.

    Keras 2's callbacks give each non-chief worker a temporary directory of their own.
    """
    del chief
    return None

  def prepare_model(self, model, strategy, backup_dir, resumed):
    """Readies ``model`` (built in ``strategy``'s scope) for ``fit``; ``BackupAndRestore``
    restores its own backup."""
    del model, strategy, backup_dir, resumed

  def fit(self, model, strategy, data, **kwargs):
    """``model.fit(data, **kwargs)`` in ``strategy``'s scope; returns the History."""
    return _fit_in_scope(model, strategy, data, **kwargs)

  def write_saved_model(self, model, export_dir, endpoints):
    """Writes a SavedModel tracking ``model`` with ``endpoints`` ``{name: (function, spec)}``."""
    module = tf.Module()
    module.model = model
    signatures = {}
    for name, (function, spec) in endpoints.items():
      signatures[name] = tf.function(function, input_signature=[spec])
      setattr(module, name, signatures[name])
    tf.saved_model.save(module, export_dir, signatures=signatures)


class Keras3Training:
  """Training on Keras 3: ``EpochMetricsBackup`` is the whole mid-epoch backup.

  Keras 3's ``BackupAndRestore`` keeps no step counter (a mid-epoch resume would train the
  interrupted epoch again from its first step) and every worker of a multi-worker run writes the
  same files; so ``EpochMetricsBackup(weights=True)`` also saves the weights and the optimizer,
  and this class resumes from them. A Keras 3 save creates variables, collective ops under a
  multi-worker strategy, so every worker saves (the others to scratch files).
  """

  SAMPLED_TRAINING = True

  def resume_position(self, backup_dir, steps_per_epoch):
    """``(epoch, step)`` at which training resumes from ``backup_dir``, or ``(0, 0)``.

    From the steps trained, ``S``, of the newest ``step_<S>.weights.h5`` written by
    ``EpochMetricsBackup``: ``divmod(S, steps_per_epoch)``.
    """
    saved = backup.step_weight_files(backup_dir)
    return divmod(saved[-1][1], steps_per_epoch) if saved else (0, 0)

  def backup_callbacks(self, backup_dir, save_freq, resume_at, monitor, chief, steps_per_epoch):
    """The callbacks that back up a run every ``save_freq`` steps into ``backup_dir``."""
    return [
      _metrics_backup(
        backup_dir, save_freq, resume_at, monitor, chief, steps_per_epoch, weights=True
      )
    ]

  def scratch_dir(self, chief):
    """A directory for a non-chief worker's files (the caller deletes it), or ``None``.

    Every worker runs the file-writing callbacks: a Keras 3 save creates variables (its
    reference ``Optimizer`` in ``saving_lib.get_attr_skipset``), collective ops under a
    multi-worker strategy, so a save on the chief alone would wait for the others forever or
    pair with another collective. Keras 3's callbacks would write the chief's files, so the
    non-chief workers write here instead.
    """
    return None if chief else tempfile.mkdtemp(prefix="tfrank4class_worker_")

  def prepare_model(self, model, strategy, backup_dir, resumed):
    """Readies ``model`` (built in ``strategy``'s scope) for ``fit``: vector step logs under a
    multi-worker strategy of more than one worker (``_log_vectors``), and the backed-up weights
    and optimizer when ``resumed``."""
    if strategy_lib.worker_count(strategy) > 1:
      _log_vectors(model)
    if resumed:
      model.optimizer.build(model.trainable_variables)
      path = os.path.join(backup_dir, backup.step_weight_files(backup_dir)[-1][0])
      try:
        model.load_weights(path)
      except (OSError, ValueError, KeyError) as e:  # h5py raises OSError for a truncated file
        raise damaged_backup(path, backup_dir, e) from None

  def fit(self, model, strategy, data, **kwargs):
    """``model.fit(data, **kwargs)`` in ``strategy``'s scope; returns the History.

    Keras 3 (3.15) builds a model created in a strategy's scope before its first step from the
    first input batch averaged over the replicas (``strategy.reduce("MEAN", batch)``), which
    fails for string inputs (text models: no sum of strings). A Keras 3 model whose private
    ``_distribute_strategy`` is unset builds while its train step is traced instead, and still
    trains on every replica of ``strategy``, which ``fit`` then takes from the scope. Only such
    models are changed.
    """
    if strategy.num_replicas_in_sync > 1 and any(
      tf.as_dtype(x.dtype) == tf.string for x in _symbolic_inputs(model)
    ):
      model._distribute_strategy = None  # pylint: disable=protected-access
    return _fit_in_scope(model, strategy, data, **kwargs)

  def write_saved_model(self, model, export_dir, endpoints):
    """Writes a SavedModel tracking ``model`` with ``endpoints`` ``{name: (function, spec)}``.

    Keras 3's own SavedModel writer: it saves the model's variables and lookup tables as plain
    lists, which a TF1 session (``saved_model_cli run``) restores; ``tf.saved_model.save`` of a
    module holding a Keras 3 model leaves some variables uninitialised there.
    """
    archive = keras.export.ExportArchive()
    archive.track(model)
    for name, (function, spec) in endpoints.items():
      archive.add_endpoint(name, function, input_signature=[spec])
    archive.write_out(export_dir, verbose=False)


def _log_vectors(model):
  """Makes a Keras 3 model's train and test steps log ``[1]`` vectors instead of scalars.

  Keras 3 (3.15) averages a step's logged values over the workers of a multi-worker strategy of
  more than one worker with ``strategy.reduce("MEAN", value, axis=0)``, which fails on scalars
  ("Invalid reduction dimension 0", tensorflow/tensorflow#72388), and its
  ``distribute_reduction_method`` does not reach that call. Over ``[1]`` vectors the same
  reduction is the mean over workers, a scalar. With one worker Keras reduces nothing, and
  TensorBoard refuses the vectors, so a one-worker cluster keeps its scalars. This changes only
  the per-step logs; epoch-end logs (what checkpoints and ``EpochMetricsBackup`` read) are the
  metrics' results read across replicas, as before.
  """
  for name in ("train_step", "test_step"):
    step = getattr(model, name)

    def vector_step(data, step=step):
      return {k: tf.reshape(v, [1]) for k, v in step(data).items()}

    setattr(model, name, vector_step)


#: The training behaviour of the Keras flavour in use.
TRAINING = Keras3Training() if compat.KERAS_3 else Keras2Training()
