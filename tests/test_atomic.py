"""tfrank4class.atomic: a file or folder is replaced whole or not at all."""

import os

import pytest

from tfrank4class import atomic


class Killed(BaseException):
  """Stands for the process being killed (not an ``Exception``: nothing catches it)."""


def test_partial_path_is_beside_the_file_and_keeps_its_ending(tmp_path):
  assert atomic.partial_path(tmp_path / "best.keras") == str(tmp_path / ".partial-best.keras")
  assert atomic.partial_path(f"{tmp_path}/export/") == str(tmp_path / ".partial-export")


def test_write_text_replaces_the_file(tmp_path):
  path = tmp_path / "config.json"
  atomic.write_text(path, "old")
  atomic.write_text(path, "new ü")
  assert path.read_text("utf-8") == "new ü"
  assert os.listdir(tmp_path) == ["config.json"]


def test_a_write_killed_halfway_leaves_the_previous_file(tmp_path):
  path = tmp_path / "results.json"
  path.write_text('{"top_1": 0.5}')
  with pytest.raises(Killed):
    with atomic.writing(path) as partial:
      with open(partial, "w") as f:
        f.write('{"top_1": 0.')
      raise Killed()
  assert path.read_text() == '{"top_1": 0.5}'
  assert os.listdir(tmp_path) == ["results.json"]


def test_a_kill_before_the_rename_leaves_the_previous_file(tmp_path, monkeypatch):
  # A kill after the partial file is complete but before the rename: only the partial is left,
  # and the next write replaces it.
  path = tmp_path / "results.json"
  path.write_text("old")

  def killed(partial, final):
    raise Killed()

  monkeypatch.setattr(atomic, "commit", killed)
  with pytest.raises(Killed):
    atomic.write_text(path, "new")
  assert path.read_text() == "old"
  assert sorted(os.listdir(tmp_path)) == [".partial-results.json", "results.json"]
  monkeypatch.undo()
  atomic.write_text(path, "newer")
  assert path.read_text() == "newer" and os.listdir(tmp_path) == ["results.json"]


def test_a_folder_replaces_a_folder_whole(tmp_path):
  export = tmp_path / "export"
  export.mkdir()
  (export / "saved_model.pb").write_text("old")
  (export / "old_only").write_text("x")
  with pytest.raises(Killed):
    with atomic.writing(export) as partial:
      os.makedirs(partial)
      (tmp_path / ".partial-export" / "saved_model.pb").write_text("half")
      raise Killed()
  assert sorted(os.listdir(export)) == ["old_only", "saved_model.pb"]
  assert os.listdir(tmp_path) == ["export"]  # the partial folder is removed
  with atomic.writing(export) as partial:
    os.makedirs(partial)
    (tmp_path / ".partial-export" / "saved_model.pb").write_text("new")
  assert os.listdir(export) == ["saved_model.pb"]
  assert (export / "saved_model.pb").read_text() == "new"
  assert os.listdir(tmp_path) == ["export"]
