"""tf.data pipelines for classification-as-ranking datasets.

``load(name, split, data_dir)`` returns a batched, prefetched ``tf.data.Dataset`` of
``(features, label)``: images as float32 ``[B, H, W, 3]`` (normalised), text as ``tf.string [B]``,
labels as int64 class ids ``[B]`` (or multi-hot float32 ``[B, C]`` relevance for multi-label
GoEmotions). ``info(name, data_dir)`` gives the class names. ``serving_preprocess(name)`` is the
evaluation preprocessing as a pure TF function from raw serving inputs (encoded image bytes or
strings, ``[B]``) to model features, for use inside an exported SavedModel.

=====================  =========================================  ==============================
name                   sources (``source=``, detected if None)    validation split
=====================  =========================================  ==============================
``cifar10``            ``folder`` (train/, test/), ``tfds``       hold-out of train (or val/)
``cifar100``           ``folder``, ``tfds``                       hold-out of train (or val/)
``imagenet2012``       ``folder`` (train/, val/), ``tfds``        hold-out of train
``goemotions``         ``tsv`` (official files), ``tfds``         dev
``goemotions_sample``  ``tsv``, embedded in the package           dev
``mind``               ``tsv`` (news.tsv), ``tfds`` (builder)     60/20/20 by news-id hash
=====================  =========================================  ==============================

Every dataset has the splits ``train``, ``validation`` and ``test``, and its validation split is
never its test split. Where the release has none (CIFAR, ImageNet), ``validation`` is a fixed,
seeded hold-out of 10% of the training examples, left out of ``train``; ImageNet's ``test`` is the
official validation set (val/). ``info(name).validation`` says what the split is.

Example:
  >>> import tfrank4class.data as data
  >>> ds = data.load("goemotions_sample", "train", batch_size=4, deterministic=True)
  >>> texts, labels = next(iter(ds))
  >>> texts.shape, labels.dtype
  (TensorShape([4]), tf.int64)
  >>> data.info("goemotions_sample").class_names[27]
  'neutral'
"""

import collections
import os

os.environ.setdefault("NO_GCE_CHECK", "true")

from tfrank4class import compat  # noqa: E402

compat.require_tensorflow_backend("tfrank4class.data")  # the fence: tf.data is TensorFlow

from tfrank4class.data import (  # noqa: E402
  _common,
  cifar,
  goemotions,
  imagenet,
  mind,
  text,
)
from tfrank4class.data import options as options_lib  # noqa: E402
from tfrank4class.registry import Registry  # noqa: E402

DataNotFoundError = _common.DataNotFoundError
DatasetInfo = _common.DatasetInfo
EmptySplitError = _common.EmptySplitError
InputOptions = options_lib.InputOptions
MalformedRowError = _common.MalformedRowError
#: ``on_corrupt`` values every dataset takes (image datasets also take ``"unchecked"``).
ON_CORRUPT = _common.ON_CORRUPT
adapt_text_vectorization = text.adapt_text_vectorization
#: ``canonical_split("dev[:50]") == ("validation", "[:50]")``: a split name's canonical base.
canonical_split = _common.canonical_split

_IMAGE_KWARGS = ("on_corrupt",)


def _goemotions_sample_dir(data_dir):
  return goemotions.sample_dir() if data_dir is None else data_dir


def _tsv_only(source):
  if source not in (None, "tsv"):
    raise ValueError(f"`source` of 'goemotions_sample' must be 'tsv' or None, got {source!r}.")
  return "tsv"


#: What :data:`DATASETS` holds per dataset: ``load(split, data_dir, options, source=,
#: training=, **dataset_options)``, ``info(data_dir, source)``, the names of the dataset options
#: ``load`` takes, and ``serving_preprocess()``.
DatasetEntry = collections.namedtuple(
  "DatasetEntry", ["load", "info", "dataset_options", "serving_preprocess"]
)

#: The datasets by name (case-insensitive; alias ``imagenet`` -> ``imagenet2012``).
DATASETS = Registry(
  "dataset",
  fold_case=True,
  message=(
    "Unknown dataset `name` {value!r}; the known datasets are {names} (aliases: {aliases})."
  ),
)
DATASETS.add(
  "cifar10",
  DatasetEntry(
    lambda split, d, o, **kw: cifar.load("cifar10", split, d, o, **kw),
    lambda d, s: cifar.info("cifar10", d, s),
    _IMAGE_KWARGS,
    lambda: cifar.serving_preprocess("cifar10"),
  ),
)
DATASETS.add(
  "cifar100",
  DatasetEntry(
    lambda split, d, o, **kw: cifar.load("cifar100", split, d, o, **kw),
    lambda d, s: cifar.info("cifar100", d, s),
    _IMAGE_KWARGS,
    lambda: cifar.serving_preprocess("cifar100"),
  ),
)
DATASETS.add(
  "imagenet2012",
  DatasetEntry(imagenet.load, imagenet.info, _IMAGE_KWARGS, imagenet.serving_preprocess),
)
DATASETS.add(
  "goemotions",
  DatasetEntry(
    goemotions.load, goemotions.info, ("multi_label", "on_corrupt"), goemotions.serving_preprocess
  ),
)
DATASETS.add(
  "goemotions_sample",
  DatasetEntry(
    lambda split, d, o, **kw: goemotions.load(
      split,
      _goemotions_sample_dir(d),
      o,
      name=goemotions.SAMPLE_NAME,
      source=_tsv_only(kw.pop("source", None)),
      **kw,
    ),
    lambda d, s: goemotions.info(
      _goemotions_sample_dir(d), _tsv_only(s), name=goemotions.SAMPLE_NAME
    ),
    ("multi_label", "on_corrupt"),
    goemotions.serving_preprocess,
  ),
)
DATASETS.add("mind", DatasetEntry(mind.load, mind.info, ("on_corrupt",), mind.serving_preprocess))
DATASETS.add_alias("imagenet", "imagenet2012")


def names():
  """The dataset names ``load`` and ``info`` accept (aliases: ``imagenet`` -> ``imagenet2012``)."""
  return DATASETS.names()


def modality(name):
  """``"image"`` or ``"text"``: what the features of dataset ``name`` are."""
  key, _ = _entry(name)
  return "image" if key in ("cifar10", "cifar100", "imagenet2012") else "text"


def _entry(name):
  key, entry, _ = DATASETS.resolve(name)
  return key, entry


def load(
  name, split, data_dir=None, batch_size=32, *, source=None, training=None, options=None, **kwargs
):
  """Returns a batched, prefetched ``tf.data.Dataset`` of ``(features, label)``.

  Args:
    name: a dataset name, see ``names()``.
    split: ``"train"``, ``"validation"`` (``"dev"``, ``"val"``) or ``"test"`` (every dataset has
      the three); TFDS sources also take slices such as ``"train[:10%]"`` (not of a hold-out).
    data_dir: where the data is (an image folder, the TSV files, or a TFDS data directory);
      ``None`` means the TFDS default directory, or the embedded files for ``goemotions_sample``.
    batch_size: the GLOBAL batch size. With ``input_context`` each pipeline yields batches of
      ``input_context.get_per_replica_batch_size(batch_size)``: pass the global size, not a
      per-replica one (it would be divided twice).
    source: force a source (``"folder"``, ``"tfds"``, ``"tsv"``); detected from ``data_dir``
      when None.
    training: training pipeline (augmentation, shuffling); default: the split is ``train``.
    options: an ``InputOptions``; keyword arguments below override its fields.
    **kwargs: ``InputOptions`` fields (``shuffle``, ``shuffle_buffer``, ``shuffle_seed``,
      ``cache``, ``deterministic``, ``drop_remainder``, ``repeat``, ``num_parallel_calls``,
      ``prefetch``, ``input_context``, ``num_shards``, ``shard_index``) and dataset options:
      ``on_corrupt`` (every dataset: ``"error"`` or ``"skip"`` an undecodable image or a
      malformed text line; image datasets also ``"unchecked"``) and ``multi_label``
      (GoEmotions).

  Raises:
    ValueError: unknown dataset, split, source or option (the message lists the allowed ones).
    DataNotFoundError: the data is not in ``data_dir`` (the message names the path and how to
      get the data).
    EmptySplitError: a text split read from files (GoEmotions, MIND) holds no example.
  """
  key, (loader, _, extra, _) = _entry(name)
  option_fields = set(InputOptions.__dataclass_fields__)
  dataset_kwargs = {k: v for k, v in kwargs.items() if k in extra}
  option_kwargs = {k: v for k, v in kwargs.items() if k not in extra}
  unknown = sorted(set(option_kwargs) - option_fields)
  if unknown:
    raise ValueError(
      f"Unknown argument(s) {unknown} for dataset {key!r}; allowed: dataset options "
      f"{sorted(extra)} and input options {sorted(option_fields - {'batch_size'})}."
    )
  if options is None or batch_size != 32:
    option_kwargs["batch_size"] = batch_size
  opts = options_lib.make_options(options, **option_kwargs)
  return loader(split, data_dir, opts, source=source, training=training, **dataset_kwargs)


def info(name, data_dir=None, source=None):
  """``DatasetInfo`` (``num_classes``, ``class_names``, modality, source, what the validation
  split is) of a dataset."""
  _, (_, info_fn, _, _) = _entry(name)
  return info_fn(data_dir, source)


def serving_preprocess(name):
  """The eval-time preprocessing of ``name`` as a function of a batch of raw serving inputs.

  * image datasets: encoded JPEG/PNG/BMP/GIF bytes ``tf.string [B]`` -> float32
    ``[B, H, W, 3]``, exactly the evaluation preprocessing of ``load`` (decode, resize/crop,
    normalise);
  * text datasets: ``tf.string [B]`` -> ``tf.string [B]`` (models vectorise raw strings
    themselves; for ``mind`` the string is ``title [SEP] abstract``, see ``mind.join_text``).

  The function is pure TensorFlow: call it inside a ``tf.function`` serving signature.
  """
  _, (_, _, _, serving) = _entry(name)
  return serving()
