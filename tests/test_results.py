"""The result tables: the validation split of each dataset, and the plain-text table."""

import tensorflow as tf
from _training import tiny

from tfrank4class.train import results


def test_validation_split_is_test_only_where_the_dataset_has_no_validation_split():
  assert results.validation_split("cifar10") == "test"
  assert results.validation_split("cifar100") == "test"
  assert results.validation_split("goemotions_sample") == "validation"


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
  assert values == pytest.approx(
    {"top_1": 0.5, "top_5": 1.0, "ndcg_5": (1.0 + 1.0 / math.log2(3.0)) / 2.0, "mrr": 0.75}
  )
  assert list(results.evaluate_batches(lambda f, training: f, batches, ("mrr",))) == ["mrr"]


def test_evaluate_splits_reports_the_metrics_of_the_config():
  # goemotions_sample ships with the package; a "model" scoring class c as c
  def model(features, training):
    del training
    return tf.tile(tf.range(28, dtype=tf.float32)[None], [tf.shape(features)[0], 1])

  config = tiny(metrics=("map", "recall_5", "top_1"), best_metric="map")
  rows = results.evaluate_splits(model, config)
  assert [split for split, _ in rows] == ["validation", "test"]
  for _, values in rows:
    assert list(values) == ["map", "recall_5", "top_1"]
