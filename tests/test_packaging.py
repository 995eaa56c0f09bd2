"""The sdist and the wheel carry the licence, the data notice and every resource file, and the
build prints no setuptools warning about the data folders (setup.cfg)."""

import configparser
import pathlib
import shutil
import subprocess
import sys
import tarfile
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESOURCES = ROOT / "tfrank4class" / "resources"


def _resource_files():
  """Every data file under tfrank4class/resources/, as a path from the repository root."""
  return sorted(
    p.relative_to(ROOT).as_posix()
    for p in RESOURCES.rglob("*")
    if p.is_file() and "__pycache__" not in p.parts
  )


def _setup_cfg():
  config = configparser.ConfigParser()
  config.read(ROOT / "setup.cfg", encoding="utf-8")
  return config


def test_licence_is_the_apache_2_text_and_declared():
  text = (ROOT / "LICENSE").read_text(encoding="utf-8")
  assert text.lstrip().startswith("Apache License\n                           Version 2.0")
  assert "END OF TERMS AND CONDITIONS" in text
  assert "APPENDIX: How to apply the Apache License to your work." in text
  metadata = _setup_cfg()["metadata"]
  assert metadata["license"] == "Apache-2.0"
  assert metadata["license_files"].split() == ["LICENSE", "NOTICE"]


def test_notice_names_every_data_folder_with_its_source_and_licence():
  notice = (ROOT / "NOTICE").read_text(encoding="utf-8")
  folders = sorted(p.name for p in RESOURCES.iterdir() if p.is_dir() and p.name != "__pycache__")
  assert folders == ["goemotions_sample", "sorters"]  # a new folder needs its entry here and there
  for folder in folders:
    assert f"tfrank4class/resources/{folder}/" in notice
  assert "github.com/google-research/google-research/tree/master/goemotions" in notice
  assert notice.count("Apache License, Version 2.0") == 3  # the package, GoEmotions, the weights


def test_every_data_folder_is_package_data():
  options = _setup_cfg()
  assert options["options"]["packages"] == "find_namespace:"
  folders = {p.name for p in RESOURCES.iterdir() if p.is_dir() and p.name != "__pycache__"}
  declared = {key for key in options["options.package_data"]}
  assert declared == {f"tfrank4class.resources.{folder}" for folder in folders}


def test_wheel_and_sdist_ship_licence_notice_and_resources_without_warnings(tmp_path):
  """Builds both from a copy of the sources, as pip does (a few seconds, no network)."""
  src = tmp_path / "src"
  ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
  shutil.copytree(ROOT / "tfrank4class", src / "tfrank4class", ignore=ignore)
  for name in ("setup.cfg", "pyproject.toml", "README.md", "LICENSE", "NOTICE"):
    shutil.copy(ROOT / name, src / name)
  out = tmp_path / "dist"
  code = (
    "import sys\nfrom setuptools import build_meta\n"
    "out = sys.argv[1]  # build_wheel rewrites sys.argv\n"
    "print(build_meta.build_wheel(out))\nprint(build_meta.build_sdist(out))\n"
  )
  result = subprocess.run(
    [sys.executable, "-c", code, str(out)], cwd=src, capture_output=True, text=True, timeout=300
  )
  log = result.stdout + result.stderr
  assert result.returncode == 0, log[-3000:]
  assert "would be ignored" not in log and "absent from the `packages`" not in log, log[-3000:]
  (wheel,) = out.glob("*.whl")
  with zipfile.ZipFile(wheel) as archive:
    in_wheel = set(archive.namelist())
  (sdist,) = out.glob("*.tar.gz")
  with tarfile.open(sdist) as archive:
    in_sdist = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
  dist_info = f"tfrank4class-{_setup_cfg()['metadata']['version']}.dist-info"
  # .dist-info/licenses/ from setuptools 77 (PEP 639), .dist-info/ itself before.
  for name in ("LICENSE", "NOTICE"):
    assert in_wheel & {f"{dist_info}/licenses/{name}", f"{dist_info}/{name}"}, name
  assert {"LICENSE", "NOTICE"} <= in_sdist
  resources = _resource_files()
  assert len(resources) == 11
  assert set(resources) <= in_wheel
  assert set(resources) <= in_sdist
