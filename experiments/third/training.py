"""One run of the third edition: a head trained with per-endpoint checkpoints, scored on test.

:func:`train_run` seeds Keras, builds the head (:func:`experiments.third.scaled_head.head_model`)
and the loss (:func:`experiments.training.build_loss`, the one place the experiments build a loss),
and fits with Adam. :class:`EndpointCheckpoints` scores the validation split after every epoch
(Top-1, Top-5, NDCG@5, from the true class's rank, :mod:`experiments.true_ranks`) and keeps the
weights of the best epoch of each (ties to the earlier epoch); it stops the run after
``patience`` epochs in which neither Top-1 nor Top-5 improved. The test split is then scored once
at each endpoint's checkpoint: the rank of the true class and its ties per example (stored
compactly), the metrics, and the diagnostics of the collapse (the mean per-list standard
deviation of the scores, their softmax cross-entropy, the share of inputs whose top class is the
most frequent top class).
"""

import time

import numpy as np

from experiments import training, true_ranks
from experiments.third import protocol, scaled_head
from tfrank4class import checks
from tfrank4class.compat import keras


def validation_metrics(model, x, y):
  """``{endpoint: value}`` of ``protocol.VALIDATION_ENDPOINTS`` on ``(x, y)``."""
  scores = training.predict(model, x)
  if not np.isfinite(scores).all():  # never a new best; the curve shows None
    return {m: float("nan") for m in protocol.VALIDATION_ENDPOINTS}
  rank, ties = true_ranks.true_ranks(scores, y)
  return {
    m: float(np.mean(true_ranks.per_example(rank, ties, m))) for m in protocol.VALIDATION_ENDPOINTS
  }


class EndpointCheckpoints(keras.callbacks.Callback):
  """Keeps the best weights per validation endpoint; stops after ``patience`` epochs in which no
  endpoint of ``patience_on`` improved.

  Attributes:
    best: ``{endpoint: value}``; best_epoch: ``{endpoint: 0-based epoch}``; weights:
      ``{endpoint: weights}``; curve: ``{endpoint: [value per epoch]}``; stopped_by_patience.
  """

  def __init__(self, x, y, patience, patience_on=protocol.PRIMARY_ENDPOINTS):
    super().__init__()
    self.x, self.y = x, y
    self.patience = checks.check_int("patience", patience, minimum=1)
    self.patience_on = tuple(patience_on)
    endpoints = protocol.VALIDATION_ENDPOINTS
    self.best = {m: -np.inf for m in endpoints}
    self.best_epoch = {m: None for m in endpoints}
    self.weights, self.curve = {}, {m: [] for m in endpoints}
    self.last_improvement, self.stopped_by_patience = 0, False

  def on_epoch_end(self, epoch, logs=None):
    values = validation_metrics(self.model, self.x, self.y)
    for m, value in values.items():
      self.curve[m].append(value)
      if value > self.best[m]:
        self.best[m], self.best_epoch[m] = value, epoch
        self.weights[m] = self.model.get_weights()
        if m in self.patience_on:
          self.last_improvement = epoch
    if epoch - self.last_improvement >= self.patience:
      self.model.stop_training, self.stopped_by_patience = True, True


def score_checkpoint(model, x, y):
  """The record's test entry of one checkpoint (see the module docstring)."""
  scores = training.predict(model, x)
  finite = bool(np.isfinite(scores).all())
  if not finite:
    return {"finite": False}
  rank, ties = true_ranks.true_ranks(scores, y)
  shifted = scores.astype(np.float64) - scores.max(axis=1, keepdims=True)
  log_softmax = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
  top = np.argmax(scores, axis=1)
  return {
    "finite": True,
    **true_ranks.summary(rank, ties),
    "score_std": scaled_head.score_scale(scores),
    "cross_entropy": float(-np.mean(log_softmax[np.arange(len(y)), y])),
    "top_class_share": float(np.bincount(top).max() / len(top)),
    "rank": true_ranks.encode(np.minimum(rank, 65535)),
    "ties": true_ranks.encode(np.minimum(ties, 65535)),
  }


def train_run(splits, num_classes, cell, head, learning_rate, scale, seed, settings):
  """Trains one run and returns its result fields: ``loss_config``, ``epochs_run``,
  ``stopped_by`` (``"patience"`` or ``"budget"``), ``best_epoch`` and ``validation`` (per
  endpoint, 1-based epochs), ``validation_curve``, ``jit_compile`` (the train step compiled with
  XLA), ``train_seconds``, ``seconds_per_epoch`` and
  ``test`` (per endpoint, :func:`score_checkpoint` at its checkpoint).

  ``splits``: ``{"train", "validation", "test": (x, y)}``; ``settings``: ``max_epochs``,
  ``patience``, ``batch_size``.
  """
  learning_rate = checks.check_float("learning_rate", learning_rate, minimum=0.0, strict=True)
  keras.utils.set_random_seed(seed)
  x, y = splits["train"]
  model = scaled_head.head_model(x.shape[1], num_classes, head)
  loss, kwargs = protocol.loss_arguments(cell, scale)
  model.compile(
    optimizer=keras.optimizers.Adam(learning_rate),
    loss=training.build_loss(loss, kwargs),
    jit_compile=protocol.JIT_COMPILE,
  )
  keep = EndpointCheckpoints(*splits["validation"], patience=settings["patience"])
  inputs = training.arrays_dataset(x, y, settings["batch_size"], shuffle_seed=seed)
  start = time.perf_counter()
  model.fit(inputs, epochs=settings["max_epochs"], callbacks=[keep], verbose=0, shuffle=False)
  seconds = time.perf_counter() - start
  test = {}
  for endpoint, weights in keep.weights.items():
    model.set_weights(weights)
    test[endpoint] = score_checkpoint(model, *splits["test"])
  epochs = len(keep.curve["top_1"])
  return {
    "loss": loss,
    "loss_config": training.loss_config(loss, kwargs),
    "epochs_run": epochs,
    "stopped_by": "patience" if keep.stopped_by_patience else "budget",
    "best_epoch": {m: e + 1 for m, e in keep.best_epoch.items() if e is not None},
    "validation": {m: v for m, v in keep.best.items() if np.isfinite(v)},
    "validation_curve": {
      m: [round(v, 5) if np.isfinite(v) else None for v in c] for m, c in keep.curve.items()
    },
    "jit_compile": protocol.JIT_COMPILE,
    "train_seconds": seconds,
    "seconds_per_epoch": seconds / max(epochs, 1),
    "test": test,
  }
