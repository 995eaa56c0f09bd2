"""ImageNet (ILSVRC-2012) from TFDS ``imagenet2012`` or from an image folder, ResNet preprocessing.

Sources (``source=None`` detects them):
  * ``"folder"``: ``data_dir/train/<synset>/*.JPEG`` and ``data_dir/val/<synset>/*.JPEG`` (or
    ``validation/``). Class names are the sorted synset folder names, the same order as TFDS.
  * ``"tfds"``: TFDS ``imagenet2012`` prepared in ``data_dir``. TFDS cannot download ImageNet:
    put the official ``ILSVRC2012_img_train.tar`` and ``ILSVRC2012_img_val.tar`` in
    ``<data_dir>/downloads/manual/`` and run
    ``tfds.builder("imagenet2012", data_dir=...).download_and_prepare()`` once.

Splits: ``test`` is the official ILSVRC2012 validation set (``val/``, TFDS ``validation``), on
which results are reported (the test set's labels are not public); ``validation`` is a fixed
hold-out of 10% of the training images (``_common.HOLDOUT``, by ``<synset>/<file name>`` or TFDS
file name) and ``train`` the rest, so that the best checkpoint is not chosen on ``test``.

Preprocessing (the standard ResNet recipe, He et al. 2016 / TF Model Garden):
  * training: a random crop covering 8%-100% of the area with aspect ratio in [3/4, 4/3]
    (``sample_distorted_bounding_box``, at least 10% of the whole image), resized to 224x224
    (bilinear), random horizontal flip;
  * evaluation: resize the shorter side to 256 (= 224 / 0.875, aspect ratio kept), centre crop
    224x224;
  * always: ``x = (pixel / 255 - mean_c) / std_c`` with the ImageNet channel statistics.

Example:
  >>> ds = load("train", "/data/imagenet", options.InputOptions(batch_size=256))  # doctest: +SKIP
"""

import tensorflow as tf

from tfrank4class import checks
from tfrank4class.data import _common, image_folder
from tfrank4class.data import options as options_lib

NAME = "imagenet2012"
IMAGE_SIZE = (224, 224)
RESIZE_SHORTER = 256
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
SOURCES = ("folder", "tfds")
AREA_RANGE = (0.08, 1.0)
ASPECT_RATIO_RANGE = (3.0 / 4.0, 4.0 / 3.0)

HOW = (
  "Either point `data_dir` at an image folder with train/<synset>/*.JPEG and "
  "val/<synset>/*.JPEG, or put the official ILSVRC2012_img_train.tar and "
  "ILSVRC2012_img_val.tar (from https://image-net.org, registration required) in "
  "<data_dir>/downloads/manual/ and run "
  "`tfds.builder('imagenet2012', data_dir=...).download_and_prepare()`."
)


def normalize(image):
  """``(image / 255 - mean) / std`` per channel with the ImageNet statistics, float32."""
  image = tf.cast(image, tf.float32) / 255.0
  return (image - tf.constant(MEAN)) / tf.constant(STD)


def random_resized_crop(image, seed, size=IMAGE_SIZE):
  """Random crop of 8%-100% of the area, aspect ratio in [3/4, 4/3], resized to ``size``.

  Args:
    image: ``[H, W, 3]`` image (any dtype).
    seed: int ``[2]`` stateless seed.

  Returns:
    float32 ``[size[0], size[1], 3]`` in the input's value range.
  """
  begin, crop_size, _ = tf.image.stateless_sample_distorted_bounding_box(
    tf.shape(image),
    bounding_boxes=tf.constant([[[0.0, 0.0, 1.0, 1.0]]]),
    seed=seed,
    min_object_covered=0.1,
    aspect_ratio_range=ASPECT_RATIO_RANGE,
    area_range=AREA_RANGE,
    max_attempts=10,
    use_image_if_no_bounding_boxes=True,
  )
  crop = tf.slice(image, begin, crop_size)
  return tf.image.resize(crop, size, method="bilinear")


def resize_and_center_crop(image, size=IMAGE_SIZE, shorter=RESIZE_SHORTER):
  """Resizes the shorter side to ``shorter`` (keeping the aspect ratio), then centre-crops ``size``.

  Returns float32 ``[size[0], size[1], 3]`` in the input's value range.
  """
  shape = tf.cast(tf.shape(image)[:2], tf.float32)
  scale = tf.cast(shorter, tf.float32) / tf.reduce_min(shape)
  new = tf.cast(tf.round(shape * scale), tf.int32)
  new = tf.maximum(new, tf.constant(size, tf.int32))
  resized = tf.image.resize(image, new, method="bilinear")
  top = (new[0] - size[0]) // 2
  left = (new[1] - size[1]) // 2
  return tf.slice(resized, [top, left, 0], [size[0], size[1], 3])


def preprocess_for_train(image, seed):
  """Random resized crop to 224, random flip, normalise: uint8 ``[H, W, 3]`` -> float32."""
  crop_seed, flip_seed = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
  image = random_resized_crop(tf.ensure_shape(image, [None, None, 3]), crop_seed)
  image = tf.image.stateless_random_flip_left_right(image, flip_seed)
  return tf.ensure_shape(normalize(image), [IMAGE_SIZE[0], IMAGE_SIZE[1], 3])


def preprocess_for_eval(image):
  """Resize to 256, centre crop 224, normalise; ``image``: uint8 ``[H, W, 3]`` or encoded bytes."""
  image = tf.convert_to_tensor(image)
  if image.dtype == tf.string:
    image = tf.io.decode_image(image, channels=3, expand_animations=False)
  image = resize_and_center_crop(tf.ensure_shape(image, [None, None, 3]))
  return tf.ensure_shape(normalize(image), [IMAGE_SIZE[0], IMAGE_SIZE[1], 3])


#: The folders of each split: the official validation set is the test split, and the validation
#: split is always the hold-out of train.
FOLDER_SPLITS = {"train": ("train",), "validation": (), "test": ("val", "validation")}
#: What the validation split is (``DatasetInfo.validation``).
VALIDATION = _common.HOLDOUT + " (the official validation set is the test split)"

TARS = ("ILSVRC2012_img_train.tar", "ILSVRC2012_img_val.tar")


def prepare(manual_dir, data_dir):
  """Prepares TFDS ``imagenet2012`` in ``data_dir`` from the official tars in ``manual_dir``.

  Runs TFDS's own ``imagenet2012`` builder offline (``try_download_gcs=False``); it takes hours
  and about 150 GB for the full tars.

  Raises:
    DataNotFoundError: ``manual_dir`` does not hold both ``TARS``.
  """
  manual = _common.require_dir(manual_dir, "ImageNet tars", HOW)
  missing = [t for t in TARS if not (manual / t).is_file()]
  if missing:
    raise _common.missing_data(manual, f"{' and '.join(missing)}", HOW)
  return _common.prepare_offline(_common.tfds_builder(NAME, data_dir), manual)


def detect_source(data_dir):
  """``"folder"`` or ``"tfds"``, from what ``data_dir`` holds; raises if it holds neither."""
  if data_dir is None:
    return "tfds"
  path = _common.require_dir(data_dir, "ImageNet data", HOW)
  if image_folder.is_image_folder(path):
    return "folder"
  if (path / NAME).is_dir():
    return "tfds"
  raise _common.missing_data(path, "ImageNet image folder or prepared TFDS 'imagenet2012'", HOW)


def info(data_dir=None, source=None):
  """``DatasetInfo`` of ImageNet (synset class names)."""
  source = checks.check_choice("source", source or detect_source(data_dir), SOURCES)
  if source == "folder":
    path = _common.require_dir(data_dir, "ImageNet image folder", HOW)
    names = image_folder.class_names(path)
  else:
    names = _common.tfds_builder(NAME, data_dir).info.features["label"].names
  return _common.DatasetInfo(NAME, names, "image", source, data_dir, VALIDATION, IMAGE_SIZE)


def load(split, data_dir, options, source=None, training=None, on_corrupt="error"):
  """Batched ``(float32 [B, 224, 224, 3], int64 [B])`` of an ImageNet split.

  Args:
    split: ``"train"``, ``"validation"`` (the hold-out) or ``"test"`` (the official validation
      set); TFDS slices of train and test with ``source="tfds"``.
    data_dir, options, source, training, on_corrupt: as in ``cifar.load``.
  """
  checks.check_choice("on_corrupt", on_corrupt, image_folder.ON_CORRUPT)
  source = checks.check_choice("source", source or detect_source(data_dir), SOURCES)
  base, suffix = _common.canonical_split(split)
  training = base == "train" if training is None else bool(training)
  keep = image_folder.keep_decoded if on_corrupt == "skip" else None
  if source == "folder":
    path = _common.require_dir(data_dir, "ImageNet image folder", HOW)
    records, _ = image_folder.file_records(path, split, options, folders=FOLDER_SPLITS)
    decode = image_folder.read_decoder(on_corrupt)
  else:
    import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top

    records = _common.tfds_read(
      NAME,
      _common.holdout_tfds_split(base, suffix, test_split="validation"),
      data_dir,
      options,
      training,
      HOW,
      decoders={"image": tfds.decode.SkipDecoding()},
    )
    if base != "test":
      records = records.filter(_common.holdout_filter(base, lambda example: example["file_name"]))

    def decode(example):
      image = image_folder.decode_checked(example["image"], example["file_name"], on_corrupt)
      return image, example["label"]

  def preprocess(image, label, seed):
    if training:
      return preprocess_for_train(image, seed), label
    return preprocess_for_eval(image), label

  return options_lib.build_pipeline(
    records, decode, preprocess, options, training, keep=keep, in_memory=source == "folder"
  )


def serving_preprocess():
  """``encoded image bytes tf.string [B] -> float32 [B, 224, 224, 3]``, the eval preprocessing."""

  def fn(images):
    return tf.map_fn(
      preprocess_for_eval,
      images,
      fn_output_signature=tf.TensorSpec([IMAGE_SIZE[0], IMAGE_SIZE[1], 3], tf.float32),
    )

  return fn
