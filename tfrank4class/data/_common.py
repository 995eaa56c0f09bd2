"""Small helpers shared by the dataset modules: errors for missing data and malformed rows, split
names, serving."""

import codecs
import os
import pathlib
import sys

os.environ.setdefault("NO_GCE_CHECK", "true")

import tensorflow as tf  # noqa: E402

from tfrank4class import checks, errors  # noqa: E402

# Canonical split -> accepted spellings.
SPLIT_ALIASES = {
  "train": ("train",),
  "validation": ("validation", "dev", "val", "valid"),
  "test": ("test",),
}


#: The validation split of a dataset whose release has none (CIFAR, ImageNet): the training
#: examples whose name (an image folder's ``<class>/<file name>``, a TFDS example's id or file
#: name) falls in the first ``HOLDOUT_PERCENT`` of 100 buckets of a keyed hash (SipHash,
#: ``tf.strings.to_hash_bucket_strong`` with ``HOLDOUT_KEY``). It is fixed, the same examples on
#: every run and machine whatever the run's seed, and the train split is the rest.
HOLDOUT_PERCENT = 10
HOLDOUT_KEY = (0, 37)
HOLDOUT = (
  f"a fixed hold-out of {HOLDOUT_PERCENT}% of the training examples (seeded hash of each "
  "example's name), left out of the train split"
)


def held_out(names):
  """Which examples are in the validation hold-out: a bool tensor of the shape of ``names``, the
  examples' names (``tf.string``, any shape); see ``HOLDOUT_PERCENT``."""
  buckets = tf.strings.to_hash_bucket_strong(names, 100, key=list(HOLDOUT_KEY))
  return buckets < HOLDOUT_PERCENT


def holdout_filter(base, name_of):
  """The ``tf.data`` filter of an example of the TFDS train split read for split ``base``:
  ``name_of(example)`` is held out for ``"validation"``, not held out for ``"train"``."""
  want = base == "validation"
  return lambda example: tf.equal(held_out(name_of(example)), want)


def holdout_tfds_split(base, suffix, test_split="test"):
  """The TFDS split to read for split ``base`` + ``suffix`` of a dataset whose validation split
  is the hold-out: ``train`` + ``suffix`` for ``train`` and ``validation``, ``test_split`` +
  ``suffix`` for ``test``.

  Raises:
    InvalidConfigError: a slice of the hold-out (slice ``train`` instead).
  """
  if base == "validation" and suffix:
    raise errors.InvalidConfigError(
      f"`split` {base + suffix!r}: the validation split is a hold-out of train and takes no "
      "slice; slice 'train' instead, or read all of 'validation'."
    )
  return ("train" if base in ("train", "validation") else test_split) + suffix


class DataNotFoundError(errors.UserError, FileNotFoundError):
  """The data a dataset needs is not where it was asked for; the message says how to get it."""


#: What the text readers do with a row that does not parse: stop with an error naming the file and
#: line, or drop it and report the dropped lines on stderr.
ON_CORRUPT = ("error", "skip")
#: Dropped lines listed one by one in the skip report; the rest are counted.
SKIP_REPORT_LINES = 10


class MalformedRowError(errors.UserError, ValueError):
  """A row of a data file does not parse; the message names the file and the 1-based line."""


class EmptySplitError(errors.UserError, ValueError):
  """A split of a dataset holds no examples; the message names the dataset, the split and the
  file or folder read."""


def require_examples(count, dataset, split, where, rows="rows"):
  """Raises ``EmptySplitError`` if the split ``split`` of ``dataset``, read from ``where``, has no
  examples (``count == 0``): an empty split would train on nothing or score as 0."""
  if count == 0:
    raise EmptySplitError(
      f"The {split!r} split of {dataset} ({where}) holds no examples (no {rows}). Fill it with "
      "the dataset's files, or point `data_dir` at the complete dataset."
    )


def missing_data(path, what, how):
  """Returns a ``DataNotFoundError`` naming ``path``, what was expected there and how to get it."""
  return DataNotFoundError(f"No {what} found at {str(path)!r}. {how}")


def canonical_split(split, allowed=("train", "validation", "test")):
  """Maps a split name (with an optional TFDS slice such as ``train[:10%]``) to its canonical base.

  Returns:
    ``(base, slice_suffix)``, e.g. ``("validation", "[:50]")`` for ``"dev[:50]"``.

  Raises:
    tfrank4class.errors.InvalidConfigError (a ``ValueError``): the split is not a string or not
      one of ``allowed`` (or their aliases).
  """
  if not isinstance(split, str) or not split:
    raise errors.InvalidConfigError(f"`split` must be a split name such as 'train', got {split!r}.")
  base, bracket, rest = split.partition("[")
  suffix = bracket + rest
  for canonical, aliases in SPLIT_ALIASES.items():
    if base in aliases and canonical in allowed:
      return canonical, suffix
  spellings = sorted(a for c in allowed for a in SPLIT_ALIASES.get(c, (c,)))
  raise errors.InvalidConfigError(f"`split` must be one of {spellings}, got {split!r}.")


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


def file_stamp(path):
  """``(modification time in ns, size)`` of a file: part of a cache key that changes with it."""
  stat = os.stat(path)
  return stat.st_mtime_ns, stat.st_size


def read_rows(path, parse):
  """Parses a text data file one line at a time; returns ``(rows, dropped)``.

  The file is read as editors save it: a UTF-8 byte order mark at its start is dropped, and
  lines end with ``\\n`` or ``\\r\\n`` (or with a lone ``\\r`` in a file with no ``\\n``, as old
  Mac editors save). Every line, without its ending, is decoded as UTF-8 on its own and handed
  to ``parse``, which returns the row's value, ``None`` for a line that holds no row (left out),
  or raises ``ValueError`` saying what is wrong with the line. Line numbers are 1-based, as an
  editor shows them. ``apply_on_corrupt`` then acts on ``dropped``.

  Args:
    path: the file (``str`` or ``Path``).
    parse: ``str -> value or None``; raises ``ValueError`` for a malformed line.

  Returns:
    ``rows``: ``[(line number, value)]``; ``dropped``: ``[(line number, problem)]`` for the lines
    that are not UTF-8 or that ``parse`` refused.

  Example:
    >>> import tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "rows.txt")
    >>> with open(path, "wb") as f:
    ...   _ = f.write(b"1\\n\\xff\\n3\\n")
    >>> read_rows(path, int)
    ([(1, 1), (3, 3)], [(2, 'not valid UTF-8 (byte 0xff at byte 1 of the line)')])
  """
  rows, dropped = [], []
  with open(path, "rb") as f:
    content = f.read().removeprefix(codecs.BOM_UTF8)
  lines = content.split(b"\n") if b"\n" in content else content.split(b"\r")
  if lines[-1] == b"":
    lines.pop()  # after the last line's end, or an empty file
  for number, raw in enumerate(lines, start=1):
    raw = raw.rstrip(b"\r")
    try:
      value = parse(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
      dropped.append(
        (number, f"not valid UTF-8 (byte {raw[e.start]:#04x} at byte {e.start + 1} of the line)")
      )
    except ValueError as e:
      dropped.append((number, str(e)))
    else:
      if value is not None:
        rows.append((number, value))
  return rows, dropped


_REPORTED = set()


def apply_on_corrupt(path, kept, dropped, on_corrupt):
  """Acts on the ``dropped`` lines of ``read_rows`` as ``on_corrupt`` says.

  ``"error"``: raises ``MalformedRowError`` for the first one, naming the file, the line and the
  problem. ``"skip"``: prints one report on stderr, with the count and the first
  ``SKIP_REPORT_LINES`` lines and their problem, once per process and version of the file
  (``file_stamp``), however often the file is read.

  Args:
    path: the file read.
    kept: how many rows were kept (for the report).
    dropped: ``[(line number, problem)]``.
    on_corrupt: one of ``ON_CORRUPT``.

  Raises:
    ValueError: a bad ``on_corrupt``.
    MalformedRowError: with ``on_corrupt="error"`` and a dropped line.

  Example:
    >>> apply_on_corrupt("rows.txt", 2, [(2, "not valid UTF-8")], "error")
    Traceback (most recent call last):
    tfrank4class.data._common.MalformedRowError: rows.txt, line 2: not valid UTF-8
  """
  checks.check_choice("on_corrupt", on_corrupt, ON_CORRUPT)
  if not dropped:
    return
  if on_corrupt == "error":
    number, problem = dropped[0]
    raise MalformedRowError(f"{path}, line {number}: {problem}")
  key = (str(path), file_stamp(path))
  if key in _REPORTED:
    return
  _REPORTED.add(key)
  listed = "; ".join(f"line {n}: {p}" for n, p in dropped[:SKIP_REPORT_LINES])
  more = len(dropped) - SKIP_REPORT_LINES
  print(
    f"Skipped {len(dropped)} malformed line(s) of {path} (kept {kept} rows): {listed}"
    + (f"; and {more} more." if more > 0 else "."),
    file=sys.stderr,
    flush=True,
  )


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
    validation: what the validation split is, in words (the release's dev split, a folder, or
      the hold-out ``HOLDOUT``), never the test split; ``None`` for a dataset with no
      validation split (choosing a checkpoint on it then needs ``select_on_test``).

  Raises:
    InvalidConfigError: fewer than 2 classes (a ranking of one class is no ranking; an image
      folder with one class sub-folder is the usual cause).
  """

  def __init__(self, name, class_names, modality, source, data_dir, validation, image_size=None):
    self.name = name
    self.class_names = tuple(str(c) for c in class_names)
    if len(self.class_names) < 2:
      raise errors.InvalidConfigError(
        f"Dataset {name!r} in {data_dir} has {len(self.class_names)} class(es) "
        f"{list(self.class_names)}; classification as ranking needs at least 2 classes "
        "(an image folder holds <split>/<class>/<image>, one sub-folder per class)."
      )
    self.num_classes = len(self.class_names)
    self.modality = modality
    self.source = source
    self.data_dir = None if data_dir is None else str(data_dir)
    self.image_size = image_size
    self.validation = validation

  def __repr__(self):
    return (
      f"DatasetInfo(name={self.name!r}, num_classes={self.num_classes}, "
      f"modality={self.modality!r}, source={self.source!r}, data_dir={self.data_dir!r})"
    )


def tfds_builder(name, data_dir):
  """``tfds.builder`` that never touches the network (``try_gcs=False``)."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top

  return tfds.builder(name, data_dir=None if data_dir is None else str(data_dir), try_gcs=False)


def prepare_offline(builder, manual_dir):
  """``builder.download_and_prepare`` from the files in ``manual_dir`` only; returns ``builder``."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top

  config = tfds.download.DownloadConfig(manual_dir=str(manual_dir), try_download_gcs=False)
  builder.download_and_prepare(download_config=config)
  return builder


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
    return builder.as_dataset(
      split=tfds_split(split, options),
      shuffle_files=shuffle_files,
      decoders=decoders,
      read_config=read_config,
    )
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
