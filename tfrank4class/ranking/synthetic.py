"""Synthetic score lists and their exact ranks, for pretraining sorters (SoDeep Sec. 3.1.2).

Every list is drawn from one of four families, chosen uniformly at random per list:

* ``uniform``:  ``s_i ~ U[-1, 1]``;
* ``normal``:   ``s_i ~ N(0, 1)``;
* ``spaced``:   ``n`` evenly spaced numbers ``a + (b - a) * t / (n - 1)``, ``t = 0..n-1``, in a
  random sub-range ``-1 <= a < b <= 1``, in random order;
* ``mixture``:  each item drawn from one of the three families above, with per-list random
  mixing proportions.

The target is ``rank(s)`` (:func:`tfrank4class.ranking.rank`: 1..n, 1 = highest). Everything is
generated with stateless random ops from ``(seed, batch index)``, so a dataset is reproducible and
two seeds give independent data.
"""

import tensorflow as tf

from tfrank4class import checks
from tfrank4class.ranking.exact import rank

FAMILIES = ("uniform", "normal", "spaced", "mixture")


def _check_lengths(list_size):
  if isinstance(list_size, (tuple, list)):
    if len(list_size) != 2:
      raise ValueError(f"`list_size` must be an int >= 2 or a (min, max) pair, got {list_size!r}.")
    lo = checks.check_int("list_size[0]", list_size[0], minimum=2)
    hi = checks.check_int("list_size[1]", list_size[1], minimum=2)
    if hi < lo:
      raise ValueError(f"`list_size` must be (min, max) with min <= max, got {list_size!r}.")
    return lo, hi
  n = checks.check_int("list_size", list_size, minimum=2)
  return n, n


def _check_families(families):
  families = tuple(families)
  if not families:
    raise ValueError(f"`families` must name at least one of {list(FAMILIES)}, got ().")
  for f in families:
    checks.check_choice("families", f, FAMILIES)
  return families


def synthetic_batch(batch_size, list_size, seed, families=FAMILIES, dtype=tf.float32):
  """One batch ``(scores [B, n], ranks [B, n])`` of synthetic lists of length ``list_size``.

  Args:
    batch_size: number of lists ``B >= 1``.
    list_size: the list length ``n >= 2`` (a Python int or an int32 scalar tensor).
    seed: a shape-[2] int seed of the stateless random ops (or a Python int).
    families: the families to draw from (see the module docstring).
    dtype: float dtype of the scores and ranks.

  Returns:
    ``(scores, ranks)`` with ``ranks = rank(scores)`` (1 = highest).

  Example:
    >>> s, r = synthetic_batch(2, 5, seed=0)
    >>> sorted(r.numpy()[0].tolist())
    [1.0, 2.0, 3.0, 4.0, 5.0]
  """
  checks.check_int("batch_size", batch_size, minimum=1)
  if isinstance(list_size, int):
    checks.check_int("list_size", list_size, minimum=2)
  families = _check_families(families)
  if isinstance(seed, int):
    seed = [seed, 0]
  seed = tf.cast(tf.convert_to_tensor(seed), tf.int64)
  seeds = tf.random.experimental.stateless_split(seed, 10)
  b, n = batch_size, list_size
  shape = tf.stack([b, n])
  uni = tf.random.stateless_uniform(shape, seeds[0], -1.0, 1.0, dtype=dtype)
  nor = tf.random.stateless_normal(shape, seeds[1], dtype=dtype)
  ends = tf.sort(tf.random.stateless_uniform([b, 2], seeds[2], -1.0, 1.0, dtype=dtype), axis=-1)
  t = tf.cast(tf.range(n), dtype) / tf.cast(n - 1, dtype)
  spaced_sorted = ends[:, :1] + (ends[:, 1:] - ends[:, :1]) * t[None, :]
  order = tf.argsort(tf.random.stateless_uniform(shape, seeds[3]), axis=-1)
  spaced = tf.gather(spaced_sorted, order, batch_dims=1)
  proportions = tf.random.stateless_uniform([b, 3], seeds[4], 1e-3, 1.0)
  component = tf.random.stateless_categorical(tf.math.log(proportions), n, seeds[5], dtype=tf.int32)
  mixture = tf.where(component == 0, uni, tf.where(component == 1, nor, spaced))
  pool = {"uniform": uni, "normal": nor, "spaced": spaced, "mixture": mixture}
  stacked = tf.stack([pool[f] for f in families], axis=0)  # [F, B, n]
  family = tf.random.stateless_uniform([b], seeds[6], 0, len(families), dtype=tf.int32)
  scores = tf.gather(tf.transpose(stacked, [1, 0, 2]), family, batch_dims=1)
  return scores, rank(scores)


def synthetic_dataset(batch_size, list_size=100, seed=0, families=FAMILIES, num_batches=None):
  """A ``tf.data.Dataset`` of ``(scores [B, n], ranks [B, n])`` batches.

  Args:
    batch_size: lists per batch.
    list_size: an int ``n >= 2`` (fixed length), or ``(min, max)``: each batch draws its length
      uniformly from ``min..max`` (all lists of one batch share it).
    seed: an int; batch ``i`` uses the stateless seed ``(seed, i)``.
    families: the families to draw from (see the module docstring).
    num_batches: number of batches, or None for an endless dataset.

  Example:
    >>> ds = synthetic_dataset(4, list_size=(10, 20), seed=1, num_batches=2)
    >>> [tuple(s.shape)[0] for s, r in ds]
    [4, 4]
  """
  checks.check_int("batch_size", batch_size, minimum=1)
  lo, hi = _check_lengths(list_size)
  families = _check_families(families)
  checks.check_int("seed", seed)
  checks.check_int("num_batches", num_batches, minimum=1, allow_none=True)
  ds = tf.data.Dataset.counter()
  if num_batches is not None:
    ds = ds.take(num_batches)

  def make(i):
    key = tf.stack([tf.constant(seed, tf.int64), i])
    if lo == hi:
      n = tf.constant(lo, tf.int32)
    else:
      n = tf.random.stateless_uniform(
        [], tf.stack([key[0] + 7919, key[1]]), lo, hi + 1, dtype=tf.int32
      )
    return synthetic_batch(batch_size, n, key, families)

  return ds.map(make, num_parallel_calls=1).prefetch(2)
