"""Writes the fixture of ``tests/test_saving.py``: one small compiled model saved on this Keras.

Run once under each stack, from the repository root (each writes its own file):

    KERAS_BACKEND=tensorflow PYTHONPATH=$PWD .venv/bin/python tools/saved_on_backends.py
    KERAS_BACKEND=jax PYTHONPATH=$PWD .venv-jax/bin/python tools/saved_on_backends.py
    KERAS_BACKEND=torch PYTHONPATH=$PWD .venv-torch/bin/python tools/saved_on_backends.py
    TF_USE_LEGACY_KERAS=1 PYTHONPATH=$PWD .venv/bin/python tools/saved_on_backends.py

It writes ``tests/fixtures/saved_on_backends/<stack>.keras`` (stack: ``tensorflow``, ``jax``,
``torch``, or ``tf_keras``) and ``<stack>.npz``: the model's predictions on ``INPUTS`` and its
``evaluate`` results (loss, then the metric) on ``INPUTS`` and ``LABELS``, as computed by the
stack that saved it. The model is an MLP under a Rank4Class head, compiled with a tfrank4class
loss and metric and Adam, trained for two steps so the optimizer has state.
"""

import os
import sys

import numpy as np

from tfrank4class import compat, heads, losses, metrics
from tfrank4class.compat import keras

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "saved_on_backends")
RNG = np.random.default_rng(58)
INPUTS = RNG.standard_normal((16, 8)).astype(np.float32)
LABELS = RNG.integers(0, 5, 16).astype(np.int64)


def stack():
  """The name of the stack this process saves on."""
  return compat.BACKEND if compat.KERAS_3 else "tf_keras"


def main():
  keras.utils.set_random_seed(0)
  x = keras.Input((8,))
  h = keras.layers.Dense(6, activation="relu")(x)
  scores = heads.Rank4ClassHead(5, interaction="latent_cross", hidden_units=(4,))(h)
  model = keras.Model(x, scores)
  model.compile(
    optimizer=keras.optimizers.Adam(1e-2),
    loss=losses.get("approx_ndcg_loss"),
    metrics=[metrics.get("ndcg_5")],
  )
  model.fit(INPUTS, LABELS, batch_size=8, epochs=1, verbose=0)
  os.makedirs(OUT, exist_ok=True)
  model.save(os.path.join(OUT, f"{stack()}.keras"))
  np.savez(
    os.path.join(OUT, f"{stack()}.npz"),
    inputs=INPUTS,
    labels=LABELS,
    outputs=model.predict(INPUTS, verbose=0),
    evaluated=np.array(model.evaluate(INPUTS, LABELS, batch_size=16, verbose=0)),
  )
  print(f"wrote {stack()}.keras (Keras {keras.__version__})", file=sys.stderr)


if __name__ == "__main__":
  main()
