"""Training a Rank4Class model end to end: the library behind ``tfrank4class-train``.

    data.load -> encoder -> Rank4ClassHead -> scores -> registry loss; registry metrics

``ExperimentConfig`` holds every choice (the binary's flags map onto it one to one) and is
validated before any data is read. ``train(config)`` builds the strategy, the input stream, the
model and the callbacks and calls ``fit``; ``model_dir`` receives:

    checkpoints/epoch_NNN.weights.h5   the weights after every epoch
    best.keras                         the whole model at the best validation ``best_metric``
    logs/                              TensorBoard
    backup/                            BackupAndRestore (removed when training ends)
    config.json, class_names.txt       what the run was, for evaluate and export

Resuming. A killed run started again with the same command resumes from ``backup/``. Keras
restores the weights, the optimizer and its (epoch, step) counters, but reads the input from its
start; so the training input is one seeded, repeated shuffle of the training split and, on a
restart, this module reads the saved counters first and skips exactly the batches already
trained on. With the same seed, deterministic ops (``tf.config.experimental.
enable_op_determinism``) and no dropout, a resumed run ends with the same weights and metrics as
an uninterrupted one; with dropout it is statistically, not bitwise, the same run (the dropout
random state is not in the backup).
"""
import collections
import dataclasses
import json
import os

import tensorflow as tf
from absl import logging as absl_logging

from tfrank4class import _validation
from tfrank4class import data as data_lib
from tfrank4class.compat import keras
from tfrank4class import encoders as encoders_lib
from tfrank4class import heads as heads_lib
from tfrank4class import losses as losses_lib
from tfrank4class import metrics as metrics_lib
from tfrank4class.train import strategy as strategy_lib

OPTIMIZERS = {"adam": keras.optimizers.Adam, "adagrad": keras.optimizers.Adagrad}
INTERACTIONS = ("dot", "latent_cross", "concat")
#: Encoders chosen by ``encoder="auto"``, per modality.
AUTO_ENCODERS = {"text": "transformer", "image": "small_cnn"}
#: Defaults of the auto text encoder: small enough to train from scratch on a CPU in minutes.
TEXT_DEFAULTS = {"max_tokens": 20_000, "sequence_length": 48, "embedding_dim": 64,
                 "num_heads": 2, "num_layers": 1, "ff_dim": 128, "dropout": 0.0}


@dataclasses.dataclass
class ExperimentConfig:
  """Everything a training run needs; see ``tfrank4class-train --helpfull`` for each field."""
  dataset: str = "goemotions_sample"
  data_dir: str = None
  encoder: str = "auto"
  encoder_kwargs: dict = dataclasses.field(default_factory=dict)
  interaction: str = "latent_cross"
  hidden_units: tuple = (128, 128)
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
  verbose: int = 1

  def validate(self):
    """Checks every field; raises ``ValueError`` naming the field, the value and what is allowed.

    Pure Python: it creates no TensorFlow object, so it may run before a multi-worker strategy
    (which must be created before TensorFlow's runtime starts). Loss arguments are checked when
    ``train`` first builds the loss, right after the strategy and still before any data is read.
    """
    _validation.check_choice("dataset", self.dataset, data_lib.names())
    if self.encoder != "auto":
      _validation.check_choice("encoder", self.encoder, ["auto"] + list(encoders_lib.names()))
    _validation.check_choice("interaction", self.interaction, INTERACTIONS)
    _validation.check_choice("loss", self.loss, losses_lib.names())
    for name in self.metrics:
      metrics_lib.registry.parse(name)
    metrics_lib.registry.parse(self.best_metric)
    if self.best_metric not in self.metrics:
      raise ValueError(f"`best_metric` {self.best_metric!r} must be one of `metrics` {list(self.metrics)}.")
    for units in self.hidden_units:
      _validation.check_int("hidden_units", units, minimum=1)
    _validation.check_int("batch_size", self.batch_size, minimum=1)
    _validation.check_int("epochs", self.epochs, minimum=1)
    _validation.check_int("steps", self.steps, minimum=1, allow_none=True)
    _validation.check_choice("optimizer", self.optimizer, OPTIMIZERS)
    _validation.check_float("learning_rate", self.learning_rate, minimum=0.0, strict=True)
    _validation.check_choice("strategy", self.strategy, strategy_lib.STRATEGIES)
    if self.strategy == "tpu" and not self.tpu:
      raise ValueError("`tpu` must name a TPU (a name, or grpc://host:port) when `strategy` is 'tpu'.")
    if self.strategy == "multi_worker_mirrored" and not self.model_dir:
      raise ValueError("`model_dir` is required when `strategy` is 'multi_worker_mirrored': the "
                       "chief evaluates and exports the best.keras it writes there.")
    _validation.check_int("seed", self.seed, minimum=0)
    _validation.check_int("backup_every", self.backup_every, minimum=1)
    return self

  def to_json(self):
    return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

  @classmethod
  def from_model_dir(cls, model_dir):
    """The config a run wrote to ``model_dir/config.json``."""
    path = os.path.join(model_dir, "config.json")
    if not os.path.exists(path):
      raise FileNotFoundError(f"No training run in `model_dir` {model_dir!r}: {path} is missing.")
    with open(path) as f:
      return cls(**json.load(f))


def quiet_tensorflow_logs():
  """Hides TensorFlow's Python INFO lines (SavedModel tracing chatter); warnings still show.

  TensorFlow logs through both its ``tensorflow`` logger and ``absl.logging``.
  """
  tf.get_logger().setLevel("WARNING")
  absl_logging.set_verbosity(absl_logging.WARNING)


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
        config.dataset, config.data_dir, max_tokens=kwargs.pop("max_tokens"),
        output_sequence_length=kwargs["sequence_length"])
    encoder = encoders_lib.get(name, text_vectorization=vectorizer, **kwargs)
  elif info.modality == "image":
    kwargs.setdefault("input_shape", tuple(info.image_size) + (3,))
    encoder = encoders_lib.get(name, **kwargs)
  else:
    encoder = encoders_lib.get(name, **kwargs)
  model = heads_lib.build_model(encoder, info.num_classes, interaction=config.interaction,
                                hidden_units=tuple(config.hidden_units))
  model.compile(
      optimizer=OPTIMIZERS[config.optimizer](learning_rate=config.learning_rate),
      loss=losses_lib.get(config.loss, **config.loss_kwargs),
      metrics=[metrics_lib.get(m) for m in config.metrics])
  return model


def _count_batches(dataset):
  cardinality = int(dataset.cardinality())
  if cardinality >= 0:
    return cardinality
  return int(dataset.reduce(0, lambda count, _: count + 1))


def resume_position(backup_dir, steps_per_epoch):
  """``(epoch, step)`` at which Keras' BackupAndRestore will resume, or ``(0, 0)``.

  Mirrors Keras 2.15's own rule for step-level backups: the counters saved with the backup name
  the last finished batch.
  """
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
        config.dataset, split, config.data_dir, batch_size=config.batch_size, training=training,
        shuffle=training, shuffle_seed=config.seed, deterministic=True, repeat=training,
        drop_remainder=training, input_context=input_context)
  return make


def _is_multi_worker(strategy):
  return isinstance(strategy, (tf.distribute.MultiWorkerMirroredStrategy, tf.distribute.TPUStrategy))


def _full_batches(config, split):
  """Full global batches in one pass over ``split``."""
  return _count_batches(data_lib.load(config.dataset, split, config.data_dir,
                                      batch_size=config.batch_size, training=False,
                                      shuffle=False, drop_remainder=True))


def _distribute(strategy, config, make):
  """Plain dataset for one worker (Keras splits each global batch); per-worker shards otherwise."""
  if _is_multi_worker(strategy):
    # `load` divides the global batch size per replica itself when given the input context.
    return strategy.distribute_datasets_from_function(make)
  return make()


TrainResult = collections.namedtuple("TrainResult", ["model", "history", "info", "strategy"])


def train(config):
  """Trains as ``config`` says; returns a ``TrainResult(model, history, info, strategy)``.

  Raises ``ValueError`` for a bad config before reading any data, and the data pipeline's
  ``DataNotFoundError`` for a missing ``data_dir``.
  """
  config.validate()
  strategy = strategy_lib.make_strategy(config.strategy, config.tpu, config.devices)
  keras.utils.set_random_seed(config.seed)
  tf.config.experimental.enable_op_determinism()
  with strategy.scope():
    losses_lib.get(config.loss, **config.loss_kwargs)  # bad loss arguments fail before any data
  info = data_lib.info(config.dataset, config.data_dir)
  val_split = validation_split(config.dataset)

  steps_per_epoch = config.steps or _full_batches(config, "train")
  if steps_per_epoch < 1:
    raise ValueError(f"The training split of {config.dataset!r} has fewer examples than one "
                     f"batch ({config.batch_size}).")
  model_dir = config.model_dir
  callbacks = []
  skip = 0
  if model_dir:
    os.makedirs(model_dir, exist_ok=True)
    backup_dir = os.path.join(model_dir, "backup")
    epoch, step = resume_position(backup_dir, steps_per_epoch)
    skip = epoch * steps_per_epoch + step
    callbacks = [
        keras.callbacks.BackupAndRestore(backup_dir, save_freq=config.backup_every),
        keras.callbacks.ModelCheckpoint(
            os.path.join(model_dir, "checkpoints", "epoch_{epoch:03d}.weights.h5"),
            save_weights_only=True),
        keras.callbacks.ModelCheckpoint(
            os.path.join(model_dir, "best.keras"), monitor=f"val_{config.best_metric}",
            mode="max", save_best_only=True),
        keras.callbacks.TensorBoard(os.path.join(model_dir, "logs")),
    ]
    if strategy_lib.is_chief(strategy):
      with open(os.path.join(model_dir, "config.json"), "w") as f:
        f.write(config.to_json())
      with open(os.path.join(model_dir, "class_names.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(info.class_names) + "\n")

  make_train = _input_fn(config, "train", training=True)
  make_val = _input_fn(config, val_split, training=False)
  train_data = _distribute(strategy, config,
                           lambda *a: make_train(*a).skip(skip) if skip else make_train(*a))
  val_data = _distribute(strategy, config, make_val)
  with strategy.scope():
    model = build_model(config, info)
  # Sharded validation sets need a step count; every worker has at least this many batches.
  validation_steps = max(1, _full_batches(config, val_split)) if _is_multi_worker(strategy) else None
  history = model.fit(train_data, epochs=config.epochs, steps_per_epoch=steps_per_epoch,
                      validation_data=val_data, validation_steps=validation_steps,
                      callbacks=callbacks, verbose=config.verbose)
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
    raise FileNotFoundError(f"No model file at {path}: pass a .keras `checkpoint` or the "
                            "`model_dir` of a finished training run.")
  return keras.models.load_model(path)


def evaluate_splits(model, config):
  """``[(split, {metric: value})]`` on the validation split and the test split."""
  splits = dict.fromkeys([validation_split(config.dataset), "test"])
  return [(split, evaluate(model, config.dataset, split, config.data_dir)) for split in splits]


def evaluate(model, dataset, split, data_dir=None, batch_size=256, metric_names=None):
  """``{metric name: value}`` of a scores model on a split (Top-1, Top-5, NDCG@5, MRR by default)."""
  metric_names = metric_names or ("top_1", "top_5", "ndcg_5", "mrr")
  metric_objects = [metrics_lib.get(m) for m in metric_names]
  for features, labels in data_lib.load(dataset, split, data_dir, batch_size=batch_size,
                                        training=False, shuffle=False):
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
