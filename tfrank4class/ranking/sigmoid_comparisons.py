"""Sums of sigmoid comparisons over a list, the core of the pairwise sorters (SoDeep, Engilberge
et al., CVPR 2019, Sec. 4.1.2, Eq. 11-12, and our attention sorter):

    S_i = sum_j sigmoid(k_i * (z_j - z_i))      (all j, i included; the soft rank is S_i + 0.5)

* :func:`pairwise_sigmoid_sum`: every ``S_i``, ``O(B n^2)`` time, with the ``[B, n, n]``
  comparisons processed in column blocks one after another and a hand-written backward pass, so
  memory is bounded at any ``n`` (:func:`block_columns`, :data:`PAIRS_PER_BLOCK`);
* :func:`pairwise_sigmoid_row_sum`: ``S_t`` of one item per list, ``O(B n)``.

Used by :class:`~tfrank4class.ranking.PairwiseSigmoidSorter` and
:class:`~tfrank4class.ranking.AttentionSorter`.
"""

from tfrank4class import backend, checks
from tfrank4class.compat import ops

#: Default number of columns processed at once by :func:`pairwise_sigmoid_sum`.
DEFAULT_BLOCK_SIZE = 256

#: The most pairs ``(i, j)`` of one list that :func:`pairwise_sigmoid_sum` holds at once: a list
#: longer than ``PAIRS_PER_BLOCK / block_size`` is processed in fewer columns per block, so that
#: its memory is ``O(B * PAIRS_PER_BLOCK)`` at any length (``block_columns``).
PAIRS_PER_BLOCK = 2**20


def block_columns(n, block_size):
  """The columns per block of :func:`pairwise_sigmoid_sum` for lists of ``n`` items (``None``:
  unknown when traced): ``block_size``, or fewer where ``n * block_size`` would exceed
  :data:`PAIRS_PER_BLOCK`, and at least 1.

  Example:
    >>> block_columns(1000, 256), block_columns(100_000, 256)
    (256, 10)
  """
  if n is None:
    return block_size
  return max(1, min(block_size, PAIRS_PER_BLOCK // n))


def _column_blocks(values, block_size):
  """Pads ``values`` ``[B, n]`` to a multiple of ``block_size`` and returns ``[nb, B, block]``
  blocks plus the matching validity mask."""
  batch, n = ops.shape(values)[0], ops.shape(values)[-1]
  nb = (n + block_size - 1) // block_size
  pad = nb * block_size - n
  padded = ops.pad(values, [[0, 0], [0, pad]])
  mask = ops.pad(ops.ones_like(values), [[0, 0], [0, pad]])
  shape = (batch, nb, block_size)
  padded = ops.transpose(ops.reshape(padded, shape), [1, 0, 2])
  mask = ops.transpose(ops.reshape(mask, shape), [1, 0, 2])
  return padded, mask


def pairwise_sigmoid_sum(z, k, block_size=DEFAULT_BLOCK_SIZE):
  """``S_i = sum_j sigmoid(k_i * (z_j - z_i))`` over all ``j`` (``i`` included), memory-bounded.

  The ``[B, n, n]`` matrix of pairwise terms is never held at once: its columns are processed
  a block at a time, one block after another (:func:`tfrank4class.backend.sequential_fori_loop`),
  forward and backward (the gradient is written out by hand with
  :func:`tfrank4class.backend.custom_gradient`, ``d/du sigmoid(u) = sigmoid(u) (1 -
  sigmoid(u))``, each block's sigmoids recomputed). A block holds ``block_size`` columns, fewer
  for a list longer than ``PAIRS_PER_BLOCK / block_size`` (:func:`block_columns`), so memory is
  ``O(B * n * min(block_size, PAIRS_PER_BLOCK / n))``, at most ``O(B * PAIRS_PER_BLOCK)`` beside
  the ``[B, n]`` inputs and outputs; time is ``O(B * n^2)``.

  Args:
    z: float ``[B, n]``.
    k: float ``[B, n]``, the per-row steepness ``k_i > 0``.
    block_size: columns per block, at most.

  Returns:
    float ``[B, n]``. ``1 + sum_{j != i} sigmoid(k_i (z_j - z_i)) = S_i + 0.5`` is the soft rank of
    Eq. 11-12 (Sec. 4.1.2) of the SoDeep paper.

  Example:
    >>> z = ops.convert_to_tensor([[0.0, 1.0]])
    >>> ops.convert_to_numpy(pairwise_sigmoid_sum(z, ops.ones_like(z) * 100.0)).round(3)
    array([[1.5, 0.5]], dtype=float32)
  """
  block_size = checks.check_int("block_size", block_size, minimum=1)

  @backend.custom_gradient
  def _op(z, k):
    zi = z[:, :, None]
    ki = k[:, :, None]

    def add_block(zj, mj, index, total):
      del index
      return total + ops.sum(ops.sigmoid(ki * (zj[:, None, :] - zi)) * mj[:, None, :], axis=-1)

    total = _over_column_blocks(add_block, z, block_size, ops.zeros_like(z))

    def grad(upstream):
      return _pairwise_sigmoid_sum_grad(z, k, upstream, block_size)

    return total, grad

  return _op(ops.convert_to_tensor(z), ops.convert_to_tensor(k))


def pairwise_sigmoid_row_sum(z, k, index):
  """``S_t = sum_j sigmoid(k_t * (z_j - z_t))`` ``[B]`` for the one item ``t = index[b]`` of each
  list: the entry ``t`` of :func:`pairwise_sigmoid_sum`, from that item's row of comparisons
  alone, in ``O(B * n)`` time and memory (its gradient is the backend's autodiff). For
  standardised lists pass the raw scores and ``k * standard_scale(scores)``: the same terms,
  with exact ties exactly 0 (see
  :func:`~tfrank4class.ranking.sorter_base.standard_scale`).

  Args:
    z: float ``[B, n]``.
    k: float ``[B, n]``, the per-row steepness (only ``k_t`` is read; ``[B, 1]`` also serves).
    index: integer ``[B]``, the item of each list.

  Example:
    >>> z = ops.convert_to_tensor([[0.0, 1.0, 2.0]])
    >>> ops.convert_to_numpy(pairwise_sigmoid_row_sum(z, ops.ones_like(z) * 100.0, [1]))
    array([1.5], dtype=float32)
  """
  z, k = ops.convert_to_tensor(z), ops.convert_to_tensor(k)
  index = ops.cast(ops.convert_to_tensor(index), "int32")[:, None]
  zt = backend.take_along_axis(z, index, axis=-1)
  kt = backend.take_along_axis(k, index, axis=-1) if k.shape[-1] != 1 else k
  return ops.sum(ops.sigmoid(kt * (z - zt)), axis=-1)


def _over_column_blocks(step, z, block_size, init):
  """``carry = step(zj, mj, index, carry)`` for the column blocks ``zj`` ``[B, columns]`` of ``z``
  (``mj``: 1 for a real column, 0 for padding), one after another from ``init``; one direct call
  (``index`` 0) for a list that fits in one block."""
  columns = block_columns(z.shape[-1], block_size)
  if z.shape[-1] is not None and z.shape[-1] <= columns:
    return step(z, ops.ones_like(z), 0, init)
  blocks, masks = _column_blocks(z, columns)

  def body(index, carry):
    return step(ops.take(blocks, index, axis=0), ops.take(masks, index, axis=0), index, carry)

  return backend.sequential_fori_loop(0, ops.shape(blocks)[0], body, init)


def _pairwise_sigmoid_sum_grad(z, k, upstream, block_size):
  """The gradient of :func:`pairwise_sigmoid_sum` w.r.t. ``z`` and ``k``, block by block, with
  ``d/du sigmoid(u) = sigmoid(u) (1 - sigmoid(u))``."""
  zi, ki, gi = z[:, :, None], k[:, :, None], upstream[:, :, None]
  batch, n = ops.shape(z)[0], ops.shape(z)[-1]
  columns = block_columns(z.shape[-1], block_size)
  single = z.shape[-1] is not None and z.shape[-1] <= columns
  num_blocks = 1 if single else (n + columns - 1) // columns

  def add_block(zj, mj, index, carry):
    row, row_k, cols = carry
    diff = zj[:, None, :] - zi
    sig = ops.sigmoid(ki * diff)
    dsig = sig * (1.0 - sig) * mj[:, None, :]
    col = ops.sum(gi * ki * dsig, axis=1)  # sum_i g_i k_i s'_ij, this block's columns
    at_index = ops.cast(ops.equal(ops.arange(num_blocks), index), z.dtype)[:, None, None]
    return (
      row + ops.sum(dsig, axis=-1),  # sum_j s'_ij
      row_k + ops.sum(dsig * diff, axis=-1),  # sum_j s'_ij (z_j - z_i)
      cols + at_index * col[None],
    )

  width = n if single else columns
  init = (ops.zeros_like(z), ops.zeros_like(z), ops.zeros((num_blocks, batch, width), z.dtype))
  row, row_k, cols = _over_column_blocks(add_block, z, block_size, init)
  col = ops.reshape(ops.transpose(cols, [1, 0, 2]), (batch, -1))[:, :n]
  return col - upstream * k * row, upstream * row_k
