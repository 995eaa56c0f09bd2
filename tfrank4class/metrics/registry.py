"""Metrics by name, for flags and configs: ``get("top_5")``, ``get("ndcg_5")``, ``get("mrr")``.

top_K    -> TopKAccuracy(K)     ndcg  -> NDCG()     ndcg_K -> NDCG(K)
mrr      -> MRR()               mrr_K -> MRR(K)     map    -> MeanAveragePrecision()
recall_K -> RecallAtK(K)        precision_K -> PrecisionAtK(K)    spearman -> Spearman()

Each name is also a Keras metric identifier once the package is imported:
``model.compile(metrics=["ndcg_5", "top_1"])`` builds ``get("ndcg_5")`` and ``get("top_1")``,
under Keras 3 and tf-keras, after Keras's own names (:func:`tfrank4class.compat.resolve_by_name`).
"""

from tfrank4class import compat
from tfrank4class.metrics import classification
from tfrank4class.registry import Registry

PATTERNS = ("top_K", "ndcg", "ndcg_K", "mrr", "mrr_K", "map", "spearman", "recall_K", "precision_K")

#: Every metric by name; ``K`` is a positive integer (``top_5``; ``top_05`` is ``top_5`` too).
METRICS = Registry(
  "metric",
  message=(
    "Unknown metric name {value!r}; known metrics are: "
    + ", ".join(PATTERNS)
    + " (K a positive integer, e.g. top_5, ndcg_10)."
  ),
)
METRICS.add("ndcg", classification.NDCG)
METRICS.add("mrr", classification.MRR)
METRICS.add("map", classification.MeanAveragePrecision)
METRICS.add("spearman", classification.Spearman)
for _prefix, _cls in (
  ("top", classification.TopKAccuracy),
  ("ndcg", classification.NDCG),
  ("mrr", classification.MRR),
  ("recall", classification.RecallAtK),
  ("precision", classification.PrecisionAtK),
):
  METRICS.add_pattern(f"{_prefix}_K", f"{_prefix}_(0*[1-9][0-9]*)", _cls, int)
del _prefix, _cls
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
