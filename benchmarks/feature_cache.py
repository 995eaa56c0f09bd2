"""Frozen features: the instance embeddings of a trained model, computed once and cached on disk.

A Rank4Class model is ``scores = head(encoder(x))``. To compare many heads and losses on the same
representation (the *frozen features* protocol), train one model, take its embeddings
``h = encoder(x)`` (the input of its ``rank4class_head``) for every split once, and train only
heads on them:

    model = ... trained ...
    embed = embedding_model(model)                       # x -> h, [N, d]
    h = extract(embed, x_train)                          # numpy float32 [N, d]

``FeatureCache`` keeps such arrays on disk, keyed by a *spec* (a JSON-serialisable dict naming
everything that determines them: dataset, encoder, its training settings, seed), so that a
restarted experiment reuses them instead of training the encoder again:

    cache = FeatureCache("/tmp/features")
    arrays, info = cache.get_or_build(spec, build)       # build() -> (arrays dict, info dict)

Each entry is ``<key>.npz`` (the arrays) and ``<key>.json`` (the spec and ``info``), with
``key = spec_key(spec)``; both are written to a temporary file first and renamed, so a killed
process never leaves a half-written entry that would later be read as complete.
"""

import hashlib
import json
import os

import numpy as np
import tensorflow as tf

from tfrank4class import checks
from tfrank4class.compat import keras

#: The layer name ``tfrank4class.heads.build_model`` gives the head.
HEAD_NAME = "rank4class_head"


def embedding_model(model, head_name=HEAD_NAME):
  """The model ``inputs -> input of the head``: the instance embeddings ``[B, d]`` of ``model``.

  Args:
    model: a functional model with a head layer named ``head_name`` (as
      :func:`tfrank4class.heads.build_model` builds).
    head_name: the head layer's name.

  Raises:
    ValueError: ``model`` has no layer ``head_name``.
  """
  names = [layer.name for layer in model.layers]
  if head_name not in names:
    raise ValueError(
      f"`model` has no layer named {head_name!r} (`head_name`); its layers are {names}."
    )
  head = model.get_layer(head_name)
  return keras.Model(model.inputs, head.input, name=f"{model.name}_embedding")


def extract(model, features, batch_size=512):
  """``model(features)`` in batches, without training behaviour, as a float32 numpy array."""
  batch_size = checks.check_int("batch_size", batch_size, minimum=1)
  outputs = []
  for batch in tf.data.Dataset.from_tensor_slices(features).batch(batch_size):
    outputs.append(np.asarray(model(batch, training=False), np.float32))
  return np.concatenate(outputs)


def spec_key(spec):
  """A 16-hex-digit key of a JSON-serialisable ``spec`` (SHA-1 of its canonical JSON).

  Example:
    >>> spec_key({"a": 1, "b": [2, 3]}) == spec_key({"b": [2, 3], "a": 1})
    True
  """
  try:
    text = json.dumps(spec, sort_keys=True, separators=(",", ":"))
  except TypeError as e:
    raise ValueError(f"`spec` must be JSON-serialisable, got {spec!r}: {e}") from None
  return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def _write_atomically(path, write):
  tmp = f"{path}.tmp{os.getpid()}"
  with open(tmp, "wb") as f:
    write(f)
    f.flush()
    os.fsync(f.fileno())
  os.replace(tmp, path)


class FeatureCache:
  """Arrays on disk keyed by a spec (see the module docstring).

  Args:
    directory: where the entries live (created when needed).
  """

  def __init__(self, directory):
    if not isinstance(directory, (str, os.PathLike)) or not str(directory):
      raise ValueError(f"`directory` must be a folder path, got {directory!r}.")
    self.directory = str(directory)

  def paths(self, spec):
    """``(npz path, json path)`` of the entry for ``spec``."""
    base = os.path.join(self.directory, spec_key(spec))
    return base + ".npz", base + ".json"

  def load(self, spec):
    """``(arrays, info)`` of the entry for ``spec``, or ``None`` if there is none.

    Raises:
      ValueError: the entry's stored spec differs from ``spec`` (a key collision or an edited
        file), naming the file.
    """
    npz, meta = self.paths(spec)
    if not (os.path.exists(npz) and os.path.exists(meta)):
      return None
    with open(meta, encoding="utf-8") as f:
      stored = json.load(f)
    if json.loads(json.dumps(spec)) != stored.get("spec"):
      raise ValueError(
        f"The feature cache entry {meta} holds another spec than the one asked "
        f"for: {stored.get('spec')!r} there, {spec!r} asked. Delete the entry."
      )
    with np.load(npz, allow_pickle=False) as arrays:
      return {k: arrays[k] for k in arrays.files}, stored.get("info", {})

  def save(self, spec, arrays, info=None):
    """Writes ``arrays`` (a dict of numpy arrays) and ``info`` (a JSON dict) for ``spec``."""
    if not isinstance(arrays, dict) or not arrays:
      raise ValueError(f"`arrays` must be a non-empty dict of numpy arrays, got {arrays!r}.")
    os.makedirs(self.directory, exist_ok=True)
    npz, meta = self.paths(spec)
    _write_atomically(npz, lambda f: np.savez(f, **{k: np.asarray(v) for k, v in arrays.items()}))
    text = json.dumps({"spec": spec, "info": info or {}}, indent=1, sort_keys=True)
    _write_atomically(meta, lambda f: f.write(text.encode("utf-8")))

  def get_or_build(self, spec, build):
    """The cached ``(arrays, info)`` for ``spec``; on a miss, ``build()`` makes and stores them.

    ``build`` takes no argument and returns ``(arrays dict, info dict)``. The JSON file is
    written last, so an entry counts as present only once both files are complete.
    """
    found = self.load(spec)
    if found is not None:
      return found
    arrays, info = build()
    self.save(spec, arrays, info)
    return self.load(spec)
