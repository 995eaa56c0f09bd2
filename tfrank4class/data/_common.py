"""Small helpers shared by the dataset modules: errors for missing data, split names, serving."""
import os
import pathlib

os.environ.setdefault("NO_GCE_CHECK", "true")

import tensorflow as tf  # noqa: E402

# Canonical split -> accepted spellings.
SPLIT_ALIASES = {
    "train": ("train",),
    "validation": ("validation", "dev", "val", "valid"),
    "test": ("test",),
}


class DataNotFoundError(FileNotFoundError):
  """The data a dataset needs is not where it was asked for; the message says how to get it."""


def missing_data(path, what, how):
  """Returns a ``DataNotFoundError`` naming ``path``, what was expected there and how to get it."""
  return DataNotFoundError(f"No {what} found at {str(path)!r}. {how}")


def canonical_split(split, allowed=("train", "validation", "test")):
  """Maps a split name (with an optional TFDS slice such as ``train[:10%]``) to its canonical base.

  Returns:
    ``(base, slice_suffix)``, e.g. ``("validation", "[:50]")`` for ``"dev[:50]"``.

  Raises:
    ValueError: the split is not a string or not one of ``allowed`` (or their aliases).
  """
  if not isinstance(split, str) or not split:
    raise ValueError(f"`split` must be a split name such as 'train', got {split!r}.")
  base, bracket, rest = split.partition("[")
  suffix = bracket + rest
  for canonical, aliases in SPLIT_ALIASES.items():
    if base in aliases and canonical in allowed:
      return canonical, suffix
  spellings = sorted(a for c in allowed for a in SPLIT_ALIASES.get(c, (c,)))
  raise ValueError(f"`split` must be one of {spellings}, got {split!r}.")


def require_dir(data_dir, what, how):
  """Returns ``data_dir`` as a ``Path`` if it is an existing, non-empty directory, else raises."""
  if data_dir is None:
    raise missing_data("<data_dir=None>", what, "Pass `data_dir`. " + how)
  path = pathlib.Path(os.fspath(data_dir)).expanduser()
  if not path.is_dir():
    raise missing_data(path, what, how)
  if not any(path.iterdir()):
    raise missing_data(path, what, f"The directory is empty. {how}")
  return path


class DatasetInfo:
  """What a model needs to know about a dataset: class names, modality, source.

  Attributes:
    name: the dataset name given to ``tfrank4class.data.load``.
    class_names: tuple of class names; the class id of a name is its position.
    num_classes: ``len(class_names)``.
    modality: ``"image"`` (features float32 ``[H, W, 3]``) or ``"text"`` (features scalar
      ``tf.string``).
    source: where the data is read from (``"tfds"``, ``"folder"`` or ``"tsv"``).
    data_dir: the directory read (``None`` for the TFDS default).
    image_size: ``(H, W)`` of the model's input images, or ``None`` for text.
  """

  def __init__(self, name, class_names, modality, source, data_dir, image_size=None):
    self.name = name
    self.class_names = tuple(str(c) for c in class_names)
    self.num_classes = len(self.class_names)
    self.modality = modality
    self.source = source
    self.data_dir = None if data_dir is None else str(data_dir)
    self.image_size = image_size

  def __repr__(self):
    return (f"DatasetInfo(name={self.name!r}, num_classes={self.num_classes}, "
            f"modality={self.modality!r}, source={self.source!r}, data_dir={self.data_dir!r})")


def tfds_builder(name, data_dir):
  """``tfds.builder`` that never touches the network (``try_gcs=False``)."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  return tfds.builder(name, data_dir=None if data_dir is None else str(data_dir), try_gcs=False)


def tfds_split(split, options):
  """This pipeline's TFDS split: the ``i``-th of ``tfds.even_splits(split, N)`` when sharded."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  n, i = options.shard
  return tfds.even_splits(split, n=n)[i] if n > 1 else split


def tfds_read(name, split, data_dir, options, training, how, decoders=None):
  """Reads this pipeline's share of a prepared TFDS dataset, offline.

  Raises:
    DataNotFoundError: the dataset is not prepared in ``data_dir`` (the message says how to
      prepare it).
  """
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  builder = tfds_builder(name, data_dir)
  shuffle_files = options.should_shuffle(training)
  read_config = tfds.ReadConfig(shuffle_seed=options.seed, try_autocache=False)
  try:
    return builder.as_dataset(split=tfds_split(split, options), shuffle_files=shuffle_files,
                              decoders=decoders, read_config=read_config)
  except AssertionError as e:
    if "could not find data" not in str(e):
      raise
    where = data_dir if data_dir is not None else builder.data_dir
    raise missing_data(where, f"prepared TFDS dataset {name!r}", how) from None


def text_serving_preprocess(dataset):
  """``tf.string [B] -> tf.string [B]``: text models vectorise raw strings themselves, so serving
  only checks the input type (``dataset`` names it in the error)."""
  def fn(texts):
    texts = tf.convert_to_tensor(texts)
    if texts.dtype != tf.string:
      raise TypeError(f"{dataset} serving inputs must be tf.string, got {texts.dtype.name}.")
    return texts
  return fn
