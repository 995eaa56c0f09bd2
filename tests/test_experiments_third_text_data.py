"""experiments/third/text_data.py: the TSV reader, the label groups from the published maps,
BANKING77's hold-out, on the shared dataset files (skipped without them)."""

import io
import json
import os

import numpy as np
import pytest

from experiments.third import text_data

DATA = os.environ.get("TFRANK4CLASS_DATA", "")
needs_data = pytest.mark.skipif(
  not os.path.isdir(os.path.join(DATA, "clinc150")), reason="needs the shared datasets"
)


def test_read_tsv_keeps_quotes_and_names_a_bad_line():
  texts, labels = text_data.read_tsv(io.StringIO('"a\t1\tx\n'))
  assert texts == ['"a'] and labels.tolist() == [1]
  with pytest.raises(ValueError, match="Line 2"):
    text_data.read_tsv(io.StringIO("a\t1\tr\nbroken line\n"))


@needs_data
def test_clinc150_splits_and_domains():
  folder = os.path.join(DATA, "clinc150")
  sizes = {}
  for name in ("train.tsv", "val.tsv", "test.tsv"):
    texts, labels = text_data.read_tsv(os.path.join(folder, name))
    sizes[name] = len(texts)
    assert np.all(np.bincount(labels, minlength=150) == len(texts) // 150)
  assert sizes == {"train.tsv": 15000, "val.tsv": 3000, "test.tsv": 4500}
  groups = text_data.label_groups(DATA, "clinc150")
  assert len(groups) == 10 and all(len(g) == 15 for g in groups)
  assert sorted(c for g in groups for c in g) == list(range(150))
  names = text_data.class_names(DATA, "clinc150")
  with open(os.path.join(folder, "domains.json"), encoding="utf-8") as f:
    assert sorted(names[c] for c in groups[0]) == sorted(next(iter(json.load(f).values())))


@needs_data
def test_goemotions_ekman_groups_leave_neutral_out():
  groups = text_data.label_groups(DATA, "goemotions")
  names = text_data.class_names(DATA, "goemotions")
  assert sorted(len(g) for g in groups) == [1, 2, 3, 4, 5, 12]
  assert names.index("neutral") not in [c for g in groups for c in g]


@needs_data
def test_banking77_holdout_is_ten_percent_of_each_class():
  _, labels = text_data.read_tsv(os.path.join(DATA, "banking77", "train.tsv"))
  assert len(labels) == 10003
  kept, held = text_data.banking_split(labels)
  assert len(np.intersect1d(kept, held)) == 0 and len(kept) + len(held) == 10003
  counts, held_counts = np.bincount(labels), np.bincount(labels[held], minlength=77)
  assert np.array_equal(held_counts, [round(0.1 * n) for n in counts])
  assert held_counts.min() >= 3
  assert np.array_equal(held, text_data.banking_split(labels)[1])  # the same rows every time


def test_unknown_dataset_is_named():
  with pytest.raises(ValueError, match="`dataset` must be one of"):
    text_data.dataset_features("w", "d", "mnist")
  with pytest.raises(ValueError, match="for label groups"):
    text_data.label_groups("d", "banking77")
