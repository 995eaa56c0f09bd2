"""benchmarks/split_arrays.py: whole splits in memory, stratified hold-out."""

import collections
import doctest
import hashlib

import numpy as np
import pytest
import split_arrays as arrays


def _reference_mind(path, split):
  """(texts, category names) of a MIND split, read with plain Python."""
  rows = []
  with open(path / "news.tsv", encoding="utf-8") as f:
    for line in f:
      fields = line.rstrip("\n").split("\t")
      b = int(hashlib.md5(fields[0].encode()).hexdigest(), 16) % 100
      if {"train": b < 60, "validation": 60 <= b < 80, "test": b >= 80}[split]:
        rows.append(fields)
  return sorted(rows, key=lambda r: r[0])  # the MIND pipeline yields a split in news-id order


@pytest.mark.parametrize("split", ["train", "validation", "test"])
def test_to_numpy_reads_a_whole_split_in_its_order(datasets_dir, split):
  path = datasets_dir / "mind_sample"
  texts, labels = arrays.to_numpy("mind", split, path, batch_size=97)
  rows = _reference_mind(path, split)
  categories = sorted(
    {
      r[1]
      for r in _reference_mind(path, "train")
      + _reference_mind(path, "validation")
      + _reference_mind(path, "test")
    }
  )
  assert texts.dtype == object and labels.dtype == np.int64
  assert len(texts) == len(labels) == len(rows)
  assert [categories[i] for i in labels] == [r[1] for r in rows]
  assert texts[0].decode("utf-8").startswith(rows[0][3].strip())
  again_texts, again_labels = arrays.to_numpy("mind", split, path)
  np.testing.assert_array_equal(again_labels, labels)
  assert list(again_texts) == list(texts)


def test_to_numpy_limit(datasets_dir):
  path = datasets_dir / "mind_sample"
  full, labels = arrays.to_numpy("mind", "train", path)
  first, first_labels = arrays.to_numpy("mind", "train", path, batch_size=16, limit=50)
  assert len(first) == 50
  assert list(first) == list(full[:50])
  np.testing.assert_array_equal(first_labels, labels[:50])
  with pytest.raises(ValueError, match="`limit` must be an integer >= 1"):
    arrays.to_numpy("mind", "train", path, limit=0)


def test_stratified_holdout_counts_per_class():
  labels = np.repeat(np.arange(4), [10, 21, 1, 7])
  kept, held = arrays.stratified_holdout(labels, 0.2, seed=3)
  counts = collections.Counter(labels[held].tolist())
  assert counts == {0: 2, 1: 4, 3: 1}  # round(0.2 n_c); the single example of class 2 stays
  assert len(np.intersect1d(kept, held)) == 0
  np.testing.assert_array_equal(np.sort(np.concatenate([kept, held])), np.arange(len(labels)))
  assert np.all(np.diff(kept) > 0) and np.all(np.diff(held) > 0)
  again_kept, again_held = arrays.stratified_holdout(labels, 0.2, seed=3)
  np.testing.assert_array_equal(again_held, held)
  other = [arrays.stratified_holdout(labels, 0.2, seed=s)[1] for s in range(4, 9)]
  assert any(not np.array_equal(o, held) for o in other)


@pytest.mark.parametrize(
  "labels, fraction, seed, match",
  [
    ([0, 1], 0.0, 0, "`fraction` must be in"),
    ([0, 1], 1.0, 0, "`fraction` must be in"),
    ([0, 1], 0.5, -1, "`seed` must be an integer >= 0"),
    ([0.5, 1.0], 0.5, 0, "`labels` must be integer class ids"),
    ([[0, 1]], 0.5, 0, "`labels` must be integer class ids"),
  ],
)
def test_stratified_holdout_bad_input(labels, fraction, seed, match):
  with pytest.raises(ValueError, match=match):
    arrays.stratified_holdout(labels, fraction, seed)


def test_docstring_examples_run():
  assert doctest.testmod(arrays).failed == 0
