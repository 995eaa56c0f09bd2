"""Soft sort and soft rank by projection onto the permutahedron (Blondel et al., ICML 2020).

Blondel, Teboul, Berthet, Djolonga, "Fast Differentiable Sorting and Ranking", ICML 2020 (not
the SoftSort of Prillo and Eisenschlos, :mod:`tfrank4class.ranking.softsort`). With
``rho = (n, n - 1, ..., 1)``, the permutahedron ``P(w)`` (the convex hull of the permutations of
``w``) and a regularisation ``Psi``: ``Q = 1/2 ||.||^2`` ("l2") or the entropy ``E`` ("kl"), the
regularised projection (Sec. 3, Eq. 6-7)

    P_Psi(z, w) = argmax_{mu in P(w)} <mu, z> - Psi(mu)

defines, with the regularisation strength ``eps > 0`` (Sec. 3, Eq. 8-9),

    soft sort:  s_eps(theta) = P_{eps Psi}(rho, theta) = P_Psi(rho / eps, theta)
    soft rank:  r_eps(theta) = P_{eps Psi}(-theta, rho) = P_Psi(-theta / eps, rho)   ("kl": w =
                log rho and the result is exp(P_E(.)) , Sec. 3)

As ``eps -> 0`` they tend to the sorted values and to the ranks; as ``eps -> inf`` to the mean.
Both reduce to isotonic regression (Sec. 4, Prop. 3): with ``sigma`` the permutation sorting
``z`` in decreasing order and ``s = z_sigma``,

    P_Q(z, w) = z - v_Q(s, w)_{sigma^-1},
    v_Q(s, w) = argmin_{v_1 >= .. >= v_n} 1/2 ||v - (s - w)||^2
    P_E(z, w) = z - v_E(s, w)_{sigma^-1},
    v_E(s, w) = argmin_{v_1 >= .. >= v_n} <exp(s - v), 1> + <exp(w), v>

whose solution is constant on blocks of consecutive indices, each block ``B`` at the value
(Sec. 4, Eq. 10-11)

    gamma_Q(B) = mean_{i in B} (s_i - w_i),   gamma_E(B) = log sum_B exp(s_i) - log sum_B exp(w_i).

:func:`isotonic_regression` finds the blocks by pooling adjacent violators (PAV, Sec. 4) in
parallel: every round merges *all* adjacent pairs of blocks that violate the order at once
(pooling a violating pair is always part of the solution, in any order), in a ``while_loop``
batched over the rows, each round ``O(n)`` work per row with segment sums. The number of rounds
is at most ``n - 1`` and usually far smaller. The blocks are then a constant for the gradient and
the values ``gamma(B)`` are recomputed with differentiable segment sums, so the backend's autodiff
gives the paper's Jacobian (Sec. 4, Lemma 1 / Prop. 4: block-wise means for "l2", block-wise
softmax weights for "kl"). Deviation from the paper on purpose: the sequential PAV of the
authors' code is ``O(n)`` per row but cannot be batched or compiled by XLA; the parallel rounds
can, at the price of up to ``O(n)`` rounds in the worst case.

Direction: the package ranks with 1 = highest score (:func:`tfrank4class.ranking.rank`), which is
``direction="DESCENDING"`` here (the default): the highest score gets the soft rank closest to 1
and soft sort returns the values in decreasing order. ``"ASCENDING"`` is the authors' default
(rank 1 = lowest; increasing order).

Written on ``keras.ops``: TensorFlow (eager, ``tf.function``, ``jit_compile=True``), JAX (eager,
``jax.jit``; the loop is ``lax.while_loop``, whose carry holds no gradient) and PyTorch (eager; the
loop is a Python loop). The segment sums are :func:`tfrank4class.backend.segment_sum` (Keras's
``segment_sum`` on PyTorch computes in float32 whatever the dtype; on TensorFlow it is
``unsorted_segment_sum``, with which the soft rank runs about twice as fast under ``tf.function``
as with a scatter-add).
float64 scores stay float64 on every backend (JAX: with ``jax_enable_x64``).
"""

from tfrank4class import backend, checks
from tfrank4class.compat import ops
from tfrank4class.ranking import exact

REGULARIZATIONS = ("l2", "kl")
DIRECTIONS = ("ASCENDING", "DESCENDING")


def _check(regularization_strength, regularization, direction):
  checks.check_float("regularization_strength", regularization_strength, minimum=0.0, strict=True)
  checks.check_choice("regularization", regularization, REGULARIZATIONS)
  checks.check_choice("direction", direction, DIRECTIONS)
  return float(regularization_strength)


def _segment_sum(x, segments, num_segments):
  """Sums of the entries of ``x`` ``[B, n]`` by global segment id ``segments`` ``[B, n]``, in
  the dtype of ``x``."""
  return backend.segment_sum(ops.reshape(x, (-1,)), ops.reshape(segments, (-1,)), num_segments)


def _segment_values(s, w, segments, num_segments, regularization):
  """``gamma(B)`` of every block ``B`` (by global segment id), differentiable in ``s`` and ``w``."""
  if regularization == "l2":
    total = _segment_sum(s - w, segments, num_segments)
    count = _segment_sum(ops.ones_like(s), segments, num_segments)
    return total / backend.maximum(count, 1.0)

  def log_sum_exp(x):
    flat_segments = ops.reshape(segments, (-1,))
    top = ops.segment_max(ops.reshape(x, (-1,)), flat_segments, num_segments=num_segments)
    top = ops.stop_gradient(backend.where(ops.isfinite(top), top, ops.zeros_like(top)))
    total = _segment_sum(ops.exp(x - ops.take(top, segments)), segments, num_segments)
    return ops.log(backend.where(total > 0, total, ops.ones_like(total))) + top  # 0: empty block

  return log_sum_exp(s) - log_sum_exp(w)


def isotonic_regression(s, w, regularization="l2"):
  """The decreasing isotonic solution ``v_Psi(s, w)`` of each row (Blondel et al., Sec. 4).

      "l2": argmin_{v_1 >= ... >= v_n} 1/2 ||v - (s - w)||^2
      "kl": argmin_{v_1 >= ... >= v_n} <exp(s - v), 1> + <exp(w), v>

  solved by parallel pooling of adjacent violators (see the module docstring); the gradient is
  that of the block values ``gamma(B)`` (Eq. 10-11) with the blocks held fixed.

  Args:
    s, w: ``[B, n]`` float tensors of one dtype (``n`` may be unknown when traced).
    regularization: ``"l2"`` or ``"kl"``.

  Returns:
    ``[B, n]``, non-increasing along each row.

  Example:
    >>> v = isotonic_regression([[1.0, 3.0, 2.0, 0.0]], [[0.0, 0.0, 0.0, 0.0]])
    >>> ops.convert_to_numpy(v).tolist()  # 1 < 3 violate: both pooled to 2, then 2, 0 in order
    [[2.0, 2.0, 2.0, 0.0]]
  """
  checks.check_choice("regularization", regularization, REGULARIZATIONS)
  s = checks.check_scores("s", s)
  w = ops.cast(checks.check_scores("w", w), backend.dtype_name(s))
  rows, n = exact.shape_of(s)
  offsets = (ops.arange(rows, dtype="int32") * n)[:, None]
  num_segments = rows * n
  s_const, w_const = ops.stop_gradient(s), ops.stop_gradient(w)

  def segments_of(starts):
    return ops.cumsum(ops.cast(starts, "int32"), axis=1) - 1 + offsets

  def violations(starts):
    segments = segments_of(starts)
    v = ops.take(
      _segment_values(s_const, w_const, segments, num_segments, regularization), segments
    )
    # A block start i > 0 whose block does not lie below the previous one: a block above breaks
    # v_{i-1} >= v_i; one at the same value is pooled too, so that the gradient treats adjacent
    # blocks of equal value (a point where it is not unique) as one block, as the authors' code.
    up = ops.concatenate([ops.zeros_like(starts[:, :1]), v[:, :-1] <= v[:, 1:]], axis=1)
    return ops.logical_and(starts, up)

  def body(starts, bad):
    kept = ops.logical_and(starts, ops.logical_not(bad))
    return kept, violations(kept)

  starts = ops.ones_like(s, dtype="bool")
  starts, _ = ops.while_loop(
    lambda starts, bad: ops.any(bad),
    body,
    (starts, violations(starts)),
    maximum_iterations=ops.maximum(n - 1, 0) if ops.is_tensor(n) else max(n - 1, 0),
  )
  segments = ops.stop_gradient(segments_of(starts))
  return ops.take(_segment_values(s, w, segments, num_segments, regularization), segments)


def _sorted_descending(values):
  """``values`` sorted decreasingly along the last axis, and the inverse permutation.

  Tied values keep their order (a stable sort). At ties the operators are not differentiable and
  this order decides which one-sided derivative the gradient is.
  """
  order, inverse = exact.sort_and_invert(values)
  return backend.take_along_axis(values, order, axis=-1), inverse


def _rho(like):
  """``(n, n - 1, ..., 1)`` in every row of ``like``."""
  n = ops.shape(like)[-1]
  return ops.broadcast_to(ops.cast(ops.arange(n, 0, -1), backend.dtype_name(like)), ops.shape(like))


def soft_rank(scores, regularization_strength=1.0, regularization="l2", direction="DESCENDING"):
  """Soft ranks ``r_eps(theta)`` of each row (Blondel et al., ICML 2020, Sec. 3, Eq. 9).

      "l2": r = P_Q(z, rho),           z = -+theta / eps
      "kl": r = exp(P_E(z, log rho))

  (``P_Psi`` by isotonic regression, Sec. 4, Prop. 3; see the module docstring). With
  ``direction="DESCENDING"`` the highest score has the soft rank closest to 1 (the package's
  convention); ``"ASCENDING"`` ranks the lowest first. Each row of the result sums to
  ``n (n + 1) / 2`` ("l2").

  Args:
    scores: ``[B, n]`` float scores.
    regularization_strength: ``eps > 0``; ranks tend to the exact ones as ``eps -> 0``.
    regularization: ``"l2"`` (quadratic ``Q``) or ``"kl"`` (entropy ``E``).
    direction: ``"DESCENDING"`` (rank 1 = highest score) or ``"ASCENDING"``.

  Returns:
    ``[B, n]`` soft ranks in the scores' float dtype (at least float32).

  Example:
    >>> [round(float(r), 4) for r in soft_rank([[0.3, 2.0, 1.0]], 0.1)[0]]
    [3.0, 1.0, 2.0]
    >>> [round(float(r), 4) for r in soft_rank([[0.3, 2.0, 1.0]], 2.0)[0]]
    [2.4, 1.55, 2.05]
  """
  eps = _check(regularization_strength, regularization, direction)
  scores = checks.check_scores("scores", scores)
  sign = 1.0 if direction == "ASCENDING" else -1.0
  z = scores * (sign / eps)
  s, inverse = _sorted_descending(z)
  rho = _rho(s)
  w = rho if regularization == "l2" else ops.log(rho)
  primal = s - isotonic_regression(s, w, regularization)
  primal = backend.take_along_axis(primal, inverse, axis=-1)
  ranks = primal if regularization == "l2" else ops.exp(primal)
  return ranks


def soft_sort(scores, regularization_strength=1.0, regularization="l2", direction="DESCENDING"):
  """Soft sorted values ``s_eps(theta)`` of each row (Blondel et al., ICML 2020, Sec. 3, Eq. 8).

      s = -+(rho / eps - v_Psi(rho / eps, -+theta sorted decreasingly))

  (``v_Psi`` the isotonic solution of Sec. 4, Prop. 3, with the roles of ``s`` and ``w`` as in
  ``P_Psi(rho / eps, theta)``). ``"DESCENDING"``: values in decreasing order (the default);
  ``"ASCENDING"``: increasing. Each row keeps the sum of its scores ("l2").

  Args:
    scores: ``[B, n]`` float scores.
    regularization_strength: ``eps > 0``; the result tends to the sorted scores as ``eps -> 0``.
    regularization: ``"l2"`` or ``"kl"``.
    direction: ``"DESCENDING"`` or ``"ASCENDING"``.

  Returns:
    ``[B, n]`` soft sorted values in the scores' float dtype (at least float32).

  Example:
    >>> [round(float(v), 4) for v in soft_sort([[0.3, 2.0, 1.0]], 0.1)[0]]
    [2.0, 1.0, 0.3]
    >>> [round(float(v), 4) for v in soft_sort([[0.3, 2.0, 1.0]], 2.0)[0]]  # all pooled
    [1.6, 1.1, 0.6]
  """
  eps = _check(regularization_strength, regularization, direction)
  scores = checks.check_scores("scores", scores)
  sign = 1.0 if direction == "DESCENDING" else -1.0
  s, _ = _sorted_descending(scores * sign)
  w = _rho(s) / eps
  return sign * (w - isotonic_regression(w, s, regularization))
