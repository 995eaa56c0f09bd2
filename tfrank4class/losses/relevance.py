"""Deprecated alias: the label parser moved to :mod:`tfrank4class.labels`.

``class_ids``, ``to_relevance`` and ``num_items`` are the functions of :mod:`tfrank4class.labels`
(the one label parser of the package, :func:`tfrank4class.labels.parse_labels`, used by losses,
metrics and retrieval alike); ``class_ids`` and ``to_relevance`` also stay importable from
``tfrank4class.losses``. Importing this module emits a ``DeprecationWarning``.
"""

import warnings

from tfrank4class.labels import class_ids, num_items, to_relevance

__all__ = ["class_ids", "num_items", "to_relevance"]

warnings.warn(
  "tfrank4class.losses.relevance is deprecated: import class_ids, to_relevance and num_items "
  "from tfrank4class.labels.",
  DeprecationWarning,
  stacklevel=2,
)
