"""The documentation site (docs/site.md): every public name is on a page, and its examples run.

The API pages are generated at build time by ``tools/docs_site.py`` (an MkDocs hook); these tests
read what it generates with plain Python, so they need neither MkDocs nor a build. Whether a
page's example runs is the docstring's doctest, which the default suite runs
(``--doctest-modules``; ``tests/test_doctests.py`` checks that every module is collected): here,
only that every documented module is one of those. The code blocks of ``docs/*.md`` are commands
with the output they printed (benchmark runs of minutes, on named machines), which are not run;
a Python example belongs in a docstring, so a ``>>>`` line in ``docs/*.md`` fails here.
"""

import collections
import importlib
import importlib.util
import inspect
import pathlib
import re

import pytest
import test_doctests

from tfrank4class import registry

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _load_site():
  spec = importlib.util.spec_from_file_location("docs_site", ROOT / "tools" / "docs_site.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


site = _load_site()


def _blocks():
  """``[(page, module, members or None)]``: the ``:::`` blocks of the generated pages, each with
  its ``members:`` list (None: the module's public members, all of them)."""
  found = []
  for page, text in site.pages().items():
    for block in re.split(r"^(?=::: )", text, flags=re.M)[1:]:
      module = block.split()[1]
      listed = re.search(r"^      members: \[(.*)\]$", block, re.M)
      members = None if listed is None else [m for m in listed[1].split(", ") if m]
      found.append((page, module, members))
  return found


def _on_a_page(obj, blocks):
  """Whether ``obj`` is a module documented whole, a package with its page, or a member listed
  by a block."""
  if inspect.ismodule(obj):
    return any(
      module == obj.__name__ and (members is None or page == f"reference/{module}.md")
      for page, module, members in blocks
    )
  return any(
    getattr(importlib.import_module(module), member, None) is obj
    for _, module, members in blocks
    for member in members or ()
  )


@pytest.mark.tensorflow_only  # the full API: the TensorFlow-only encoders and export included
def test_every_public_name_has_a_page():
  """Every name of every package's ``__all__`` (as imported, not as read by the generator) and
  every class of ``registry.PUBLIC`` is on a page, as the very object the package exports."""
  blocks = _blocks()
  exported = site.packages()
  checked = []
  for package, (static_names, _) in exported.items():
    module = importlib.import_module(package)
    assert set(module.__all__) <= set(static_names), package
    checked += [(f"{package}.{name}", getattr(module, name)) for name in module.__all__]
  checked += [(f"registry.PUBLIC[{name!r}]", cls) for name, cls in registry.PUBLIC.items()]
  assert len(registry.PUBLIC) > 30 and len(checked) > 150, len(checked)
  missing = [name for name, obj in checked if not _on_a_page(obj, blocks)]
  assert not missing, f"Public names without a page: {missing}"


def test_every_package_with_an_all_has_a_page():
  """A package whose ``__init__.py`` sets ``__all__`` has a page (the generator found it)."""
  pages = site.pages()
  for init in (ROOT / "tfrank4class").rglob("__init__.py"):
    package = ".".join(init.parent.relative_to(ROOT).parts)
    if re.search(r"^__all__ ", init.read_text(), re.M):
      assert package in site.packages(), package
  assert set(pages) == {
    f"reference/{'index' if p == 'tfrank4class' else p}.md" for p in site.packages()
  }


def test_each_member_is_on_one_page():
  listed = collections.Counter(
    (module, member) for _, module, members in _blocks() for member in members or ()
  )
  assert not [key for key, count in listed.items() if count > 1]


def test_documented_modules_run_their_examples():
  """Every module on a page is a module whose doctests the default suite collects."""
  collected = set(test_doctests._modules())
  for page, module, _ in _blocks():
    path = ROOT / module.replace(".", "/")
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    assert path.relative_to(ROOT).as_posix() in collected, (page, module)


def test_the_nav_is_built_from_the_files():
  """No ``nav:`` in mkdocs.yml: MkDocs lists every page of docs/ and the generated ones, so a
  new docs page appears on the site without an edit; the hooks and the extension are loaded."""
  config = (ROOT / "mkdocs.yml").read_text()
  assert not re.search(r"^nav:", config, re.M)
  assert re.search(r"^hooks:\n  - tools/docs_site.py$", config, re.M)
  assert "- tools/griffe_roles.py:SphinxRoles" in config
  assert re.search(r"^strict: true$", config, re.M)


def test_docs_pages_hold_no_doctests():
  """Python examples live in docstrings, where they run; a docs page's would run nowhere."""
  for page in (ROOT / "docs").glob("*.md"):
    assert not re.search(r"^\s*>>> ", page.read_text(), re.M), page


@pytest.mark.parametrize(
  ("page", "target", "expected"),
  [
    ("running.md", "../benchmarks/backends.py", "benchmarks/backends.py"),
    ("running.md", "../tfrank4class/losses/base.py#L10", "tfrank4class/losses/base.py"),
    ("running.md", "stacks.md#pins", None),  # a docs page: the site has it
    ("running.md", "../no/such/file.md", None),  # left as it is: the strict build fails on it
    ("running.md", "https://keras.io/", None),
  ],
)
def test_links_out_of_docs_become_repository_paths(page, target, expected):
  assert site.repository_path(page, target) == expected


def test_a_list_after_a_paragraph_line_is_a_list():
  """GitHub's reading: a blank line goes before such a list, not inside code or a list."""
  page = "Text:\n- one\n- two\n\n```\nx\n- not a list\n```\n  indented\n- item\n+ wrapped"
  expected = "Text:\n\n- one\n- two\n\n```\nx\n- not a list\n```\n  indented\n- item\n+ wrapped"
  assert site.lists_after_paragraphs(page) == expected
