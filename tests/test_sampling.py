"""Tests of tfrank4class.data.sampling (class-balanced P x K batches)."""

import collections

import numpy as np
import pytest
import tensorflow as tf

from tfrank4class.data.sampling import ClassBalancedSampler, class_balanced_dataset


def _labels():
  # 6 classes of sizes 5, 5, 4, 4, 2, 1.
  return np.repeat(np.arange(6), [5, 5, 4, 4, 2, 1])


def test_every_batch_has_p_classes_of_k_distinct_items():
  y = _labels()
  s = ClassBalancedSampler(
    y, classes_per_batch=3, samples_per_class=4, batches_per_epoch=50, seed=3
  )
  batches = s.epoch(0)
  assert batches.shape == (50, 12) and batches.dtype == np.int64
  for batch in batches:
    groups = batch.reshape(3, 4)  # laid out class by class
    for g in groups:
      assert len(set(y[g])) == 1 and len(set(g)) == 4  # one class, K distinct items
    assert len({y[g[0]] for g in groups}) == 3  # P distinct classes
    assert not set(y[batch]) & {4, 5}  # classes smaller than K are skipped


def test_classes_are_drawn_uniformly():
  y = _labels()
  s = ClassBalancedSampler(y, 2, 4, batches_per_epoch=2000, seed=0)
  counts = collections.Counter(y[s.epoch(0)[:, ::4].ravel()])
  # 4 eligible classes, 2 per batch: each appears in half the batches (binomial sd ~ 22).
  for c in range(4):
    assert abs(counts[c] - 1000) < 120


def test_repeat_small_classes_and_determinism():
  y = _labels()
  s = ClassBalancedSampler(y, 6, 3, small_classes="repeat", seed=7)
  batch = s.epoch(0)[0].reshape(6, 3)
  single = [g for g in batch if y[g[0]] == 5][0]
  assert list(single) == [20, 20, 20]  # the one item of class 5, repeated
  again = ClassBalancedSampler(y, 6, 3, small_classes="repeat", seed=7)
  np.testing.assert_array_equal(s.epoch(1), again.epoch(1))
  assert not np.array_equal(s.epoch(0), s.epoch(1))
  assert len(s) == len(y) // 18 or len(s) == 1


def test_dataset_gathers_features_and_labels():
  y = _labels()
  x = np.arange(len(y), dtype=np.float32)[:, None] * 10.0
  ds, steps = class_balanced_dataset({"x": x}, y, 2, 2, seed=1, epochs=2)
  batches = list(ds)
  assert steps == len(y) // 4 and len(batches) == 2 * steps
  idx = ClassBalancedSampler(y, 2, 2, seed=1).epoch(1)
  feats, labels = batches[steps]  # first batch of epoch 1
  np.testing.assert_array_equal(labels.numpy(), y[idx[0]])
  np.testing.assert_array_equal(feats["x"].numpy()[:, 0], idx[0] * 10.0)


def test_dataset_trains_under_mirrored_strategy(mirrored_strategy):
  y = _labels()
  x = np.random.default_rng(0).normal(size=(len(y), 3)).astype(np.float32)
  ds, steps = class_balanced_dataset(x, y, 2, 2, map_fn=lambda f, lab: (f * 2.0, lab), epochs=1)
  with mirrored_strategy.scope():
    inputs = tf.keras.Input((3,))
    model = tf.keras.Model(inputs, tf.keras.layers.Dense(6)(inputs))
    model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  hist = model.fit(ds, epochs=1, verbose=0)
  assert np.isfinite(hist.history["loss"][0]) and steps == 5
  # Each replica gets a contiguous half of the global batch: P / 2 whole classes.
  shards = next(iter(mirrored_strategy.experimental_distribute_dataset(ds)))[1].values
  halves = [t.numpy() for t in shards]
  assert [len(h) for h in halves] == [2, 2] and all(len(set(h)) == 1 for h in halves)


def test_bad_input():
  y = _labels()
  with pytest.raises(
    ValueError,
    match=r"`classes_per_batch`=5 exceeds the 4 classes with at "
    r"least `samples_per_class`=3",
  ):
    ClassBalancedSampler(y, 5, 3)
  with pytest.raises(ValueError, match=r"`samples_per_class` must be an integer >= 1, got 0"):
    ClassBalancedSampler(y, 2, 0)
  with pytest.raises(
    ValueError, match=r"`small_classes` must be one of \['repeat', 'skip'\], got 'drop'"
  ):
    ClassBalancedSampler(y, 2, 2, small_classes="drop")
  with pytest.raises(ValueError, match=r"`labels` must be integer class ids"):
    ClassBalancedSampler(y.astype(float), 2, 2)
  with pytest.raises(ValueError, match=r"`features` must have 21 rows"):
    ClassBalancedSampler(y, 2, 2).dataset(np.zeros((5, 2)))
