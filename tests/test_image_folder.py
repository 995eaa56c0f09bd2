"""Tests of tfrank4class/data/image_folder.py: listing, class names, decoding, corrupt files."""

import numpy as np
import pytest
import tensorflow as tf

from tfrank4class.data import DataNotFoundError, image_folder
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
