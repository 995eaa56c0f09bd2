"""Class-balanced batches for metric learning: P classes x K items per batch.

Pairwise losses (contrastive, triplet) and RaMBO's recall loss compare the items of a batch with
each other, so every batch must hold several items of each class it contains. A
:class:`ClassBalancedSampler` draws each batch as

    P classes uniformly without replacement among the eligible classes, then
    K items of each class uniformly without replacement,

the "PK" sampling of Hermans et al. ("In Defense of the Triplet Loss", 2017, Sec. 3) and of the
RaMBO retrieval experiments. Batches are laid out class by class (``K`` items of the first class,
then ``K`` of the second, ...), so when ``P`` is a multiple of the number of replicas,
``tf.distribute`` (which splits a global batch into contiguous shards) gives every replica
``P / replicas`` whole classes.

Classes with fewer than ``K`` items: ``small_classes="skip"`` (default) never draws them;
``"repeat"`` draws them and fills the ``K`` slots with replacement (some items appear twice).

Everything is a function of ``seed`` and the epoch number, so runs are reproducible.

Example:
  >>> sampler = ClassBalancedSampler([0, 0, 1, 1, 2, 2], classes_per_batch=2, samples_per_class=2)
  >>> sampler.epoch(0).shape
  (1, 4)
"""

import numpy as np
import tensorflow as tf

from tfrank4class import checks

SMALL_CLASSES = ("skip", "repeat")


class ClassBalancedSampler:
  """Index batches with ``classes_per_batch`` classes x ``samples_per_class`` items each.

  Args:
    labels: integer class ids ``[N]``.
    classes_per_batch: ``P >= 1``.
    samples_per_class: ``K >= 1`` (``K >= 2`` for losses that need positives).
    batches_per_epoch: batches per epoch; default ``N // (P * K)`` (at least 1).
    small_classes: ``"skip"`` or ``"repeat"`` classes with fewer than ``K`` items.
    seed: integer seed.

  Raises:
    ValueError: fewer than ``P`` eligible classes, or bad arguments.

  Example:
    >>> s = ClassBalancedSampler([0] * 4 + [1] * 4 + [2] * 4, 2, 3, seed=1)
    >>> batch = s.epoch(0)[0]
    >>> len(batch), len(set(np.asarray([0] * 4 + [1] * 4 + [2] * 4)[batch]))
    (6, 2)
  """

  def __init__(
    self,
    labels,
    classes_per_batch,
    samples_per_class,
    batches_per_epoch=None,
    small_classes="skip",
    seed=0,
  ):
    labels = np.asarray(labels)
    if labels.ndim == 2 and labels.shape[1] == 1:
      labels = labels[:, 0]
    if labels.ndim != 1 or labels.size == 0:
      raise ValueError(
        f"`labels` must be a non-empty 1-D array of class ids, got shape {labels.shape}."
      )
    if not np.issubdtype(labels.dtype, np.integer):
      raise ValueError(f"`labels` must be integer class ids, got dtype {labels.dtype}.")
    self.classes_per_batch = checks.check_int("classes_per_batch", classes_per_batch, minimum=1)
    self.samples_per_class = checks.check_int("samples_per_class", samples_per_class, minimum=1)
    self.small_classes = checks.check_choice("small_classes", small_classes, SMALL_CLASSES)
    self.seed = checks.check_int("seed", seed, minimum=0)
    self.labels = labels.astype(np.int64)
    classes, inverse = np.unique(self.labels, return_inverse=True)
    self._members = [np.flatnonzero(inverse == c) for c in range(classes.size)]
    sizes = np.array([m.size for m in self._members])
    eligible = (
      np.ones_like(sizes, bool) if small_classes == "repeat" else sizes >= samples_per_class
    )
    self._eligible = np.flatnonzero(eligible)
    if self._eligible.size < self.classes_per_batch:
      raise ValueError(
        f"`classes_per_batch`={classes_per_batch} exceeds the {self._eligible.size} classes "
        f"with at least `samples_per_class`={samples_per_class} items (of {classes.size} "
        f"classes; small_classes={small_classes!r})."
      )
    default = max(1, self.labels.size // self.batch_size)
    self.batches_per_epoch = checks.check_int(
      "batches_per_epoch", default if batches_per_epoch is None else batches_per_epoch, minimum=1
    )

  @property
  def batch_size(self):
    """``P * K``."""
    return self.classes_per_batch * self.samples_per_class

  def __len__(self):
    return self.batches_per_epoch

  def epoch(self, index):
    """Int64 row indices ``[batches_per_epoch, P * K]`` of epoch ``index`` (a pure function of
    it)."""
    checks.check_int("index", index, minimum=0)
    rng = np.random.default_rng([self.seed, index])
    out = np.empty((self.batches_per_epoch, self.batch_size), np.int64)
    k = self.samples_per_class
    for b in range(self.batches_per_epoch):
      chosen = rng.choice(self._eligible, size=self.classes_per_batch, replace=False)
      for j, c in enumerate(chosen):
        members = self._members[c]
        out[b, j * k : (j + 1) * k] = rng.choice(members, size=k, replace=members.size < k)
    return out

  def __iter__(self):
    """Yields index batches forever, epoch after epoch."""
    index = 0
    while True:
      yield from self.epoch(index)
      index += 1

  def dataset(self, features, map_fn=None, epochs=None):
    """A ``tf.data.Dataset`` of ``(features[batch], labels[batch])`` batches.

    Args:
      features: an in-memory array (or tensor) ``[N, ...]`` or a tuple/dict of them.
      map_fn: optional ``fn(features, labels) -> (features, labels)`` applied per batch, e.g.
        augmentation.
      epochs: number of epochs (``None``: repeat forever; pass ``steps_per_epoch=len(sampler)`` to
        ``fit``).

    Example:
      >>> s = ClassBalancedSampler([0, 0, 1, 1], 2, 2)
      >>> x, y = next(iter(s.dataset(np.arange(4.0)[:, None], epochs=1)))
      >>> sorted(y.numpy().tolist())
      [0, 0, 1, 1]
    """
    if epochs is not None:
      checks.check_int("epochs", epochs, minimum=1)
    features = tf.nest.map_structure(tf.convert_to_tensor, features)
    n = self.labels.size
    for t in tf.nest.flatten(features):
      if t.shape.rank is None or t.shape.rank == 0 or t.shape[0] != n:
        raise ValueError(
          f"`features` must have {n} rows (one per label), got an array of shape {t.shape}."
        )
    labels = tf.constant(self.labels)

    def batches():
      index = 0
      while epochs is None or index < epochs:
        yield from self.epoch(index)
        index += 1

    # unbatch().batch() ends the index stream in a real batch op, so that tf.distribute can split
    # every global batch into contiguous per-replica shards (instead of handing whole batches to
    # replicas in turn).
    ds = tf.data.Dataset.from_generator(
      batches, output_signature=tf.TensorSpec([self.batch_size], tf.int64)
    )
    ds = ds.unbatch().batch(self.batch_size, drop_remainder=True)
    ds = ds.map(
      lambda idx: (
        tf.nest.map_structure(lambda t: tf.gather(t, idx), features),
        tf.gather(labels, idx),
      )
    )
    if map_fn is not None:
      ds = ds.map(map_fn, num_parallel_calls=tf.data.AUTOTUNE)
    return ds.prefetch(2)


def class_balanced_dataset(
  features,
  labels,
  classes_per_batch,
  samples_per_class,
  seed=0,
  batches_per_epoch=None,
  small_classes="skip",
  map_fn=None,
  epochs=None,
):
  """Shortcut: ``ClassBalancedSampler(labels, P, K, ...).dataset(features, ...)``.

  Returns:
    ``(dataset, steps_per_epoch)``.

  Example:
    >>> ds, steps = class_balanced_dataset(np.zeros((6, 2)), [0, 0, 1, 1, 2, 2], 3, 2)
    >>> steps
    1
  """
  sampler = ClassBalancedSampler(
    labels, classes_per_batch, samples_per_class, batches_per_epoch, small_classes, seed
  )
  return sampler.dataset(features, map_fn=map_fn, epochs=epochs), len(sampler)
