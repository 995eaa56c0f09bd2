"""One run of the evidence grid: a model trained with early stopping, scored on the test split.

:func:`train_run` is the grid's training loop. It seeds Keras (``keras.utils.set_random_seed``),
builds the model (a :class:`tfrank4class.heads.Rank4ClassHead` on frozen features,
:func:`head_model`; or an image encoder and head, ``tfrank4class.heads.build_model``, end to
end), compiles it with Adam and the registry loss (:func:`build_loss`, the one place the grid
builds a loss), and fits it with :class:`KeepBest`: after every epoch the model scores the
validation split, the weights of the best epoch on the validation ``monitor`` (NDCG@5) are kept
and restored at the end, and training stops ``patience`` epochs after the best one. The restored
model scores the test split (:func:`predict`, :func:`evaluate_scores`), and the Bruch et al.
slack of those scores is recorded (:mod:`experiments.bounds`).

What the package's own training (``tfrank4class.train``) shares with it, it takes from the
package: the registry losses and metrics, the heads and ``build_model``, the encoders and the
input pipeline. The rest stays here because it differs: the binaries read files through
``tfrank4class.data`` and restore the best epoch from their backups, while the grid trains
hundreds of small runs on arrays in memory; and ``tfrank4class.train.results.evaluate_batches``
scores batches as it reads them, while the grid needs the test scores themselves (for the slack)
and keeps the batching its records were computed with (scores in batches of 512, the metrics
accumulated over 4,096 of them), so that a rerun computes what the records hold.
"""

import json
import math
import time

import numpy as np
import tensorflow as tf

from experiments import bounds, features
from tfrank4class import checks, encoders, heads
from tfrank4class import losses as losses_lib
from tfrank4class import metrics as metrics_lib
from tfrank4class.compat import keras

#: Test-split metrics every record holds (``tfrank4class.metrics.get`` names), each in [0, 1].
METRICS = metrics_lib.registry.DEFAULT_NAMES  # ("top_1", "top_5", "ndcg_5", "mrr")


def build_loss(name, kwargs):
  """The registry loss ``name`` with the grid's ``kwargs`` (``protocol.LOSS_KWARGS``): every loss
  the grid trains with, and every loss configuration it records or expects, is built here.

  TF-Ranking's keys get TF-Ranking's own normalisation, ``normalization="tf_ranking"``, unless
  ``kwargs`` names one: the second edition's records were made with it, before the package's
  per-list default existed (docs/evidence-grid.md)."""
  kwargs = dict(kwargs)
  if name in losses_lib.registry.TFR_KEYS:
    kwargs.setdefault("normalization", "tf_ranking")
  return losses_lib.get(name, **kwargs)


def loss_config(name, kwargs):
  """``build_loss(name, kwargs).get_config()``, JSON-normalised as records hold it: without
  ``normalization="tf_ranking"``, which the records made before the argument existed lack and
  a config without it loads as; and with the reduction in Keras 3's spelling, under which the
  records were made (tf-keras calls the same mean over the batch ``"auto"``)."""
  config = json.loads(json.dumps(build_loss(name, kwargs).get_config(), default=str))
  if config.get("normalization") == "tf_ranking":
    del config["normalization"]
  if config.get("reduction") == "auto":
    config["reduction"] = "sum_over_batch_size"
  return config


def arrays_dataset(features_, labels, batch_size, shuffle_seed=None):
  """A batched ``tf.data.Dataset`` of in-memory ``(features_, labels)``, reshuffled every epoch
  with ``shuffle_seed`` (not shuffled when ``None``)."""
  batch_size = checks.check_int("batch_size", batch_size, minimum=1)
  dataset = tf.data.Dataset.from_tensor_slices((features_, labels))
  if shuffle_seed is not None:
    dataset = dataset.shuffle(len(labels), seed=shuffle_seed, reshuffle_each_iteration=True)
  return dataset.batch(batch_size).prefetch(tf.data.AUTOTUNE)


def predict(model, features_, batch_size=512):
  """``model(features_, training=False)`` in batches, as a float32 numpy array ``[N, C]``."""
  batch_size = checks.check_int("batch_size", batch_size, minimum=1)
  outputs = [
    np.asarray(model(x, training=False), np.float32)
    for x in tf.data.Dataset.from_tensor_slices(features_).batch(batch_size)
  ]
  return np.concatenate(outputs)


def evaluate_scores(labels, scores, metric_names=METRICS, batch_size=4096):
  """``{name: value}`` of the metrics ``metric_names`` (``tfrank4class.metrics.get`` names) of
  ``scores`` ``[N, C]`` against ``labels``, accumulated over batches as Keras does (the default
  ``top_5`` left out of lists of fewer than 5 classes: ``metrics.registry.for_classes``)."""
  metric_names = metrics_lib.registry.for_classes(metric_names, scores.shape[-1])
  metric_objects = [metrics_lib.get(name) for name in metric_names]
  for start in range(0, len(labels), batch_size):
    y = labels[start : start + batch_size]
    s = scores[start : start + batch_size]
    for metric in metric_objects:
      metric.update_state(y, s)
  return {name: float(m.result()) for name, m in zip(metric_names, metric_objects)}


class KeepBest(keras.callbacks.Callback):
  """Scores the validation split after every epoch; keeps and finally restores the best weights,
  and stops training ``patience`` epochs after the best one (never, with ``patience=None``).

  Works the same on every Keras version (``EarlyStopping(restore_best_weights=True)`` restores
  at the end of training only from tf-keras 2.16 on, and only when it stopped early before that).

  Args:
    features_, labels: the validation split (numpy).
    monitor: the metric name (``tfrank4class.metrics.get``) to maximise.
    patience: epochs without a new best before training stops, or ``None``.
    batch_size: batch size of the scoring.

  Attributes:
    best_epoch: 0-based epoch of the best value; ``best``: that value; ``curve``: the value after
      every epoch.
  """

  def __init__(self, features_, labels, monitor="ndcg_5", patience=None, batch_size=512):
    super().__init__()
    metrics_lib.get(monitor)  # an unknown name fails here, naming the known ones
    self.patience = checks.check_int("patience", patience, minimum=1, allow_none=True)
    self.features, self.labels = features_, labels
    self.monitor, self.batch_size = monitor, batch_size
    self.best, self.best_epoch, self.curve, self._weights = -math.inf, None, [], None

  def on_epoch_end(self, epoch, logs=None):
    scores = predict(self.model, self.features, self.batch_size)
    value = evaluate_scores(self.labels, scores, (self.monitor,))[self.monitor]
    self.curve.append(value)
    if value > self.best:
      self.best, self.best_epoch, self._weights = value, epoch, self.model.get_weights()
    if self.patience is not None and epoch - self.best_epoch >= self.patience:
      self.model.stop_training = True

  def on_train_end(self, logs=None):
    if self._weights is not None:
      self.model.set_weights(self._weights)


def head_model(feature_dim, num_classes, interaction="dot", hidden_units=()):
  """A model from instance embeddings ``[B, feature_dim]`` to scores ``[B, C]``: one
  :class:`tfrank4class.heads.Rank4ClassHead` (for frozen features)."""
  feature_dim = checks.check_int("feature_dim", feature_dim, minimum=1)
  inputs = keras.Input(shape=(feature_dim,), dtype=tf.float32, name="embeddings")
  head = heads.Rank4ClassHead(
    num_classes, interaction=interaction, hidden_units=tuple(hidden_units), name="rank4class_head"
  )
  return keras.Model(inputs, head(inputs), name="frozen_head")


def _model_and_input(splits, num_classes, head, seed, settings):
  """The model of a run and its training input: a head on frozen features, or (``settings``
  with a ``model``) the image encoder + head with augmented input."""
  x, y = splits["train"]
  hidden = () if head == "dot" else settings["hidden_units"]
  if "model" in settings:
    spec = settings["model"]
    encoder = encoders.get(spec["encoder"], **spec["encoder_kwargs"])
    model = heads.build_model(encoder, num_classes, interaction=head, hidden_units=hidden)
    return model, features.train_input(x, y, settings["batch_size"], seed, spec["dataset"])
  model = head_model(x.shape[1], num_classes, head, hidden)
  return model, arrays_dataset(x, y, settings["batch_size"], shuffle_seed=seed)


def train_run(splits, num_classes, loss, head, learning_rate, seed, settings):
  """Trains one model with early stopping (see the module doc); returns the run's result fields:
  the test ``METRICS``, ``best_epoch`` (1-based), ``epochs_run``, ``validation`` (``{monitor:
  best value}``), ``validation_curve``, ``train_seconds`` (the wall time of ``fit``, validation
  scoring included), ``loss_config``, ``bruch_slack`` and ``cross_entropy`` of the test scores
  and ``test_scores_finite``.

  ``splits``: ``{"train", "validation", "test": (x, y)}``; ``settings``: the experiment's
  (``experiments.second.grid.grid_settings``).
  """
  learning_rate = checks.check_float("learning_rate", learning_rate, minimum=0.0, strict=True)
  keras.utils.set_random_seed(seed)
  model, inputs = _model_and_input(splits, num_classes, head, seed, settings)
  kwargs = settings["loss_kwargs"].get(loss, {})
  model.compile(optimizer=keras.optimizers.Adam(learning_rate), loss=build_loss(loss, kwargs))
  keep = KeepBest(*splits["validation"], monitor=settings["monitor"], patience=settings["patience"])
  start = time.perf_counter()
  model.fit(inputs, epochs=settings["max_epochs"], callbacks=[keep], verbose=0, shuffle=False)
  train_seconds = time.perf_counter() - start
  scores = predict(model, splits["test"][0])
  result = evaluate_scores(splits["test"][1], scores, METRICS)
  slack = bounds.softmax_rank_bound(splits["test"][1], scores).summary()
  result.update(
    best_epoch=keep.best_epoch + 1,
    epochs_run=len(keep.curve),
    validation={settings["monitor"]: keep.best},
    validation_curve=[round(v, 6) for v in keep.curve],
    train_seconds=train_seconds,
    loss_config=loss_config(loss, kwargs),
    bruch_slack=slack["ce_gap"],
    cross_entropy=slack["cross_entropy"],
    test_scores_finite=bool(np.isfinite(scores).all()),
  )
  return result
