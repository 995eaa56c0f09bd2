"""Tests of tfrank4class/data/cifar.py against the real CIFAR-10 image folder and mocked TFDS."""

import os

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from tfrank4class.data import DataNotFoundError, cifar, image_folder
from tfrank4class.data import options as options_lib

CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
MEAN10 = np.array([0.4914, 0.4822, 0.4465])
STD10 = np.array([0.2470, 0.2435, 0.2616])


@pytest.fixture(scope="module")
def cifar_dir(datasets_dir):
  return datasets_dir / "cifar10_jpeg"


def _opts(**kw):
  return options_lib.InputOptions(**kw)


def test_real_folder_counts_and_class_names(cifar_dir):
  # Count the files independently of the library.
  listed = {}
  for split, expected in [("train", 20_000), ("test", 10_000)]:
    listed[split] = {
      str(cifar_dir / split / c / f)
      for c in CLASSES
      for f in os.listdir(cifar_dir / split / c)
      if f.endswith(".jpg")
    }
    assert len(listed[split]) == expected
  paths, labels, names = image_folder.list_split(cifar_dir, "test")
  assert set(paths) == listed["test"] and list(names) == CLASSES
  assert np.bincount(labels).tolist() == [1000] * 10
  info = cifar.info("cifar10", cifar_dir)
  assert info.num_classes == 10 and list(info.class_names) == CLASSES
  assert info.source == "folder"


def test_real_folder_validation_is_a_fixed_holdout_of_train(cifar_dir):
  train, train_labels, _ = image_folder.split_files(cifar_dir, "train")
  held, held_labels, _ = image_folder.split_files(cifar_dir, "validation")
  all_train = {str(p) for p in (cifar_dir / "train").glob("*/*.jpg")}
  assert not set(train) & set(held) and set(train) | set(held) == all_train
  # Fixed: these counts pin the hash, key and names (the same images on every run and machine).
  assert (len(train), len(held)) == (17_953, 2_047)
  # About 10% of each class: binomial(2000, 0.1) is 200 +- 13.4; 6 standard deviations.
  assert np.all(np.abs(np.bincount(held_labels) - 200) < 6 * 13.4)
  assert np.bincount(train_labels).tolist() == (2000 - np.bincount(held_labels)).tolist()
  assert "hold-out of 10% of the training examples" in cifar.info("cifar10", cifar_dir).validation


def test_validation_folder_replaces_the_holdout(tmp_path):
  for split in ("train", "val", "test"):
    for c in ("a", "b"):
      for i in range(3):
        path = tmp_path / split / c / f"{i}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(tf.io.encode_png(np.zeros((2, 2, 3), np.uint8)).numpy())
  assert len(image_folder.split_files(tmp_path, "train")[0]) == 6  # all of train/
  assert {p.split("/")[-3] for p in image_folder.split_files(tmp_path, "validation")[0]} == {"val"}
  assert cifar.info("cifar10", tmp_path).validation == "the val/ folder"


def test_real_folder_eval_batch_is_normalised_decoded_jpeg(cifar_dir):
  ds = cifar.load("cifar10", "test", cifar_dir, _opts(batch_size=8, deterministic=True))
  images, labels = next(iter(ds))
  assert images.shape == (8, 32, 32, 3) and images.dtype == tf.float32
  assert labels.dtype == tf.int64
  # Evaluation is not shuffled: the first files are test/airplane/0000.jpg ...
  first = sorted(os.listdir(cifar_dir / "test" / "airplane"))[:8]
  for k, name in enumerate(first):
    raw = tf.io.decode_jpeg(tf.io.read_file(str(cifar_dir / "test" / "airplane" / name))).numpy()
    expected = (raw / 255.0 - MEAN10) / STD10
    np.testing.assert_allclose(images[k].numpy(), expected, atol=1e-5)
  assert labels.numpy().tolist() == [0] * 8


def test_real_folder_training_batches_are_deterministic(cifar_dir):
  def first(seed):
    ds = cifar.load(
      "cifar10",
      "train",
      cifar_dir,
      _opts(batch_size=16, deterministic=True, shuffle_seed=seed, shuffle_buffer=256),
    )
    return next(iter(ds))

  a, b, c = first(1), first(1), first(2)
  np.testing.assert_array_equal(a[0].numpy(), b[0].numpy())
  np.testing.assert_array_equal(a[1].numpy(), b[1].numpy())
  assert not np.array_equal(a[0].numpy(), c[0].numpy())
  assert a[0].shape == (16, 32, 32, 3)


def test_augment_is_a_padded_crop_possibly_flipped():
  rng = np.random.default_rng(0)
  image = rng.integers(1, 256, size=(32, 32, 3)).astype(np.uint8)
  padded = np.pad(image, [(4, 4), (4, 4), (0, 0)])
  windows = {}
  for dy in range(9):
    for dx in range(9):
      w = padded[dy : dy + 32, dx : dx + 32]
      windows[(dy, dx, False)] = w
      windows[(dy, dx, True)] = w[:, ::-1]
  seen = set()
  for s in range(40):
    out = cifar.augment(tf.constant(image), tf.constant([s, 7], tf.int64)).numpy()
    match = [k for k, w in windows.items() if np.array_equal(out, w)]
    assert match, f"seed {s}: output is not a flipped/unflipped window of the padded image"
    seen.update(match)
  assert {k[2] for k in seen} == {False, True}  # both flips occur
  assert len({k[:2] for k in seen}) > 10  # many offsets occur
  again = cifar.augment(tf.constant(image), tf.constant([3, 7], tf.int64))
  first = cifar.augment(tf.constant(image), tf.constant([3, 7], tf.int64))
  np.testing.assert_array_equal(again.numpy(), first.numpy())


def test_augment_and_normalize_under_jit_compile():
  image = np.random.default_rng(3).integers(1, 256, size=(32, 32, 3)).astype(np.uint8)
  padded = np.pad(image, [(4, 4), (4, 4), (0, 0)])
  out = tf.function(cifar.augment, jit_compile=True)(
    tf.constant(image), tf.constant([1, 2], tf.int64)
  ).numpy()
  # XLA draws different (still valid) random numbers than the kernels: check the property.
  windows = [padded[dy : dy + 32, dx : dx + 32] for dy in range(9) for dx in range(9)]
  assert any(np.array_equal(out, w) or np.array_equal(out, w[:, ::-1]) for w in windows)
  norm = tf.function(cifar.normalize, jit_compile=True)(tf.constant(image)).numpy()
  np.testing.assert_allclose(norm, (image / 255.0 - MEAN10) / STD10, atol=1e-5)


def test_normalize_per_channel_cifar100():
  x = np.full((2, 2, 3), 128, np.uint8)
  out = cifar.normalize(x, "cifar100").numpy()
  mean = np.array([0.5071, 0.4865, 0.4409])
  std = np.array([0.2673, 0.2564, 0.2762])
  np.testing.assert_allclose(out, np.broadcast_to((128 / 255 - mean) / std, (2, 2, 3)), atol=1e-6)


def test_serving_preprocess_from_png_bytes_in_tf_function():
  rng = np.random.default_rng(1)
  imgs = rng.integers(0, 256, size=(3, 32, 32, 3)).astype(np.uint8)
  encoded = tf.stack([tf.io.encode_png(i) for i in imgs])
  fn = tf.function(cifar.serving_preprocess("cifar10"))
  out = fn(encoded).numpy()
  np.testing.assert_allclose(out, (imgs / 255.0 - MEAN10) / STD10, atol=1e-5)
  # Other sizes are resized to 32x32.
  big = tf.io.encode_png(np.zeros((64, 48, 3), np.uint8))
  assert fn(tf.stack([big])).shape == (1, 32, 32, 3)


def test_tfds_source_with_mock_data(tmp_path):
  with tfds.testing.mock_data(num_examples=40):
    opts = _opts(batch_size=4, deterministic=True)
    batches = list(cifar.load("cifar10", "train", tmp_path, opts, source="tfds", training=False))
    assert next(iter(cifar.load("cifar10", "train", tmp_path, opts, source="tfds")))
    held = cifar.load("cifar10", "validation", tmp_path, _opts(batch_size=40), source="tfds")
    held = next(iter(held))[0]
    test = cifar.load("cifar10", "test", tmp_path, _opts(batch_size=40), source="tfds")
    info = cifar.info("cifar100", tmp_path, source="tfds")
  # The validation hold-out and the train split share no image and together make up train.
  seen = np.concatenate([b[0].numpy() for b in batches] + [held.numpy()])
  assert len(seen) == 40 and len(np.unique(seen.reshape(40, -1), axis=0)) == 40
  assert 0 < len(held) < 40 and sum(len(b[0]) for b in test) == 40
  assert [b[0].shape[0] for b in batches[:-1]] == [4] * (len(batches) - 1)
  assert batches[0][0].shape == (4, 32, 32, 3) and batches[0][0].dtype == tf.float32
  labels = np.concatenate([b[1].numpy() for b in batches])
  assert labels.dtype == np.int64 and labels.min() >= 0 and labels.max() < 10
  # TFDS only knows CIFAR-100's names once prepared; the mock keeps the class count.
  assert info.num_classes == 100 and len(info.class_names) == 100


def test_tfds_not_prepared_names_path_and_how(tmp_path):
  (tmp_path / "cifar10").mkdir()
  with pytest.raises(DataNotFoundError) as e:
    cifar.load("cifar10", "train", tmp_path, _opts())
  assert str(tmp_path) in str(e.value) and "download_and_prepare" in str(e.value)


def test_missing_and_empty_dirs_name_the_path(tmp_path):
  with pytest.raises(DataNotFoundError, match="nowhere.*image folder"):
    cifar.load("cifar10", "train", tmp_path / "nowhere", _opts())
  with pytest.raises(DataNotFoundError, match="empty"):
    cifar.load("cifar10", "train", tmp_path, _opts())


def test_bad_arguments(cifar_dir):
  with pytest.raises(ValueError, match="`split` must be one of"):
    cifar.load("cifar10", "holdout", cifar_dir, _opts())
  with pytest.raises(ValueError, match="hold-out of train and takes no slice"):
    cifar.load("cifar10", "validation[:50%]", cifar_dir, _opts(), source="tfds")
  with pytest.raises(ValueError, match="`source` must be one of"):
    cifar.load("cifar10", "train", cifar_dir, _opts(), source="csv")
  with pytest.raises(ValueError, match="`name` must be one of"):
    cifar.normalize(np.zeros((1, 1, 3)), "cifar12")
