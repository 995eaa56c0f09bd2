"""NeuralSort: the continuous relaxation of sorting of Grover et al., "Stochastic Optimization of
Sorting Networks via Continuous Relaxations", ICLR 2019 (Sec. 3: Thm. 4 and the relaxation that
follows it).

For scores ``s`` of ``n`` items and ``A_s[i, j] = |s_i - s_j|``, Theorem 4 writes the ``r``-th
row (``r = 1..n``) of the permutation matrix that sorts ``s`` in *descending* order as the argmax
of ``(n + 1 - 2 r) s - A_s 1``; NeuralSort replaces the argmax by a softmax with temperature
``tau > 0`` (Sec. 3):

    P_hat[r, :] = softmax( ((n + 1 - 2 r) s - A_s 1) / tau )

Each row is a distribution over the items (row-stochastic; columns need not sum to 1) and
``P_hat`` tends to the sorting permutation as ``tau -> 0`` (Sec. 3).

Convention. Like every operator of :mod:`tfrank4class.ranking` that returns a relaxed permutation
(and like difftopk, which calls NeuralSort on ``-s`` and transposes), :func:`neuralsort` returns
``P[b, i, j]``: the weight of item ``i`` at *ascending* position ``j`` (``j = n - 1`` is the
largest score), i.e. ``P[i, j] = P_hat[n - j, i]`` in the paper's 1-based rows. Its columns sum
to 1.

``hard=True`` is the straight-through estimator of Grover et al. (Sec. 3): the
forward value is the one-hot matrix that puts, at each position, the item with the largest weight
there; the gradient is that of ``P``. Deviation from difftopk 0.2.0 on purpose: difftopk takes
the argmax over positions for each item of the transposed matrix, which need not be a permutation
(two items can pick one position); we take it per position over items, as Grover et al. do.

Written on ``keras.ops``: TensorFlow, JAX and PyTorch backends. ``torch.compile`` of
:func:`neuralsort` was checked once (torch 2.13, CPU): the same values as eager.
"""

from tfrank4class import backend, checks
from tfrank4class.compat import ops


def neuralsort(scores, temperature=1.0, hard=False):
  """NeuralSort (Grover et al., ICLR 2019, Sec. 3): relaxed ascending permutation ``[B, n, n]``.

      logits[b, j, i] = (2 j + 1 - n) s_i - sum_k |s_i - s_k|       (j = 0..n-1, ascending)
      P[b, i, j]      = softmax_i(logits[b, j, :] / temperature)

  (the relaxation of Sec. 3 with ``s -> -s``; see the module docstring for the convention.)

  Args:
    scores: ``[B, n]`` real scores; float16 / bfloat16 / integers are computed in float32,
      float64 stays float64.
    temperature: ``tau > 0``.
    hard: straight-through: one-hot forward value, relaxed gradient.

  Returns:
    ``[B, n, n]``, entry ``[b, i, j]`` the weight of item ``i`` at ascending position ``j``;
    every column sums to 1.

  Example:
    >>> ops.convert_to_numpy(neuralsort([[2.0, 0.0, 1.0]], temperature=0.01)).round(2)[0]
    array([[0., 0., 1.],
           [1., 0., 0.],
           [0., 1., 0.]], dtype=float32)
  """
  temperature = checks.check_float("temperature", temperature, minimum=0.0, strict=True)
  if not isinstance(hard, bool):
    raise ValueError(f"`hard` must be a bool, got {hard!r}.")
  s = checks.check_scores("scores", scores, rank=2, min_length=1)
  n = ops.shape(s)[-1]
  spread = ops.sum(tie_neutral_abs(s[:, :, None] - s[:, None, :]), axis=-1)  # [B, n]
  position = ops.cast(2 * ops.arange(n) + 1 - n, backend.dtype_name(s))  # [n]
  logits = position[None, :, None] * s[:, None, :] - spread[:, None, :]  # [B, j, i]
  p = ops.transpose(ops.softmax(logits / temperature, axis=-1), [0, 2, 1])
  return straight_through(p) if hard else p


def tie_neutral_abs(x):
  """``|x|`` with the derivative 0 at ``x = 0`` (tied scores) on every backend: TensorFlow's and
  PyTorch's ``abs`` have it; on JAX, whose ``abs`` has 1 there, it is written as ``x sign(x)``
  (two ops on ``[B, n, n]`` and their gradients: 1.07-1.13x main's time on TensorFlow where it
  was used there too; benchmarks/backends.md, "The smooth SVM on PyTorch's own ops, and softmax
  on JAX").

  Example:
    >>> ops.convert_to_numpy(tie_neutral_abs(ops.convert_to_tensor([-2.0, 0.0, 3.0])))
    array([2., 0., 3.], dtype=float32)
  """
  if backend.name() == "jax":
    return x * ops.sign(x)
  return ops.abs(x)


def straight_through(p):
  """``p`` ``[B, n, n]`` with the forward value one-hot at each column's largest entry (the
  straight-through estimator: the gradient is that of ``p``)."""
  one_hot = ops.one_hot(ops.argmax(p, axis=1), ops.shape(p)[1], axis=1, dtype=backend.dtype_name(p))
  return p + ops.stop_gradient(one_hot - p)
