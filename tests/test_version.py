"""The package's version is the CHANGELOG's latest section, in ``setup.cfg`` and at run time."""

import configparser
import pathlib
import re

import tfrank4class

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _changelog_version():
  """The version of the CHANGELOG's first ``## X.Y.Z`` heading (its latest section)."""
  text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
  return re.search(r"^## (\d+\.\d+\.\d+)\b", text, re.MULTILINE)[1]


def test_version_is_the_changelogs_latest_section():
  config = configparser.ConfigParser()
  config.read(ROOT / "setup.cfg", encoding="utf-8")
  assert config["metadata"]["version"] == tfrank4class.__version__ == _changelog_version()
