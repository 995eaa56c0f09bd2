"""Keras callbacks of the training recipes.

:class:`CommitCheckpoints` makes Keras's ``ModelCheckpoint`` files atomic: the checkpoint writes
to the partial path of each file (``tfrank4class.atomic.partial_path``) and this callback,
after it in the list, renames what was written to the final name at the end of the epoch.

:class:`PatienceStopping` stops a run ``patience`` epochs after its best validation value (the
training binary's ``--early_stopping_patience``).

:class:`RetrievalEvaluation` measures an embedding model's retrieval quality (Recall@K, MAP@R of
:func:`tfrank4class.retrieval.retrieval_metrics`) on a validation set after every epoch and
writes it into the epoch's logs, where ``History``, ``TensorBoard``, ``EarlyStopping`` and
``ModelCheckpoint`` see it.
"""

import os

import tensorflow as tf

from tfrank4class import atomic, checks
from tfrank4class.compat import keras
from tfrank4class.retrieval import inputs
from tfrank4class.retrieval.evaluation import retrieval_metrics


class RetrievalEvaluation(keras.callbacks.Callback):
  """Keras callback: Recall@K (and MAP@R) of a validation set at the end of every epoch.

  It embeds ``x`` with ``embedding_model`` (default: the model being trained, for models whose
  output is the embedding), computes :func:`retrieval_metrics`, prints one line and writes the
  values into the epoch's ``logs`` as ``"{prefix}recall@K"`` and ``"{prefix}map@r"``, so that
  ``History``, ``TensorBoard``, ``EarlyStopping(monitor="val_recall@1", mode="max")`` and
  ``ModelCheckpoint`` see them (put this callback before them in the list).

  Args:
    x: validation inputs (array, or a ``tf.data.Dataset`` yielding inputs only).
    labels: their class ids ``[N]``.
    ks: Recall@K cut-offs.
    query, gallery: the protocol (see
      :func:`~tfrank4class.retrieval.evaluation.retrieval_metrics`).
    embedding_model: a Keras model mapping ``x`` to embeddings, e.g. the ``embedding_model`` of
      :func:`tfrank4class.retrieval.build_retrieval_model`; ``None`` uses the trained model.
    with_map: also report MAP@R.
    prefix: key prefix in ``logs``.
    batch_size: prediction batch size.
    every: evaluate after epochs ``every``, ``2 * every``, ...
    verbose: print the line.
    singletons: see :func:`retrieval_metrics`.

  A callback is configuration of a ``fit`` call, not part of the model, so it is not
  Keras-serialisable (Keras never saves callbacks); results of every evaluation stay in
  ``self.history``.

  Example:
    >>> import numpy as np
    >>> x, y = np.eye(4, dtype="float32"), [0, 0, 1, 1]
    >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> cb = RetrievalEvaluation(x, y, ks=(1,), verbose=0)
    >>> history = model.fit(x, np.zeros((4, 2)), epochs=1, verbose=0, callbacks=[cb])
    >>> sorted(key for key in history.history if key.startswith("val_"))
    ['val_map@r', 'val_recall@1']
  """

  def __init__(
    self,
    x,
    labels,
    ks=(1, 2, 4, 8),
    query=None,
    gallery=None,
    embedding_model=None,
    with_map=True,
    prefix="val_",
    batch_size=256,
    every=1,
    verbose=1,
    singletons="exclude",
  ):
    super().__init__()
    self.ks = inputs.check_ks(ks)
    checks.check_int("batch_size", batch_size, minimum=1)
    checks.check_int("every", every, minimum=1)
    checks.check_choice("singletons", singletons, inputs.SINGLETONS)
    self.x = x
    self.labels = labels
    self.query = query
    self.gallery = gallery
    self.embedding_model = embedding_model
    self.with_map = bool(with_map)
    self.prefix = str(prefix)
    self.batch_size = batch_size
    self.every = every
    self.verbose = verbose
    self.singletons = singletons
    self.history = []

  def evaluate(self):
    """Embeds the validation set and returns :func:`retrieval_metrics` of it."""
    model = self.embedding_model if self.embedding_model is not None else self.model
    if isinstance(self.x, tf.data.Dataset):
      emb = model.predict(self.x, verbose=0)
    else:
      emb = model.predict(self.x, batch_size=self.batch_size, verbose=0)
    return retrieval_metrics(
      emb,
      self.labels,
      self.ks,
      self.query,
      self.gallery,
      with_map=self.with_map,
      singletons=self.singletons,
    )

  def on_epoch_end(self, epoch, logs=None):
    if (epoch + 1) % self.every:
      return
    result = self.evaluate()
    self.history.append(dict(result, epoch=epoch))
    keys = [f"recall@{k}" for k in self.ks] + (["map@r"] if self.with_map else [])
    if logs is not None:
      for key in keys:
        logs[self.prefix + key] = result[key]
    if self.verbose:
      text = " - ".join(f"{self.prefix}{key}: {result[key]:.4f}" for key in keys)
      print(f"epoch {epoch + 1}: {text}")


class CommitCheckpoints(keras.callbacks.Callback):
  """Keras callback: at the end of every epoch, renames each ``ModelCheckpoint`` file written to
  a partial path to its final name (``tfrank4class.atomic.commit``).

  A ``ModelCheckpoint`` writes in place, so a run killed while it saves leaves a truncated file
  under the final name. Give it ``atomic.partial_path(template)`` as ``filepath`` and put this
  callback, with ``template``, after it in the callback list: the final name then holds the
  previous complete file until the new one is whole.

  Args:
    templates: the final file names, ``ModelCheckpoint`` templates formatted with ``epoch``
      (1-based, as ``ModelCheckpoint`` does), e.g. ``"checkpoints/epoch_{epoch:03d}.weights.h5"``.

  Example:
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> final = os.path.join(folder, "epoch_{epoch:03d}.txt")
    >>> atomic.write_text(atomic.partial_path(final.format(epoch=2)), "weights")
    >>> CommitCheckpoints([final]).on_epoch_end(1)
    >>> os.listdir(folder)
    ['epoch_002.txt']
  """

  def __init__(self, templates):
    super().__init__()
    self.templates = list(templates)

  def on_epoch_end(self, epoch, logs=None):
    for template in self.templates:
      path = template.format(epoch=epoch + 1)
      partial = atomic.partial_path(path)
      if os.path.exists(partial):
        atomic.commit(partial, path)


class PatienceStopping(keras.callbacks.Callback):
  """Keras callback: stops training ``patience`` epochs after the best epoch of ``monitor``.

  Higher is better. The best epoch is the first to reach the highest value so far (a later
  epoch must beat it strictly); after epoch ``e``, training stops when ``e - best >= patience``,
  the evidence grid's protocol (``experiments/training.py``, ``KeepBest``). When it stops a run,
  the model gets the weights of the best epoch back if that epoch ran in this ``fit``.

  Unlike ``keras.callbacks.EarlyStopping``, it continues a resumed run's count: ``previous``
  ``{epoch: value}`` holds the values of the epochs trained before the restart (a run's backup
  records them, ``tfrank4class.train.backup``). Put it after the callbacks that write
  ``monitor`` into the logs and after the backup callbacks, which clear ``stop_training`` at the
  end of a resumed epoch.

  Args:
    monitor: the logged value, e.g. ``"val_ndcg_5"``; an epoch without it is an error.
    patience: epochs without a new best before stopping, ``>= 1``.
    previous: ``{epoch: value}`` of the epochs before the first one this ``fit`` runs.

  Example:
    >>> import numpy as np
    >>> class Curve(keras.callbacks.Callback):  # a validation curve: best at epoch 1 (0.9)
    ...   def on_epoch_end(self, epoch, logs=None):
    ...     logs["val_score"] = [0.5, 0.9, 0.9, 0.7, 0.95][epoch]
    >>> model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> stop = PatienceStopping("val_score", patience=2)
    >>> history = model.fit(np.ones((2, 1)), np.ones((2, 1)), epochs=5, verbose=0,
    ...                     callbacks=[Curve(), stop])
    >>> len(history.epoch), stop.best_epoch, stop.stopped_epoch
    (4, 1, 3)
  """

  def __init__(self, monitor, patience, previous=None):
    super().__init__()
    self.monitor = str(monitor)
    self.patience = checks.check_int("patience", patience, minimum=1)
    self.previous = {int(e): float(v) for e, v in (previous or {}).items()}

  def on_train_begin(self, logs=None):
    self.values = dict(self.previous)
    self.best_epoch = None
    for epoch in sorted(self.values):
      if self.best_epoch is None or self.values[epoch] > self.values[self.best_epoch]:
        self.best_epoch = epoch
    self.best_weights = None
    self.stopped_epoch = None

  def on_epoch_end(self, epoch, logs=None):
    if not logs or self.monitor not in logs:
      raise ValueError(
        f"`monitor` {self.monitor!r} is not in the logs of epoch {epoch + 1}: {sorted(logs or {})}."
      )
    self.values[epoch] = float(logs[self.monitor])
    if self.best_epoch is None or self.values[epoch] > self.values[self.best_epoch]:
      self.best_epoch = epoch
      self.best_weights = self.model.get_weights()
    if epoch - self.best_epoch >= self.patience:
      self.model.stop_training = True
      self.stopped_epoch = epoch

  def on_train_end(self, logs=None):
    if self.stopped_epoch is not None and self.best_weights is not None:
      self.model.set_weights(self.best_weights)
