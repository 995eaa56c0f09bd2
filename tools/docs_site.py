"""The documentation site's MkDocs hooks (``mkdocs.yml``, ``hooks:``); ``make docs`` builds it.

1. The API reference, generated from the public API list at build time (:func:`on_files`), so
   a new public name needs no edit here. The public API is what the package ``__init__`` files
   export in ``__all__`` (which holds every class of :data:`tfrank4class.registry.PUBLIC`:
   ``tests/test_registry.py``). :func:`pages` reads those lists and the imports that bind them
   from the source, without importing the package (the site builds without TensorFlow), and
   makes one page per package with an ``__all__``, ``reference/<package>.md``: the package's
   docstring, then a section per module that defines an exported name, with that module's
   docstring (where the formulas are) and the exported names (signature, docstring, example).
   A name that a package and its subpackage both export is on the subpackage's page.
2. The pages of ``docs/`` are written for GitHub's Markdown; two differences are bridged
   (:func:`on_page_markdown`): a list right after a paragraph line is a list (Python-Markdown
   wants a blank line first: :func:`lists_after_paragraphs`), and a link to another file of the
   repository (``../benchmarks/backends.md``), which the site does not hold, becomes the file's
   repository path in code; a link to a file that exists nowhere is left as it is, and the
   strict build fails on it.
3. A docstring example that would be shown as prose, not code, fails the strict build
   (:func:`on_page_content`).

``tests/test_docs_site.py`` checks with :func:`pages` that every public name is on a page.
"""

import ast
import logging
import os
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = "tfrank4class"
FOLDER = "reference"  # under docs/: the site's "Reference" section


def _exports(init):
  """``(__all__, {name: (module, name there)})`` of a package ``__init__.py``, read statically.

  ``__all__`` is its literal list plus any literal ``__all__ += [...]``; each name maps to the
  module of the ``from module import name`` that binds it (anywhere in the file, e.g. inside a
  lazy ``__getattr__``; the first one wins) or, defined in the file itself, to the package.
  ``from package import submodule`` maps ``submodule`` to that module, whole (name ``None``).
  """
  tree = ast.parse(init.read_text())
  package = ".".join(init.parent.relative_to(ROOT).parts)
  names, where = [], {}
  for node in ast.walk(tree):
    targets = getattr(node, "targets", None) or [getattr(node, "target", None)]
    if isinstance(node, (ast.Assign, ast.AugAssign)) and any(
      isinstance(t, ast.Name) and t.id == "__all__" for t in targets
    ):
      names += ast.literal_eval(node.value)
    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
      for alias in node.names:
        bound = alias.asname or alias.name
        submodule = f"{node.module}.{alias.name}"
        if (ROOT / submodule.replace(".", "/")).with_suffix(".py").exists() or (
          ROOT / submodule.replace(".", "/") / "__init__.py"
        ).exists():
          where.setdefault(bound, (submodule, None))
        else:
          where.setdefault(bound, _defined_in(node.module, alias.name))
  return names, {name: where.get(name, (package, name)) for name in names}


def _defined_in(module, name):
  """``(module, name)`` where ``name`` of ``module`` is defined, following the module's own
  top-level ``from ... import`` re-exports (``losses.registry`` re-exports ``RankingLoss``)."""
  path = ROOT / module.replace(".", "/")
  path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
  for node in ast.parse(path.read_text()).body:
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
      for alias in node.names:
        if (alias.asname or alias.name) == name:
          return _defined_in(node.module, alias.name)
  return module, name


def packages():
  """``{package: (__all__, {name: (module, name there)})}``, each package with an ``__all__``."""
  found = {}
  for init in sorted((ROOT / PACKAGE).rglob("__init__.py")):
    names, where = _exports(init)
    if names:
      found[".".join(init.parent.relative_to(ROOT).parts)] = (names, where)
  return found


def _owner(name, target, exported):
  """The deepest package that exports ``name`` bound to the same object ``target``."""
  owners = [p for p, (names, where) in exported.items() if name in names and where[name] == target]
  return max(owners, key=lambda p: p.count("."))


def _page(package):
  """The page of ``package`` under ``reference/``: the top package's is the section's index."""
  return "index.md" if package == PACKAGE else f"{package}.md"


def _directive(identifier, members, root_heading=True):
  """A mkdocstrings ``:::`` block: ``identifier`` with ``members`` (all public ones if None)."""
  lines = [f"::: {identifier}", "    options:", "      heading_level: 2"]
  if not root_heading:
    lines.append("      show_root_heading: false")
  if members is not None:
    lines.append(f"      members: [{', '.join(members)}]")
  return "\n".join(lines)


def pages():
  """``{path under docs/: markdown}``: one page per package with an ``__all__``.

  Every exported name appears on exactly one page, as a member of the ``:::`` block of the
  module that defines it (an exported module as a block of its own, all its public members).
  """
  exported = packages()
  sections = {package: {} for package in exported}  # package -> {module: [names] or None}
  for package, (names, where) in exported.items():
    for name in names:
      module, original = where[name]
      subpackage = module in exported and original is None
      if subpackage or _owner(name, where[name], exported) != package:
        continue  # a subpackage (a page of its own), or a name documented on a deeper page
      members = sections[package].setdefault(module, [])
      if original is None:
        sections[package][module] = None
      elif members is not None:
        members.append(original)
  out = {}
  for package, modules in sections.items():
    parts = [f"# `{package}`", _directive(package, modules.pop(package, []), root_heading=False)]
    subpackages = [p for p in exported if "." in p and p.rsplit(".", 1)[0] == package]
    if subpackages:
      links = ", ".join(f"[`{p}`]({_page(p)})" for p in subpackages)
      parts.append(f"Subpackages, each on a page of its own: {links}.")
    parts += [_directive(module, members) for module, members in sorted(modules.items())]
    out[f"{FOLDER}/{_page(package)}"] = "\n\n".join(parts) + "\n"
  return out


#: A Markdown inline link: ``[text](target)``.
LINK = re.compile(r"\[(?P<text>[^\]]*)\]\((?P<target>[^)\s]+)\)")

#: A list item at the start of a line (a nested one, indented, belongs to its parent's item).
#: Not ``+``: the pages write lists with ``-``, and a wrapped line may start with ``+ x``.
LIST_ITEM = re.compile(r"^(?:[-*]|\d+\.) +\S")

#: What a page's HTML shows as code: doctests are right there and nowhere else.
CODE = re.compile(r"<pre\b.*?</pre>|<code\b.*?</code>", re.S)

LOG = logging.getLogger("mkdocs.hooks.docs_site")  # a warning fails `mkdocs build --strict`


def repository_path(page_path, target):
  """The repository path of the link ``target`` of the page ``docs/<page_path>`` when it leaves
  ``docs/`` for a file of the repository, else None."""
  path = target.split("#", 1)[0]
  if not path or "://" in path or path.startswith(("/", "mailto:")):
    return None
  docs = ROOT / "docs"
  resolved = pathlib.Path(os.path.normpath(docs / pathlib.PurePosixPath(page_path).parent / path))
  if resolved.is_relative_to(docs) or not resolved.is_relative_to(ROOT) or not resolved.exists():
    return None
  return resolved.relative_to(ROOT).as_posix()


def lists_after_paragraphs(markdown):
  """``markdown`` with a blank line before each list that follows a paragraph line directly
  (outside fenced code), as GitHub reads it."""
  lines, fenced, previous = [], False, ""
  for line in markdown.split("\n"):
    if line.startswith("```"):
      fenced = not fenced
    paragraph = previous.strip() and not previous.startswith((" ", "|", "#", ">", "```"))
    if not fenced and LIST_ITEM.match(line) and paragraph and not LIST_ITEM.match(previous):
      lines.append("")
    lines.append(line)
    previous = line
  return "\n".join(lines)


def on_files(files, config):
  """MkDocs hook: adds the generated pages to the site's files (and so to its default nav)."""
  from mkdocs.structure.files import File  # noqa: PLC0415  (mkdocs is needed by the build only)

  for path, text in pages().items():
    files.append(File.generated(config, path, content=text))
  return files


def on_page_markdown(markdown, page, **kwargs):
  """MkDocs hook: lists after paragraphs, and links out of ``docs/`` (item 2)."""
  del kwargs

  def replace(match):
    path = repository_path(page.file.src_uri, match["target"])
    if path is None:
      return match[0]
    text = match["text"]
    return text if path in text else f"{text} (`{path}` in the repository)"

  return LINK.sub(replace, lists_after_paragraphs(markdown))


def on_page_content(html, page, **kwargs):
  """MkDocs hook: warns (fails the strict build) on a reference page that shows a docstring
  example as prose (item 3): ``>>>`` outside code, or a blockquote (what Markdown makes of a
  paragraph that starts with ``>>>``; the docstrings hold no quotes)."""
  del kwargs
  if page.file.src_uri.startswith(f"{FOLDER}/"):
    prose = CODE.sub("", html)
    if "&gt;&gt;&gt;" in prose or "<blockquote" in prose:
      LOG.warning("%s shows a docstring example as prose, not code", page.file.src_uri)
  return html
