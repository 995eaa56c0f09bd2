"""Training a Rank4Class model end to end: the library behind ``tfrank4class-train``.

    data.load -> encoder -> Rank4ClassHead -> scores -> registry loss; registry metrics

``train(config)`` (an ``ExperimentConfig``, ``tfrank4class.train.config``) builds the strategy,
the input stream, the model and the callbacks and calls ``fit``. With a ``model_dir`` it takes
the directory and checks its stored configuration first (``tfrank4class.train.run_dir``), resumes
a killed run from its backup (``tfrank4class.train.backup``) and writes checkpoints, the best
model and TensorBoard logs there. What differs between Keras 3 and Keras 2 is
``tfrank4class.train.flavour``'s; the result tables are ``tfrank4class.train.results``'s.

The training binaries reach the recipe through this module: ``ExperimentConfig``,
``ModelDirInUseError``, ``ConfigMismatchError``, ``load_checkpoint``, ``evaluate``,
``evaluate_splits``, ``format_table`` and ``selection_split`` are those of the modules above,
named here too.
"""

import collections
import contextlib
import os
import shutil

import tensorflow as tf
from absl import logging as absl_logging
from tensorflow.python.framework import config as tf_config  # reads the setting; no public API

from tfrank4class import atomic, errors
from tfrank4class import data as data_lib
from tfrank4class import encoders as encoders_lib
from tfrank4class import heads as heads_lib
from tfrank4class import losses as losses_lib
from tfrank4class import metrics as metrics_lib
from tfrank4class.compat import keras
from tfrank4class.train import backup, cluster, run_dir
from tfrank4class.train import callbacks as callbacks_lib
from tfrank4class.train import config as config_lib
from tfrank4class.train import strategy as strategy_lib
from tfrank4class.train.config import ExperimentConfig
from tfrank4class.train.flavour import TRAINING
from tfrank4class.train.results import evaluate, evaluate_splits, format_table, selection_split
from tfrank4class.train.run_dir import ConfigMismatchError, ModelDirInUseError, load_checkpoint

__all__ = [
  "ConfigMismatchError",
  "ExperimentConfig",
  "ModelDirInUseError",
  "TrainResult",
  "best_model",
  "build_model",
  "check_arguments",
  "evaluate",
  "evaluate_splits",
  "format_table",
  "load_checkpoint",
  "quiet_tensorflow_logs",
  "selection_split",
  "train",
]


def quiet_tensorflow_logs():
  """Hides TensorFlow's Python INFO lines (SavedModel tracing chatter); warnings still show.

  TensorFlow logs through both its ``tensorflow`` logger and ``absl.logging``.
  """
  tf.get_logger().setLevel("WARNING")
  absl_logging.set_verbosity(absl_logging.WARNING)


def _build_encoder(config, modality, make_vectorizer, image_size):
  """The encoder ``config`` names for ``modality``; ``make_vectorizer(max_tokens, length)`` gives
  the transformer's text vectoriser, ``image_size`` an image encoder's default input size."""
  name = config_lib.AUTO_ENCODERS[modality] if config.encoder == "auto" else config.encoder
  kwargs = dict(config.encoder_kwargs)
  if name == "transformer":
    kwargs = {**config_lib.TEXT_DEFAULTS, **kwargs}
    vectorizer = make_vectorizer(kwargs.pop("max_tokens"), kwargs["sequence_length"])
    return encoders_lib.get(name, text_vectorization=vectorizer, **kwargs)
  if modality == "image":
    kwargs.setdefault("input_shape", tuple(image_size) + (3,))
  return encoders_lib.get(name, **kwargs)


def check_arguments(config):
  """Builds what ``config`` names from its arguments, reading no data; raises
  ``InvalidConfigError`` naming the argument for a path that cannot be written, loss arguments
  the loss refuses, a loss over embeddings (which cannot train class scores) or encoder arguments
  the encoder refuses.

  The encoder is built once with a placeholder vocabulary (text) or input size (images) and
  thrown away; the loss is built too. ``train`` calls it before any data is read and then seeds
  the random generators, so the check changes no weight of the run.
  """
  try:
    config.check_paths()
  except ValueError as e:
    raise errors.InvalidConfigError(str(e)) from e
  try:
    loss = losses_lib.get(config.loss, **config.loss_kwargs)
  except (TypeError, ValueError) as e:
    raise errors.InvalidConfigError(f"`loss_kwargs` of {config.loss!r}: {e}") from e
  _check_loss_takes_scores(config.loss, loss)

  def placeholder_vectorizer(max_tokens, length):
    return data_lib.adapt_text_vectorization(
      None, max_tokens=max_tokens, output_sequence_length=length, vocabulary=["placeholder"]
    )

  modality = data_lib.modality(config.dataset)
  try:
    _build_encoder(config, modality, placeholder_vectorizer, _PLACEHOLDER_IMAGE_SIZE)
  except (TypeError, ValueError, OSError) as e:
    name = config_lib.AUTO_ENCODERS[modality] if config.encoder == "auto" else config.encoder
    raise errors.InvalidConfigError(f"`encoder_kwargs` of {name!r}: {e}") from e


#: The input size of the image encoder ``check_arguments`` builds (the smallest of the datasets).
_PLACEHOLDER_IMAGE_SIZE = (32, 32)


def build_model(config, info):
  """The Rank4Class model for ``info`` (a ``DatasetInfo``), compiled as ``config`` says: with
  ``config.sampled_negatives``, a :class:`~tfrank4class.heads.SampledClassifier`."""

  def adapted_vectorizer(max_tokens, length):
    return data_lib.adapt_text_vectorization(
      config.dataset,
      config.data_dir,
      max_tokens=max_tokens,
      output_sequence_length=length,
      on_corrupt=config.on_corrupt,
    )

  encoder = _build_encoder(config, info.modality, adapted_vectorizer, info.image_size)
  if config.sampled_negatives is None:
    model = heads_lib.build_model(
      encoder,
      info.num_classes,
      interaction=config.interaction,
      hidden_units=tuple(config.hidden_units),
    )
  else:  # sampled lists in training, every class at evaluation and serving
    model = heads_lib.SampledClassifier(encoder, _sampled_head(config, info.num_classes))
  model.compile(
    optimizer=config_lib.OPTIMIZERS.get(config.optimizer, learning_rate=config.learning_rate),
    loss=losses_lib.get(config.loss, **config.loss_kwargs),
    # Weighted: a multi-worker run pads its validation split with examples of weight 0
    # (`_padded_validation`); without sample weights (every other input) they are the same.
    weighted_metrics=[
      metrics_lib.get(m) for m in config_lib.metrics_for_classes(config, info.num_classes)
    ],
  )
  return model


def _sampled_head(config, num_classes):
  """The head of ``config.sampled_negatives``: ``S`` negatives drawn from ``config.sampler``.

  ``"dot"``: a :class:`~tfrank4class.heads.SampledDotProduct` (the sampled rows of a class table
  ``[C, d]``); ``"latent_cross"`` and ``"concat"``: a
  :class:`~tfrank4class.heads.SampledRank4ClassHead`, the MLP on each example's candidates only.
  """
  sampling = dict(distribution=config.sampler, seed=config.seed)
  if config.interaction == "dot":
    return heads_lib.SampledDotProduct(num_classes, config.sampled_negatives, **sampling)
  return heads_lib.SampledRank4ClassHead(
    num_classes,
    config.interaction,
    hidden_units=tuple(config.hidden_units),
    num_negatives=config.sampled_negatives,
    **sampling,
  )


def _count_batches(dataset):
  cardinality = int(dataset.cardinality())
  if cardinality >= 0:
    return cardinality
  return int(dataset.reduce(0, lambda count, _: count + 1))


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


def _count_rows(config, split):
  """The examples in one pass over ``split``."""
  batches = data_lib.load(
    config.dataset,
    split,
    config.data_dir,
    batch_size=1024,
    training=False,
    shuffle=False,
    on_corrupt=config.on_corrupt,
  )
  return int(batches.reduce(0, lambda n, batch: n + tf.shape(batch[1])[0]))


def _padded_validation(config, split, rows):
  """The validation input of a multi-worker run: every example once, with weight 1, then
  copies of the first examples with weight 0, so that each replica sees the same number of full
  batches (``steps``, returned with the function that makes each worker's input). The metrics
  (``build_model`` compiles them as weighted metrics, weighted means) are then those of the
  whole split, as evaluating it on one machine gives."""
  steps = -(-rows // config.batch_size)

  def weighted(batches, weight):
    return batches.unbatch().map(lambda x, y: (x, y, tf.constant(weight, tf.float32)))

  def make(input_context):
    load = _input_fn(config, split, training=False)
    per_replica = input_context.get_per_replica_batch_size(config.batch_size)
    pipeline_rows = steps * config.batch_size // input_context.num_input_pipelines
    padding = weighted(load(), 0.0).repeat()  # never empty: the split has a row
    return (
      weighted(load(input_context), 1.0)
      .concatenate(padding)
      .take(pipeline_rows)
      .batch(per_replica, drop_remainder=True)
    )

  return steps, make


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


def _distribute(strategy, make):
  """Plain dataset for one worker (Keras splits each global batch); per-worker shards otherwise."""
  if _is_multi_worker(strategy):
    # `load` divides the global batch size per replica itself when given the input context.
    return strategy.distribute_datasets_from_function(make)
  return make()


def _barrier(strategy):
  """Returns once every worker of a multi-worker strategy has reached it (a 1-number all-reduce)."""
  strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(lambda: tf.constant(1.0)), axis=None)


TrainResult = collections.namedtuple("TrainResult", ["model", "history", "info", "strategy"])
#: Where ``fit`` starts: its callbacks, the (epoch, step) it resumes at, the backup directory
#: (``None`` without ``model_dir``) and this worker's scratch directory (deleted after ``fit``).
_Start = collections.namedtuple("_Start", ["callbacks", "epoch", "step", "backup_dir", "scratch"])


def train(config):
  """Trains as ``config`` says; returns a ``TrainResult(model, history, info, strategy)``.

  Raises ``ValueError`` for a bad config, ``InvalidConfigError`` for arguments that cannot be
  built, paths that cannot be written or a loss over embeddings, which cannot train class scores
  (``check_arguments``), ``ModelDirInUseError`` when another run holds ``model_dir`` and
  ``ConfigMismatchError`` when ``model_dir`` holds a run with another configuration, all before
  reading any data; then the data pipeline's ``DataNotFoundError`` for a missing ``data_dir`` and
  ``MalformedRowError`` for a malformed line (with ``on_corrupt="error"``). Op determinism is on
  while it runs; the process's setting is restored after.
  """
  with op_determinism():
    return _train(config)


@contextlib.contextmanager
def op_determinism():
  """Op determinism on inside the ``with`` block, and the process's own setting after it.

  TensorFlow's public API turns it on (``tf.config.experimental.enable_op_determinism``) but can
  neither read nor undo that; ``tensorflow.python.framework.config`` (the module Keras itself
  reads it from) can. Keras 3 compiles nothing with XLA while it is on (``Trainer.compile``
  turns ``jit_compile`` off), so leaving it on would silently change later models of the process.

  Example:
    >>> with op_determinism():
    ...   tf_config.is_op_determinism_enabled()
    True
    >>> tf_config.is_op_determinism_enabled()
    False
  """
  was_on = tf_config.is_op_determinism_enabled()
  tf.config.experimental.enable_op_determinism()
  try:
    yield
  finally:
    if not was_on:
      tf_config.disable_op_determinism()


def _train(config):
  config.validate()
  strategy = strategy_lib.make_strategy(
    config.strategy, config.tpu, config.devices, config.cluster_timeout
  )
  chief = strategy_lib.is_chief(strategy)
  with strategy.scope():
    check_arguments(config)  # bad arguments fail before any data is read
  keras.utils.set_random_seed(config.seed)  # after the check, which builds an encoder
  if config.model_dir:
    _claim_model_dir(config, strategy, chief)
  info = data_lib.info(config.dataset, config.data_dir)
  config_lib.check_loss_classes(config, info.num_classes)  # before any example is read
  config_lib.metrics_for_classes(config, info.num_classes)
  val_split = selection_split(info, config.select_on_test)
  if chief:
    print(_selection_line(config, info, val_split), flush=True)
  steps_per_epoch = config.steps or _full_batches(config, "train")
  if steps_per_epoch < 1:
    raise errors.InvalidConfigError(
      f"The training split of {config.dataset!r} has fewer examples than one "
      f"batch ({config.batch_size})."
    )
  if config.model_dir:
    start = _start_in_model_dir(config, info, chief, steps_per_epoch)
  else:
    stop = [_patience_stopping(config)] if config.early_stopping_patience else []
    start = _Start(stop, 0, 0, None, None)
  try:
    model, history = _fit(config, info, strategy, start, steps_per_epoch, val_split)
  except (tf.errors.UnavailableError, tf.errors.CancelledError) as e:
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
      raise
    parsed = cluster.read_tf_config(check_port=False)
    raise cluster.lost_worker_error(e, parsed, config.model_dir) from None
  finally:
    if start.scratch:
      shutil.rmtree(start.scratch, ignore_errors=True)
  return TrainResult(model, history, info, strategy)


def _selection_line(config, info, split):
  """Says on which split the best checkpoint is chosen, and what that split is."""
  if split == "test":
    return (
      f"The best checkpoint is chosen on the TEST split of {config.dataset} (--select_on_test): "
      "its test results are optimistic."
    )
  return (
    f"The best checkpoint is chosen on the validation split of {config.dataset}: {info.validation}."
  )


def _check_loss_takes_scores(name, loss):
  """Refuses a loss whose ``y_pred`` is not class scores (``Loss.predictions``): a Rank4Class
  model outputs one score per class, and an embedding loss would train it to chance."""
  if loss.predictions != "scores":
    raise errors.InvalidConfigError(
      f"`loss` {name!r} takes {loss.predictions}, not class scores, so it cannot train a "
      "classification run; train it on a retrieval model "
      "(tfrank4class.retrieval.build_retrieval_model, see docs/retrieval.md)."
    )


def _claim_model_dir(config, strategy, chief):
  """Takes ``model_dir`` (the chief locks it and checks its stored run) on every worker."""
  os.makedirs(config.model_dir, exist_ok=True)
  if chief:
    run_dir.lock_model_dir(config.model_dir)
    run_dir.prepare_model_dir(config)
  if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
    if chief:
      cluster.write_marker(strategy, config.model_dir)
    _barrier(strategy)  # the other workers read the backup after the chief's start_over
    cluster.check_shared_model_dir(strategy, config.model_dir)


def _start_in_model_dir(config, info, chief, steps_per_epoch):
  """The ``_Start`` of a run in ``model_dir``: resumed from its backup, writing its files there."""
  backup_dir = os.path.join(config.model_dir, "backup")
  epoch, step = TRAINING.resume_position(backup_dir, steps_per_epoch)
  monitor = f"val_{config.best_metric}"
  state_file = os.path.join(backup_dir, backup.STATE_FILE)
  callbacks = TRAINING.backup_callbacks(
    backup_dir, config.backup_every, (epoch, step), monitor, chief, steps_per_epoch
  )
  scratch = TRAINING.scratch_dir(chief)
  files_dir = scratch or config.model_dir
  # Checkpoints write to partial paths; the chief renames each complete file (atomic.py).
  epoch_file = os.path.join(files_dir, "checkpoints", "epoch_{epoch:03d}.weights.h5")
  best_file = os.path.join(files_dir, "best.keras")
  callbacks += [
    keras.callbacks.ModelCheckpoint(atomic.partial_path(epoch_file), save_weights_only=True),
    keras.callbacks.ModelCheckpoint(
      atomic.partial_path(best_file),
      monitor=monitor,
      mode="max",
      save_best_only=True,
      initial_value_threshold=backup.best_so_far(state_file, epoch),
    ),
    *([callbacks_lib.CommitCheckpoints([epoch_file, best_file])] if chief else []),
    keras.callbacks.TensorBoard(os.path.join(files_dir, "logs")),
  ]
  if config.early_stopping_patience:  # after the backup callbacks (see PatienceStopping)
    recorded = backup.EpochMetricsBackup.read(state_file)["best"]
    previous = {e: v for e, v in recorded.items() if int(e) < epoch}
    callbacks.append(_patience_stopping(config, previous))
  if chief:
    skip = epoch * steps_per_epoch + step
    if skip:
      print(
        f"Resuming the run in {config.model_dir} from its backup: at epoch {epoch + 1} of "
        f"{config.epochs}, step {step + 1} of {steps_per_epoch} ({skip} steps trained "
        "before the restart).",
        flush=True,
      )
    run_dir.write_run_files(config, info.class_names)
  return _Start(callbacks, epoch, step, backup_dir, scratch)


def _patience_stopping(config, previous=None):
  """The ``PatienceStopping`` of ``config.early_stopping_patience`` on the validation
  ``best_metric``; ``previous``: the values of the epochs before a resume."""
  return callbacks_lib.PatienceStopping(
    f"val_{config.best_metric}", config.early_stopping_patience, previous
  )


def _fit(config, info, strategy, start, steps_per_epoch, val_split):
  """Builds the model and the input streams (skipping the steps trained before a resume) and
  calls ``fit``, validating on ``val_split``; returns the model and its History."""
  skip = start.epoch * steps_per_epoch + start.step
  make_train = _input_fn(config, "train", training=True)
  make_val = _input_fn(config, val_split, training=False)
  train_data = _distribute(
    strategy, lambda *a: make_train(*a).skip(skip) if skip else make_train(*a)
  )
  validation_steps = None
  if _is_multi_worker(strategy):  # sharded: every replica needs the same number of batches
    validation_steps, make_val = _padded_validation(
      config, val_split, _count_rows(config, val_split)
    )
  val_data = _distribute(strategy, make_val)
  with strategy.scope():
    model = build_model(config, info)
    TRAINING.prepare_model(model, strategy, start.backup_dir, resumed=bool(skip))
  history = TRAINING.fit(
    model,
    strategy,
    train_data,
    epochs=config.epochs,
    initial_epoch=start.epoch,
    steps_per_epoch=steps_per_epoch,
    validation_data=val_data,
    validation_steps=validation_steps,
    callbacks=start.callbacks,
    verbose=config.verbose,
    # The input pipeline shuffles (`_input_fn`); Keras's own shuffle does nothing to a dataset,
    # and Keras 3 warns on every run that its default `shuffle=True` is ignored.
    shuffle=False,
  )
  return model, history


def best_model(config, result):
  """The model of ``model_dir/best.keras`` if the run wrote one, else ``result.model``.

  Under multi-worker training only the chief calls this: the loaded copy is not distributed, so
  evaluating and exporting it needs no collective op from the other workers.
  """
  if config.model_dir and os.path.exists(os.path.join(config.model_dir, "best.keras")):
    return load_checkpoint(config.model_dir)
  return result.model
