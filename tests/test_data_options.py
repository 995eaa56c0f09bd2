"""Tests of tfrank4class/data/options.py: validation, sharding, shuffling, caching, determinism."""

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

from tfrank4class.data import options as options_lib


def _records(n=50):
  return tf.data.Dataset.from_tensor_slices(
    (tf.range(n, dtype=tf.int64), tf.range(n, dtype=tf.int64) % 3)
  )


def _noisy(x, y, seed):
  """A random preprocessing step: x + uniform noise drawn from the per-example seed."""
  return tf.cast(x, tf.float32) + tf.random.stateless_uniform([], seed), y


def _run(opts, training=True, n=50, preprocess=None):
  ds = options_lib.build_pipeline(
    options_lib.shard_dataset(_records(n), opts),
    lambda x, y: (x, y),
    preprocess or (lambda x, y, s: (x, y)),
    opts,
    training,
  )
  return np.concatenate([x.numpy() for x, _ in ds]) if n else np.array([])


@pytest.mark.parametrize(
  "kwargs,match",
  [
    ({"batch_size": 0}, "`batch_size` must be an integer >= 1, got 0"),
    ({"shuffle_buffer": -1}, "`shuffle_buffer`"),
    ({"shuffle_seed": 1.5}, "`shuffle_seed`"),
    ({"cache": ""}, "`cache` must be True, False or a non-empty file path"),
    ({"deterministic": "yes"}, "`deterministic` must be True or False"),
    ({"num_shards": 2}, "`num_shards` and `shard_index` go together"),
    ({"num_shards": 2, "shard_index": 2}, r"`shard_index` must be in \[0, num_shards=2\), got 2"),
    ({"num_parallel_calls": 0}, "`num_parallel_calls`"),
    ({"input_context": "ctx"}, "`input_context` must be a tf.distribute.InputContext"),
    (
      {"input_context": tf.distribute.InputContext(2, 0, 2), "num_shards": 2, "shard_index": 0},
      "either `input_context` or `num_shards`",
    ),
  ],
)
def test_bad_options_are_named(kwargs, match):
  with pytest.raises(ValueError, match=match):
    options_lib.InputOptions(**kwargs)


def test_make_options_rejects_unknown_keywords():
  with pytest.raises(ValueError, match=r"Unknown input option\(s\) \['bach_size'\]"):
    options_lib.make_options(bach_size=3)
  base = options_lib.InputOptions(batch_size=4)
  assert options_lib.make_options(base, deterministic=True).batch_size == 4


def test_eval_pipeline_keeps_order_and_batches():
  opts = options_lib.InputOptions(batch_size=8, deterministic=True)
  np.testing.assert_array_equal(_run(opts, training=False), np.arange(50))
  ds = options_lib.build_pipeline(
    _records(),
    lambda x, y: (x, y),
    lambda x, y, s: (x, y),
    options_lib.InputOptions(batch_size=8, drop_remainder=True),
    training=False,
  )
  assert ds.element_spec[0].shape == (8,)
  assert sum(1 for _ in ds) == 6


def test_training_shuffle_is_a_permutation_reproducible_with_a_seed():
  a = _run(options_lib.InputOptions(batch_size=7, shuffle_seed=3, deterministic=True))
  b = _run(options_lib.InputOptions(batch_size=7, shuffle_seed=3, deterministic=True))
  c = _run(options_lib.InputOptions(batch_size=7, shuffle_seed=4, deterministic=True))
  assert sorted(a.tolist()) == list(range(50))
  np.testing.assert_array_equal(a, b)
  assert not np.array_equal(a, c) and not np.array_equal(a, np.arange(50))


def test_random_preprocessing_is_reproducible_only_with_a_seed():
  det = options_lib.InputOptions(batch_size=10, deterministic=True, shuffle=False)
  a = _run(det, preprocess=_noisy)
  b = _run(det, preprocess=_noisy)
  np.testing.assert_array_equal(a, b)
  assert np.all((a - np.arange(50) >= 0) & (a - np.arange(50) < 1))
  free = options_lib.InputOptions(batch_size=10, shuffle=False)
  assert not np.array_equal(_run(free, preprocess=_noisy), _run(free, preprocess=_noisy))


@pytest.mark.parametrize("n", [3, 4])
def test_shards_cover_every_record_exactly_once(n):
  parts = [
    _run(
      options_lib.InputOptions(batch_size=4, num_shards=n, shard_index=i, deterministic=True),
      training=False,
    )
    for i in range(n)
  ]
  everything = np.sort(np.concatenate(parts))
  np.testing.assert_array_equal(everything, np.arange(50))
  np.testing.assert_array_equal(parts[1], np.arange(1, 50, n))  # shard i keeps i, i+n, ...


def test_input_context_shards_and_gives_per_replica_batches():
  ctx = tf.distribute.InputContext(
    num_input_pipelines=2, input_pipeline_id=1, num_replicas_in_sync=4
  )
  opts = options_lib.InputOptions(batch_size=16, input_context=ctx, deterministic=True)
  assert opts.shard == (2, 1) and opts.pipeline_batch_size == 4
  ds = options_lib.build_pipeline(
    options_lib.shard_dataset(_records(), opts),
    lambda x, y: (x, y),
    lambda x, y, s: (x, y),
    opts,
    False,
  )
  first = next(iter(ds))[0].numpy()
  np.testing.assert_array_equal(first, [1, 3, 5, 7])
  assert (
    ds.options().experimental_distribute.auto_shard_policy
    == tf.data.experimental.AutoShardPolicy.OFF
  )


def test_cache_in_memory_and_on_disk(tmp_path):
  calls = []

  def decode(x, y):
    tf.py_function(lambda: calls.append(1), [], [])
    return x, y

  for cache in (True, str(tmp_path / "cache")):
    calls.clear()
    opts = options_lib.InputOptions(batch_size=10, cache=cache, deterministic=True, shuffle_seed=1)
    ds = options_lib.build_pipeline(_records(20), decode, lambda x, y, s: (x, y), opts, True)
    e1 = np.concatenate([x.numpy() for x, _ in ds])
    e2 = np.concatenate([x.numpy() for x, _ in ds])
    assert len(calls) == 20  # decoded once, second epoch from the cache
    assert sorted(e1.tolist()) == sorted(e2.tolist()) == list(range(20))
    assert not np.array_equal(e1, e2)  # reshuffled after the cache


def test_repeat_reshuffles_every_epoch():
  opts = options_lib.InputOptions(batch_size=10, repeat=True, deterministic=True)
  ds = options_lib.build_pipeline(
    _records(10), lambda x, y: (x, y), lambda x, y, s: (x, y), opts, True
  )
  epochs = [b[0].numpy() for b in ds.take(3)]
  assert all(sorted(e.tolist()) == list(range(10)) for e in epochs)
  assert not np.array_equal(epochs[0], epochs[1])


def test_in_memory_records_are_shuffled_whole_also_before_a_cache():
  opts = options_lib.InputOptions(batch_size=50, shuffle_buffer=1, deterministic=True)
  keep_order = options_lib.build_pipeline(_records(), None, None, opts, True)
  np.testing.assert_array_equal(next(iter(keep_order))[0], np.arange(50))  # a buffer of 1
  for cache in (False, True):
    ds = options_lib.build_pipeline(
      _records(), None, None, dataclasses.replace(opts, cache=cache), True, in_memory=True
    )
    epochs = [np.concatenate([x.numpy() for x, _ in ds]) for _ in range(2)]
    assert all(sorted(e.tolist()) == list(range(50)) for e in epochs)
    # A permutation of 50 keeps at most 40 records within 3 places of their sorted position
    # with probability far below 1e-6; a buffer of 1 keeps all 50 in place.
    assert np.sum(np.abs(epochs[0] - np.arange(50)) <= 3) < 40
    assert np.array_equal(epochs[0], epochs[1]) == cache  # the cache keeps its first order


def test_in_memory_records_need_a_known_size():
  records = _records().filter(lambda x, y: x > 0)
  opts = options_lib.InputOptions(deterministic=True)
  with pytest.raises(ValueError, match="`records` held in memory must have a known, finite size"):
    options_lib.build_pipeline(records, None, None, opts, True, in_memory=True)
