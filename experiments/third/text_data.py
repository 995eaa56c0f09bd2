"""The third edition's data: CLINC150, BANKING77 and GoEmotions as frozen MiniLM features.

* :func:`read_tsv`: one split of CLINC150 or BANKING77 as published in ``../shared/datasets``
  (``text<TAB>label id<TAB>row id``, split on TAB with no quote handling, as the datasets'
  README says: 16 CLINC150 texts begin with a stray ``"``).
* :func:`label_groups`: the class groups of the structured label noise, from CLINC150's official
  ``domains.json`` (10 domains of 15 intents) or GoEmotions' ``ekman_mapping.json`` (6 groups over
  27 labels; neutral in none), as lists of class ids.
* :func:`dataset_features`: ``{"train", "validation", "test": (x, y)}`` of a dataset as
  all-MiniLM-L6-v2 embeddings (``experiments.second.features.ENCODER``, the second edition's),
  computed
  once per dataset and cached by :class:`experiments.features.FeatureCache`. CLINC150 uses its
  official ``val``; BANKING77 publishes no validation split, so the protocol's hold-out
  (:data:`BANKING_HOLDOUT`) is carved from train; GoEmotions is the second edition's cache entry
  (:func:`experiments.features.minilm_features`).

The out-of-scope items of CLINC150 are only in its ``data_full.json``; the TSVs read here hold the
150 in-scope intents only, as the protocol asks.

Example:
  >>> import io
  >>> rows = '"quoted\\t3\\ttrain-00000\\nplain\\t0\\ttrain-00001\\n'
  >>> texts, labels = read_tsv(io.StringIO(rows))
  >>> texts, labels.tolist()
  (['"quoted', 'plain'], [3, 0])
"""

import json
import os
import sys
import time

import numpy as np

from experiments import features
from tfrank4class.encoders import huggingface_bert, huggingface_checkpoint

#: Dataset -> (folder under the data directory, {split: file}, labels file).
DATASETS = {
  "clinc150": (
    "clinc150",
    {"train": "train.tsv", "validation": "val.tsv", "test": "test.tsv"},
    "labels.txt",
  ),
  "banking77": ("banking77", {"train": "train.tsv", "test": "test.tsv"}, "labels.txt"),
  "goemotions": ("goemotions", None, "emotions.txt"),
}
#: BANKING77's validation hold-out: 10 % of each class's training rows, drawn once with
#: ``numpy.random.default_rng(0)`` (:func:`experiments.features.stratified_holdout`; Python's
#: ``round``, and every class has at least 35 rows, so at least 4 are held out).
BANKING_HOLDOUT = {"fraction": 0.1, "seed": 0, "minimum": 3}
#: The files of the label groups: dataset -> (file in its folder, what it maps).
GROUP_FILES = {"clinc150": "domains.json", "goemotions": "ekman_mapping.json"}


def read_tsv(file):
  """``(texts, int64 label ids)`` of one TSV split (a path or an open text file)."""
  if isinstance(file, (str, os.PathLike)):
    with open(file, encoding="utf-8", newline="\n") as f:
      return read_tsv(f)
  texts, labels = [], []
  for number, line in enumerate(file, 1):
    line = line.rstrip("\r\n")
    if not line:
      continue
    fields = line.split("\t")
    if len(fields) != 3 or not fields[1].isdigit():
      raise ValueError(
        f"Line {number} of {getattr(file, 'name', 'the TSV')} must be text<TAB>label id<TAB>row "
        f"id, got {line!r}."
      )
    texts.append(fields[0])
    labels.append(int(fields[1]))
  return texts, np.asarray(labels, np.int64)


def class_names(data_dir, dataset):
  """The class names of ``dataset`` in label-id order."""
  folder, _, names_file = DATASETS[dataset]
  with open(os.path.join(data_dir, folder, names_file), encoding="utf-8") as f:
    return [line.strip() for line in f if line.strip()]


def label_groups(data_dir, dataset):
  """The class-id groups of ``dataset``'s structured noise (see the module docstring), each
  sorted, in the file's order of groups; a name the dataset lacks raises ``ValueError``."""
  if dataset not in GROUP_FILES:
    raise ValueError(
      f"`dataset` must be one of {sorted(GROUP_FILES)} for label groups, got {dataset!r}."
    )
  folder = DATASETS[dataset][0]
  path = os.path.join(data_dir, folder, GROUP_FILES[dataset])
  with open(path, encoding="utf-8") as f:
    mapping = json.load(f)
  ids = {name: i for i, name in enumerate(class_names(data_dir, dataset))}
  groups = []
  for group, members in mapping.items():
    unknown = [m for m in members if m not in ids]
    if unknown:
      raise ValueError(f"{path}: group {group!r} names classes {unknown} not in the labels.")
    groups.append(sorted(ids[m] for m in members))
  return groups


def _encoder():
  return huggingface_bert.bert_checkpoint(
    huggingface_checkpoint.installed_minilm_path(),
    max_length=features.ENCODER["max_length"],
    output_mode=features.ENCODER["output_mode"],
    normalize=features.ENCODER["normalize"],
  )


def _build(data_dir, dataset):
  """``(arrays, info)`` of ``dataset``'s published splits, embedded."""
  folder, files, _ = DATASETS[dataset]
  encoder, arrays, seconds = _encoder(), {}, {}
  for split, name in files.items():
    texts, labels = read_tsv(os.path.join(data_dir, folder, name))
    start = time.perf_counter()
    batch = np.asarray([t.encode("utf-8") for t in texts], object).reshape(-1, 1)
    arrays[f"{split}_x"] = features.extract(encoder, batch, features.EMBED_BATCH_SIZE)
    seconds[split] = time.perf_counter() - start
    arrays[f"{split}_y"] = labels
    print(
      f"[features] {dataset} {split}: {len(labels)} texts, {seconds[split]:.0f}s",
      file=sys.stderr,
      flush=True,
    )
  return arrays, {"embed_seconds": seconds, "num_classes": len(class_names(data_dir, dataset))}


def banking_split(labels):
  """``(kept, held_out)`` row indices of BANKING77's training split (:data:`BANKING_HOLDOUT`)."""
  kept, held = features.stratified_holdout(
    labels, BANKING_HOLDOUT["fraction"], seed=BANKING_HOLDOUT["seed"]
  )
  counts = np.bincount(np.asarray(labels)[held])
  if counts.min() < BANKING_HOLDOUT["minimum"]:
    raise ValueError(
      f"The BANKING77 hold-out keeps {counts.min()} rows of some class, fewer "
      f"than the protocol's {BANKING_HOLDOUT['minimum']}."
    )
  return kept, held


def dataset_features(work_dir, data_dir, dataset):
  """``(splits, info)``: ``splits[split] = (float32 [N, 384], int64 [N])`` for ``train``,
  ``validation`` and ``test`` of ``dataset`` (see the module docstring); ``info`` holds
  ``num_classes`` and ``feature_key``."""
  if dataset not in DATASETS:
    raise ValueError(f"`dataset` must be one of {sorted(DATASETS)}, got {dataset!r}.")
  if dataset == "goemotions":
    arrays, info = features.minilm_features(work_dir, data_dir)
  else:
    spec = {"dataset": dataset, "encoder": features.ENCODER, "version": 1}
    cache = features.FeatureCache(work_dir)
    arrays, info = cache.get_or_build(spec, lambda: _build(data_dir, dataset))
    info = {**info, "feature_key": features.spec_key(spec)}
  splits = {
    s: (arrays[f"{s}_x"], arrays[f"{s}_y"])
    for s in ("train", "validation", "test")
    if f"{s}_x" in arrays
  }
  if dataset == "banking77":
    x, y = splits["train"]
    kept, held = banking_split(y)
    splits.update(train=(x[kept], y[kept]), validation=(x[held], y[held]))
  return splits, {"num_classes": int(info["num_classes"]), "feature_key": info["feature_key"]}
