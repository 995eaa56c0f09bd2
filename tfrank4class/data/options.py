"""Input options shared by every dataset: batching, shuffling, caching, determinism, sharding.

Every dataset module builds the same pipeline shape, so that speed and correctness are decided in
one place::

    records -shard-> [shuffle] -decode-> [cache -shuffle] -preprocess(seed)-> batch -prefetch

* **Sharding** happens first, on the cheapest representation (file names, TFDS sub-splits, rows
  held in memory), so each of ``N`` input pipelines reads and decodes only its ``1/N``; shard ``i``
  keeps the records ``i, i + N, i + 2N, ...`` (``tf.data.Dataset.shard``) or the ``i``-th of
  ``tfds.even_splits``. Together the shards hold every record exactly once.
* **Shuffling** happens on the raw records (paths, encoded bytes, strings) when nothing is cached,
  and after the cache otherwise (a cache must see a fixed order to be reusable). Records held in
  memory (an image folder's file list, listed sorted by class) are shuffled whole, a new
  permutation each epoch, so that every batch is a uniform sample of the split whatever its size;
  ``shuffle_buffer`` bounds the other shuffles (TFDS records, cached decoded examples).
* **Random preprocessing** (training augmentation) uses stateless random ops with one seed pair per
  example drawn from ``tf.data.Dataset.random``: with a fixed seed it is reproducible run to run
  even with parallel ``map`` calls.
* **Deterministic mode** (``deterministic=True``) fixes the shuffle and augmentation seeds (to
  ``shuffle_seed``, or 0) and keeps the element order of parallel maps, so two runs give the same
  batches; the default lets parallel maps return elements out of order, which is faster.

Example:
  >>> opts = InputOptions(batch_size=64, deterministic=True)
  >>> opts.seed
  0
"""

import dataclasses

import tensorflow as tf

from tfrank4class import checks

AUTOTUNE = tf.data.AUTOTUNE


@dataclasses.dataclass(frozen=True)
class InputOptions:
  """How a dataset is batched, shuffled, cached and sharded.

  Attributes:
    batch_size: global batch size (>= 1). With ``input_context`` the per-pipeline batch is
      ``input_context.get_per_replica_batch_size(batch_size)``, as
      ``strategy.distribute_datasets_from_function`` expects.
    shuffle: shuffle the records; ``None`` means "when training".
    shuffle_buffer: size of the shuffle buffer (>= 1) of TFDS and text records and of cached
      examples; an image folder's file list is always shuffled whole.
    shuffle_seed: seed of the shuffle and the augmentation; ``None`` draws fresh randomness unless
      ``deterministic``.
    cache: ``False``; ``True`` to cache decoded examples in memory; or a file path prefix for
      ``tf.data.Dataset.cache(filename)``.
    deterministic: reproducible order and augmentation (seed = ``shuffle_seed`` or 0).
    drop_remainder: drop the last incomplete batch (static batch dimension, needed by TPUs and
      ``jit_compile`` models with fixed shapes).
    repeat: repeat the dataset indefinitely (after shuffling, so every epoch is reshuffled).
    num_parallel_calls: parallelism of the ``map`` calls (default ``tf.data.AUTOTUNE``).
    prefetch: prefetch ``AUTOTUNE`` batches at the end of the pipeline.
    input_context: a ``tf.distribute.InputContext``; shards by ``input_pipeline_id`` of
      ``num_input_pipelines``.
    num_shards, shard_index: explicit sharding, as an alternative to ``input_context``.
  """

  batch_size: int = 32
  shuffle: bool | None = None
  shuffle_buffer: int = 10_000
  shuffle_seed: int | None = None
  cache: bool | str = False
  deterministic: bool = False
  drop_remainder: bool = False
  repeat: bool = False
  num_parallel_calls: int = AUTOTUNE
  prefetch: bool = True
  input_context: tf.distribute.InputContext | None = None
  num_shards: int | None = None
  shard_index: int | None = None

  def __post_init__(self):
    checks.check_int("batch_size", self.batch_size, minimum=1)
    checks.check_int("shuffle_buffer", self.shuffle_buffer, minimum=1)
    checks.check_int("shuffle_seed", self.shuffle_seed, minimum=0, allow_none=True)
    if self.shuffle not in (None, True, False):
      raise ValueError(f"`shuffle` must be True, False or None, got {self.shuffle!r}.")
    for flag in ("deterministic", "drop_remainder", "repeat", "prefetch"):
      if not isinstance(getattr(self, flag), bool):
        raise ValueError(f"`{flag}` must be True or False, got {getattr(self, flag)!r}.")
    if not (isinstance(self.cache, bool) or (isinstance(self.cache, str) and self.cache)):
      raise ValueError(
        f"`cache` must be True, False or a non-empty file path prefix, got {self.cache!r}."
      )
    if self.num_parallel_calls != AUTOTUNE:
      checks.check_int("num_parallel_calls", self.num_parallel_calls, minimum=1)
    if self.input_context is not None:
      if not isinstance(self.input_context, tf.distribute.InputContext):
        raise ValueError(
          f"`input_context` must be a tf.distribute.InputContext, got {self.input_context!r}."
        )
      if self.num_shards is not None or self.shard_index is not None:
        raise ValueError(
          "Pass either `input_context` or `num_shards`/`shard_index`, not both "
          f"(got num_shards={self.num_shards!r}, shard_index={self.shard_index!r})."
        )
    if (self.num_shards is None) != (self.shard_index is None):
      raise ValueError(
        "`num_shards` and `shard_index` go together; got "
        f"num_shards={self.num_shards!r}, shard_index={self.shard_index!r}."
      )
    if self.num_shards is not None:
      checks.check_int("num_shards", self.num_shards, minimum=1)
      checks.check_int("shard_index", self.shard_index, minimum=0)
      if self.shard_index >= self.num_shards:
        raise ValueError(
          f"`shard_index` must be in [0, num_shards={self.num_shards}), got {self.shard_index!r}."
        )

  @property
  def seed(self):
    """The seed of shuffling and augmentation: ``shuffle_seed``, else 0 if deterministic."""
    if self.shuffle_seed is not None:
      return self.shuffle_seed
    return 0 if self.deterministic else None

  @property
  def shard(self):
    """``(num_shards, shard_index)`` of this input pipeline; ``(1, 0)`` when not sharded."""
    if self.input_context is not None:
      return (self.input_context.num_input_pipelines, self.input_context.input_pipeline_id)
    if self.num_shards is not None:
      return (self.num_shards, self.shard_index)
    return (1, 0)

  @property
  def pipeline_batch_size(self):
    """The batch size of this pipeline (per replica under an ``input_context``)."""
    if self.input_context is not None:
      return self.input_context.get_per_replica_batch_size(self.batch_size)
    return self.batch_size

  def should_shuffle(self, training):
    """Whether to shuffle: ``shuffle`` if given, else ``training``."""
    return bool(training) if self.shuffle is None else self.shuffle


def make_options(options=None, **kwargs):
  """Returns ``InputOptions`` from an instance and/or keyword overrides.

  Raises:
    ValueError: an unknown keyword (the message lists the known ones) or an invalid value.
  """
  fields = {f.name for f in dataclasses.fields(InputOptions)}
  unknown = sorted(set(kwargs) - fields)
  if unknown:
    raise ValueError(f"Unknown input option(s) {unknown}; the known ones are {sorted(fields)}.")
  if options is None:
    return InputOptions(**kwargs)
  if not isinstance(options, InputOptions):
    raise ValueError(f"`options` must be an InputOptions, got {options!r}.")
  return dataclasses.replace(options, **kwargs) if kwargs else options


def shard_dataset(dataset, options):
  """Keeps this pipeline's share of ``dataset``: elements ``i, i + N, ...`` for shard ``i`` of N."""
  n, i = options.shard
  return dataset.shard(n, i) if n > 1 else dataset


def _shuffle_records(records, options, in_memory):
  """The raw-record shuffle of ``build_pipeline`` (``records`` when it shuffles after a cache)."""
  if in_memory:
    size = int(records.cardinality())
    if size < 0:
      raise ValueError(f"`records` held in memory must have a known, finite size; got {size}.")
    # A new permutation of every record each epoch; before a cache, one fixed permutation (the
    # cache must see a fixed order), so that the cache holds the records in random order.
    return records.shuffle(
      max(size, 1), seed=options.seed, reshuffle_each_iteration=not options.cache
    )
  if options.cache:
    return records
  return records.shuffle(options.shuffle_buffer, seed=options.seed, reshuffle_each_iteration=True)


def build_pipeline(records, decode, preprocess, options, training, keep=None, in_memory=False):
  """Turns sharded raw records into batched ``(features, label)``; see the module docstring.

  Args:
    records: a ``tf.data.Dataset`` of raw records, already sharded (``shard_dataset`` or a TFDS
      sub-split); with ``in_memory``, of known size.
    decode: deterministic ``record -> (features, label)`` (e.g. read and decode an image), or
      ``None`` when the records already are ``(features, label)``.
    preprocess: ``(features, label, seed) -> (features, label)``; ``seed`` is an int64 ``[2]``
      stateless seed, used only by random (training) preprocessing. ``None``: no preprocessing.
    options: ``InputOptions``.
    training: whether this is a training pipeline (default shuffle).
    keep: optional ``(features, label) -> bool`` filter applied after ``decode`` (e.g. dropping
      undecodable images).
    in_memory: the records are cheap and held in memory (an image folder's file names and
      labels): when shuffling they are shuffled whole, whatever ``shuffle_buffer``, so that every
      batch is a uniform sample of the split even when the records come sorted by class.

  Returns:
    A batched (and prefetched) ``tf.data.Dataset``.
  """
  calls = options.num_parallel_calls
  det = options.deterministic
  shuffle = options.should_shuffle(training)
  seed = options.seed

  ds = _shuffle_records(records, options, in_memory) if shuffle else records
  if decode is not None:
    ds = ds.map(decode, num_parallel_calls=calls, deterministic=det)
  if keep is not None:
    ds = ds.filter(keep)
  if options.cache:
    ds = ds.cache() if options.cache is True else ds.cache(options.cache)
    if shuffle:
      ds = ds.shuffle(options.shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
  if options.repeat:
    ds = ds.repeat()
  if preprocess is not None:
    seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).batch(2)
    ds = tf.data.Dataset.zip((ds, seeds))
    ds = ds.map(
      lambda example, s: preprocess(example[0], example[1], s),
      num_parallel_calls=calls,
      deterministic=det,
    )
  ds = ds.batch(options.pipeline_batch_size, drop_remainder=options.drop_remainder)
  if options.prefetch:
    ds = ds.prefetch(AUTOTUNE)
  tf_options = tf.data.Options()
  tf_options.deterministic = det
  if options.shard[0] > 1:
    # Already sharded by us: a strategy must not shard again.
    tf_options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
  return ds.with_options(tf_options)
