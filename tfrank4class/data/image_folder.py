"""Image folders ``root/<split>/<class>/<image>``, as ``tfds.folder_dataset.ImageFolder`` reads.

Class names are the sorted union of the class folders of all splits, so the class id of a folder is
the same in every split (and, for CIFAR-10 and ImageNet, the same as in TFDS, whose label names are
sorted the same way). Files are listed in sorted order, so a pipeline's order and its shards do not
depend on the file system (a training pipeline then shuffles the whole list).

Validation: a ``validation/`` (``val/``, ``dev/``, ``valid/``) folder where there is one; else a
fixed hold-out of the train folder (``_common.HOLDOUT``, by ``<class>/<file name>``), and the
train split is the rest of the train folder, so the two never share an image.

Corrupt images: by default (``on_corrupt="error"``) a file that cannot be decoded stops the
pipeline with an ``InvalidArgumentError`` whose message is ``Could not decode image file`` followed
by the file's path, marked as an ``UndecodableImageError`` (a user error that the command-line
programs report on one line, ``tfrank4class.errors.user_error_message``). ``on_corrupt="skip"``
drops such files instead, printing ``Skipping undecodable image file <path>`` to stderr for each
one (so the log holds the count); ``on_corrupt="unchecked"`` decodes with no check, about twice
as fast on 32x32 images but TensorFlow's own error does not name the file.

Example:
  >>> root = image_folder_root("/data/cifar10_jpeg")  # doctest: +SKIP
  >>> paths, labels, names = split_files(root, "train")  # doctest: +SKIP
"""

import os
import pathlib
import sys

import tensorflow as tf

from tfrank4class import checks, errors
from tfrank4class.data import _common

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".gif")
ON_CORRUPT = ("error", "skip", "unchecked")
#: The end of the message of an undecodable image (no quotes: TensorFlow escapes them).
UNDECODABLE_HINT = "(on_corrupt=skip drops undecodable images instead of stopping)"
# Folder names accepted for each canonical split.
FOLDER_SPLITS = {
  "train": ("train",),
  "validation": ("validation", "val", "dev", "valid"),
  "test": ("test",),
}


class UndecodableImageError(errors.UserError, ValueError):
  """An image file does not decode. Raised in the graph by ``decode_image``, so TensorFlow reports
  it as an ``InvalidArgumentError`` whose message names this class, the file and the fix."""


def _subdirs(path):
  return sorted(e.name for e in os.scandir(path) if e.is_dir() and not e.name.startswith("."))


def is_image_folder(root):
  """Whether ``root`` holds at least one split folder with class sub-folders."""
  root = pathlib.Path(root)
  if not root.is_dir():
    return False
  for aliases in FOLDER_SPLITS.values():
    for name in aliases:
      if (root / name).is_dir() and _subdirs(root / name):
        return True
  return False


def _folder(root, names):
  """The first of the folders ``names`` in ``root`` that exists, or None."""
  return next((root / name for name in names if (root / name).is_dir()), None)


def split_dir(root, split, folders=FOLDER_SPLITS):
  """The folder of ``split`` (``train``, ``validation``/``val``/``dev``, ``test``) in ``root``.

  Args:
    folders: the folder names of each split (``FOLDER_SPLITS``; ImageNet reads ``val/`` as test).

  Raises:
    DataNotFoundError: no such folder; the message lists the split folders that exist.
  """
  root = pathlib.Path(root)
  base, suffix = _common.canonical_split(split)
  if suffix:
    raise errors.InvalidConfigError(
      f"`split` slices such as {split!r} are only supported for TFDS sources; "
      "an image folder takes 'train', 'validation' or 'test'."
    )
  found = _folder(root, folders[base])
  if found is not None:
    return found
  present = [d for d in _subdirs(root)] if root.is_dir() else []
  raise _common.missing_data(
    root / (folders[base] or FOLDER_SPLITS[base])[0],
    f"image folder for split {split!r}",
    f"Expected {root}/<split>/<class>/<image>; split folders present: {present}.",
  )


def describe_validation(root, folders=FOLDER_SPLITS):
  """What the validation split of the image folder ``root`` is, in words (a folder, or the
  hold-out of train)."""
  found = _folder(pathlib.Path(root), folders["validation"])
  return _common.HOLDOUT if found is None else f"the {found.name}/ folder"


def class_names(root):
  """The sorted union of the class folder names of every split folder in ``root``."""
  root = pathlib.Path(root)
  names = set()
  for aliases in FOLDER_SPLITS.values():
    for name in aliases:
      if (root / name).is_dir():
        names.update(_subdirs(root / name))
  return tuple(sorted(names))


def list_split(root, split, names=None, folders=FOLDER_SPLITS):
  """Lists the images of a split folder, sorted by (class, file name); ``split_files`` is what
  a pipeline reads (with the validation hold-out).

  Args:
    folders: the folder names of each split (``FOLDER_SPLITS``; ImageNet reads ``val/`` as test).

  Returns:
    ``(paths, labels, class_names)``: lists of file paths and int class ids, and the class names.

  Raises:
    DataNotFoundError: no split folder, or no image files in it.
  """
  root = pathlib.Path(root)
  folder = split_dir(root, split, folders)
  names = tuple(names) if names is not None else class_names(root)
  paths, labels = [], []
  for label, name in enumerate(names):
    class_dir = folder / name
    if not class_dir.is_dir():
      continue
    files = sorted(
      e.name
      for e in os.scandir(class_dir)
      if e.is_file() and e.name.lower().endswith(IMAGE_EXTENSIONS)
    )
    paths.extend(str(class_dir / f) for f in files)
    labels.extend([label] * len(files))
  if not paths:
    raise _common.missing_data(
      folder,
      "image files (" + ", ".join(IMAGE_EXTENSIONS) + ")",
      f"Expected {folder}/<class>/<image>.",
    )
  return paths, labels, names


def split_files(root, split, names=None, folders=FOLDER_SPLITS):
  """The images of a split as a pipeline reads them: ``list_split``, but without a validation
  folder ``validation`` is the hold-out of the train folder (``_common.HOLDOUT``, by
  ``<class>/<file name>``) and ``train`` is the rest of it.

  Returns:
    ``(paths, labels, class_names)``, sorted by (class, file name).

  Raises:
    DataNotFoundError: no split folder, or no image files in it or in its part of the hold-out.
  """
  root = pathlib.Path(root)
  base, _ = _common.canonical_split(split)
  if base == "test" or _folder(root, folders["validation"]) is not None:
    return list_split(root, split, names, folders)
  paths, labels, names = list_split(root, "train", names, folders)
  keys = [f"{names[y]}/{os.path.basename(p)}" for p, y in zip(paths, labels)]
  wanted = _common.held_out(keys).numpy() == (base == "validation")
  if not wanted.any():
    raise _common.missing_data(
      split_dir(root, "train", folders),
      f"image files for the {base} split, {_common.HOLDOUT}",
      "Add training images, or a validation/ folder.",
    )
  return [p for p, w in zip(paths, wanted) if w], [y for y, w in zip(labels, wanted) if w], names


def decode_image(contents, path=None, on_corrupt="error", channels=3):
  """Decodes JPEG/PNG/BMP/GIF bytes to ``uint8 [H, W, channels]``; see the module docstring.

  Args:
    contents: a scalar ``tf.string`` of encoded image bytes.
    path: the file name used in the error message (a scalar string tensor or Python string).
    on_corrupt: ``"error"`` (an undecodable image raises, naming ``path``), ``"unchecked"`` (no
      check) or ``"skip"`` (also return whether it decoded; :func:`decode_checked` logs such a
      file and :func:`keep_decoded` drops it).
    channels: output channels (3: greyscale is broadcast, alpha is dropped).

  Returns:
    ``uint8 [H, W, channels]`` (and, for ``on_corrupt="skip"``, a bool telling whether it decoded).
  """

  def _decode(c):
    return tf.io.decode_image(c, channels=channels, expand_animations=False)

  if on_corrupt == "unchecked":
    return _decode(contents)
  # A try/except inside the graph: decode in a one-element dataset that drops errors, and fall
  # back to an empty image.
  decoded = tf.data.Dataset.from_tensors(contents).map(_decode).ignore_errors()
  fallback = tf.data.Dataset.from_tensors(tf.zeros([0, 0, channels], tf.uint8))
  image = decoded.concatenate(fallback).take(1).get_single_element()
  ok = tf.size(image) > 0
  if on_corrupt == "skip":
    return image, ok
  name = path if path is not None else "<bytes>"
  message = [
    f"{UndecodableImageError.__name__}: Could not decode image file",
    name,
    UNDECODABLE_HINT,
  ]
  with tf.control_dependencies([tf.debugging.Assert(ok, message)]):
    return tf.identity(image)


def file_records(root, split, options, names=None, folders=FOLDER_SPLITS):
  """Sharded ``tf.data.Dataset`` of ``(path, label)`` and the class names (``split_files``)."""
  from tfrank4class.data import options as options_lib  # pylint: disable=g-import-not-at-top

  paths, labels, names = split_files(root, split, names, folders)
  ds = tf.data.Dataset.from_tensor_slices((paths, tf.constant(labels, tf.int64)))
  return options_lib.shard_dataset(ds, options), names


def decode_checked(contents, name, on_corrupt="error"):
  """``decode_image`` for any ``on_corrupt``; "skip" gives ``[0, 0, 3]`` and logs ``name``.

  With ``on_corrupt="skip"`` an undecodable image gives an empty ``[0, 0, 3]`` image (drop it
  with ``keep_decoded``) and prints ``Skipping undecodable image file <name>`` to stderr.
  """
  if on_corrupt != "skip":
    return decode_image(contents, name, on_corrupt)
  image, ok = decode_image(contents, name, "skip")
  if not ok:
    tf.print("Skipping undecodable image file", name, output_stream=sys.stderr)
  return image


def read_decoder(on_corrupt="error"):
  """Returns ``(path, label) -> (uint8 image, label)`` for ``build_pipeline``."""
  checks.check_choice("on_corrupt", on_corrupt, ON_CORRUPT)

  def decode(path, label):
    return decode_checked(tf.io.read_file(path), path, on_corrupt), label

  return decode


def keep_decoded(image, label):
  """Filter for ``on_corrupt="skip"``: keeps the examples whose image decoded (is non-empty)."""
  del label
  return tf.size(image) > 0
