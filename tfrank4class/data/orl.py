"""The ORL (AT&T) face database: 40 subjects ``s1``..``s40``, 10 greyscale 92x112 PGM images each.

A small real data set for metric learning and retrieval (Samaria & Harter, "Parameterisation of
a stochastic model for human face identification", 1994; Olivetti Research Laboratory,
Cambridge - credit them when reporting results). The layout is ``<data_dir>/s<k>/<i>.pgm``.

``tf.io.decode_image`` does not read PGM, so the images are decoded with Pillow (a dependency of
the package) and returned as in-memory arrays; the whole set is 4 MB.

Class ids are ``subject - 1`` (``s1`` -> 0, ..., ``s40`` -> 39), so a model trained on subjects
1..30 has class ids ``0..29`` and subjects 31..40 (ids 30..39) are unseen classes for retrieval.

Example:
  >>> x, y = load_orl("/data/orl_faces", subjects=range(1, 31),  # doctest: +SKIP
  ...                 image_size=(56, 46))
  >>> x.shape, y.max()  # doctest: +SKIP
  ((300, 56, 46, 1), 29)
"""

import os
import pathlib

import numpy as np

from tfrank4class import checks

NUM_SUBJECTS = 40
IMAGES_PER_SUBJECT = 10
IMAGE_SIZE = (112, 92)  # (height, width)


def orl_dir(data_dir):
  """The ORL folder: ``data_dir`` itself if it holds ``s1/``, else ``data_dir/orl_faces``.

  Raises:
    FileNotFoundError: neither exists; the message says what was expected.
  """
  if data_dir is None:
    raise ValueError(
      "`data_dir` must be the path of the ORL folder (holding s1/ .. s40/), got None."
    )
  root = pathlib.Path(data_dir)
  for candidate in (root, root / "orl_faces"):
    if (candidate / "s1").is_dir():
      return candidate
  raise FileNotFoundError(
    f"ORL faces not found under {root}: expected {root}/s1/1.pgm .. s40/10.pgm "
    f"(or {root}/orl_faces/s1/...). The database is in shared/datasets/orl_faces."
  )


def _checked_subjects(subjects):
  """``subjects`` as a list of distinct numbers in ``1..40`` (``None``: all)."""
  if subjects is None:
    subjects = range(1, NUM_SUBJECTS + 1)
  subjects = list(subjects)
  if not subjects:
    raise ValueError("`subjects` must name at least one subject in 1..40, got an empty list.")
  for s in subjects:
    checks.check_int("subjects", s, minimum=1)
    if s > NUM_SUBJECTS:
      raise ValueError(f"`subjects` must be numbers in 1..{NUM_SUBJECTS}, got {s!r}.")
  if len(set(subjects)) != len(subjects):
    raise ValueError(f"`subjects` must not repeat a subject, got {subjects!r}.")
  return subjects


def _checked_image_size(image_size):
  """``image_size`` as ``(height, width)`` of ints ``>= 1``, or ``None``."""
  if image_size is None:
    return None
  if len(tuple(image_size)) != 2:
    raise ValueError(f"`image_size` must be (height, width), got {image_size!r}.")
  for v in image_size:
    checks.check_int("image_size", v, minimum=1)
  return tuple(int(v) for v in image_size)


def _subject_images(folder, image_size, resample_filter):
  """The images ``[H, W, 1]`` of one subject's folder, in file order ``1.pgm .. 10.pgm``."""
  from PIL import Image  # pylint: disable=import-outside-toplevel

  if not folder.is_dir():
    raise FileNotFoundError(f"ORL subject folder {folder} is missing.")
  files = sorted(
    (f for f in os.listdir(folder) if f.lower().endswith(".pgm")), key=lambda f: (len(f), f)
  )
  if not files:
    raise FileNotFoundError(f"ORL subject folder {folder} holds no .pgm files.")
  images = []
  for f in files:
    path = folder / f
    try:
      with Image.open(path) as img:
        img = img.convert("L")
        if image_size is not None and img.size != (image_size[1], image_size[0]):
          img = img.resize((image_size[1], image_size[0]), resample_filter)
        pixels = np.asarray(img, np.float32) / 255.0
    except (OSError, ValueError) as err:
      raise ValueError(f"Could not read ORL image {path}: {err}") from None
    images.append(pixels[:, :, None])
  return images


def load_orl(data_dir, subjects=None, image_size=None, resample="box"):
  """Loads ORL faces as float32 images in ``[0, 1]`` and int64 class ids.

  Args:
    data_dir: the ``orl_faces`` folder, or a folder containing it.
    subjects: subject numbers to load, each in ``1..40`` (default: all), in the given order.
    image_size: optional ``(height, width)`` to resize to, e.g. ``(56, 46)`` (half) or
      ``(28, 23)`` (quarter); default the original ``(112, 92)``.
    resample: Pillow filter for resizing: ``"box"`` (area average, right for downsampling),
      ``"bilinear"`` or ``"nearest"``.

  Returns:
    ``(images, labels)``: float32 ``[N, H, W, 1]`` and int64 ``[N]`` with ``labels = subject - 1``;
    within a subject, images are in file order ``1.pgm .. 10.pgm``.

  Raises:
    FileNotFoundError: the folder or a subject folder is missing.
    ValueError: bad ``subjects`` / ``image_size`` / ``resample``, or a file that is not a
      readable image (the message names the file).
  """
  from PIL import Image  # pylint: disable=import-outside-toplevel

  filters = {
    "box": Image.Resampling.BOX,
    "bilinear": Image.Resampling.BILINEAR,
    "nearest": Image.Resampling.NEAREST,
  }
  checks.check_choice("resample", resample, filters)
  subjects = _checked_subjects(subjects)
  image_size = _checked_image_size(image_size)
  root = orl_dir(data_dir)
  images, labels = [], []
  for s in subjects:
    pictures = _subject_images(root / f"s{s}", image_size, filters[resample])
    images.extend(pictures)
    labels.extend([s - 1] * len(pictures))
  shapes = {im.shape for im in images}
  if len(shapes) != 1:
    raise ValueError(
      f"ORL images under {root} have different sizes {sorted(shapes)}; pass `image_size`."
    )
  return np.stack(images), np.asarray(labels, np.int64)
