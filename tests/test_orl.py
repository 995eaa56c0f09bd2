"""Tests of tfrank4class.data.orl on the real ORL faces and on small synthetic PGM folders."""

import numpy as np
import pytest

from tfrank4class.data.orl import load_orl, orl_dir


def _read_pgm(path):
  """Independent binary (P5) PGM reader: header tokens, then raw 8-bit pixels."""
  data = path.read_bytes()
  tokens, pos = [], 0
  while len(tokens) < 4:
    while data[pos : pos + 1].isspace():
      pos += 1
    if data[pos : pos + 1] == b"#":
      pos = data.index(b"\n", pos) + 1
      continue
    end = pos
    while not data[end : end + 1].isspace():
      end += 1
    tokens.append(data[pos:end])
    pos = end
  assert tokens[0] == b"P5" and int(tokens[3]) == 255
  w, h = int(tokens[1]), int(tokens[2])
  return np.frombuffer(data[pos + 1 : pos + 1 + w * h], np.uint8).reshape(h, w)


def test_real_orl_full_size(datasets_dir):
  x, y = load_orl(datasets_dir / "orl_faces", subjects=[1, 40])
  assert x.shape == (20, 112, 92, 1) and x.dtype == np.float32
  np.testing.assert_array_equal(y, [0] * 10 + [39] * 10)
  want = _read_pgm(datasets_dir / "orl_faces" / "s40" / "10.pgm") / 255.0
  np.testing.assert_allclose(x[19, :, :, 0], want, atol=1e-7)  # file order 1..10
  want = _read_pgm(datasets_dir / "orl_faces" / "s1" / "2.pgm") / 255.0
  np.testing.assert_allclose(x[1, :, :, 0], want, atol=1e-7)


def test_real_orl_downsampled_is_block_mean(datasets_dir):
  # 112x92 -> 28x23 is an exact 4x4 box average.
  x, y = load_orl(datasets_dir, subjects=[3], image_size=(28, 23))
  full = _read_pgm(datasets_dir / "orl_faces" / "s3" / "1.pgm").astype(np.float64)
  want = full.reshape(28, 4, 23, 4).mean(axis=(1, 3)) / 255.0
  np.testing.assert_allclose(x[0, :, :, 0], want, atol=1.5 / 255)
  assert x.shape == (10, 28, 23, 1) and set(y) == {2}


def test_all_subjects(datasets_dir):
  x, y = load_orl(datasets_dir / "orl_faces", image_size=(14, 12))
  assert x.shape == (400, 14, 12, 1)
  np.testing.assert_array_equal(np.bincount(y), [10] * 40)
  assert 0.0 <= x.min() and x.max() <= 1.0


def _write_pgm(path, pixels):
  h, w = pixels.shape
  path.write_bytes(b"P5\n%d %d\n255\n" % (w, h) + pixels.astype(np.uint8).tobytes())


def test_synthetic_folder_and_errors(tmp_path):
  root = tmp_path / "orl_faces"
  (root / "s1").mkdir(parents=True)
  pix = np.arange(12, dtype=np.uint8).reshape(3, 4) * 20
  for i in (1, 2, 10):
    _write_pgm(root / "s1" / f"{i}.pgm", pix + i)
  x, y = load_orl(tmp_path, subjects=[1])
  np.testing.assert_allclose(x[:, 0, 0, 0] * 255, [1, 2, 10], atol=1e-4)  # numeric file order
  assert orl_dir(tmp_path) == root
  with pytest.raises(FileNotFoundError, match=r"ORL subject folder .*s2 is missing"):
    load_orl(root, subjects=[1, 2])
  (root / "s1" / "3.pgm").write_bytes(b"not an image")
  with pytest.raises(ValueError, match=r"Could not read ORL image .*3.pgm"):
    load_orl(root, subjects=[1])
  with pytest.raises(FileNotFoundError, match=r"ORL faces not found under"):
    load_orl(tmp_path / "nowhere")


def test_bad_arguments(tmp_path):
  with pytest.raises(ValueError, match=r"`subjects` must be numbers in 1..40, got 41"):
    load_orl(tmp_path, subjects=[41])
  with pytest.raises(ValueError, match=r"`subjects` must be an integer >= 1, got 0"):
    load_orl(tmp_path, subjects=[0])
  with pytest.raises(ValueError, match=r"`resample` must be one of"):
    load_orl(tmp_path, resample="cubic")
