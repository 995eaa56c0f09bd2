"""Tests of tfrank4class/data/mind.py: the real MIND sample, the TFDS builder, the hash split."""

import collections
import hashlib

import numpy as np
import pytest
import tensorflow as tf

from tfrank4class.data import DataNotFoundError, EmptySplitError, mind
from tfrank4class.data import options as options_lib

README_COUNTS = {
  "news": 603,
  "sports": 597,
  "finance": 115,
  "foodanddrink": 109,
  "lifestyle": 95,
  "weather": 84,
  "video": 72,
  "travel": 72,
  "health": 71,
  "autos": 68,
  "music": 33,
  "tv": 32,
  "movies": 28,
  "entertainment": 18,
  "kids": 3,
}
SPLITS = ("train", "validation", "test")


@pytest.fixture(scope="module")
def mind_dir(datasets_dir):
  return datasets_dir / "mind_sample"


@pytest.fixture(scope="module")
def prepared(mind_dir, tmp_path_factory):
  """TFDS 'mind' prepared offline from the real sample (manual_dir)."""
  out = tmp_path_factory.mktemp("tfds")
  mind.prepare(mind_dir, out)
  return out


def _rows(path):
  with open(path, encoding="utf-8") as f:
    return [line.rstrip("\n").split("\t") for line in f if line.strip()]


def _reference_split(news_id):
  b = int(hashlib.md5(news_id.encode()).hexdigest(), 16) % 100
  return "train" if b < 60 else ("validation" if b < 80 else "test")


def _all(ds):
  texts, labels = [], []
  for x, y in ds:
    texts += [t.decode() for t in x.numpy()]
    labels += y.numpy().tolist()
  return texts, labels


def _all_or_none(split, folder, **kwargs):
  """``_all`` of a split of the MIND files in ``folder``, or no rows for a split they leave empty
  (which ``load`` refuses, naming it)."""
  try:
    return _all(mind.load(split, folder, _opts(), **kwargs))
  except EmptySplitError as e:
    assert f"The {split!r} split of MIND ({folder}) holds no examples" in str(e)
    return [], []


def _opts(**kw):
  kw.setdefault("batch_size", 512)
  kw.setdefault("deterministic", True)
  return options_lib.InputOptions(**kw)


def test_sample_counts_categories_and_disjoint_covering_splits(mind_dir):
  rows = _rows(mind_dir / "news.tsv")
  info = mind.info(mind_dir)
  assert info.num_classes == 15 and list(info.class_names) == sorted(README_COUNTS)
  by_split = {s: _all(mind.load(s, mind_dir, _opts())) for s in SPLITS}
  assert sum(len(t) for t, _ in by_split.values()) == 2000
  counts = collections.Counter(
    info.class_names[y] for _, labels in by_split.values() for y in labels
  )
  assert counts == README_COUNTS
  # Disjoint and covering, and each article in the split the md5 rule puts it in.
  text_of = {r[0]: (r[3] + " [SEP] " + r[4]) if r[4] else r[3] for r in rows}
  for split, (texts, _) in by_split.items():
    expected = sorted(text_of[i] for i in text_of if _reference_split(i) == split)
    assert sorted(texts) == expected
  sizes = [len(by_split[s][0]) / 2000 for s in SPLITS]
  np.testing.assert_allclose(sizes, [0.6, 0.2, 0.2], atol=0.03)


def test_same_split_on_every_run_and_any_row_order(mind_dir, tmp_path):
  first = _all(mind.load("test", mind_dir, _opts()))
  again = _all(mind.load("test", mind_dir, _opts()))
  assert first == again
  rows = (mind_dir / "news.tsv").read_text(encoding="utf-8").splitlines()
  (tmp_path / "news.tsv").write_text("\n".join(reversed(rows)) + "\n", encoding="utf-8")
  assert sorted(_all(mind.load("test", tmp_path, _opts()))[0]) == sorted(first[0])


def test_labels_are_the_category_ids(mind_dir):
  rows = {r[0]: r for r in _rows(mind_dir / "news.tsv")}
  names = sorted(README_COUNTS)
  ids, texts, labels = mind.split_examples(mind.read_news(mind_dir), "validation")
  for i, y in zip(ids, labels):
    assert names[y] == rows[i][1]


def test_tfds_builder_matches_the_tsv_reader(prepared, mind_dir):
  builder = mind.Mind(data_dir=str(prepared))
  assert builder.is_prepared() and "msnews.github.io" in mind.Mind.MANUAL_DOWNLOAD_INSTRUCTIONS
  assert {s: builder.info.splits[s].num_examples for s in SPLITS} == {
    s: len(mind.split_examples(mind.read_news(mind_dir), s)[0]) for s in SPLITS
  }
  info = mind.info(prepared, source="tfds")
  assert list(info.class_names) == sorted(README_COUNTS)
  for split in SPLITS:
    a = _all(mind.load(split, prepared, _opts(), source="tfds"))
    b = _all(mind.load(split, mind_dir, _opts()))
    assert sorted(zip(*a)) == sorted(zip(*b))


def test_tfds_sharding_two_workers_see_each_example_once(prepared):
  full = _all(mind.load("train", prepared, _opts(), source="tfds"))[0]
  parts = [
    _all(mind.load("train", prepared, _opts(num_shards=2, shard_index=i), source="tfds"))[0]
    for i in range(2)
  ]
  assert sorted(parts[0] + parts[1]) == sorted(full)
  assert not set(parts[0]) & set(parts[1]) and min(len(p) for p in parts) > 500
  # A sliced split is sharded too (tfds.even_splits of the slice).
  full = _all(mind.load("train[:10%]", prepared, _opts(), source="tfds"))[0]
  parts = [
    _all(mind.load("train[:10%]", prepared, _opts(num_shards=2, shard_index=i), source="tfds"))[0]
    for i in range(2)
  ]
  assert len(full) == 121 and sorted(parts[0] + parts[1]) == sorted(full)


def test_join_text():
  assert mind.join_text(" Title ", "Abstract.") == "Title [SEP] Abstract."
  assert mind.join_text("Title", "") == "Title"


def test_malformed_and_inconsistent_rows_name_file_and_line(tmp_path):
  good = "N1\tnews\tx\tTitle\tAbs\turl\t[]\t[]"
  (tmp_path / "news.tsv").write_text(good + "\nN2\tnews\tonly four\n")
  with pytest.raises(mind.MalformedRowError, match=r"news.tsv, line 2: expected at least 5"):
    mind.load("train", tmp_path, _opts())
  (tmp_path / "news.tsv").write_text(good + "\n" + good.replace("news", "sports", 1) + "\n")
  with pytest.raises(mind.MalformedRowError, match=r"line 2: news id 'N1' was seen before"):
    mind.load("test", tmp_path, _opts())
  (tmp_path / "news.tsv").write_bytes(good.encode() + b"\nN3\tnews\tx\tCaf\xe9\tAbs\n")
  with pytest.raises(
    mind.MalformedRowError,
    match=r"news.tsv, line 2: not valid UTF-8 \(byte 0xe9 at byte 14 of "
    r"the line\)",
  ):
    mind.load("train", tmp_path, _opts())


def test_on_corrupt_skip_drops_counts_and_names_the_lines(tmp_path, capsys):
  lines = [
    b"N1\tnews\tx\tT1\tA1",
    b"N2\tnews\tx\tbad \xff\tA2",
    b"N3\tnews\tonly four",
    b"N1\tsports\tx\tT1\tA1",
    b"N4\tsports\tx\tT4\t",
  ]
  (tmp_path / "news.tsv").write_bytes(b"\n".join(lines) + b"\n")
  info = mind.info(tmp_path)
  by_split = [_all_or_none(s, tmp_path, on_corrupt="skip") for s in SPLITS]
  assert list(info.class_names) == ["news", "sports"]
  assert sorted(zip(*[sum(parts, []) for parts in zip(*by_split)])) == [
    ("T1 [SEP] A1", 0),
    ("T4", 1),
  ]
  err = capsys.readouterr().err
  assert err.count("Skipped") == 1  # one report, though info and three splits read the file
  assert f"Skipped 3 malformed line(s) of {tmp_path / 'news.tsv'} (kept 2 rows)" in err
  assert "line 2: not valid UTF-8" in err and "line 3: expected at least 5" in err
  assert "line 4: news id 'N1' was seen before with category 'news', now 'sports'" in err
  with pytest.raises(mind.MalformedRowError, match="line 2: not valid UTF-8"):
    mind.load("train", tmp_path, _opts())  # the default stays "error"
  with pytest.raises(ValueError, match=r"`on_corrupt` must be one of \['error', 'skip'\], got 'x'"):
    mind.load("train", tmp_path, _opts(), on_corrupt="x")


@pytest.mark.parametrize("ending", [b"\r\n", b"\r"])
def test_news_read_as_editors_save_it(tmp_path, ending):
  lines = [b"N1\tnews\tx\tT1\tA1", b"N2\tsports\tx\tT\xc3\xa92\t", b"N3\tnews\tx\tT3\tA3"]
  (tmp_path / "news.tsv").write_bytes(b"\xef\xbb\xbf" + b"".join(x + ending for x in lines))
  assert list(mind.info(tmp_path).class_names) == ["news", "sports"]
  rows = [_all_or_none(s, tmp_path) for s in SPLITS]
  assert sorted(zip(*[sum(parts, []) for parts in zip(*rows)])) == [
    ("T1 [SEP] A1", 0),
    ("T3 [SEP] A3", 0),
    ("T\u00e92", 1),
  ]
  assert sorted(mind.read_news(tmp_path)) == ["N1", "N2", "N3"]  # no byte order mark in "N1"


def test_missing_data_errors(tmp_path):
  with pytest.raises(DataNotFoundError, match=r"absent.*msnews"):
    mind.load("train", tmp_path / "absent", _opts())
  (tmp_path / "other.txt").write_text("x")
  with pytest.raises(DataNotFoundError, match="news.tsv"):
    mind.load("train", tmp_path, _opts())
  with pytest.raises(DataNotFoundError, match="news.tsv"):
    mind.prepare(tmp_path, tmp_path / "out")
  with pytest.raises(DataNotFoundError, match="prepared TFDS 'mind'"):
    mind.load("train", tmp_path, _opts(), source="tfds")


def test_serving_preprocess_is_identity_on_strings():
  out = mind.serving_preprocess()(tf.constant(["t [SEP] a"]))
  assert out.numpy().tolist() == [b"t [SEP] a"]
