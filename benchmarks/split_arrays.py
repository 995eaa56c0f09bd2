"""Whole splits in memory as numpy arrays, and a stratified hold-out of a training split.

For experiments that train many small models on one dataset (a grid over losses, heads and
seeds), reading and decoding the files once and keeping the examples in memory is much cheaper
than rebuilding the file pipeline for every run:

    features, labels = to_numpy("cifar10", "train", data_dir)      # evaluation preprocessing
    train_idx, val_idx = stratified_holdout(labels, fraction=0.1)  # a validation split from train

``to_numpy`` reads the split with ``tfrank4class.data.load`` without shuffling or augmentation (the
evaluation preprocessing), in the order that pipeline yields it (sorted file names for image
folders, the file's rows for GoEmotions, news ids for MIND), so it returns the same arrays on
every call.
"""

import numpy as np

from tfrank4class import checks
from tfrank4class import data as data_lib


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
