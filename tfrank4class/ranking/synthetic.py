"""Synthetic score lists and their exact ranks, for pretraining sorters (SoDeep Sec. 3.1.2).

Every list is drawn from one of four families, chosen uniformly at random per list:

* ``uniform``:  ``s_i ~ U[-1, 1]``;
* ``normal``:   ``s_i ~ N(0, 1)``;
* ``spaced``:   ``n`` evenly spaced numbers ``a + (b - a) * t / (n - 1)``, ``t = 0..n-1``, in a
  random sub-range ``-1 <= a < b <= 1``, in random order;
* ``mixture``:  each item drawn from one of the three families above, with per-list random
  mixing proportions.

The target is ``rank(s)`` (:func:`tfrank4class.ranking.rank`: 1..n, 1 = highest). The lists are
generated with numpy (``numpy.random.default_rng`` seeded by ``(seed, batch index)``), on the
host, whatever the Keras backend: a dataset is reproducible, two seeds give independent data, and
the arrays feed a sorter on TensorFlow, JAX or PyTorch alike. :func:`synthetic_dataset` wraps them
in a ``tf.data`` pipeline (TensorFlow by nature: it needs TensorFlow installed; Keras 3 feeds
tf.data to every backend), for ``tfrank4class-pretrain-sorter``.
"""

import numpy as np

from tfrank4class import checks
from tfrank4class.compat import ops
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


def _check_seed(seed):
  """``seed`` (an int or a pair of ints, each ``>= 0``) as the entropy list of numpy's RNG."""
  if isinstance(seed, (tuple, list)):
    if len(seed) != 2:
      raise ValueError(f"`seed` must be an int >= 0 or a pair of them, got {seed!r}.")
    return [checks.check_int(f"seed[{i}]", v, minimum=0) for i, v in enumerate(seed)]
  return [checks.check_int("seed", seed, minimum=0), 0]


def synthetic_batch(batch_size, list_size, seed, families=FAMILIES, dtype="float32"):
  """One batch ``(scores [B, n], ranks [B, n])`` of synthetic lists of length ``list_size``.

  Args:
    batch_size: number of lists ``B >= 1``.
    list_size: the list length ``n >= 2``.
    seed: an int ``>= 0`` or a pair of them (e.g. ``(seed, batch index)``).
    families: the families to draw from (see the module docstring).
    dtype: float dtype of the scores and ranks.

  Returns:
    numpy arrays ``(scores, ranks)`` with ``ranks = rank(scores)`` (1 = highest).

  Example:
    >>> s, r = synthetic_batch(2, 5, seed=0)
    >>> sorted(r[0].tolist())
    [1.0, 2.0, 3.0, 4.0, 5.0]
  """
  b = checks.check_int("batch_size", batch_size, minimum=1)
  n = checks.check_int("list_size", list_size, minimum=2)
  families = _check_families(families)
  rng = np.random.default_rng(_check_seed(seed))
  uni = rng.uniform(-1.0, 1.0, size=(b, n))
  nor = rng.normal(size=(b, n))
  ends = np.sort(rng.uniform(-1.0, 1.0, size=(b, 2)), axis=-1)
  t = np.arange(n) / (n - 1)
  spaced_sorted = ends[:, :1] + (ends[:, 1:] - ends[:, :1]) * t[None, :]
  order = np.argsort(rng.uniform(size=(b, n)), axis=-1)
  spaced = np.take_along_axis(spaced_sorted, order, axis=-1)
  proportions = rng.uniform(1e-3, 1.0, size=(b, 3))
  cumulative = np.cumsum(proportions / proportions.sum(-1, keepdims=True), axis=-1)
  component = (rng.uniform(size=(b, n, 1)) > cumulative[:, None, :2]).sum(-1)
  mixture = np.choose(component, [uni, nor, spaced])
  pool = {"uniform": uni, "normal": nor, "spaced": spaced, "mixture": mixture}
  family = rng.integers(0, len(families), size=b)
  stacked = np.stack([pool[f] for f in families], axis=0)  # [F, B, n]
  scores = stacked[family, np.arange(b)].astype(dtype)
  return scores, ops.convert_to_numpy(rank(scores))


def synthetic_dataset(batch_size, list_size=100, seed=0, families=FAMILIES, num_batches=None):
  """A ``tf.data.Dataset`` of ``(scores [B, n], ranks [B, n])`` float32 batches.

  Batch ``i`` is ``synthetic_batch(batch_size, n_i, seed=(seed, i), families)``, made on the host
  (``tf.numpy_function``). TensorFlow by nature: it imports TensorFlow, which must be installed
  (on any Keras backend).

  Args:
    batch_size: lists per batch.
    list_size: an int ``n >= 2`` (fixed length), or ``(min, max)``: each batch draws its length
      uniformly from ``min..max`` (all lists of one batch share it).
    seed: an int ``>= 0``; batch ``i`` uses the seed ``(seed, i)``.
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
  checks.check_int("seed", seed, minimum=0)
  checks.check_int("num_batches", num_batches, minimum=1, allow_none=True)
  import tensorflow as tf  # noqa: PLC0415  (tf.data: this function only, see the docstring)

  def make(i):
    i = int(i)
    n = lo + int(np.random.default_rng([seed, i, 7919]).integers(hi - lo + 1))
    return synthetic_batch(batch_size, n, (seed, i), families)

  def make_tensors(i):
    scores, ranks = tf.numpy_function(make, [i], (tf.float32, tf.float32), stateful=False)
    shape = [batch_size, lo if lo == hi else None]
    return tf.ensure_shape(scores, shape), tf.ensure_shape(ranks, shape)

  ds = tf.data.Dataset.counter()
  if num_batches is not None:
    ds = ds.take(num_batches)
  return ds.map(make_tensors, num_parallel_calls=1).prefetch(2)
