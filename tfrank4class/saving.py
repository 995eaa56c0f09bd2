"""Loading a ``.keras`` file on any Keras 3 backend, whichever backend saved it: ``load_model``.

Keras 3 (3.15) writes two things into a compiled model's ``.keras`` file that belong to the
backend that saved it, not to the model:

* the optimizer's module: on PyTorch it is the backend's own class
  (``keras.src.backend.torch.optimizers.torch_adam``), which another backend cannot import, so
  ``keras.saving.load_model`` fails there ("Could not deserialize class 'Adam'");
* ``jit_compile`` as that backend resolved it: ``True`` on JAX, which PyTorch then runs through
  ``torch.compile`` (seconds to minutes per call on a CPU), ``False`` on PyTorch, which JAX then
  runs op by op.

``load_model`` reads the file as it is, names the optimizer by Keras's generic class
(``keras.optimizers.Adam``: the same configuration and slot variables on every backend) and
compiles with ``jit_compile="auto"``, the loading backend's own default (the file does not say
which backend saved it); the weights and the optimizer's state load as saved. Set
``model.jit_compile`` after loading to choose otherwise. Everything else is
``keras.saving.load_model``'s. ``import tfrank4class`` has registered the package's losses,
metrics and layers, so no ``custom_objects`` are needed for them.

Files that tf-keras (Keras 2) wrote load under tf-keras, and Keras 3 files under Keras 3: the
two ``.keras`` formats differ, and ``load_model`` refuses a file of the other Keras by name.

Example:
  >>> import os, tempfile
  >>> import numpy as np
  >>> from tfrank4class.compat import keras
  >>> inputs = keras.Input((3,))
  >>> model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
  >>> model.compile(optimizer="adam", loss="mse")
  >>> model.train_on_batch(np.ones((4, 3)), np.zeros((4, 2))) is not None
  True
  >>> path = os.path.join(tempfile.mkdtemp(), "model.keras")
  >>> model.save(path)
  >>> type(load_model(path).optimizer).__name__
  'Adam'
"""

import json
import os
import tempfile
import zipfile

from tfrank4class.compat import keras

__all__ = ["load_model"]

#: The module prefix of Keras 3's backend-specific classes (e.g. PyTorch's optimizers).
_BACKEND_MODULES = "keras.src.backend."
#: The module of Keras 3's generic optimizers.
_GENERIC_OPTIMIZERS = "keras.optimizers"


def _keras_major(version):
  return int(str(version).split(".")[0])


def portable_config(config):
  """``config`` (a ``.keras`` file's ``config.json``, a dict) with its compile configuration
  made backend-neutral: the optimizer named by Keras's generic class, ``jit_compile="auto"``.

  Example:
    >>> config = {"compile_config": {"jit_compile": True, "optimizer": {
    ...   "module": "keras.src.backend.torch.optimizers.torch_adam", "class_name": "Adam"}}}
    >>> portable_config(config)["compile_config"]
    {'jit_compile': 'auto', 'optimizer': {'module': 'keras.optimizers', 'class_name': 'Adam'}}
  """
  compile_config = config.get("compile_config")
  if not compile_config:
    return config
  compile_config = dict(compile_config, jit_compile="auto")
  optimizer = compile_config.get("optimizer")
  if isinstance(optimizer, dict) and str(optimizer.get("module", "")).startswith(_BACKEND_MODULES):
    compile_config["optimizer"] = dict(optimizer, module=_GENERIC_OPTIMIZERS)
  return dict(config, compile_config=compile_config)


def load_model(path, custom_objects=None, compile=True, safe_mode=True):  # noqa: A002  (Keras's name)
  """The model of the ``.keras`` file ``path``, loaded on the bound Keras's backend.

  The arguments are ``keras.saving.load_model``'s. A Keras 3 file saved on any backend loads on
  any other, compiled as saved but for the two backend-specific settings the module names.

  Raises:
    ValueError: ``path`` was written by the other Keras (Keras 2 under Keras 3, or the reverse).
  """
  path = os.fspath(path)
  if not (path.endswith(".keras") and zipfile.is_zipfile(path)):
    return keras.models.load_model(path, custom_objects=custom_objects, compile=compile)
  with zipfile.ZipFile(path) as archive:
    saved_with = json.loads(archive.read("metadata.json")).get("keras_version", "0")
    _check_same_keras(path, saved_with)
    if _keras_major(saved_with) < 3:
      return keras.models.load_model(
        path, custom_objects=custom_objects, compile=compile, safe_mode=safe_mode
      )
    config = json.loads(archive.read("config.json"))
    with tempfile.TemporaryDirectory(prefix="tfrank4class_load_") as scratch:
      portable = os.path.join(scratch, os.path.basename(path))
      with zipfile.ZipFile(portable, "w", zipfile.ZIP_DEFLATED) as out:
        for item in archive.infolist():
          if item.filename == "config.json":
            out.writestr(item, json.dumps(portable_config(config)))
          else:
            with archive.open(item) as source, out.open(item, "w") as target:
              while chunk := source.read(1 << 24):
                target.write(chunk)
      return keras.saving.load_model(
        portable, custom_objects=custom_objects, compile=compile, safe_mode=safe_mode
      )


def _check_same_keras(path, saved_with):
  """Refuses a file that the other Keras (2 against 3) wrote, naming both versions."""
  bound = keras.__version__
  if (_keras_major(saved_with) >= 3) != (_keras_major(bound) >= 3):
    raise ValueError(
      f"{path} was saved by Keras {saved_with}, and the bound Keras is {bound}: a .keras file "
      "of Keras 2 (tf-keras) loads only under tf-keras (TF_USE_LEGACY_KERAS=1), one of Keras 3 "
      "only under Keras 3."
    )
