"""A ``.keras`` file saved on any backend loads, predicts, evaluates and trains on this one.

The fixture (``tools/saved_on_backends.py``) holds one small compiled model (a Rank4Class head,
a tfrank4class loss and metric, Adam after two steps) saved on each stack: Keras 3 on
TensorFlow, JAX and PyTorch, and tf-keras; with its predictions and ``evaluate`` results as the
saving stack computed them. Every leg loads every file: a Keras 3 file on every Keras 3 backend,
the tf-keras file under tf-keras; a file of the other Keras is refused by name. Plain
``keras.saving.load_model`` fails on the PyTorch file elsewhere (its optimizer is PyTorch's own
class) and compiles the JAX file for ``torch.compile`` on PyTorch.
"""

import pathlib

import numpy as np
import pytest

import tfrank4class  # noqa: F401  (registers the package's objects, as a user's import does)
from tfrank4class import compat, saving
from tfrank4class.compat import keras

FIXTURE = pathlib.Path(__file__).parent / "fixtures" / "saved_on_backends"
STACKS = ("tensorflow", "jax", "torch", "tf_keras")


def _same_keras(stack):
  return (stack == "tf_keras") != compat.KERAS_3


@pytest.mark.parametrize("stack", STACKS)
def test_a_model_saved_on_any_stack_loads_predicts_evaluates_and_trains(stack):
  path = FIXTURE / f"{stack}.keras"
  if not _same_keras(stack):
    with pytest.raises(ValueError, match=r"was saved by Keras \d.*loads only under"):
      saving.load_model(path)
    return
  saved = np.load(FIXTURE / f"{stack}.npz")
  labels = saved["labels"].astype(np.int32)
  model = saving.load_model(path)
  np.testing.assert_allclose(model.predict(saved["inputs"], verbose=0), saved["outputs"], atol=1e-5)
  evaluated = model.evaluate(saved["inputs"], labels, batch_size=16, verbose=0)
  np.testing.assert_allclose(evaluated, saved["evaluated"], rtol=1e-5, atol=1e-6)
  assert type(model.optimizer).__name__ == "Adam"
  assert int(np.array(model.optimizer.iterations)) == 2  # the state came too
  if compat.KERAS_3:  # compiled for this backend: its own default, not the saver's
    reference = keras.Model(model.inputs, model.outputs)
    reference.compile(optimizer="adam", loss="mse")
    assert model.jit_compile == reference.jit_compile
  before = [np.array(w) for w in model.trainable_weights]
  loss = model.train_on_batch(saved["inputs"], labels)
  assert np.all(np.isfinite(loss))
  assert int(np.array(model.optimizer.iterations)) == 3
  assert any(
    not np.allclose(b, np.array(w)) for b, w in zip(before, model.trainable_weights, strict=True)
  )


@pytest.mark.skipif(not compat.KERAS_3, reason="the compile configuration of Keras 3")
def test_the_portable_config_names_keras_generic_optimizer_and_the_loading_default():
  config = {
    "compile_config": {
      "optimizer": {
        "module": "keras.src.backend.torch.optimizers.torch_adam",
        "class_name": "Adam",
      },
      "jit_compile": False,
      "loss": "mse",
    }
  }
  portable = saving.portable_config(config)["compile_config"]
  assert portable == {
    "optimizer": {"module": "keras.optimizers", "class_name": "Adam"},
    "jit_compile": "auto",
    "loss": "mse",
  }
  assert config["compile_config"]["jit_compile"] is False  # the input is left as it was
