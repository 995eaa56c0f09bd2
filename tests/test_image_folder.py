"""Tests of tfrank4class/data/image_folder.py: listing, class names, decoding, corrupt files,
shuffling a folder listed sorted by class."""

import os

import numpy as np
import pytest
import tensorflow as tf
from scipy import stats

from tfrank4class import data
from tfrank4class.data import DataNotFoundError, cifar, image_folder
from tfrank4class.data import options as options_lib


def _write_png(path, array):
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_bytes(tf.io.encode_png(tf.constant(array, tf.uint8)).numpy())


@pytest.fixture
def folder(tmp_path):
  """train/{cat,dog}, val/{cat,eel}: class names are the union {cat, dog, eel}."""
  rng = np.random.default_rng(0)
  for split, cls, n in [
    ("train", "dog", 2),
    ("train", "cat", 3),
    ("val", "cat", 1),
    ("val", "eel", 2),
  ]:
    for i in range(n):
      _write_png(tmp_path / split / cls / f"{i:02d}.png", rng.integers(0, 256, size=(5, 7, 3)))
  (tmp_path / "train" / "cat" / "notes.txt").write_text("not an image")
  return tmp_path


def test_class_names_are_the_sorted_union_over_splits(folder):
  assert image_folder.class_names(folder) == ("cat", "dog", "eel")
  assert image_folder.is_image_folder(folder)
  assert not image_folder.is_image_folder(folder / "train" / "cat")


def test_list_split_sorted_with_consistent_ids(folder):
  paths, labels, names = image_folder.list_split(folder, "validation")
  assert [p.split("/")[-2:] for p in paths] == [
    ["cat", "00.png"],
    ["eel", "00.png"],
    ["eel", "01.png"],
  ]
  assert labels == [0, 2, 2]  # eel is class 2 in every split
  paths, labels, _ = image_folder.list_split(folder, "train")
  assert len(paths) == 5 and labels == [0, 0, 0, 1, 1]  # notes.txt is not listed


def test_missing_split_names_path_and_present_folders(folder):
  with pytest.raises(DataNotFoundError, match=r"test.*split folders present: \['train', 'val'\]"):
    image_folder.list_split(folder, "test")
  with pytest.raises(ValueError, match="`split` must be one of"):
    image_folder.list_split(folder, "holdout")
  with pytest.raises(ValueError, match="only supported for TFDS"):
    image_folder.split_dir(folder, "train[:10%]")


def test_empty_class_folders_are_an_error(tmp_path):
  (tmp_path / "train" / "a").mkdir(parents=True)
  with pytest.raises(DataNotFoundError, match="image files"):
    image_folder.list_split(tmp_path, "train")


def test_decode_matches_encoded_pixels_and_greyscale_is_broadcast():
  rgb = np.arange(4 * 6 * 3, dtype=np.uint8).reshape(4, 6, 3)
  out = image_folder.decode_image(tf.io.encode_png(rgb))
  np.testing.assert_array_equal(out.numpy(), rgb)
  grey = np.arange(12, dtype=np.uint8).reshape(3, 4, 1)
  out = image_folder.decode_image(tf.io.encode_png(grey))
  np.testing.assert_array_equal(out.numpy(), np.repeat(grey, 3, axis=2))
  out = tf.function(image_folder.decode_image)(tf.io.encode_png(rgb), "x.png")
  np.testing.assert_array_equal(out.numpy(), rgb)


def _corrupt_folder(tmp_path):
  _write_png(tmp_path / "train" / "a" / "good0.png", np.zeros((3, 3, 3)))
  _write_png(tmp_path / "train" / "a" / "good1.png", np.full((3, 3, 3), 7))
  bad = tmp_path / "train" / "b" / "broken.jpg"
  bad.parent.mkdir(parents=True)
  bad.write_bytes(b"\xff\xd8\xff\xe0 this is not a JPEG")
  return bad


def _pipeline(root, on_corrupt):
  opts = options_lib.InputOptions(batch_size=1, deterministic=True)
  records, _ = image_folder.file_records(root, "train", opts)
  keep = image_folder.keep_decoded if on_corrupt == "skip" else None
  return options_lib.build_pipeline(
    records,
    image_folder.read_decoder(on_corrupt),
    lambda x, y, s: (x, y),
    opts,
    training=False,
    keep=keep,
  )


def test_corrupt_file_error_names_the_file(tmp_path):
  bad = _corrupt_folder(tmp_path)
  with pytest.raises(tf.errors.InvalidArgumentError, match="Could not decode image file") as e:
    list(_pipeline(tmp_path, "error"))
  assert str(bad) in str(e.value)


def test_corrupt_file_skip_drops_it_and_logs_its_name(tmp_path, capfd):
  bad = _corrupt_folder(tmp_path)
  labels = [int(y[0]) for _, y in _pipeline(tmp_path, "skip")]
  assert labels == [0, 0]
  err = capfd.readouterr().err
  assert err.count("Skipping undecodable image file") == 1 and str(bad) in err


def test_unchecked_mode_fails_without_the_file_name(tmp_path):
  _corrupt_folder(tmp_path)
  with pytest.raises(tf.errors.InvalidArgumentError):
    list(_pipeline(tmp_path, "unchecked"))


def test_bad_on_corrupt_is_rejected():
  with pytest.raises(ValueError, match="`on_corrupt` must be one of"):
    image_folder.read_decoder("ignore")


# Shuffling a folder listed sorted by class (tfrank4class issue 37, item 1).

#: Pearson's chi-square of 10 equal classes (9 degrees of freedom) that a uniform sample exceeds
#: with probability 1e-6 (scipy.stats.chi2.isf(1e-6, 9)); a fixed seed makes each draw repeatable.
CHI2_BOUND_10_CLASSES = 44.81


def _linked_folder(root, classes, per_class):
  """``root/train/c<k>/<i>.png``: one 2x2 PNG per class, hard-linked ``per_class`` times."""
  for k in range(classes):
    first = root / "train" / f"c{k}" / "00000.png"
    _write_png(first, np.full((2, 2, 3), 20 * k))
    for i in range(1, per_class):
      os.link(first, first.with_name(f"{i:05d}.png"))
  return root


def test_first_batches_of_a_sorted_folder_hold_every_class_in_near_uniform_mix(tmp_path):
  # 15,000 files, more than the default shuffle buffer (10,000): a buffer of decoded or listed
  # files would hold classes 0-6 only for the first 5,000 draws.
  root = _linked_folder(tmp_path, classes=10, per_class=1500)
  for seed in range(3):
    ds = data.load(
      "cifar10",
      "train",
      root,
      batch_size=64,
      shuffle_seed=seed,
      deterministic=True,
      on_corrupt="unchecked",
    )
    counts = np.bincount(np.concatenate([y.numpy() for _, y in ds.take(5)]), minlength=10)
    assert counts.min() > 0, counts
    expected = counts.sum() / 10
    assert ((counts - expected) ** 2 / expected).sum() < CHI2_BOUND_10_CLASSES, counts


def _id_folder(root, classes, per_class):
  """32x32 PNGs of one colour each, ``(id % 256, id // 256, 0)``, ids sorted by class."""
  for i in range(classes * per_class):
    colour = np.zeros((32, 32, 3)) + [i % 256, i // 256, 0]
    _write_png(root / "train" / f"c{i // per_class}" / f"{i:05d}.png", colour)
  return root


def _epochs(root, seed, epochs=2, split="train"):
  """The file ids of ``epochs`` shuffled passes over a split, read back from the pixels."""
  n = len(image_folder.split_files(root, split)[0])  # one batch per epoch
  ds = data.load(
    "cifar10",
    split,
    root,
    batch_size=n,
    training=False,
    shuffle=True,
    shuffle_seed=seed,
    deterministic=True,
    repeat=True,
    shuffle_buffer=8,
  )
  mean, std = np.array(cifar.STATS["cifar10"][0]), np.array(cifar.STATS["cifar10"][1])
  out = []
  for images, _ in ds.take(epochs):
    pixels = np.rint((images.numpy()[:, 0, 0, :] * std + mean) * 255).astype(int)
    out.append(pixels[:, 0] + 256 * pixels[:, 1])
  return out


def test_folder_is_reshuffled_whole_each_epoch_and_repeatably_under_a_seed(tmp_path):
  root = _id_folder(tmp_path, classes=10, per_class=30)
  first, second = _epochs(root, seed=1)
  held = _epochs(root, seed=1, epochs=1, split="validation")[0]
  assert sorted(first) == sorted(second) == sorted(set(range(300)) - set(held))
  assert not np.array_equal(first, second)
  # Shuffled whole, whatever shuffle_buffer (8 here): the position of a file says nothing of its
  # place in the sorted list (|Spearman| > 0.3 has probability below 1e-6 for a permutation).
  for epoch in (first, second):
    assert abs(stats.spearmanr(np.arange(len(epoch)), epoch)[0]) < 0.3
  again = _epochs(root, seed=1)
  np.testing.assert_array_equal(again[0], first)
  np.testing.assert_array_equal(again[1], second)
  assert not np.array_equal(_epochs(root, seed=2, epochs=1)[0], first)
