"""Tests of tfrank4class.train.callbacks: RetrievalEvaluation against numpy references, and
PatienceStopping against hand-worked validation curves."""

import _retrieval_reference as ref
import numpy as np
import pytest
import tensorflow as tf

from tfrank4class import atomic
from tfrank4class.compat import keras
from tfrank4class.train.callbacks import CommitCheckpoints, PatienceStopping, RetrievalEvaluation


# ---------------------------------------------------------------- Keras callback
def _toy_model():
  inputs = tf.keras.Input((4,))
  return tf.keras.Model(inputs, tf.keras.layers.Dense(3, use_bias=False)(inputs))


def test_callback_reports_into_logs(mirrored_strategy):
  rng = np.random.default_rng(8)
  x = rng.normal(size=(40, 4)).astype(np.float32)
  y = rng.integers(0, 4, size=40)
  with mirrored_strategy.scope():
    model = _toy_model()
    model.compile(optimizer="sgd", loss="mse")
  cb = RetrievalEvaluation(x, y, ks=(1, 2), verbose=0)
  hist = model.fit(x, rng.normal(size=(40, 3)), epochs=2, batch_size=8, verbose=0, callbacks=[cb])
  assert len(hist.history["val_recall@1"]) == 2 and "val_map@r" in hist.history
  want = ref.brute_force(ref.cosine(model.predict(x, verbose=0)), y, (1, 2))
  assert hist.history["val_recall@1"][-1] == pytest.approx(want["recall@1"], abs=1e-6)
  assert hist.history["val_recall@2"][-1] == pytest.approx(want["recall@2"], abs=1e-6)
  assert hist.history["val_map@r"][-1] == pytest.approx(want["map@r"], abs=1e-6)
  assert [h["epoch"] for h in cb.history] == [0, 1]


def test_callback_with_separate_embedding_model_and_every():
  rng = np.random.default_rng(9)
  x = rng.normal(size=(30, 4)).astype(np.float32)
  y = rng.integers(0, 3, size=30)
  inputs = tf.keras.Input((4,))
  emb = tf.keras.layers.Dense(3)(inputs)
  logits = tf.keras.layers.Dense(3)(emb)
  train_model, emb_model = tf.keras.Model(inputs, logits), tf.keras.Model(inputs, emb)
  train_model.compile(optimizer="sgd", loss=tf.keras.losses.SparseCategoricalCrossentropy(True))
  cb = RetrievalEvaluation(
    x, y, ks=(1,), embedding_model=emb_model, with_map=False, every=2, verbose=0, prefix="test_"
  )
  hist = train_model.fit(x, y, epochs=2, verbose=0, callbacks=[cb])
  assert len(cb.history) == 1 and cb.history[0]["epoch"] == 1
  want = ref.brute_force(ref.cosine(emb_model.predict(x, verbose=0)), y, (1,))
  assert cb.history[0]["recall@1"] == pytest.approx(want["recall@1"], abs=1e-6)
  assert "test_recall@1" in hist.history


def test_callback_bad_arguments():
  with pytest.raises(ValueError, match=r"`every` must be an integer >= 1, got 0"):
    RetrievalEvaluation(np.eye(3), [0, 0, 1], every=0)
  with pytest.raises(ValueError, match=r"`ks` must be an integer >= 1, got -1"):
    RetrievalEvaluation(np.eye(3), [0, 0, 1], ks=(-1,))


class _Curve(tf.keras.callbacks.Callback):
  """Writes ``curve[epoch]`` into the logs as ``val_score`` and keeps the first weight."""

  def __init__(self, curve):
    super().__init__()
    self.curve = curve
    self.kernels = {}

  def on_epoch_end(self, epoch, logs=None):
    logs["val_score"] = self.curve[epoch]
    self.kernels[epoch] = self.model.get_weights()[0].copy()


def _fit_curve(curve, patience, previous=None, initial_epoch=0):
  model = _toy_model()
  model.compile(optimizer="sgd", loss="mse")
  record, stop = _Curve(curve), PatienceStopping("val_score", patience, previous)
  x = np.ones((8, 4), np.float32)
  history = model.fit(
    x,
    np.zeros((8, 3)),
    epochs=len(curve),
    initial_epoch=initial_epoch,
    verbose=0,
    callbacks=[record, stop],
  )
  return model, history, record, stop


@pytest.mark.parametrize(
  "curve, patience, best, epochs_run",
  [
    # best at epoch 1 (0.9); the tie at 2 is no new best: stops after epoch 1 + 2 = 3
    ([0.5, 0.9, 0.9, 0.7, 0.95, 0.99], 2, 1, 4),
    # a new best at 3 restarts the count: stops after epoch 3 + 2 = 5
    ([0.5, 0.9, 0.8, 0.95, 0.9, 0.9, 1.0], 2, 3, 6),
    # never stops: every epoch is a new best
    ([0.1, 0.2, 0.3], 1, 2, 3),
  ],
)
def test_patience_stopping_stops_patience_epochs_after_the_best(curve, patience, best, epochs_run):
  model, history, record, stop = _fit_curve(curve, patience)
  assert len(history.epoch) == epochs_run and stop.best_epoch == best
  if epochs_run < len(curve):  # stopped: the best epoch's weights are back
    np.testing.assert_array_equal(model.get_weights()[0], record.kernels[best])
  else:
    assert stop.stopped_epoch is None


def test_patience_stopping_continues_the_count_of_a_resumed_run():
  # epochs 0 and 1 ran before a restart; the best (0.9, epoch 0) is 2 epochs old after epoch 2
  curve = [None, None, 0.8, 0.95, 0.7]
  _, history, _, stop = _fit_curve(curve, 2, previous={"0": 0.9, "1": 0.5}, initial_epoch=2)
  assert history.epoch == [2] and stop.best_epoch == 0 and stop.stopped_epoch == 2


def test_patience_stopping_names_a_missing_monitor():
  model = _toy_model()
  model.compile(optimizer="sgd", loss="mse")
  stop = PatienceStopping("val_ndcg_5", 1)
  with pytest.raises(ValueError, match=r"`monitor` 'val_ndcg_5' is not in the logs of epoch 1"):
    model.fit(np.ones((2, 4)), np.ones((2, 3)), epochs=1, verbose=0, callbacks=[stop])
  with pytest.raises(ValueError, match=r"`patience` must be an integer >= 1, got 0"):
    PatienceStopping("val_ndcg_5", 0)


def test_docstring_examples_run():
  import doctest

  from tfrank4class.train import callbacks

  result = doctest.testmod(callbacks, optionflags=doctest.NORMALIZE_WHITESPACE)
  assert result.attempted > 0 and result.failed == 0, result


class Killed(BaseException):
  """Stands for the process being killed."""


def test_checkpoints_killed_while_saved_leave_the_previous_file(tmp_path):
  x, y = np.eye(4, dtype="float32"), np.ones((4, 2), "float32")
  inputs = keras.Input((4,))
  model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
  model.compile(optimizer="sgd", loss="mse")
  best = str(tmp_path / "best.keras")
  epochs = str(tmp_path / "epoch_{epoch:03d}.weights.h5")
  callbacks = [
    keras.callbacks.ModelCheckpoint(atomic.partial_path(best)),
    keras.callbacks.ModelCheckpoint(atomic.partial_path(epochs), save_weights_only=True),
    CommitCheckpoints([best, epochs]),
  ]
  model.fit(x, y, epochs=2, verbose=0, callbacks=callbacks)
  assert sorted(p.name for p in tmp_path.iterdir()) == [
    "best.keras",
    "epoch_001.weights.h5",
    "epoch_002.weights.h5",
  ]
  want = model.predict(x, verbose=0)

  def save_killed_halfway(path, *args, **kwargs):
    with open(path, "wb") as f:
      f.write(b"PK\x03\x04 half a zip")
    raise Killed()

  model.save = save_killed_halfway  # what ModelCheckpoint calls
  with pytest.raises(Killed):
    model.fit(x, y, epochs=3, initial_epoch=2, verbose=0, callbacks=callbacks)
  saved = keras.models.load_model(best)
  np.testing.assert_allclose(saved.predict(x, verbose=0), want, rtol=1e-6)
