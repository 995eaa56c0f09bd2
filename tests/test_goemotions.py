"""Tests of tfrank4class/data/goemotions.py against the real GoEmotions TSVs and mocked TFDS."""

import csv

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from tfrank4class.data import DataNotFoundError, EmptySplitError, goemotions
from tfrank4class.data import options as options_lib


@pytest.fixture(scope="module")
def ge_dir(datasets_dir):
  return datasets_dir / "goemotions"


def _opts(**kw):
  kw.setdefault("batch_size", 8192)
  return options_lib.InputOptions(**kw)


def _count(ds):
  return sum(int(tf.shape(y)[0]) for _, y in ds)


def test_real_single_label_counts_match_the_paper(ge_dir):
  # The README's counts (Rank4Class Table 1: 36.3K / 4.5K / 4.6K).
  for split, expected in [("train", 36_308), ("dev", 4_548), ("test", 4_590)]:
    assert _count(goemotions.load(split, ge_dir, _opts())) == expected


def test_real_class_names_neutral_is_27(ge_dir):
  info = goemotions.info(ge_dir)
  names = (ge_dir / "emotions.txt").read_text().split()
  assert info.num_classes == 28 and list(info.class_names) == names
  assert info.class_names[27] == "neutral" and info.class_names == goemotions.EMOTIONS
  assert info.modality == "text" and info.source == "tsv"


def test_real_multi_label_rows_match_csv_reference(ge_dir):
  ds = goemotions.load(
    "validation", ge_dir, _opts(batch_size=64, deterministic=True), multi_label=True
  )
  texts, relevance = next(iter(ds))
  assert texts.dtype == tf.string and relevance.shape == (64, 28)
  assert relevance.dtype == tf.float32
  with open(ge_dir / "dev.tsv", newline="", encoding="utf-8") as f:
    rows = list(csv.reader(f, delimiter="\t"))[:64]
  expected = np.zeros((64, 28), np.float32)
  for i, row in enumerate(rows):
    for c in row[1].split(","):
      expected[i, int(c)] = 1
  np.testing.assert_array_equal(relevance.numpy(), expected)
  assert [t.decode() for t in texts.numpy()] == [r[0] for r in rows]
  assert _count(goemotions.load("dev", ge_dir, _opts(), multi_label=True)) == 5_426


def test_real_single_label_ids_match_csv_reference(ge_dir):
  texts, labels = next(
    iter(goemotions.load("test", ge_dir, _opts(batch_size=100, deterministic=True)))
  )
  with open(ge_dir / "test.tsv", newline="", encoding="utf-8") as f:
    rows = [r for r in csv.reader(f, delimiter="\t") if "," not in r[1]][:100]
  assert labels.numpy().tolist() == [int(r[1]) for r in rows]
  assert [t.decode() for t in texts.numpy()] == [r[0] for r in rows]


def test_embedded_sample_counts():
  # Counts stated in resources/goemotions_sample/README.md.
  d = goemotions.sample_dir()
  assert (d / "train.tsv").is_file()
  for split, expected in [("train", 10_038), ("dev", 1_247), ("test", 1_280)]:
    assert _count(goemotions.load(split, d, _opts(), name="goemotions_sample")) == expected


def _write(tmp_path, rows):
  (tmp_path / "emotions.txt").write_text("\n".join(goemotions.EMOTIONS) + "\n")
  (tmp_path / "train.tsv").write_text("".join(r + "\n" for r in rows))
  return tmp_path


@pytest.mark.parametrize(
  "bad,match",
  [
    ("only text", r"line 2: expected 3 tab-separated fields"),
    ("text\t3,x\tid9", r"line 2: label ids must be comma-separated integers, got '3,x'"),
    ("text\t28\tid9", r"line 2: label ids must be in \[0, 28\), got \[28\]"),
    ("text\t4\t ", r"line 2: the comment id \(3rd field\) is empty"),
  ],
)
def test_malformed_rows_name_file_and_line(tmp_path, bad, match):
  d = _write(tmp_path, ["fine\t1\tid1", bad])
  with pytest.raises(goemotions.MalformedRowError, match=match) as e:
    goemotions.load("train", d, _opts())
  assert str(d / "train.tsv") in str(e.value)


def _write_bytes(tmp_path, lines):
  (tmp_path / "emotions.txt").write_text("\n".join(goemotions.EMOTIONS) + "\n")
  (tmp_path / "train.tsv").write_bytes(b"".join(line + b"\n" for line in lines))
  return tmp_path


def test_invalid_utf8_names_file_line_and_byte(tmp_path):
  d = _write_bytes(tmp_path, [b"fine\t1\tid1", b"caf\xe9 latte\t2\tid2", b"ok\t3\tid3"])
  with pytest.raises(
    goemotions.MalformedRowError,
    match=r"train.tsv, line 2: not valid UTF-8 \(byte 0xe9 at byte 4 of "
    r"the line\)",
  ):
    goemotions.load("train", d, _opts())


ROWS = [("fine", 1, "id1"), ("caf\u00e9 latte", 2, "id2"), ('a "quoted" word', 3, "id3")]


def _rows_as_saved(ending, bom):
  """The bytes an editor saves for ``ROWS`` with line ``ending``, after a UTF-8 byte order mark
  if ``bom``."""
  quoted = [t if '"' not in t else '"' + t.replace('"', '""') + '"' for t, _, _ in ROWS]
  lines = [f"{q}\t{i}\t{c}" for q, (_, i, c) in zip(quoted, ROWS)]
  return (b"\xef\xbb\xbf" if bom else b"") + "".join(line + ending for line in lines).encode()


@pytest.mark.parametrize("ending", ["\n", "\r\n", "\r"])
@pytest.mark.parametrize("bom", [False, True])
def test_files_read_as_editors_save_them(tmp_path, ending, bom):
  names = (b"\xef\xbb\xbf" if bom else b"") + ending.join(goemotions.EMOTIONS).encode()
  (tmp_path / "emotions.txt").write_bytes(names + ending.encode())
  (tmp_path / "train.tsv").write_bytes(_rows_as_saved(ending, bom))
  assert goemotions.info(tmp_path).class_names == goemotions.EMOTIONS
  texts, labels = goemotions.examples("train", tmp_path)
  assert texts.tolist() == [t for t, _, _ in ROWS] and labels.tolist() == [1, 2, 3]


def test_an_empty_split_is_refused_by_name(tmp_path):
  d = _write(tmp_path, ["a\t1\tid1"])
  (d / "dev.tsv").write_text("")
  (d / "test.tsv").write_text("multi\t1,2\tid2\n")
  with pytest.raises(
    EmptySplitError,
    match=rf"The 'validation' split of GoEmotions \({d / 'dev.tsv'}\) holds no examples "
    r"\(no single-label rows\)",
  ):
    goemotions.load("dev", d, _opts())
  with pytest.raises(EmptySplitError, match=r"'test' split .* \(no single-label rows\)"):
    goemotions.load("test", d, _opts())
  assert _count(goemotions.load("test", d, _opts(), multi_label=True)) == 1


def test_unbalanced_quote_is_reported_at_its_own_line(tmp_path):
  # csv would read on to the end of the file looking for the closing quote (line 5).
  d = _write(
    tmp_path, ["fine\t1\tid1", '"never closed\t2\tid2', "a\t3\tid3", "b\t4\tid4", "c\t5\tid5"]
  )
  with pytest.raises(
    goemotions.MalformedRowError, match=r"train.tsv, line 2: unbalanced or misplaced quote"
  ) as e:
    goemotions.load("train", d, _opts())
  assert str(d / "train.tsv") in str(e.value)


def test_on_corrupt_skip_drops_counts_and_names_the_lines(tmp_path, capsys):
  d = _write_bytes(
    tmp_path,
    [b"first\t1\tid1", b"\xff\xfe\t2\tid2", b'"open\t3\tid3', b"x\t99\tid4", b"last\t27\tid5"],
  )
  opts = _opts(shuffle=False, deterministic=True)
  texts, labels = next(iter(goemotions.load("train", d, opts, on_corrupt="skip")))
  assert texts.numpy().tolist() == [b"first", b"last"] and labels.numpy().tolist() == [1, 27]
  err = capsys.readouterr().err
  assert f"Skipped 3 malformed line(s) of {d / 'train.tsv'} (kept 2 rows)" in err
  assert "line 2: not valid UTF-8" in err and "line 3: unbalanced or misplaced quote" in err
  assert r"line 4: label ids must be in [0, 28), got [99]" in err
  # Read once per process: loading again (as the training binary does) does not repeat it.
  goemotions.load("train", d, opts, on_corrupt="skip", multi_label=True)
  assert "Skipped" not in capsys.readouterr().err
  with pytest.raises(
    ValueError, match=r"`on_corrupt` must be one of \['error', 'skip'\], got 'drop'"
  ):
    goemotions.load("train", d, opts, on_corrupt="drop")


def test_quoted_fields_parse(tmp_path):
  d = _write(tmp_path, ['"He said ""hi"" twice"\t3,4\tid1', "plain\t27\tid2"])
  opts = _opts(shuffle=False, deterministic=True)
  texts, labels = next(iter(goemotions.load("train", d, opts)))
  assert texts.numpy().tolist() == [b"plain"] and labels.numpy().tolist() == [27]
  texts, rel = next(iter(goemotions.load("train", d, opts, multi_label=True)))
  assert texts.numpy()[0] == b'He said "hi" twice'
  assert np.flatnonzero(rel.numpy()[0]).tolist() == [3, 4]


def test_missing_data_errors(tmp_path):
  with pytest.raises(DataNotFoundError, match=r"nope.*google-research"):
    goemotions.load("train", tmp_path / "nope", _opts())
  with pytest.raises(DataNotFoundError, match="empty"):
    goemotions.load("train", tmp_path, _opts())
  _write(tmp_path, ["a\t1\tid"])
  with pytest.raises(DataNotFoundError, match="test.tsv"):
    goemotions.load("test", tmp_path, _opts())
  with pytest.raises(ValueError, match="`multi_label` must be True or False"):
    goemotions.load("train", tmp_path, _opts(), multi_label="yes")


def test_tfds_source_with_mock_data(tmp_path):
  with tfds.testing.mock_data(num_examples=40):
    raw = list(
      tfds.builder("goemotions", data_dir=tmp_path, try_gcs=False).as_dataset(
        split="train", shuffle_files=False
      )
    )
    opts = _opts(batch_size=64, shuffle=False, deterministic=True)
    multi = list(goemotions.load("train", tmp_path, opts, source="tfds", multi_label=True))
    single = list(goemotions.load("train", tmp_path, opts, source="tfds"))
  expected = np.array([[float(ex[e].numpy()) for e in goemotions.EMOTIONS] for ex in raw])
  texts, rel = multi[0]
  np.testing.assert_array_equal(rel.numpy(), expected)
  assert texts.numpy().tolist() == [ex["comment_text"].numpy() for ex in raw]
  one = [i for i in range(len(raw)) if expected[i].sum() == 1]
  got = single[0][1].numpy().tolist() if single else []
  assert got == [int(np.argmax(expected[i])) for i in one]


def test_serving_preprocess_passes_strings_and_rejects_numbers():
  fn = goemotions.serving_preprocess()
  assert fn(tf.constant(["a", "b"])).numpy().tolist() == [b"a", b"b"]
  with pytest.raises(TypeError, match="tf.string"):
    fn(tf.constant([1.0]))
