"""The rank of the true class per example, the metrics recomputed from it, and its compact form.

For scores ``[N, C]`` and true classes ``[N]``, :func:`true_ranks` gives ``rank`` (1 + the number
of classes scored strictly higher) and ``ties`` (the number of other classes scored exactly the
same). Ties are broken at random in expectation, as the package's metrics do: the true class is
equally likely at each position ``rank .. rank + ties``, so each metric of :func:`per_example`
is the mean over those positions (Top-k: the share of them ``<= k``; NDCG@5 of one relevant
class: ``1 / log2(1 + position)`` for positions ``<= 5``; MRR: ``1 / position``).
:func:`encode` / :func:`decode` store an int array as zlib-compressed little-endian uint16 in
base64 (a run stores one pair per checkpoint; most ranks are small, so they compress well).

Example:
  >>> rank, ties = true_ranks(np.array([[3.0, 1.0, 3.0], [0.0, 2.0, 1.0]]), [2, 0])
  >>> rank.tolist(), ties.tolist()
  ([1, 3], [1, 0])
  >>> per_example(rank, ties, "top_1").tolist()
  [0.5, 0.0]
  >>> decode(encode([1, 2, 300])).tolist()
  [1, 2, 300]
"""

import base64
import zlib

import numpy as np

METRICS = ("top_1", "top_5", "ndcg_5", "mrr")


def true_ranks(scores, labels):
  """``(rank, ties)``, int64 ``[N]`` each, of the true classes ``labels`` in ``scores``."""
  scores = np.asarray(scores)
  labels = np.asarray(labels)
  if scores.ndim != 2 or labels.shape != (scores.shape[0],):
    raise ValueError(
      f"`scores` must be [N, C] and `labels` [N], got {scores.shape} and {labels.shape}."
    )
  if len(labels) and (labels.min() < 0 or labels.max() >= scores.shape[1]):
    raise ValueError(
      f"`labels` must be class ids in [0, {scores.shape[1]}), got {labels.min()} .. {labels.max()}."
    )
  if not np.isfinite(scores).all():
    raise ValueError("`scores` must be finite: a run with non-finite scores has no ranks.")
  true = scores[np.arange(len(labels)), labels][:, None]
  rank = 1 + np.sum(scores > true, axis=1)
  ties = np.sum(scores == true, axis=1) - 1
  return rank.astype(np.int64), ties.astype(np.int64)


def _gain(position, metric):
  if metric == "mrr":
    return 1.0 / position
  if metric == "ndcg_5":
    return np.where(position <= 5, 1.0 / np.log2(1.0 + position), 0.0)
  k = int(metric.split("_")[1])
  return (position <= k).astype(np.float64)


def per_example(rank, ties, metric):
  """float64 ``[N]``: ``metric`` (one of :data:`METRICS`) of each example, ties in expectation."""
  if metric not in METRICS:
    raise ValueError(f"`metric` must be one of {list(METRICS)}, got {metric!r}.")
  rank, ties = np.asarray(rank, np.int64), np.asarray(ties, np.int64)
  total = np.zeros(len(rank))
  for offset in range(int(ties.max(initial=0)) + 1):
    inside = offset <= ties
    total += np.where(inside, _gain(rank + offset, metric), 0.0)
  return total / (ties + 1)


def summary(rank, ties):
  """``{metric: mean over examples}`` for every metric of :data:`METRICS`."""
  return {m: float(np.mean(per_example(rank, ties, m))) for m in METRICS}


def encode(values):
  """The compact text of non-negative integers ``values`` below 65,536."""
  values = np.asarray(values)
  if values.size and (values.min() < 0 or values.max() > 65535):
    raise ValueError(f"`values` must lie in [0, 65535], got {values.min()} .. {values.max()}.")
  packed = zlib.compress(values.astype("<u2").tobytes(), 9)
  return base64.b64encode(packed).decode("ascii")


def decode(text):
  """The int64 array :func:`encode` stored in ``text``."""
  return np.frombuffer(zlib.decompress(base64.b64decode(text)), "<u2").astype(np.int64)
