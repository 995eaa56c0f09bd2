"""Counts of marked entries below every entry of a ``[B, C]`` matrix read as one list.

The counts behind :func:`tfrank4class.ranking.blackbox.blackbox_marked_rank`: each row ``b`` has
one marked entry ``(b, ids[b])`` with score ``marked_scores[b]`` (``+inf`` for a row without one),
and every entry of the scores, read as ONE list in row-major order, counts the marks ranked below
it under the tie rule of :func:`tfrank4class.ranking.rank` (``s_j > s_i``, or equal and ``j``
earlier). :func:`marked_below` counts once; :func:`marked_below_moved` counts before and after
the marks move, which is what the blackbox backward needs.
"""

from tfrank4class import backend
from tfrank4class.compat import ops
from tfrank4class.ranking import exact

# The most marks (rows) :func:`_compared` takes: XLA fuses the comparisons of this many marks and
# their sum into one loop over the scores; with 64 it materialises them.
MOST_MARKS_COMPARED = 32


def _by_comparison(scores):
  """Whether XLA compiles the counts (JAX; on TensorFlow the XLA clusters of
  :func:`tfrank4class.ranking.blackbox.blackbox_marked_rank` and ``jit_compile=True``) with at
  most :data:`MOST_MARKS_COMPARED` marks known when traced: then one fused pass of comparisons,
  otherwise a binary search per entry."""
  batch = exact.shape_of(scores)[0]
  return backend.compiled_by_xla() and isinstance(batch, int) and batch <= MOST_MARKS_COMPARED


def marked_below(scores, marked_scores, ids):
  """Int32 ``[B, C]``: for each entry of ``scores`` the number of marks ranked below it (see the
  module docstring), by :func:`_compared` or :func:`_searched` (see :func:`_by_comparison`)."""
  if _by_comparison(scores):
    below, own_tie = _compared(scores, marked_scores, ids)
    return ops.sum(ops.cast(below, "int32"), axis=0) + ops.cast(own_tie, "int32")
  return _searched(scores, marked_scores, ids)


def marked_below_moved(scores, marked_scores, moved, moved_marks, ids):
  """``(below, moved_below)``, int32 ``[B, C]`` each: :func:`marked_below` of ``scores`` and of
  ``moved``, the same scores with each row's mark (``marked_scores``, at ``ids``) moved to
  ``moved_marks``. Compared (see :func:`_by_comparison`), one fused pass over the entries: one
  sum over the marks (XLA writes two sums to two ``[B, C]`` buffers) packs both counts in one
  integer, ``moved_below + 2^bits * below`` with ``2^bits > B``, unpacked by bit operations,
  which XLA fuses into their readers (a division and a remainder it wrote to two more buffers);
  otherwise two searches."""
  if not _by_comparison(scores):
    return _searched(scores, marked_scores, ids), _searched(moved, moved_marks, ids)
  bits = exact.shape_of(scores)[0].bit_length()
  below, own_tie = _compared(scores, marked_scores, ids)
  moved_below, moved_tie = _compared(moved, moved_marks, ids)
  packed = ops.sum(ops.cast(moved_below, "int32") + (1 << bits) * ops.cast(below, "int32"), axis=0)
  packed = packed + ops.cast(moved_tie, "int32") + (1 << bits) * ops.cast(own_tie, "int32")
  return ops.right_shift(packed, bits), ops.bitwise_and(packed, (1 << bits) - 1)


def _compared(scores, marked_scores, ids):
  """``(below, own_tie)``: bool ``[B, B, C]``, mark ``k`` below entry ``(r, c)`` by its score and
  row, and bool ``[B, C]``, the one term that depends on the column, which the counts add:
  ``O(B^2 C)`` comparisons, no sort and no branch (under XLA fused with their sum over ``k`` into
  one loop over the scores for ``B <= 32``; eagerly materialised).

  Mark ``k`` is below entry ``(r, c)`` when ``s_k < s_rc``, or ``s_k == s_rc`` and ``k`` comes
  later in the flat order: for ``k > r`` that is ``s_k <= s_rc``; for ``k < r``, ``s_k < s_rc``;
  for ``k == r``, ``s_k < s_rc``, or ``s_k == s_rc`` and ``c < ids[r]`` (``own_tie``; inside
  the sum over the marks, XLA's loop ran about 1.5x slower)."""
  batch, classes = exact.shape_of(scores)
  rows = ops.arange(batch, dtype="int32")
  later = (rows[:, None] > rows[None, :])[:, :, None]  # [k, r]: mark k after every entry of row r
  marks = marked_scores[:, None, None]
  below = backend.where(later, marks <= scores[None], marks < scores[None])
  own_tie = ops.logical_and(
    marked_scores[:, None] == scores,
    ops.arange(classes, dtype="int32")[None, :] < ids[:, None],
  )
  return below, own_tie


def _searched(scores, marked_scores, ids):
  """:func:`marked_below` by one binary search of every entry into the ``B`` sorted marked
  scores, ``O(B C log B)``, and a second one only when some entry ties with a mark.

  Below an entry ``j`` are the marks ``m`` with ``s_m < s_j`` (``a_j`` of them, the search) and
  the marks ``m`` with ``s_m == s_j`` that come after ``j``; sorted by score and row, each such
  tie group is a run, searched with the integer key ``a * (2B + 2) + 2 * row + 1`` (mark) against
  ``a_j * (2B + 2) + 2 * row_j + [ids[row_j] <= column_j]`` (entry ``j``).
  """
  batch, classes = exact.shape_of(scores)
  order = backend.stable_argsort(marked_scores)
  ascending = ops.take(marked_scores, order)
  lower = ops.reshape(backend.searchsorted(ascending, ops.reshape(scores, [-1])), [batch, classes])
  # The first mark not below entry j; a tie when its score is s_j (+inf past the last mark).
  # A valid mark ties with itself: the second search is needed only when more entries tie than
  # there are valid marks, or when two marks share a score.
  bounded = ops.concatenate([ascending, ops.full_like(ascending[:1], float("inf"))])
  tied = ops.take(bounded, lower) == scores
  self_ties = ops.sum(ops.cast(ascending < float("inf"), "int32"))
  any_tie = ops.logical_or(
    ops.sum(ops.cast(tied, "int32")) > self_ties, ops.any(ascending[1:] == ascending[:-1])
  )

  def with_tied_after():
    width = 2 * batch + 2
    run_start = backend.searchsorted(ascending, ascending)
    run_end = backend.searchsorted(ascending, ascending, side="right")
    run_end = ops.concatenate([run_end, ops.zeros_like(run_end[:1])])
    run_key = run_start * width + 2 * ops.cast(order, "int32") + 1
    rows = ops.arange(batch, dtype="int32")[:, None]
    after_mark = ops.cast(ops.arange(classes, dtype="int32")[None, :] >= ids[:, None], "int32")
    key = ops.reshape(lower * width + 2 * rows + after_mark, [-1])
    at_or_before = backend.searchsorted(run_key, key, side="right")
    after = ops.take(run_end, lower) - ops.reshape(at_or_before, [batch, classes])
    return lower + backend.where(tied, after, ops.zeros_like(lower))

  return ops.cond(any_tie, with_tied_after, lambda: lower)
