"""Generated blocks: the tables of README.md and docs/ that come from records, between markers.

A block is the lines between ``<!-- NAME -->`` and ``<!-- /NAME -->``, each marker on a line of
its own; ``NAME`` is ``<module>:<table>``, e.g. ``experiments.second.grid:summary``. The ``report``
command of an experiment recomputes its blocks from its records and rewrites them in every file
of :data:`FILES` that holds them (:func:`rewrite`); its tests check that each block in the
committed files equals what the committed records give (:func:`stale`).

Example:
  >>> text = "intro\\n<!-- m:t -->\\nold\\n<!-- /m:t -->\\nend\\n"
  >>> replace(text, "m:t", ["| a |", "|---|"])
  'intro\\n<!-- m:t -->\\n| a |\\n|---|\\n<!-- /m:t -->\\nend\\n'
  >>> read(text, "m:t"), names(text, "m")
  (['old'], ['m:t'])
"""

import re

from experiments import store

#: The files, relative to the repository root, whose blocks the report commands keep.
FILES = (
  "README.md",
  "docs/choosing-a-loss.md",
  "docs/evidence-grid.md",
  "docs/evidence-third-edition.md",
)


def _markers(name):
  return f"<!-- {name} -->", f"<!-- /{name} -->"


def _span(text, name):
  """``(start, end)``: the offsets of the block's first line and of its closing marker, or
  ``None`` without the block; a ``ValueError`` for a block opened and not closed."""
  opening, closing = _markers(name)
  start = text.find(opening + "\n")
  if start < 0:
    return None
  start += len(opening) + 1
  end = text.find(closing, start)
  if end < 0:
    raise ValueError(f"The generated block {name!r} is opened and never closed ({closing!r}).")
  return start, end


def names(text, module):
  """The names of the blocks of ``module`` (the part before ``:``) in ``text``, in order."""
  return re.findall(rf"^<!-- ({re.escape(module)}:[\w.-]+) -->$", text, flags=re.MULTILINE)


def read(text, name):
  """The lines of the block ``name`` in ``text``, or ``None`` where ``text`` has no such block."""
  span = _span(text, name)
  return None if span is None else text[span[0] : span[1]].splitlines()


def replace(text, name, lines):
  """``text`` with the lines of the block ``name`` replaced by ``lines``."""
  span = _span(text, name)
  if span is None:
    raise ValueError(f"The text holds no generated block {name!r}.")
  return text[: span[0]] + "".join(line + "\n" for line in lines) + text[span[1] :]


def stale(module, blocks, root=store.ROOT):
  """What differs between the blocks of ``module`` in :data:`FILES` and ``blocks`` (``{name:
  lines}``, recomputed from the records): a list of ``(file, name, problem)``, empty when every
  block is current, each of ``blocks`` appears somewhere and no file holds an unknown one."""
  problems, seen = [], set()
  for path in FILES:
    text = (root / path).read_text(encoding="utf-8")
    for name in names(text, module):
      seen.add(name)
      if name not in blocks:
        problems.append((path, name, "no such block"))
      elif read(text, name) != blocks[name]:
        problems.append((path, name, "differs from the records"))
  problems += [("-", name, "in no file") for name in sorted(set(blocks) - seen)]
  return problems


def rewrite(module, blocks, root=store.ROOT):
  """Rewrites every block of ``module`` in :data:`FILES` with ``blocks`` (``{name: lines}``);
  returns the files changed. A block name no entry of ``blocks`` has raises ``ValueError``."""
  changed = []
  for path in FILES:
    text = (root / path).read_text(encoding="utf-8")
    new = text
    for name in names(text, module):
      if name not in blocks:
        raise ValueError(f"{path}: unknown generated block {name!r}; known: {sorted(blocks)}.")
      new = replace(new, name, blocks[name])
    if new != text:
      (root / path).write_text(new, encoding="utf-8")
      changed.append(path)
  return changed
