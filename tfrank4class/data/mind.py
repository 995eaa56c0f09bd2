"""MIND news-category classification (Wu et al., ACL 2020), as in Rank4Class Appendix A.

Each article of MIND's ``news.tsv`` (columns: news id, category, subcategory, title, abstract, url,
title entities, abstract entities) becomes one example:

    text  = title + SEPARATOR + abstract      (just the title when the abstract is empty)
    label = class id of the category          (class names: the sorted categories in the data)

MIND ships no split for news classification, so the articles are split 60/20/20 by a hash of the
news id, the same on every run and every machine, whatever the row order::

    bucket(id) = int(md5(id as UTF-8).hexdigest(), 16) mod 100
    split      = train if bucket < 60, validation if bucket < 80, else test

Sources (``source=None`` detects them):
  * ``"tsv"``: ``data_dir`` holds ``news.tsv`` (or sub-folders such as ``MINDsmall_train/`` and
    ``MINDsmall_dev/`` each with one; articles present in several are read once). Read directly.
  * ``"tfds"``: the TFDS dataset ``mind`` (builder ``Mind`` below) prepared in ``data_dir`` from a
    manual directory holding the same files::

        tfds.builder("mind", data_dir=out).download_and_prepare(
            download_config=tfds.download.DownloadConfig(manual_dir=folder_with_news_tsv))

Both use the same reader and split rule, so they give the same examples. The reader takes one
article per line (UTF-8); a malformed line stops it with the file and line number, or with
``on_corrupt="skip"`` is dropped and reported (see ``read_news``).

Example:
  >>> split_of("N34700")  # doctest: +SKIP
  'train'
"""

import functools
import hashlib
import os
import pathlib

os.environ.setdefault("NO_GCE_CHECK", "true")

import tensorflow as tf  # noqa: E402
import tensorflow_datasets as tfds  # noqa: E402

from tfrank4class import checks  # noqa: E402
from tfrank4class.data import _common  # noqa: E402
from tfrank4class.data import options as options_lib  # noqa: E402

NAME = "mind"
SEPARATOR = " [SEP] "
SPLIT_PERCENT = {"train": (0, 60), "validation": (60, 80), "test": (80, 100)}
#: What the validation split is (``DatasetInfo.validation``).
VALIDATION = "the articles whose md5(news id) mod 100 is in [60, 80) (the 60/20/20 split)"
SOURCES = ("tsv", "tfds")
HOW = (
  "Download MIND (https://msnews.github.io, Microsoft Research License; e.g. MINDsmall_train."
  "zip), unzip it and pass the folder holding news.tsv as `data_dir` (source 'tsv'), or as "
  "the "
  "manual_dir of `tfds.builder('mind', data_dir=...).download_and_prepare(download_config="
  "tfds.download.DownloadConfig(manual_dir=...))` (source 'tfds')."
)


MalformedRowError = _common.MalformedRowError


def bucket_of(news_id):
  """The hash bucket in ``[0, 100)`` of a news id (see the module docstring)."""
  return int(hashlib.md5(news_id.encode("utf-8")).hexdigest(), 16) % 100


def split_of(news_id):
  """``"train"``, ``"validation"`` or ``"test"``: the 60/20/20 split of a news id."""
  b = bucket_of(news_id)
  for split, (lo, hi) in SPLIT_PERCENT.items():
    if lo <= b < hi:
      return split
  raise AssertionError(b)  # unreachable: the ranges cover [0, 100)


def join_text(title, abstract, separator=SEPARATOR):
  """``title + separator + abstract``, or just ``title`` if the abstract is empty."""
  title, abstract = title.strip(), abstract.strip()
  return title + separator + abstract if abstract else title


def news_files(folder):
  """The ``news.tsv`` files in ``folder`` or its direct sub-folders, sorted."""
  folder = pathlib.Path(folder)
  if (folder / "news.tsv").is_file():
    return [folder / "news.tsv"]
  return sorted(p for p in folder.glob("*/news.tsv") if p.is_file())


def read_news(folder, on_corrupt="error"):
  """Reads MIND articles: ``{news_id: (category, title, abstract)}`` in first-seen order.

  Each file is read one line at a time (``_common.read_rows``); a line is malformed when it is
  not UTF-8, has fewer than 5 tab-separated fields, an empty id or category, or repeats an id
  seen before with a different category. The files are parsed once per process until they
  change (the result is shared: do not modify it).

  Args:
    folder: a folder with ``news.tsv``, or sub-folders with one each (``news_files``).
    on_corrupt: ``"error"``: a malformed line raises ``MalformedRowError`` naming the file and
      the 1-based line. ``"skip"``: malformed lines are dropped, and counted and named on stderr
      once per process (``_common.apply_on_corrupt``).

  Raises:
    DataNotFoundError: no ``news.tsv`` in ``folder`` or its sub-folders, or no line parses.
    MalformedRowError: with ``on_corrupt="error"``, as above.
  """
  articles, dropped = _parse_news(folder)
  for path, (kept, lines) in dropped.items():
    _common.apply_on_corrupt(path, kept, lines, on_corrupt)
  return articles


def _parse_news(folder):
  """``(articles, {path: (rows kept, dropped lines)})`` of the news files in ``folder``."""
  folder = _common.require_dir(folder, "MIND news.tsv", HOW)
  files = news_files(folder)
  if not files:
    raise _common.missing_data(folder / "news.tsv", "MIND news.tsv", HOW)
  return _parse_news_cached(tuple((str(p), _common.file_stamp(p)) for p in files))


@functools.lru_cache(maxsize=16)
def _parse_news_cached(files):
  articles = {}

  def parse(line):
    if not line:
      return None
    fields = line.split("\t")
    if len(fields) < 5:
      raise ValueError(
        f"expected at least 5 tab-separated fields (id, category, subcategory, "
        f"title, abstract), got {len(fields)}."
      )
    news_id, category, _, title, abstract = (s.strip() for s in fields[:5])
    if not news_id or not category:
      raise ValueError("empty news id or category.")
    if news_id in articles and articles[news_id][0] != category:
      raise ValueError(
        f"news id {news_id!r} was seen before with category "
        f"{articles[news_id][0]!r}, now {category!r}."
      )
    articles.setdefault(news_id, (category, title, abstract))
    return news_id

  dropped = {}
  for path, _ in files:
    rows, lines = _common.read_rows(path, parse)
    dropped[path] = (len(rows), lines)
  if not articles:
    raise _common.missing_data(files[0][0], "MIND articles (no line of the files parses)", HOW)
  return articles, dropped


def categories(articles):
  """Sorted distinct categories: the class names."""
  return tuple(sorted({cat for cat, _, _ in articles.values()}))


def split_examples(articles, split):
  """``(news_ids, texts, labels)`` of one split, in news-id order."""
  names = categories(articles)
  index = {c: i for i, c in enumerate(names)}
  ids = sorted(i for i in articles if split_of(i) == split)
  texts = [join_text(articles[i][1], articles[i][2]) for i in ids]
  labels = [index[articles[i][0]] for i in ids]
  return ids, texts, labels


class Mind(tfds.core.GeneratorBasedBuilder):
  """TFDS builder of MIND news-category classification (manual download; see module docstring)."""

  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "Title [SEP] abstract -> category; 60/20/20 split by md5(news id)."}
  MANUAL_DOWNLOAD_INSTRUCTIONS = (
    "Download MIND from https://msnews.github.io (Microsoft Research License Terms), unzip it, "
    "and put news.tsv (or the unzipped MIND*_train/ and MIND*_dev/ folders, each with a "
    "news.tsv) in the manual directory (`tfds.download.DownloadConfig(manual_dir=...)`, "
    "by default <data_dir>/downloads/manual/)."
  )

  def _info(self):
    return self.dataset_info_from_configs(
      features=tfds.features.FeaturesDict(
        {
          "news_id": tfds.features.Text(),
          "text": tfds.features.Text(),
          "title": tfds.features.Text(),
          "abstract": tfds.features.Text(),
          "category": tfds.features.Text(),
          # Names are set from the data in _split_generators (sorted categories).
          "label": tfds.features.ClassLabel(),
        }
      ),
      supervised_keys=("text", "label"),
      homepage="https://msnews.github.io",
      citation=(
        "@inproceedings{wu2020mind, title={MIND: A Large-scale Dataset for News "
        "Recommendation}, author={Wu, Fangzhao and others}, booktitle={ACL}, "
        "year={2020}}"
      ),
    )

  def _split_generators(self, dl_manager):
    articles = read_news(dl_manager.manual_dir)
    self.info.features["label"].names = list(categories(articles))
    return {split: self._generate_examples(articles, split) for split in SPLIT_PERCENT}

  def _generate_examples(self, articles, split):
    ids, texts, labels = split_examples(articles, split)
    for news_id, text, label in zip(ids, texts, labels):
      _, title, abstract = articles[news_id]
      yield (
        news_id,
        {
          "news_id": news_id,
          "text": text,
          "title": title,
          "abstract": abstract,
          "category": articles[news_id][0],
          "label": label,
        },
      )


def prepare(manual_dir, data_dir):
  """Prepares TFDS ``mind`` into ``data_dir`` from ``manual_dir`` (offline); returns the builder."""
  manual = _common.require_dir(manual_dir, "MIND news.tsv", HOW)
  if not news_files(manual):
    raise _common.missing_data(manual / "news.tsv", "MIND news.tsv", HOW)
  return _common.prepare_offline(Mind(data_dir=str(data_dir)), manual)


def detect_source(data_dir):
  """``"tsv"`` if ``data_dir`` holds news.tsv, ``"tfds"`` if TFDS ``mind`` is prepared there."""
  if data_dir is None:
    return "tfds"
  path = _common.require_dir(data_dir, "MIND data", HOW)
  if news_files(path):
    return "tsv"
  if (path / NAME).is_dir():
    return "tfds"
  raise _common.missing_data(path, "MIND news.tsv or prepared TFDS 'mind'", HOW)


def info(data_dir=None, source=None):
  """``DatasetInfo`` of MIND: the sorted categories of the data as class names.

  The TSV source takes the categories of the lines that parse: whether a malformed line is an
  error is for ``load`` (its ``on_corrupt``) to say.
  """
  source = checks.check_choice("source", source or detect_source(data_dir), SOURCES)
  if source == "tsv":
    names = categories(_parse_news(data_dir)[0])
  else:
    builder = Mind(data_dir=None if data_dir is None else str(data_dir))
    if not builder.is_prepared():
      raise _common.missing_data(data_dir or builder.data_dir, "prepared TFDS 'mind'", HOW)
    names = builder.info.features["label"].names
  return _common.DatasetInfo(NAME, names, "text", source, data_dir, VALIDATION)


def load(split, data_dir, options, source=None, training=None, on_corrupt="error"):
  """Batched ``(tf.string [B], int64 [B])`` of a MIND split; see the module docstring.

  ``on_corrupt`` (``"error"`` or ``"skip"``) is passed to ``read_news`` for the TSV source; TFDS
  data is parsed already, so there the value is only checked.
  """
  checks.check_choice("on_corrupt", on_corrupt, _common.ON_CORRUPT)
  source = checks.check_choice("source", source or detect_source(data_dir), SOURCES)
  base, suffix = _common.canonical_split(split)
  training = base == "train" if training is None else bool(training)
  if source == "tsv":
    if suffix:
      raise ValueError(f"`split` slices such as {split!r} need source='tfds'.")
    _, texts, labels = split_examples(read_news(data_dir, on_corrupt), base)
    _common.require_examples(
      len(texts), "MIND", base, data_dir, "article of news.tsv falling in it"
    )
    records = options_lib.shard_dataset(
      tf.data.Dataset.from_tensor_slices((texts, tf.constant(labels, tf.int64))), options
    )
  else:
    builder = Mind(data_dir=None if data_dir is None else str(data_dir))
    if not builder.is_prepared():
      raise _common.missing_data(data_dir or builder.data_dir, "prepared TFDS 'mind'", HOW)
    read_config = tfds.ReadConfig(shuffle_seed=options.seed, try_autocache=False)
    records = builder.as_dataset(
      split=_common.tfds_split(base + suffix, options),
      shuffle_files=options.should_shuffle(training),
      read_config=read_config,
    )
    records = records.map(lambda ex: (ex["text"], ex["label"]))

  return options_lib.build_pipeline(records, None, None, options, training)


def serving_preprocess():
  """``tf.string [B] -> tf.string [B]`` (already ``title [SEP] abstract``, see ``join_text``)."""
  return _common.text_serving_preprocess("MIND")
