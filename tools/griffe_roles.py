"""A griffe extension for the documentation site: Sphinx roles as links, doctests as code.

The docstrings are Google style, read as Markdown, and name other objects with Sphinx roles
(``:func:`rank```, ``:class:`~tfrank4class.losses.Loss```, ``:mod:`tfrank4class.ranking```),
which Markdown would print as written. :class:`SphinxRoles` turns each into an *optional*
cross-reference of mkdocs-autorefs: a link where the target has an anchor on the site, plain code
where it has none (a private helper, a module without a page), so the strict build does not fail
on a reference to something the site does not document. The name is resolved in the scope of
the object that holds the docstring, as Sphinx would; a leading ``~`` shows its last part only.

It also renames the docstrings' ``Example:`` heading to griffe's ``Examples:`` section, so that
the doctests below it are shown as code (under ``Example:`` they would be read as Markdown), and
reStructuredText's ``::`` before a literal block to ``:`` (in Markdown the block is code already).

``mkdocs.yml`` loads it (``extensions: - tools/griffe_roles.py:SphinxRoles``); it needs griffe,
installed with the ``docs`` extra.
"""

import html
import re

import griffe

#: ``Example:`` or ``Example (what it shows):`` (the note may run over lines), the docstrings'
#: heading of a doctest, which griffe's Google parser takes for an admonition (its section is
#: ``Examples:``).
EXAMPLE = re.compile(
  r"^(?P<indent> *)Example(?: \((?P<note>[^\n]*?(?:\n(?!\s*\n)[^\n]*?)*?)\))?:$", re.M
)

#: reStructuredText's ``text::`` before a literal block; in Markdown the block is code already.
LITERAL = re.compile(r"(?<=\S)::$", re.M)

#: A Sphinx role; the target may be broken over two lines of the docstring.
ROLE = re.compile(
  r":(?:py:)?(?:attr|class|data|exc|func|meth|mod|obj|const):`(~?)([\w.\s]+?)(\(\))?`"
)


def _resolve(obj, target):
  """The full path of ``target`` seen from ``obj``, or ``target`` itself when unknown."""
  head, _, rest = target.partition(".")
  scope = obj if isinstance(obj, (griffe.Module, griffe.Class)) else obj.parent
  try:
    path = scope.resolve(head)
  except (griffe.NameResolutionError, AttributeError):
    return target
  return f"{path}.{rest}" if rest else path


def _link(obj, match):
  short, target, call = match.groups()
  target = re.sub(r"\s+", "", target)
  identifier = _resolve(obj, target)
  shown = target.rsplit(".", 1)[-1] if short else target
  code = f"<code>{html.escape(shown)}{call or ''}</code>"
  return f'<autoref identifier="{html.escape(identifier)}" optional>{code}</autoref>'


def _examples(match):
  """``Examples:``, and the note of ``Example (note):`` as the section's first line."""
  indent, note = match["indent"], match["note"]
  if note is None:
    return f"{indent}Examples:"
  return f"{indent}Examples:\n{indent}  {' '.join(note.split())}:"


def _rewrite(obj):
  if obj.docstring is not None:
    text = LITERAL.sub(":", EXAMPLE.sub(_examples, obj.docstring.value))
    obj.docstring.value = ROLE.sub(lambda m: _link(obj, m), text)
  for member in obj.members.values():
    if not member.is_alias:
      _rewrite(member)


class SphinxRoles(griffe.Extension):
  """Rewrites every docstring of the package as the module docstring says."""

  def on_package(self, *, pkg, **kwargs):
    """Once the package is loaded, so that names resolve in their complete scopes."""
    del kwargs
    _rewrite(pkg)
