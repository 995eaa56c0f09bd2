"""The API reference pages of the documentation site, generated from the public API list.

The public API is what the package ``__init__`` files export in ``__all__`` (which holds every
class of :data:`tfrank4class.registry.PUBLIC`: ``tests/test_registry.py``). This module reads
those ``__all__`` lists and the imports that bind them from the source, without importing the
package (so the site builds without TensorFlow), and writes one page per package that has an
``__all__``: ``reference/<package>.md``, with the package's docstring, then one section per
module that defines an exported name, with that module's docstring (where the formulas are) and
the exported names (signature, docstring, example). A name exported by a package and by its
subpackage is documented on the subpackage's page; a package's page links its subpackages'.

MkDocs runs it as a hook (``mkdocs.yml``, ``hooks:``): :func:`on_files` adds the pages to the
site at build time, so a new public name needs no edit here. ``tests/test_docs_site.py`` checks
with :func:`pages` that every public name is on a page.
"""

import ast
import pathlib

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


def on_files(files, config):
  """MkDocs hook: adds the generated pages to the site's files (and so to its default nav)."""
  from mkdocs.structure.files import File  # noqa: PLC0415  (mkdocs is needed by the build only)

  for path, text in pages().items():
    files.append(File.generated(config, path, content=text))
  return files
