"""Metrics by name, for flags and configs: ``get("top_5")``, ``get("ndcg_5")``, ``get("mrr")``.

    top_K    -> TopKAccuracy(K)     ndcg  -> NDCG()     ndcg_K -> NDCG(K)
    mrr      -> MRR()               mrr_K -> MRR(K)     map    -> MeanAveragePrecision()
    recall_K -> RecallAtK(K)        precision_K -> PrecisionAtK(K)    spearman -> Spearman()
"""
import re

from tfrank4class.metrics import classification

PATTERNS = ("top_K", "ndcg", "ndcg_K", "mrr", "mrr_K", "map", "spearman", "recall_K", "precision_K")

_FIXED = {"ndcg": classification.NDCG, "mrr": classification.MRR,
          "map": classification.MeanAveragePrecision, "spearman": classification.Spearman}
_WITH_K = {"top": classification.TopKAccuracy, "ndcg": classification.NDCG,
           "mrr": classification.MRR, "recall": classification.RecallAtK,
           "precision": classification.PrecisionAtK}


def parse(name):
  """``(metric class, constructor args)`` for ``name``, without building anything.

  Raises:
    ValueError: for a name that matches none of ``PATTERNS``, listing them.
  """
  if name in _FIXED:
    return _FIXED[name], ()
  match = re.fullmatch(r"(top|ndcg|mrr|recall|precision)_([0-9]+)", str(name))
  if match and int(match.group(2)) >= 1:
    return _WITH_K[match.group(1)], (int(match.group(2)),)
  raise ValueError(
      f"Unknown metric name {name!r}; known metrics are: {', '.join(PATTERNS)} "
      "(K a positive integer, e.g. top_5, ndcg_10).")


def get(name):
  """Returns a fresh Keras metric for ``name`` (see the module docstring for the names)."""
  cls, args = parse(name)
  return cls(*args)
