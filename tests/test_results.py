"""The result tables: the validation split of each dataset, and the plain-text table."""

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
