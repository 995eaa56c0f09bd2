"""GoEmotions (Demszky et al., ACL 2020): Reddit comments labelled with 27 emotions + neutral.

Sources (``source=None`` detects them):
  * ``"tsv"``: the official release files in ``data_dir``: ``train.tsv``, ``dev.tsv``, ``test.tsv``
    (one row per line, ``text<TAB>comma-separated label ids<TAB>comment id``, UTF-8, ``"``
    quoting; a quoted text closes on its own line, as in the release) and ``emotions.txt`` (the
    28 names in id order, 27 = neutral). A line that does not parse stops the read with the file
    and line number, or with ``on_corrupt="skip"`` is dropped and reported.
  * ``"tfds"``: TFDS ``goemotions`` prepared in ``data_dir`` (one bool feature per emotion); the
    class ids follow ``EMOTIONS`` (the order of ``emotions.txt``), not TFDS's alphabetical keys.

Labels:
  * default (``multi_label=False``): only the rows with exactly one label, as in the Rank4Class
    paper (train 36,308 / dev 4,548 / test 4,590 of 43,410 / 5,426 / 5,427 rows); the label is
    the int64 class id.
  * ``multi_label=True``: every row, the label is a multi-hot float32 relevance vector ``[28]``
    (``r_c = 1`` if emotion ``c`` was annotated), ready for the ranking losses.

Features are the raw comment text as a scalar ``tf.string``; see ``tfrank4class.data.text`` to
vectorise it inside the model.

The dataset name ``goemotions_sample`` reads the Apache-2.0 slice shipped in
``tfrank4class/resources/goemotions_sample`` (same format) when no ``data_dir`` is given;
``goemotions`` itself never falls back to it.

Example:
  >>> ds = load("train", "/data/goemotions", options.InputOptions(batch_size=32))  # doctest: +SKIP
"""

import csv
import functools
import importlib.resources
import pathlib

import numpy as np
import tensorflow as tf

from tfrank4class import checks
from tfrank4class.data import _common
from tfrank4class.data import options as options_lib

NAME = "goemotions"
SAMPLE_NAME = "goemotions_sample"
EMOTIONS = (
  "admiration",
  "amusement",
  "anger",
  "annoyance",
  "approval",
  "caring",
  "confusion",
  "curiosity",
  "desire",
  "disappointment",
  "disapproval",
  "disgust",
  "embarrassment",
  "excitement",
  "fear",
  "gratitude",
  "grief",
  "joy",
  "love",
  "nervousness",
  "optimism",
  "pride",
  "realization",
  "relief",
  "remorse",
  "sadness",
  "surprise",
  "neutral",
)
SOURCES = ("tsv", "tfds")
SPLIT_FILES = {"train": "train.tsv", "validation": "dev.tsv", "test": "test.tsv"}
#: What the validation split is (``DatasetInfo.validation``).
VALIDATION = "the release's dev split (dev.tsv)"
HOW = (
  "Download the official GoEmotions files train.tsv, dev.tsv, test.tsv and emotions.txt from "
  "https://github.com/google-research/google-research/tree/master/goemotions/data into one "
  "folder and pass it as `data_dir`, or prepare TFDS 'goemotions' there "
  "(`tfds.builder('goemotions', data_dir=...).download_and_prepare()` with network access). "
  "A small slice ships with the package as the dataset 'goemotions_sample'."
)


def sample_dir():
  """The folder of the embedded ``goemotions_sample`` data inside the installed package."""
  return pathlib.Path(
    str(importlib.resources.files("tfrank4class").joinpath("resources", "goemotions_sample"))
  )


MalformedRowError = _common.MalformedRowError


def read_emotions(path):
  """Reads ``emotions.txt``: one name per line, in class id order (UTF-8 with or without a byte
  order mark, any line ends)."""
  path = pathlib.Path(path)
  if not path.is_file():
    raise _common.missing_data(path, "GoEmotions emotions.txt", HOW)
  names = [line.strip() for line in path.read_text(encoding="utf-8-sig").splitlines()]
  names = [n for n in names if n]
  if len(names) < 2:
    raise MalformedRowError(f"{path}: expected one emotion name per line, got {names!r}.")
  return tuple(names)


def parse_row(line, num_classes):
  """One line of a GoEmotions TSV file -> ``(text, label ids, comment id)``.

  Raises:
    ValueError: the line is not 3 tab-separated fields with balanced ``"`` quoting, the label
      ids are not comma-separated integers in ``[0, num_classes)``, or the id is empty.

  Example:
    >>> parse_row('"a ""b"" c"\\t3,4\\tid1', 28)
    ('a "b" c', [3, 4], 'id1')
  """
  try:
    row = next(csv.reader([line], delimiter="\t", quotechar='"', strict=True), [])
  except csv.Error as e:
    raise ValueError(
      f"unbalanced or misplaced quote ({e}): a field that opens with '\"' must "
      "close with '\"' on the same line, right before a tab or the line end"
    ) from None
  if len(row) != 3:
    raise ValueError(
      f"expected 3 tab-separated fields (text, label ids, id), got {len(row)}: {row!r}."
    )
  text, label_field, comment_id = row
  try:
    ids = [int(t) for t in label_field.split(",")]
  except ValueError:
    raise ValueError(f"label ids must be comma-separated integers, got {label_field!r}.") from None
  bad = [i for i in ids if not 0 <= i < num_classes]
  if bad:
    raise ValueError(f"label ids must be in [0, {num_classes}), got {bad}.")
  if not comment_id.strip():
    raise ValueError("the comment id (3rd field) is empty.")
  return text, ids, comment_id


def read_tsv(path, num_classes, on_corrupt="error"):
  """Parses a GoEmotions TSV file, one row per line (``parse_row``).

  Returns:
    ``(texts, label_ids, comment_ids)``: lists of str, lists of int, and str.

  Raises:
    DataNotFoundError: the file is missing.
    MalformedRowError: with ``on_corrupt="error"``, a line that is not UTF-8 or that
      ``parse_row`` refuses; the message names the file and the 1-based line. With
      ``on_corrupt="skip"`` such lines are dropped and reported on stderr, once per process
      (``_common.apply_on_corrupt``).
  """
  path = pathlib.Path(path)
  if not path.is_file():
    raise _common.missing_data(path, "GoEmotions TSV file", HOW)
  rows, dropped = _read_cached(str(path), _common.file_stamp(path), num_classes)
  _common.apply_on_corrupt(path, len(rows), dropped, on_corrupt)
  return [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows]


@functools.lru_cache(maxsize=16)
def _read_cached(path, stamp, num_classes):
  """``(rows, dropped)`` of a file; ``stamp`` (``file_stamp``) is only part of the cache key."""
  del stamp
  rows, dropped = _common.read_rows(path, functools.partial(parse_row, num_classes=num_classes))
  return [row for _, row in rows], dropped


def detect_source(data_dir):
  """``"tsv"`` if ``data_dir`` has the TSV files, ``"tfds"`` if it has TFDS data; else raises."""
  if data_dir is None:
    return "tfds"
  path = _common.require_dir(data_dir, "GoEmotions data", HOW)
  if (path / "train.tsv").is_file() or (path / "emotions.txt").is_file():
    return "tsv"
  if (path / NAME).is_dir():
    return "tfds"
  raise _common.missing_data(
    path,
    "GoEmotions files (train.tsv, dev.tsv, test.tsv, emotions.txt) or prepared TFDS 'goemotions'",
    HOW,
  )


def info(data_dir=None, source=None, name=NAME):
  """``DatasetInfo`` of GoEmotions: 28 class names, ``neutral`` = 27."""
  source = checks.check_choice("source", source or detect_source(data_dir), SOURCES)
  if source == "tsv":
    path = _common.require_dir(data_dir, "GoEmotions TSV files", HOW)
    names = read_emotions(path / "emotions.txt")
  else:
    names = EMOTIONS
  return _common.DatasetInfo(name, names, "text", source, data_dir, VALIDATION)


def examples(split, data_dir, multi_label=False, on_corrupt="error"):
  """The in-memory ``(texts, labels)`` of a TSV split (numpy), before sharding.

  ``labels`` is int64 ``[N]`` of the single-label rows, or multi-hot float32 ``[N, C]`` of all
  rows with ``multi_label=True``. ``on_corrupt`` as in ``read_tsv``, which parses a file once per
  process until it changes.

  Raises:
    EmptySplitError: the split has no (single-label) row.
  """
  base, suffix = _common.canonical_split(split)
  if suffix:
    raise ValueError(
      f"`split` slices such as {split!r} need source='tfds'; the TSV source takes "
      "'train', 'validation' ('dev') or 'test'."
    )
  path = _common.require_dir(data_dir, "GoEmotions TSV files", HOW)
  names = read_emotions(path / "emotions.txt")
  file = path / SPLIT_FILES[base]
  if not file.is_file():
    raise _common.missing_data(file, f"GoEmotions {SPLIT_FILES[base]}", HOW)
  texts, label_ids, _ = read_tsv(file, len(names), on_corrupt)
  keep = [i for i, ids_ in enumerate(label_ids) if multi_label or len(ids_) == 1]
  rows = "rows" if multi_label else "single-label rows"
  _common.require_examples(len(keep), "GoEmotions", base, file, rows)
  if multi_label:
    relevance = np.zeros([len(texts), len(names)], np.float32)
    for row, ids_ in enumerate(label_ids):
      relevance[row, ids_] = 1.0
    return np.array(texts, dtype=object), relevance
  return (
    np.array([texts[i] for i in keep], dtype=object),
    np.array([label_ids[i][0] for i in keep], np.int64),
  )


def load(
  split,
  data_dir,
  options,
  source=None,
  training=None,
  multi_label=False,
  name=NAME,
  on_corrupt="error",
):
  """Batched ``(tf.string [B], labels)`` of a GoEmotions split; see the module docstring.

  Args:
    split: ``"train"``, ``"validation"`` (``"dev"``) or ``"test"``.
    data_dir: folder with the TSV files, or a TFDS data directory.
    options: ``InputOptions``.
    source: ``"tsv"``, ``"tfds"`` or None (detect).
    training: shuffle by default; default: ``split`` starts with ``train``.
    multi_label: all rows with multi-hot float32 ``[B, 28]`` labels instead of the single-label
      rows with int64 ``[B]`` ids.
    on_corrupt: TSV lines that are not UTF-8 or do not parse: ``"error"`` (``MalformedRowError``
      naming the file and line) or ``"skip"`` (dropped, counted and named on stderr). TFDS
      data is parsed already: the value is only checked.
  """
  if not isinstance(multi_label, bool):
    raise ValueError(f"`multi_label` must be True or False, got {multi_label!r}.")
  checks.check_choice("on_corrupt", on_corrupt, _common.ON_CORRUPT)
  source = checks.check_choice("source", source or detect_source(data_dir), SOURCES)
  base, suffix = _common.canonical_split(split)
  training = base == "train" if training is None else bool(training)
  if source == "tsv":
    texts, labels = examples(split, data_dir, multi_label, on_corrupt)
    records = options_lib.shard_dataset(
      tf.data.Dataset.from_tensor_slices((texts.astype(str).tolist(), labels)), options
    )
  else:
    records = _common.tfds_read(NAME, base + suffix, data_dir, options, training, HOW)
    records = records.map(_tfds_to_relevance, num_parallel_calls=options.num_parallel_calls)
    if not multi_label:
      records = records.filter(lambda text, r: tf.equal(tf.reduce_sum(r), 1.0))
      records = records.map(lambda text, r: (text, tf.argmax(r, output_type=tf.int64)))

  return options_lib.build_pipeline(records, None, None, options, training)


def _tfds_to_relevance(example):
  """TFDS example -> (comment_text, multi-hot float32 [28] in ``EMOTIONS`` order)."""
  relevance = tf.stack([tf.cast(example[e], tf.float32) for e in EMOTIONS])
  return example["comment_text"], relevance


def serving_preprocess():
  """``text tf.string [B] -> text tf.string [B]``: the model vectorises raw strings itself."""
  return _common.text_serving_preprocess("GoEmotions")
