"""Tests of tfrank4class/data/imagenet.py: ResNet preprocessing, image folder, mocked TFDS."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from tfrank4class.data import DataNotFoundError, imagenet
from tfrank4class.data import options as options_lib

MEAN = np.array([0.485, 0.456, 0.406])
STD = np.array([0.229, 0.224, 0.225])


def _opts(**kw):
  return options_lib.InputOptions(**kw)


def test_center_crop_when_shorter_side_is_already_256():
  rng = np.random.default_rng(0)
  image = rng.integers(0, 256, size=(256, 320, 3)).astype(np.uint8)
  out = imagenet.resize_and_center_crop(tf.constant(image)).numpy()
  # No resize needed: the crop is rows 16..240 and columns 48..272.
  np.testing.assert_allclose(out, image[16:240, 48:272], atol=1e-4)


def test_center_crop_under_jit_compile_matches_eager():
  image = tf.constant(np.random.default_rng(1).random((300, 260, 3)), tf.float32)
  eager = imagenet.resize_and_center_crop(image)
  xla = tf.function(imagenet.resize_and_center_crop, jit_compile=True)(image)
  np.testing.assert_allclose(xla.numpy(), eager.numpy(), atol=1e-4)


def test_eval_resize_keeps_aspect_ratio():
  # A 128x512 image: shorter side 128 -> 256, longer 512 -> 1024; a horizontal ramp keeps its
  # column order, and the centre crop covers the middle 224 of 1024 resized columns.
  cols = np.tile(np.arange(512, dtype=np.float32)[None, :, None], (128, 1, 3))
  out = imagenet.resize_and_center_crop(tf.constant(cols)).numpy()
  assert out.shape == (224, 224, 3)
  first_col = (400 + 0.5) / 2 - 0.5  # resized column 400 samples source column 199.75
  np.testing.assert_allclose(out[0, 0, 0], first_col, atol=1e-3)
  np.testing.assert_allclose(out[0, 223, 0], (623 + 0.5) / 2 - 0.5, atol=1e-3)


def test_random_resized_crop_area_and_aspect_ranges():
  # Each pixel stores its own (row, column): the output's corners reveal the crop box.
  h, w = 300, 400
  rows, cols = np.meshgrid(
    np.arange(h, dtype=np.float32), np.arange(w, dtype=np.float32), indexing="ij"
  )
  image = tf.constant(np.stack([rows, cols, np.zeros_like(rows)], axis=-1))
  areas, ratios = [], []
  for s in range(60):
    out = imagenet.random_resized_crop(image, tf.constant([s, 1], tf.int64)).numpy()
    assert out.shape == (224, 224, 3)
    ch = out[-1, 0, 0] - out[0, 0, 0]
    cw = out[0, -1, 1] - out[0, 0, 1]
    # resize maps the crop's n pixels to 224 with half-pixel centres: span = n * 223/224 - ...
    n_h = ch * 224 / 223 + 1 if ch > 0 else 1
    n_w = cw * 224 / 223 + 1 if cw > 0 else 1
    areas.append(n_h * n_w / (h * w))
    ratios.append(n_w / n_h)
  areas, ratios = np.array(areas), np.array(ratios)
  assert areas.min() >= 0.08 - 0.02 and areas.max() <= 1.0 + 1e-6
  assert ratios.min() >= 0.75 - 0.05 and ratios.max() <= 4 / 3 + 0.05
  assert areas.std() > 0.05  # the crops really vary
  a = imagenet.random_resized_crop(image, tf.constant([5, 5], tf.int64))
  b = imagenet.random_resized_crop(image, tf.constant([5, 5], tf.int64))
  np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_normalize_uses_imagenet_statistics():
  out = imagenet.normalize(np.full((1, 1, 3), 51, np.uint8)).numpy()
  np.testing.assert_allclose(out[0, 0], (51 / 255 - MEAN) / STD, atol=1e-6)


@pytest.fixture
def folder(tmp_path):
  rng = np.random.default_rng(2)
  sizes = [(300, 400), (256, 256), (500, 260)]
  for split, count in (("train", 6), ("val", 3)):
    for synset in ["n01440764", "n01443537"]:
      for k in range(count):
        hh, ww = sizes[k % 3]
        path = tmp_path / split / synset / f"img{k}.JPEG"
        path.parent.mkdir(parents=True, exist_ok=True)
        img = rng.integers(0, 256, size=(hh, ww, 3)).astype(np.uint8)
        path.write_bytes(tf.io.encode_jpeg(img).numpy())
  return tmp_path


def test_folder_train_validation_and_test(folder):
  info = imagenet.info(folder)
  assert info.class_names == ("n01440764", "n01443537") and info.source == "folder"
  assert "hold-out of 10% of the training examples" in info.validation
  opts = _opts(batch_size=12, deterministic=True)
  x, y = next(iter(imagenet.load("train", folder, opts)))
  assert x.shape == (10, 224, 224, 3) and x.dtype == tf.float32
  assert sorted(y.numpy().tolist()) == [0] * 5 + [1] * 5
  # The fixed hold-out of these 12 names (it pins the hash): one image of each class, not in train.
  x, y = next(iter(imagenet.load("validation", folder, opts)))
  assert y.numpy().tolist() == [0, 1]
  for k, name in enumerate(["n01440764/img1.JPEG", "n01443537/img5.JPEG"]):
    raw = tf.io.decode_jpeg(tf.io.read_file(str(folder / "train" / name)))
    np.testing.assert_allclose(x[k].numpy(), imagenet.preprocess_for_eval(raw), atol=1e-5)
  # The test split is the official validation set, val/.
  x, y = next(iter(imagenet.load("test", folder, _opts(batch_size=6, deterministic=True))))
  assert x.shape == (6, 224, 224, 3) and y.numpy().tolist() == [0, 0, 0, 1, 1, 1]
  # The eval batch equals preprocess_for_eval on the decoded file (order is sorted).
  raw = tf.io.decode_jpeg(tf.io.read_file(str(folder / "val" / "n01440764" / "img0.JPEG")))
  np.testing.assert_allclose(x[0].numpy(), imagenet.preprocess_for_eval(raw).numpy(), atol=1e-5)


def test_serving_preprocess_on_encoded_bytes_of_several_sizes(folder):
  files = sorted((folder / "val").glob("*/*.JPEG"))[:3]
  encoded = tf.constant([f.read_bytes() for f in files])
  out = tf.function(imagenet.serving_preprocess())(encoded)
  assert out.shape == (3, 224, 224, 3)
  for k, f in enumerate(files):
    ref = imagenet.preprocess_for_eval(tf.io.decode_jpeg(f.read_bytes()))
    np.testing.assert_allclose(out[k].numpy(), ref.numpy(), atol=1e-5)


def test_tfds_source_with_mock_data(tmp_path):
  with tfds.testing.mock_data(num_examples=30):
    ds = imagenet.load("test", tmp_path, _opts(batch_size=30), source="tfds")
    x, y = next(iter(ds))
    sizes = [
      sum(
        int(b[1].shape[0]) for b in imagenet.load(s, tmp_path, _opts(batch_size=30), source="tfds")
      )
      for s in ("train", "validation")
    ]
    info = imagenet.info(tmp_path, source="tfds")
  assert x.shape == (30, 224, 224, 3) and y.dtype == tf.int64
  assert sum(sizes) == 30 and 0 < sizes[1] < 30  # the hold-out of the 30 training examples
  assert info.num_classes == 1000 and info.class_names[0] == "n01440764"


def test_missing_data_says_how_to_get_imagenet(tmp_path):
  with pytest.raises(DataNotFoundError, match="ILSVRC2012_img_train.tar") as e:
    imagenet.load("train", tmp_path / "absent", _opts())
  assert str(tmp_path / "absent") in str(e.value)
  (tmp_path / "readme.txt").write_text("x")
  with pytest.raises(DataNotFoundError, match="image folder or prepared TFDS"):
    imagenet.load("train", tmp_path, _opts())
  with pytest.raises(ValueError, match="`split` must be one of"):
    imagenet.load("holdout", tmp_path, _opts(), source="folder")
  (tmp_path / "ILSVRC2012_img_val.tar").write_bytes(b"")
  with pytest.raises(DataNotFoundError, match=r"No ILSVRC2012_img_train.tar found at"):
    imagenet.prepare(tmp_path, tmp_path / "out")
