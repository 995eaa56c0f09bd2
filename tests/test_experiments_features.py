"""experiments/features.py: the feature cache, whole splits in memory, the stratified hold-out,
the CIFAR-10 splits and augmented input, and the label noise."""

import collections
import doctest
import hashlib
import json
import os

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from experiments import features
from experiments.second import protocol
from tfrank4class import encoders


def test_extract_in_batches_equals_one_call():
  tf.keras.utils.set_random_seed(0)
  encoder = encoders.get("small_cnn", input_shape=(8, 8, 3), filters=(4,), embedding_dim=6)
  x = np.random.default_rng(1).normal(size=(11, 8, 8, 3)).astype("float32")
  out = features.extract(encoder, x, batch_size=4)
  assert out.dtype == np.float32 and out.shape == (11, 6)
  np.testing.assert_allclose(out, encoder(x).numpy(), rtol=1e-6)


def test_spec_key_is_canonical():
  assert features.spec_key({"a": 1, "b": [1, 2]}) == features.spec_key({"b": [1, 2], "a": 1})
  assert features.spec_key({"a": 1}) != features.spec_key({"a": 2})
  assert len(features.spec_key({})) == 16
  with pytest.raises(ValueError, match="`spec` must be JSON-serialisable"):
    features.spec_key({"a": object()})


def test_cache_builds_once_and_round_trips(tmp_path):
  cache = features.FeatureCache(tmp_path / "cache")
  spec = {"dataset": "x", "epochs": 2}
  calls = []
  data = {"train_x": np.arange(12, dtype=np.float32).reshape(3, 4), "train_y": np.array([0, 2, 1])}

  def build():
    calls.append(1)
    return data, {"note": "built"}

  for _ in range(3):
    arrays, info = cache.get_or_build(spec, build)
    assert info == {"note": "built"}
    assert sorted(arrays) == ["train_x", "train_y"]
    np.testing.assert_array_equal(arrays["train_x"], data["train_x"])
    np.testing.assert_array_equal(arrays["train_y"], data["train_y"])
  assert len(calls) == 1
  # A new process (a new cache object) finds the entry too.
  assert features.FeatureCache(tmp_path / "cache").load(spec) is not None
  assert features.FeatureCache(tmp_path / "cache").load({"dataset": "y"}) is None
  assert not [n for n in os.listdir(tmp_path / "cache") if ".tmp" in n]


def test_cache_entry_without_its_json_is_rebuilt(tmp_path):
  cache = features.FeatureCache(tmp_path)
  spec = {"k": 1}
  cache.save(spec, {"a": np.zeros(2)}, {})
  os.remove(cache.paths(spec)[1])  # e.g. killed between the two writes
  assert cache.load(spec) is None
  calls = []
  cache.get_or_build(spec, lambda: (calls.append(1) or {"a": np.ones(2)}, {}))
  assert calls == [1]


def test_cache_refuses_an_entry_of_another_spec(tmp_path):
  cache = features.FeatureCache(tmp_path)
  spec = {"k": 1}
  cache.save(spec, {"a": np.zeros(2)})
  npz, meta = cache.paths(spec)
  with open(meta, "w", encoding="utf-8") as f:
    json.dump({"spec": {"k": 2}, "info": {}}, f)
  with pytest.raises(ValueError, match="holds another spec"):
    cache.load(spec)


@pytest.mark.parametrize("directory", ["", None, 3])
def test_cache_directory_must_be_a_path(directory):
  with pytest.raises(ValueError, match="`directory` must be a folder path"):
    features.FeatureCache(directory)


def test_save_refuses_empty_arrays(tmp_path):
  with pytest.raises(ValueError, match="`arrays` must be a non-empty dict"):
    features.FeatureCache(tmp_path).save({"k": 1}, {})


def _reference_mind(path, split):
  """(texts, category names) of a MIND split, read with plain Python."""
  rows = []
  with open(path / "news.tsv", encoding="utf-8") as f:
    for line in f:
      fields = line.rstrip("\n").split("\t")
      b = int(hashlib.md5(fields[0].encode()).hexdigest(), 16) % 100
      if {"train": b < 60, "validation": 60 <= b < 80, "test": b >= 80}[split]:
        rows.append(fields)
  return sorted(rows, key=lambda r: r[0])  # the MIND pipeline yields a split in news-id order


@pytest.mark.parametrize("split", ["train", "validation", "test"])
def test_to_numpy_reads_a_whole_split_in_its_order(datasets_dir, split):
  path = datasets_dir / "mind_sample"
  texts, labels = features.to_numpy("mind", split, path, batch_size=97)
  rows = _reference_mind(path, split)
  categories = sorted(
    {
      r[1]
      for r in _reference_mind(path, "train")
      + _reference_mind(path, "validation")
      + _reference_mind(path, "test")
    }
  )
  assert texts.dtype == object and labels.dtype == np.int64
  assert len(texts) == len(labels) == len(rows)
  assert [categories[i] for i in labels] == [r[1] for r in rows]
  assert texts[0].decode("utf-8").startswith(rows[0][3].strip())
  again_texts, again_labels = features.to_numpy("mind", split, path)
  np.testing.assert_array_equal(again_labels, labels)
  assert list(again_texts) == list(texts)


def test_to_numpy_limit(datasets_dir):
  path = datasets_dir / "mind_sample"
  full, labels = features.to_numpy("mind", "train", path)
  first, first_labels = features.to_numpy("mind", "train", path, batch_size=16, limit=50)
  assert len(first) == 50
  assert list(first) == list(full[:50])
  np.testing.assert_array_equal(first_labels, labels[:50])
  with pytest.raises(ValueError, match="`limit` must be an integer >= 1"):
    features.to_numpy("mind", "train", path, limit=0)


def test_stratified_holdout_counts_per_class():
  labels = np.repeat(np.arange(4), [10, 21, 1, 7])
  kept, held = features.stratified_holdout(labels, 0.2, seed=3)
  counts = collections.Counter(labels[held].tolist())
  assert counts == {0: 2, 1: 4, 3: 1}  # round(0.2 n_c); the single example of class 2 stays
  assert len(np.intersect1d(kept, held)) == 0
  np.testing.assert_array_equal(np.sort(np.concatenate([kept, held])), np.arange(len(labels)))
  assert np.all(np.diff(kept) > 0) and np.all(np.diff(held) > 0)
  again_kept, again_held = features.stratified_holdout(labels, 0.2, seed=3)
  np.testing.assert_array_equal(again_held, held)
  other = [features.stratified_holdout(labels, 0.2, seed=s)[1] for s in range(4, 9)]
  assert any(not np.array_equal(o, held) for o in other)


@pytest.mark.parametrize(
  "labels, fraction, seed, match",
  [
    ([0, 1], 0.0, 0, "`fraction` must be in"),
    ([0, 1], 1.0, 0, "`fraction` must be in"),
    ([0, 1], 0.5, -1, "`seed` must be an integer >= 0"),
    ([0.5, 1.0], 0.5, 0, "`labels` must be integer class ids"),
    ([[0, 1]], 0.5, 0, "`labels` must be integer class ids"),
  ],
)
def test_stratified_holdout_bad_input(labels, fraction, seed, match):
  with pytest.raises(ValueError, match=match):
    features.stratified_holdout(labels, fraction, seed)


def test_noisy_labels():
  y = np.arange(1000) % 28
  noisy = features.noisy_labels(y, 0.4, 28, seed=0)
  assert (noisy != y).sum() == 400  # exactly 40 % wrong, never the same class drawn again
  assert noisy.min() >= 0 and noisy.max() < 28
  np.testing.assert_array_equal(noisy, features.noisy_labels(y, 0.4, 28, seed=0))
  with pytest.raises(ValueError, match="fraction"):
    features.noisy_labels(y, 1.0, 28, seed=0)


def test_cifar_splits_hold_out_a_tenth_of_each_class(datasets_dir):

  per_class = {"train": 10, "test": 2}
  splits, info = features.cifar_splits(str(datasets_dir), protocol.CIFAR, per_class)
  assert info["num_classes"] == 10
  (x, y), (vx, vy), (tx, ty) = splits["train"], splits["validation"], splits["test"]
  assert x.dtype == np.uint8 and x.shape == (90, 32, 32, 3)
  assert np.bincount(vy).tolist() == [1] * 10 and np.bincount(y).tolist() == [9] * 10
  assert tx.shape == (20, 32, 32, 3) and np.bincount(ty).tolist() == [2] * 10
  # the evaluation preprocessing, written out: (pixel / 255 - mean) / std, CIFAR-10's statistics
  mean = np.array([0.4914, 0.4822, 0.4465])
  std = np.array([0.2470, 0.2435, 0.2616])
  root = datasets_dir / "cifar10_jpeg" / "test"
  first = sorted((root / sorted(p.name for p in root.iterdir())[0]).iterdir())[0]
  pixels = np.asarray(Image.open(first).convert("RGB"), np.float64)
  expected = (pixels / 255.0 - mean) / std
  # PIL's and TensorFlow's JPEG decoders differ by a few levels (1 level ~ 0.016 here)
  assert np.abs(tx[0] - expected).max() < 0.1 and np.abs(tx[0] - expected).mean() < 0.02
  # train and validation partition the first 10 training images of each class
  everything = np.concatenate([x, np.round((vx * std + mean) * 255.0).astype(np.uint8)])
  assert len({im.tobytes() for im in everything}) == 100


def test_train_input_augments_with_the_seed():
  rng = np.random.default_rng(0)
  images = rng.integers(0, 256, (6, 32, 32, 3), dtype=np.uint8)
  labels = np.arange(6)
  mean = np.array([0.4914, 0.4822, 0.4465])
  std = np.array([0.2470, 0.2435, 0.2616])
  padded = np.pad(images, [(0, 0), (4, 4), (4, 4), (0, 0)])

  def epochs(seed):
    dataset = features.train_input(images, labels, batch_size=6, seed=seed)
    return [tuple(t.numpy() for t in next(iter(dataset))) for _ in range(2)]

  first = epochs(7)
  for batch, label in first:
    for image, y in zip(batch, label):
      pixels = np.round((image * std + mean) * 255.0)
      crops = [
        c
        for i in range(9)
        for j in range(9)
        for c in (
          padded[y, i : i + 32, j : j + 32],
          padded[y, i : i + 32, j : j + 32, ::-1][:, ::-1],
        )
      ]
      # a pad-4 crop of its own image, flipped or not
      assert any(np.array_equal(pixels, c) for c in crops) or any(
        np.array_equal(pixels, c[:, ::-1]) for c in crops
      )
  assert not np.array_equal(first[0][0], first[1][0])  # each epoch is augmented anew
  again = epochs(7)
  np.testing.assert_array_equal(first[0][0], again[0][0])  # and the seed fixes it


def test_smoke_features_are_class_means_with_noise():
  arrays, info = features.smoke_features({"train": 200, "test": 50}, 4, 3)
  assert info == {"num_classes": 3, "feature_key": "smoke"}
  assert arrays["train_x"].shape == (200, 4) and arrays["train_x"].dtype == np.float32
  assert arrays["test_y"].shape == (50,) and set(arrays["train_y"].tolist()) == {0, 1, 2}


def test_examples():  # experiments/ is outside the suite's doctest collection
  assert doctest.testmod(features).failed == 0
