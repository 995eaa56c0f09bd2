"""CIFAR-10 and CIFAR-100 from TFDS or from an image folder.

Sources (``source=None`` detects them, in this order):
  * ``"folder"``: ``data_dir/train/<class>/*.jpg`` and ``data_dir/test/<class>/*.jpg`` (the layout
    of ``tfds.folder_dataset.ImageFolder``; e.g. ``shared/datasets/cifar10_jpeg``), and
    ``data_dir/validation/<class>/*.jpg`` (or ``val/``) if there is one.
  * ``"tfds"``: the TFDS ``cifar10`` / ``cifar100`` datasets prepared in ``data_dir`` (or in the
    TFDS default directory when ``data_dir`` is None). TFDS slices such as ``train[:50%]`` allowed.

Splits ``train``, ``validation`` and ``test``. The CIFAR release has no validation split: unless
the folder has a validation folder, ``validation`` is a fixed hold-out of 10% of the training
images (``_common.HOLDOUT``, by file name or TFDS id) and ``train`` is the rest, so that the best
checkpoint is never chosen on the test split.

Preprocessing (the standard CIFAR recipe of the ResNet / VGG papers):
  * training: pad 4 zero pixels on each side, random 32x32 crop, random horizontal flip;
  * always: per-channel normalisation ``x = (pixel / 255 - mean_c) / std_c`` with the training-set
    channel means and standard deviations below.

Example:
  >>> ds = load("cifar10", "train", "/data/cifar10_jpeg", options.InputOptions(batch_size=128))
  ... # doctest: +SKIP
"""

import tensorflow as tf

from tfrank4class import checks
from tfrank4class.data import _common, image_folder
from tfrank4class.data import options as options_lib

IMAGE_SIZE = (32, 32)
PAD = 4
# Per-channel mean and standard deviation of the training images, in [0, 1] pixel units.
STATS = {
  "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
  "cifar100": ((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)),
}
NAMES = tuple(STATS)
SOURCES = ("folder", "tfds")


def _how(name):
  return (
    f"Either point `data_dir` at an image folder with train/<class>/*.jpg and "
    f"test/<class>/*.jpg, or prepare TFDS {name!r} there on a machine with network access "
    f"(`tfds.builder({name!r}, data_dir=...).download_and_prepare()`) and copy the folder."
  )


def normalize(image, name="cifar10"):
  """``(image / 255 - mean) / std`` per channel, float32; ``image`` is uint8 ``[..., H, W, 3]``."""
  checks.check_choice("name", name, NAMES)
  mean, std = STATS[name]
  image = tf.cast(image, tf.float32) / 255.0
  return (image - tf.constant(mean)) / tf.constant(std)


def augment(image, seed):
  """Pad-4 random crop and random horizontal flip of one uint8 ``[32, 32, 3]`` image.

  Args:
    image: ``[32, 32, 3]`` image.
    seed: int ``[2]`` stateless seed; the same seed gives the same crop and flip.
  """
  crop_seed, flip_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
  padded = tf.pad(image, [[PAD, PAD], [PAD, PAD], [0, 0]])
  cropped = tf.image.stateless_random_crop(padded, [IMAGE_SIZE[0], IMAGE_SIZE[1], 3], crop_seed)
  return tf.image.stateless_random_flip_left_right(cropped, flip_seed)


def _to_size(image):
  """Resizes to 32x32 only if the image is not 32x32 already (serving inputs of any size)."""
  shape = tf.shape(image)
  same = tf.logical_and(tf.equal(shape[0], IMAGE_SIZE[0]), tf.equal(shape[1], IMAGE_SIZE[1]))
  return tf.cond(
    same,
    lambda: tf.cast(image, tf.float32),
    lambda: tf.image.resize(image, IMAGE_SIZE, antialias=True),
  )


def preprocess_for_train(image, seed, name="cifar10"):
  """Training preprocessing of a uint8 image: augment, then normalise -> float32 ``[32, 32, 3]``."""
  image = tf.ensure_shape(image, [None, None, 3])
  image = tf.cast(tf.clip_by_value(_to_size(image), 0.0, 255.0), tf.uint8)
  return normalize(augment(image, seed), name)


def preprocess_for_eval(image, name="cifar10"):
  """Evaluation preprocessing: resize to 32x32 if needed, normalise -> float32 ``[32, 32, 3]``.

  ``image`` is uint8 ``[H, W, 3]`` or a scalar ``tf.string`` of encoded JPEG/PNG bytes.
  """
  image = tf.convert_to_tensor(image)
  if image.dtype == tf.string:
    image = tf.io.decode_image(image, channels=3, expand_animations=False)
  image = tf.ensure_shape(image, [None, None, 3])
  mean, std = STATS[name]
  scaled = _to_size(image) / 255.0
  out = (scaled - tf.constant(mean)) / tf.constant(std)
  return tf.ensure_shape(out, [IMAGE_SIZE[0], IMAGE_SIZE[1], 3])


def detect_source(name, data_dir):
  """``"folder"`` for an image folder, ``"tfds"`` if TFDS data is there, else raises."""
  if data_dir is None:
    return "tfds"
  path = _common.require_dir(data_dir, f"{name} data", _how(name))
  if image_folder.is_image_folder(path):
    return "folder"
  if (path / name).is_dir():
    return "tfds"
  raise _common.missing_data(
    path, f"{name} image folder (train/<class>/*.jpg) or prepared TFDS {name!r}", _how(name)
  )


def info(name, data_dir=None, source=None):
  """``DatasetInfo`` of CIFAR-10/100 (class names from the folder or from TFDS)."""
  checks.check_choice("name", name, NAMES)
  source = checks.check_choice("source", source or detect_source(name, data_dir), SOURCES)
  if source == "folder":
    path = _common.require_dir(data_dir, f"{name} image folder", _how(name))
    names = image_folder.class_names(path)
    if not names:
      raise _common.missing_data(path, f"{name} class folders", _how(name))
  else:
    names = _common.tfds_builder(name, data_dir).info.features["label"].names
  validation = image_folder.describe_validation(path) if source == "folder" else _common.HOLDOUT
  return _common.DatasetInfo(name, names, "image", source, data_dir, validation, IMAGE_SIZE)


def load(name, split, data_dir, options, source=None, training=None, on_corrupt="error"):
  """Batched ``(float32 [B, 32, 32, 3], int64 [B])`` of a CIFAR split.

  Args:
    name: ``"cifar10"`` or ``"cifar100"``.
    split: ``"train"``, ``"validation"`` (see the module docstring) or ``"test"`` (TFDS
      slices of train and test allowed with ``source="tfds"``).
    data_dir: image folder or TFDS data directory.
    options: ``InputOptions``.
    source: ``"folder"``, ``"tfds"`` or None (detect).
    training: augment (and, by default, shuffle); default: ``split`` starts with ``train``.
    on_corrupt: undecodable images: ``"error"`` (names the file), ``"skip"`` or ``"unchecked"``.
  """
  checks.check_choice("name", name, NAMES)
  checks.check_choice("on_corrupt", on_corrupt, image_folder.ON_CORRUPT)
  source = checks.check_choice("source", source or detect_source(name, data_dir), SOURCES)
  base, suffix = _common.canonical_split(split)
  training = base == "train" if training is None else bool(training)
  keep = image_folder.keep_decoded if on_corrupt == "skip" else None
  if source == "folder":
    path = _common.require_dir(data_dir, f"{name} image folder", _how(name))
    records, _ = image_folder.file_records(path, split, options)
    decode = image_folder.read_decoder(on_corrupt)
  else:
    import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top

    records = _common.tfds_read(
      name,
      _common.holdout_tfds_split(base, suffix),
      data_dir,
      options,
      training,
      _how(name),
      decoders={"image": tfds.decode.SkipDecoding()},
    )
    if base != "test":
      records = records.filter(_common.holdout_filter(base, lambda example: example["id"]))

    def decode(example):
      image = image_folder.decode_checked(example["image"], example["id"], on_corrupt)
      return image, example["label"]

  def preprocess(image, label, seed):
    if training:
      return preprocess_for_train(image, seed, name), label
    return preprocess_for_eval(image, name), label

  return options_lib.build_pipeline(
    records, decode, preprocess, options, training, keep=keep, in_memory=source == "folder"
  )


def serving_preprocess(name="cifar10"):
  """``encoded image bytes tf.string [B] -> float32 [B, 32, 32, 3]``, the eval preprocessing.

  Pure TensorFlow, so a SavedModel can run it inside its serving signature.
  """
  checks.check_choice("name", name, NAMES)

  def fn(images):
    return tf.map_fn(
      lambda b: preprocess_for_eval(b, name),
      images,
      fn_output_signature=tf.TensorSpec([IMAGE_SIZE[0], IMAGE_SIZE[1], 3], tf.float32),
    )

  return fn
