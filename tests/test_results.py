"""The result tables: the split that picks the best checkpoint (never test), the plain-text
table."""

import numpy as np
import pytest
import tensorflow as tf
from _training import tiny

from tfrank4class import data, errors
from tfrank4class.data import DatasetInfo
from tfrank4class.train import results


def _image_folder(root, splits):
  """``root/<split>/c<k>/<i>.png`` of 8x8 images of one colour each, all different."""
  i = 0
  for split in splits:
    for k in range(3):
      for _ in range(20):
        path = root / split / f"c{k}" / f"{i:03d}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        colour = np.zeros((8, 8, 3), np.uint8) + [i % 256, i // 256, 7]
        path.write_bytes(tf.io.encode_png(colour.astype(np.uint8)).numpy())
        i += 1
  return root


def _small_data(name, tmp_path, datasets_dir):
  """A small ``data_dir`` for each registered dataset; a new dataset must be added here."""
  folders = {
    "cifar10": ("train", "test"),
    "cifar100": ("train", "test"),
    "imagenet2012": ("train", "val"),
  }
  if name in folders:
    return _image_folder(tmp_path / name, folders[name])
  if name == "goemotions":  # the first 2,000 rows of each official file
    (tmp_path / name).mkdir()
    for file in ("train.tsv", "dev.tsv", "test.tsv", "emotions.txt"):
      lines = (datasets_dir / name / file).read_text(encoding="utf-8").splitlines(keepends=True)
      (tmp_path / name / file).write_text("".join(lines[:2000]), encoding="utf-8")
    return tmp_path / name
  dirs = {
    "goemotions_sample": None,
    "mind": datasets_dir / "mind_sample",
  }
  assert name in dirs, f"Add small data for the new dataset {name!r} to this test."
  return dirs[name]


def _examples(name, split, data_dir):
  """Each example's features, as bytes, in evaluation order."""
  ds = data.load(name, split, data_dir, batch_size=4096, training=False)
  return [np.asarray(x).tobytes() for features, _ in ds for x in features.numpy()]


def test_no_dataset_picks_its_checkpoint_on_its_test_split(tmp_path, datasets_dir):
  # Every registered dataset, so that a new one is covered: its selection split is not `test`,
  # and its validation examples are neither its test examples nor its training examples.
  for name in data.names():
    data_dir = _small_data(name, tmp_path, datasets_dir)
    info = data.info(name, data_dir)
    assert results.selection_split(info) == "validation" and info.validation, name
    val, test, train = (_examples(name, s, data_dir) for s in ("validation", "test", "train"))
    assert val and test and train, name
    # Published splits may repeat a short text ("Thank you!"); less than 1% of validation.
    assert len(set(val) & set(test)) < 0.01 * len(val), name
    assert len(set(val) & set(train)) < 0.01 * len(val), name


def test_selecting_on_test_needs_select_on_test():
  info = data.info("goemotions_sample")
  assert results.selection_split(info, select_on_test=True) == "test"
  bare = DatasetInfo("bare", ["a", "b"], "text", "tsv", None, validation=None)
  with pytest.raises(
    errors.InvalidConfigError, match=r"'bare' has no validation split.*--select_on_test"
  ):
    results.selection_split(bare)
  assert results.selection_split(bare, select_on_test=True) == "test"


def test_format_table_aligns_labels_and_prints_four_decimals():
  rows = [("validation", {"top_1": 0.5, "mrr": 0.25}), ("test", {"top_1": 1.0, "mrr": 0.125})]
  assert results.format_table(rows, ["top_1", "mrr"]).splitlines() == [
    "run            top_1       mrr",
    "------------------------------",
    "validation    0.5000    0.2500",
    "test          1.0000    0.1250",
  ]


def test_evaluate_batches_accumulates_over_batches_against_hand_computed_metrics():
  import math

  import numpy as np
  import pytest

  # the "model" returns the batch's features as scores; example 1 ranks its class first, example 2
  # ranks its class second (scores 0.9, 0.3, 0.4 and class 2)
  batches = [
    (np.array([[0.1, 0.5, 0.2]], np.float32), np.array([1])),
    (np.array([[0.9, 0.3, 0.4]], np.float32), np.array([2])),
  ]
  values = results.evaluate_batches(lambda features, training: features, batches)
  # the default top_5 is left out of three-class lists (it would be 1 for every list)
  assert values == pytest.approx(
    {"top_1": 0.5, "ndcg_5": (1.0 + 1.0 / math.log2(3.0)) / 2.0, "mrr": 0.75}
  )
  assert list(results.evaluate_batches(lambda f, training: f, batches, ("mrr",))) == ["mrr"]
  assert results.evaluate_batches(lambda f, training: f, batches, ("top_3",)) == {"top_3": 1.0}
  with pytest.raises(ValueError, match="`metrics` names 'top_4'.*3 classes"):
    results.evaluate_batches(lambda f, training: f, batches, ("top_1", "top_4"))
  # no batch: no classes to fit the names to, every metric's empty result
  assert results.evaluate_batches(lambda f, training: f, [], ("top_5", "mrr")) == {
    "top_5": 0.0,
    "mrr": 0.0,
  }


def test_evaluate_splits_reports_the_metrics_of_the_config():
  # goemotions_sample ships with the package; a "model" scoring class c as c
  def model(features, training):
    del training
    return tf.tile(tf.range(28, dtype=tf.float32)[None], [tf.shape(features)[0], 1])

  config = tiny(metrics=("map", "recall_5", "top_1"), best_metric="map")
  rows = results.evaluate_splits(model, config, data.info(config.dataset))
  assert [split for split, _ in rows] == ["validation", "test"]
  for _, values in rows:
    assert list(values) == ["map", "recall_5", "top_1"]
