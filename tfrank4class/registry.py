"""One registry pattern for everything the package builds by name.

A :class:`Registry` maps a name to a *factory* (a class or a function) and builds objects with
``get(name, **kwargs)``, so losses, metrics, interactions, encoders, sorters, pretrained sorter
weights and datasets are all looked up the same way:

    registry.get(name, **kwargs)  ==  factory(*args, **kwargs)

where ``args`` is empty for a plain name and holds the converted groups of a *pattern* entry
(``"ndcg_5"`` -> ``NDCG(5)``). An unknown name raises a ``ValueError`` that names the argument,
the value received and the known names. The module imports neither TensorFlow nor Keras, so any
front end (tf-keras or Keras 3) can use it.

Example:
  >>> shapes = Registry("shape")
  >>> @shapes.register("square")
  ... def square(side=1.0):
  ...   return ("square", side)
  >>> shapes.add_pattern("polygon_N", r"polygon_([3-9])", lambda n, side=1.0: (n, side), int)
  >>> shapes.names()
  ('polygon_N', 'square')
  >>> shapes.get("square", side=2.0)
  ('square', 2.0)
  >>> shapes.get("polygon_5")
  (5, 1.0)
  >>> shapes.get("circle")
  Traceback (most recent call last):
  ...
  ValueError: `name` must be one of ['polygon_N', 'square'], got 'circle'.
"""

import collections
import re

#: What :meth:`Registry.resolve` returns: the canonical ``name`` (after case folding and
#: aliases), the registered ``factory`` and the positional ``args`` a pattern entry parsed.
Resolved = collections.namedtuple("Resolved", ["name", "factory", "args"])

#: The default unknown-name message; see :class:`Registry` for the fields.
DEFAULT_MESSAGE = "`{argument}` must be one of {names}, got {value!r}."


class Registry:
  """Name -> factory, with ``names()``, ``get(name, **kwargs)`` and pattern entries.

  Membership (``name in registry``) is true for every name :meth:`get` accepts; iteration yields
  :meth:`names` (a pattern entry under its template name, e.g. ``"top_K"``); ``registry[name]``
  is the factory registered under a plain name or alias.

  Args:
    kind: what the registry holds, in the singular (``"loss"``, ``"encoder"``); used in error
      messages.
    argument: the name of the argument the looked-up name came from (``"name"``,
      ``"interaction"``, ``"sorter"``); used in error messages.
    message: the unknown-name message, a ``str.format`` template with the fields ``{kind}``,
      ``{argument}``, ``{value}`` (the name received, use ``{value!r}``), ``{names}`` (the sorted
      list of known names), ``{joined}`` (the same, comma-separated) and ``{aliases}`` (a dict).
      Default: :data:`DEFAULT_MESSAGE`.
    fold_case: look names up in lower case (entries must then be registered in lower case).
  """

  def __init__(self, kind, argument="name", message=None, fold_case=False):
    self.kind = kind
    self.argument = argument
    self.message = DEFAULT_MESSAGE if message is None else message
    self.fold_case = fold_case
    self._entries = {}
    self._patterns = {}  # template name -> (compiled regex, factory, convert)
    self._aliases = {}

  # --- registration --------------------------------------------------------------------------
  def _check_new(self, name):
    if not isinstance(name, str) or not name:
      raise ValueError(f"A {self.kind} name must be a non-empty string, got {name!r}.")
    if self.fold_case and name != name.lower():
      raise ValueError(f"{self.kind} names are looked up in lower case; got {name!r}.")
    if name in self._entries or name in self._patterns or name in self._aliases:
      raise ValueError(f"A {self.kind} named {name!r} is already registered.")

  def add(self, name, factory):
    """Registers ``factory`` under ``name``; returns ``factory``.

    Raises:
      ValueError: ``name`` is not a non-empty string or is already registered.
    """
    self._check_new(name)
    self._entries[name] = factory
    return factory

  def register(self, name):
    """Decorator form of :meth:`add`: ``@registry.register("name")`` over a class or function."""

    def decorator(factory):
      return self.add(name, factory)

    return decorator

  def add_pattern(self, name, pattern, factory, convert=str):
    """Registers a parameterised family of names, e.g. ``"ndcg_K"`` for ``ndcg_1``, ``ndcg_2``...

    A looked-up name that fully matches the regular expression ``pattern`` (and no plain name)
    is built as ``factory(*map(convert, groups), **kwargs)``.

    Args:
      name: the template name listed by :meth:`names`, e.g. ``"ndcg_K"``. It is not itself a
        name :meth:`get` accepts unless ``pattern`` matches it.
      pattern: a regular expression whose groups are the parameters.
      factory: called with the converted groups, then the keyword arguments of :meth:`get`.
      convert: applied to each group (a string), e.g. ``int``.
    """
    self._check_new(name)
    self._patterns[name] = (re.compile(pattern), factory, convert)

  def add_alias(self, alias, name):
    """Makes ``alias`` look up the plain entry ``name`` (not listed by :meth:`names`)."""
    if name not in self._entries:
      raise ValueError(f"Cannot alias {alias!r} to {name!r}: no {self.kind} named {name!r}.")
    self._check_new(alias)
    self._aliases[alias] = name

  # --- lookup --------------------------------------------------------------------------------
  def names(self):
    """The registered names, sorted (pattern entries by their template name, no aliases)."""
    return tuple(sorted(set(self._entries) | set(self._patterns)))

  def aliases(self):
    """``{alias: name}`` for the aliases added with :meth:`add_alias`."""
    return dict(self._aliases)

  def resolve(self, name):
    """Finds ``name`` without building anything; returns a :data:`Resolved`.

    Raises:
      ValueError: ``name`` is not registered; the message names the argument, the value and
        the known names.
    """
    key = name.lower() if self.fold_case and isinstance(name, str) else name
    if isinstance(key, str):
      key = self._aliases.get(key, key)
      if key in self._entries:
        return Resolved(key, self._entries[key], ())
      for regex, factory, convert in self._patterns.values():
        match = regex.fullmatch(key)
        if match:
          return Resolved(key, factory, tuple(convert(g) for g in match.groups()))
    known = self.names()
    raise ValueError(
      self.message.format(
        kind=self.kind,
        argument=self.argument,
        value=name,
        names=list(known),
        joined=", ".join(known),
        aliases=self.aliases(),
      )
    )

  def get(self, name, **kwargs):
    """Builds the entry ``name``: ``factory(*args, **kwargs)`` (see :meth:`resolve`)."""
    _, factory, args = self.resolve(name)
    return factory(*args, **kwargs)

  def __contains__(self, name):
    try:
      self.resolve(name)
    except ValueError:
      return False
    return True

  def __iter__(self):
    return iter(self.names())

  def __len__(self):
    return len(self._entries) + len(self._patterns)

  def __getitem__(self, name):
    key = name.lower() if self.fold_case and isinstance(name, str) else name
    key = self._aliases.get(key, key)
    if key not in self._entries:
      raise KeyError(name)
    return self._entries[key]

  def __repr__(self):
    return f"Registry({self.kind!r}, names={list(self.names())})"


#: Every Keras object of the package made public by :func:`export`: class name -> class. The
#: public API list (``tests/test_registry.py`` checks that each is reachable from its package's
#: ``__all__``).
PUBLIC = {}

#: The Keras identifier kind of each registry kind whose names ``compile`` also accepts.
_KERAS_KINDS = {"loss": "losses", "metric": "metrics"}


def export(registry=None, name=None):
  """The one decorator that makes a Keras class of the package public.

  It (1) registers the class with the bound Keras as ``tfrank4class>ClassName``, so ``.keras``
  files reload it without ``custom_objects`` (:func:`tfrank4class.compat.register_serializable`);
  (2) adds it to ``registry`` under ``name`` when both are given, so ``registry.get(name)`` and,
  for the loss and metric registries, ``compile(loss=name)`` / ``compile(metrics=[name])``
  build it; a name Keras itself resolves is refused (Keras's own names keep their meaning);
  (3) records it in :data:`PUBLIC`.

  Raises:
    ValueError: ``name`` is already registered, or is a Keras loss or metric identifier.

  Example (a new loss is this decorator over one class; see CONTRIBUTING.md):
    >>> from tfrank4class.compat import keras
    >>> toy_losses = Registry("loss")
    >>> @export(toy_losses, "toy_loss")
    ... class ToyLoss(keras.losses.Loss):
    ...   def call(self, y_true, y_pred):
    ...     return y_pred
    >>> type(toy_losses.get("toy_loss")).__name__
    'ToyLoss'
    >>> PUBLIC.pop("ToyLoss") is ToyLoss  # a doctest's class is not part of the API
    True
  """
  from tfrank4class import compat  # noqa: PLC0415  (this module itself imports no Keras)

  if (registry is None) != (name is None):
    raise ValueError("`registry` and `name` go together: give both or neither.")
  keras_kind = _KERAS_KINDS.get(getattr(registry, "kind", None))
  if keras_kind and compat.keras_resolves(keras_kind, name):
    raise ValueError(
      f"Cannot register a {registry.kind} named {name!r}: it is a Keras {registry.kind} "
      f"identifier, and `compile` builds Keras's own. Choose another name."
    )

  def decorator(cls):
    if registry is not None:
      registry.add(name, cls)  # refuses a duplicate before Keras sees the class
    cls = compat.register_serializable(cls)
    PUBLIC[cls.__name__] = cls
    return cls

  return decorator
