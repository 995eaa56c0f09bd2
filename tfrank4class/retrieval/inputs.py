"""Host-side checks of the retrieval metrics' inputs: embeddings, labels, query / gallery, cut-offs.

The retrieval metrics evaluate a whole data set on the host (:mod:`tfrank4class.retrieval.
evaluation`); these functions turn their arguments into numpy arrays the block loop can slice,
or raise an error naming the argument, the value and what is allowed. Labels go through the
package's one label parser (:func:`tfrank4class.labels.parse_labels`, class ids only).
"""

import numbers

import numpy as np

from tfrank4class import checks
from tfrank4class.compat import ops
from tfrank4class.labels import check_batch_size, parse_labels

#: How queries without any positive in the gallery are averaged.
SINGLETONS = ("exclude", "miss")


def as_embeddings(embeddings):
  """Finite float64 ``[N, D]`` embeddings (``N >= 2``, ``D >= 1``), each row scaled to unit norm.

  Normalisation is row-wise in float64, so identical rows give bit-identical unit vectors; a zero
  row stays zero (cosine similarity 0 with everything, ``tf.math.l2_normalize`` semantics).

  Raises:
    TypeError: non-numeric embeddings.
    ValueError: a wrong shape, or rows holding NaN or Inf (the first offending rows are named).

  Example:
    >>> as_embeddings([[3.0, 4.0], [0.0, 0.0]]).tolist()
    [[0.6, 0.8], [0.0, 0.0]]
  """
  try:
    e = np.asarray(ops.convert_to_numpy(embeddings))
  except Exception as err:  # pylint: disable=broad-except
    raise TypeError(
      f"`embeddings` must be a numeric array [N, D], got {embeddings!r}: {err}"
    ) from None
  if not (np.issubdtype(e.dtype, np.floating) or np.issubdtype(e.dtype, np.integer)):
    raise TypeError(f"`embeddings` must be numeric, got dtype {e.dtype}.")
  if e.ndim != 2:
    raise ValueError(f"`embeddings` must have shape [num_items, dim], got shape {e.shape}.")
  if e.shape[0] < 2 or e.shape[1] < 1:
    raise ValueError(
      f"`embeddings` must hold at least 2 items of dimension >= 1, got shape {e.shape}."
    )
  e = e.astype(np.float64)
  bad = np.flatnonzero(~np.isfinite(e).all(axis=1))
  if bad.size:
    raise ValueError(
      f"`embeddings` must be finite, but {bad.size} row(s) hold NaN or Inf "
      f"(first rows: {bad[:5].tolist()})."
    )
  norms = np.sqrt(np.einsum("ij,ij->i", e, e))
  return e / np.where(norms > 0, norms, 1.0)[:, None]


def as_labels(labels, embeddings):
  """int64 class ids ``[N]`` of ``labels`` ``[N]`` / ``[N, 1]``, one per row of ``embeddings``.

  :func:`tfrank4class.labels.parse_labels` (``dense=False``) and
  :func:`tfrank4class.labels.check_batch_size`, run eagerly.

  Raises:
    TypeError: non-numeric labels.
    ValueError: a shape other than ``[N]`` / ``[N, 1]``, or a length other than ``N``.
    InvalidArgumentError: ids that are not whole numbers ``>= 0``.

  Example:
    >>> as_labels([[1.0], [0.0]], [[1.0, 0.0], [0.0, 1.0]]).tolist()
    [1, 0]
  """
  ids = parse_labels(labels, name="labels", dense=False, size="N").ids
  check_batch_size(ids, embeddings, other_name="embeddings", items="embeddings", dimension="length")
  return np.asarray(ops.convert_to_numpy(ids), np.int64)


def as_subset(name, subset, n):
  """Row indices ``[k]`` (int64, distinct, in ``[0, n)``) of a query or gallery selection.

  Args:
    name: ``"query"`` or ``"gallery"``, for messages.
    subset: ``None`` (every row), row indices, or a boolean mask of length ``n``.
    n: the number of rows.

  Example:
    >>> as_subset("query", [True, False, True], 3).tolist()
    [0, 2]
  """
  if subset is None:
    return np.arange(n, dtype=np.int64)
  s = np.asarray(ops.convert_to_numpy(subset))
  if s.dtype == bool:
    if s.shape != (n,):
      raise ValueError(
        f"`{name}` given as a boolean mask must have shape ({n},), got shape {s.shape}."
      )
    s = np.flatnonzero(s)
  elif s.ndim != 1 or not (np.issubdtype(s.dtype, np.integer) or s.size == 0):
    raise ValueError(
      f"`{name}` must be a 1-D array of row indices or a boolean mask of length {n}, "
      f"got {subset!r}."
    )
  s = s.astype(np.int64)
  if s.size == 0:
    raise ValueError(f"`{name}` must select at least one item, got an empty selection.")
  if s.min() < 0 or s.max() >= n:
    raise ValueError(f"`{name}` holds row indices outside [0, {n}): {subset!r}.")
  if np.unique(s).size != s.size:
    raise ValueError(f"`{name}` must not repeat row indices.")
  return s


def check_ks(ks):
  """The cut-offs ``ks`` (a positive int or a non-empty sequence of them) as a tuple of ints.

  Example:
    >>> check_ks(4), check_ks([1, 2])
    ((4,), (1, 2))
  """
  if isinstance(ks, numbers.Integral) and not isinstance(ks, bool):
    ks = (ks,)
  try:
    ks = tuple(ks)
  except TypeError:
    raise ValueError(
      f"`ks` must be a positive integer or a sequence of them, got {ks!r}."
    ) from None
  if not ks:
    raise ValueError("`ks` must hold at least one cut-off, got an empty sequence.")
  for k in ks:
    checks.check_int("ks", k, minimum=1)
  return tuple(int(k) for k in ks)
