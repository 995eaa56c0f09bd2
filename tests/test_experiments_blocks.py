"""experiments/blocks.py: the generated blocks of README.md and docs/, read, replaced, checked
and rewritten in a folder made for the test."""

import doctest

import pytest

from experiments import blocks

TEXT = """# Title

<!-- m:one -->
| a |
|---|
<!-- /m:one -->

text

<!-- m:two -->
<!-- /m:two -->
<!-- other:one -->
x
<!-- /other:one -->
"""


def test_read_and_names():
  assert blocks.names(TEXT, "m") == ["m:one", "m:two"]
  assert blocks.names(TEXT, "other") == ["other:one"]
  assert blocks.read(TEXT, "m:one") == ["| a |", "|---|"]
  assert blocks.read(TEXT, "m:two") == [] and blocks.read(TEXT, "m:three") is None


def test_replace_changes_only_the_block():
  new = blocks.replace(TEXT, "m:two", ["| b |", "|---|", "| 1 |"])
  assert blocks.read(new, "m:two") == ["| b |", "|---|", "| 1 |"]
  assert new.replace("| b |\n|---|\n| 1 |\n", "") == TEXT
  assert blocks.replace(new, "m:two", []) == TEXT
  with pytest.raises(ValueError, match="holds no generated block 'm:three'"):
    blocks.replace(TEXT, "m:three", [])


def test_an_unclosed_block_is_refused():
  with pytest.raises(ValueError, match="'m:open' is opened and never closed"):
    blocks.read("<!-- m:open -->\n| a |\n", "m:open")


def _folder(tmp_path, readme, doc):
  (tmp_path / "docs").mkdir()
  (tmp_path / "README.md").write_text(readme)
  (tmp_path / "docs" / "evidence-grid.md").write_text(doc)
  for name in ("choosing-a-loss.md", "evidence-third-edition.md"):
    (tmp_path / "docs" / name).write_text("no blocks here\n")
  return tmp_path


def test_stale_names_each_problem(tmp_path):
  root = _folder(tmp_path, TEXT, "<!-- m:one -->\n| a |\n|---|\n<!-- /m:one -->\n")
  current = {"m:one": ["| a |", "|---|"], "m:two": []}
  assert blocks.stale("m", current, root) == []
  assert blocks.stale("m", {"m:one": ["| c |"], "m:two": [], "m:four": []}, root) == [
    ("README.md", "m:one", "differs from the records"),
    ("docs/evidence-grid.md", "m:one", "differs from the records"),
    ("-", "m:four", "in no file"),
  ]
  assert blocks.stale("m", {"m:one": ["| a |", "|---|"]}, root) == [
    ("README.md", "m:two", "no such block")
  ]


def test_rewrite_updates_every_file_that_holds_a_block(tmp_path):
  root = _folder(tmp_path, TEXT, "no blocks here\n")
  current = {"m:one": ["| z |"], "m:two": ["y"]}
  assert blocks.rewrite("m", current, root) == ["README.md"]
  assert blocks.stale("m", current, root) == []
  assert (root / "docs" / "evidence-grid.md").read_text() == "no blocks here\n"
  assert blocks.rewrite("m", current, root) == []  # nothing left to change
  with pytest.raises(ValueError, match="README.md: unknown generated block 'm:two'"):
    blocks.rewrite("m", {"m:one": []}, root)


def test_examples():  # experiments/ is outside the suite's doctest collection
  assert doctest.testmod(blocks).failed == 0
