"""SoftSort: the continuous relaxation of argsort of Prillo & Eisenschlos, "SoftSort: A
Continuous Relaxation for the argsort Operator", ICML 2020 (Sec. 3, the definition of SoftSort).

For scores ``s`` and ``sort(s)`` the scores sorted in decreasing order,

    SoftSort_tau^d(s) = softmax( -d(sort(s) 1^T, 1 s^T) / tau )           (row-wise softmax)

with ``d`` a semi-metric applied elementwise: the paper uses ``d(x, y) = |x - y|`` and also
discusses ``|x - y|^2`` (Sec. 3). Row ``r`` is a distribution over the items, peaked at the
item whose score is the ``r``-th largest; as ``tau -> 0`` it tends to the one-hot argsort.

Convention. As every permutation operator of :mod:`tfrank4class.ranking` (and difftopk, which
applies SoftSort to ``-s`` and transposes), :func:`softsort` returns ``P[b, i, j]``: the weight
of item ``i`` at *ascending* position ``j``, ``P[i, j] = softmax_i(-|sort_asc(s)_j - s_i|^p /
tau)``, whose columns sum to 1.

``hard=True`` is the straight-through estimator of the paper (Sec. 3, as for NeuralSort): the
forward value puts a one at each position's largest weight, the gradient is the relaxed one.

Written on ``keras.ops``: TensorFlow, JAX and PyTorch backends.
"""

from tfrank4class import checks
from tfrank4class.compat import ops
from tfrank4class.ranking.neuralsort import straight_through, tie_neutral_abs


def softsort(scores, temperature=1.0, power=1.0, hard=False):
  """SoftSort (Prillo & Eisenschlos, ICML 2020, Sec. 3): relaxed ascending permutation.

      P[b, i, j] = softmax_i( -|sort_asc(s)_j - s_i| ** power / temperature )

  Args:
    scores: ``[B, n]`` real scores; float16 / bfloat16 / integers are computed in float32,
      float64 stays float64.
    temperature: ``tau > 0``.
    power: the exponent ``p > 0`` of the distance: 1 is the paper's ``|x - y|``, 2 its squared
      variant (difftopk's ``pow``).
    hard: straight-through: one-hot forward value, relaxed gradient.

  Returns:
    ``[B, n, n]``, entry ``[b, i, j]`` the weight of item ``i`` at ascending position ``j``;
    every column sums to 1. The gradient flows through both ``s_i`` and the sorted values.

  Example:
    >>> ops.convert_to_numpy(softsort([[2.0, 0.0, 1.0]], temperature=0.01)).round(2)[0]
    array([[0., 0., 1.],
           [1., 0., 0.],
           [0., 1., 0.]], dtype=float32)
  """
  temperature = checks.check_float("temperature", temperature, minimum=0.0, strict=True)
  power = checks.check_float("power", power, minimum=0.0, strict=True)
  if not isinstance(hard, bool):
    raise ValueError(f"`hard` must be a bool, got {hard!r}.")
  s = checks.check_scores("scores", scores, rank=2, min_length=1)
  ascending = ops.sort(s, axis=-1)
  distance = tie_neutral_abs(s[:, :, None] - ascending[:, None, :])  # [B, i, j]
  if power != 1.0:
    distance = ops.power(distance, power)
  p = ops.softmax(-distance / temperature, axis=1)
  return straight_through(p) if hard else p
