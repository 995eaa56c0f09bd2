"""Metrics by name, for flags and configs: ``get("top_5")``, ``get("ndcg_5")``, ``get("mrr")``.

top_K    -> TopKAccuracy(K)     ndcg  -> NDCG()     ndcg_K -> NDCG(K)
mrr      -> MRR()               mrr_K -> MRR(K)     map    -> MeanAveragePrecision()
recall_K -> RecallAtK(K)        precision_K -> PrecisionAtK(K)    spearman -> Spearman()

A metric class names itself where it is defined, with the one export decorator
(:func:`tfrank4class.registry.export`): ``@export(METRICS, "map")`` for a plain name,
``@export(METRICS, "recall_K")`` for the family ``recall_1, recall_2, ...`` built as
``RecallAtK(K)``, and ``@export(METRICS, "ndcg[_K]")`` for both ``ndcg`` (``NDCG()``) and
``ndcg_K``. So adding a metric touches one module (its class) and its test.

Each name is also a Keras metric identifier once the package is imported:
``model.compile(metrics=["ndcg_5", "top_1"])`` builds ``get("ndcg_5")`` and ``get("top_1")``,
under Keras 3 and tf-keras, after Keras's own names (:func:`tfrank4class.compat.resolve_by_name`).
"""

from tfrank4class import compat
from tfrank4class.registry import Registry

#: The metric names in the order their classes register them (``K`` a positive integer); filled
#: by :meth:`MetricRegistry.add` when :mod:`tfrank4class.metrics.classification` is imported.
PATTERNS = []

_K = "(0*[1-9][0-9]*)"  # a positive integer, leading zeros allowed (top_05 is top_5)


class MetricRegistry(Registry):
  """The metric :class:`~tfrank4class.registry.Registry`, whose :meth:`add` reads templates.

  ``add("name", cls)`` registers a plain name, ``add("prefix_K", cls)`` the family
  ``prefix_<K>`` built as ``cls(K)``, ``add("prefix[_K]", cls)`` both. An unknown name raises a
  ``ValueError`` listing :data:`PATTERNS` in registration order.
  """

  def add(self, name, factory):
    plain, bracket, rest = name.partition("[_K]") if isinstance(name, str) else (name, "", "")
    if bracket and rest:
      raise ValueError(f"A metric template must end in '[_K]' or '_K', got {name!r}.")
    if isinstance(plain, str) and plain.endswith("_K"):
      self.add_pattern(plain, f"{plain[:-2]}_{_K}", factory, int)
      PATTERNS.append(plain)
      return factory
    super().add(plain, factory)
    PATTERNS.append(plain)
    if bracket:
      self.add_pattern(f"{plain}_K", f"{plain}_{_K}", factory, int)
      PATTERNS.append(f"{plain}_K")
    return factory

  def resolve(self, name):
    try:
      return super().resolve(name)
    except ValueError:
      raise ValueError(
        f"Unknown metric name {name!r}; known metrics are: {', '.join(PATTERNS)} "
        "(K a positive integer, e.g. top_5, ndcg_10)."
      ) from None


#: What the binaries and :func:`tfrank4class.train.results.evaluate_batches` report unless told
#: otherwise.
DEFAULT_NAMES = ("top_1", "top_5", "ndcg_5", "mrr")

#: Every metric by name; ``K`` is a positive integer (``top_5``; ``top_05`` is ``top_5`` too).
METRICS = MetricRegistry("metric")
compat.resolve_by_name("metrics", METRICS)


def parse(name):
  """``(metric class, constructor args)`` for ``name``, without building anything.

  Raises:
    ValueError: for a name that matches none of ``PATTERNS``, listing them.
  """
  _, cls, args = METRICS.resolve(name)
  return cls, args


def names():
  """Every name :func:`get` accepts, sorted; a parameterised family under its template
  (``"ndcg_K"`` for ``ndcg_1``, ``ndcg_5``...)."""
  return list(METRICS.names())


def get(name):
  """Returns a fresh Keras metric for ``name`` (see the module docstring for the names)."""
  return METRICS.get(name)


def for_classes(names, num_classes):
  """``names`` for lists of ``num_classes`` classes: a ``top_K`` with ``K`` above the classes is
  1 for every list (:class:`~tfrank4class.metrics.TopKAccuracy` refuses it), so
  :data:`DEFAULT_NAMES` leave it out, and any other ``names`` holding one raise.

  Example:
    >>> for_classes(DEFAULT_NAMES, 4)
    ('top_1', 'ndcg_5', 'mrr')
    >>> for_classes(["top_20", "mrr"], 10)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: `metrics` names 'top_20', Top-20 accuracy of lists of 10 classes (1 for every...
  """
  top_k = parse("top_1")[0]
  too_wide = [n for n in names if parse(n)[0] is top_k and parse(n)[1][0] > num_classes]
  if too_wide and tuple(names) != DEFAULT_NAMES:
    name = too_wide[0]
    raise ValueError(
      f"`metrics` names {name!r}, Top-{parse(name)[1][0]} accuracy of lists of {num_classes} "
      f"classes (1 for every list); name a top_K with K at most {num_classes}."
    )
  return tuple(n for n in names if n not in too_wide)
