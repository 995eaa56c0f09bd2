"""The smooth top-k SVM loss of Berrada, Zisserman and Kumar (ICLR 2018) and its hard limit.

"Smooth Loss Functions for Deep Top-k Classification", Sec. 2 (the losses) and Sec. 3 (their
computation). With ``s`` the scores of one example, ``y`` its true class, ``Y^(k)`` the sets of
``k`` distinct classes, ``Y_y^(k)`` those that contain ``y`` and ``Delta_k(Y, y) = alpha *
1[y not in Y]``, the top-k SVM loss (Sec. 2.1, in its rewritten form) is

    l_k(s, y) = max_{Y in Y^(k)} [Delta_k(Y, y) + (1/k) sum_{j in Y} s_j]
                - max_{Y in Y_y^(k)} [(1/k) sum_{j in Y} s_j]
              = max(alpha + ((s_{\\y})_[k] - s_y) / k, 0)

(``(s_{\\y})_[k]``: the k-th largest score of another class), and its smoothing with temperature
``tau > 0`` (Sec. 2.2) replaces each max by ``tau * log sum exp(. / tau)``:

    L_{k,tau}(s, y) = tau log sum_{Y in Y^(k)} exp([Delta_k(Y, y) + (1/k) sum_{j in Y} s_j] / tau)
                      - tau log sum_{Y in Y_y^(k)} exp([(1/k) sum_{j in Y} s_j] / tau).

With ``x_j = s_j / (k tau)`` and ``e_j`` the elementary symmetric polynomials of
``exp(x_{\\y})`` (the other classes), both sums are polynomials (Sec. 3):

    L_{k,tau}(s, y) = tau * softplus(log e_k + alpha / tau - log e_{k-1} - x_y).

``L_{k,tau} -> l_k`` as ``tau -> 0``; ``k = 1``, ``alpha = 0``, ``tau = 1`` is the cross-entropy.
The margin ``alpha`` of the rewritten form is the margin of Sec. 2.1's ``max((s_{\\y} + 1)_[k] -
s_y, 0)`` divided by ``k`` (and the loss is that one divided by ``k``), as in the authors' code.

Computation (Sec. 3.1): ``e_0 .. e_k`` are the coefficients of ``prod_j (1 + exp(x_j) t)``,
multiplied pairwise, divide and conquer: ``ceil(log2 C)`` rounds of batched products of
polynomials truncated to degree ``k``, ``O(C k^2)`` in all (a few multiplications and additions
of ``[B, columns]`` tensors per coefficient and round). Only ``e_k / e_{k-1}`` is needed, and it
is taken in linear space for any scores, in one form on every backend (no choice by value, no
log-space products). With ``r`` the ``k``-th largest rival ``x`` (held constant), each rival's
factor is rewritten so that both its coefficients are at most 1: ``1 + exp(x - r) t`` at or
below ``r`` and ``exp(x - r) (exp(r - x) + t)`` above it (``t`` scaled by ``exp(r)``); the
factors ``exp(x - r)`` of the (at most ``k - 1``) rivals above ``r`` are common to ``e_k`` and
``e_{k-1}`` and cancel, so ``log e_k - log e_{k-1} = r + log Q_k - log Q_{k-1}`` with ``Q =
Q_R Q_K``, ``Q_R = prod (1 + b t)`` over the rivals at or below ``r`` (``b = exp(x - r) <= 1``;
its coefficient 0 is 1 and left implicit) and ``Q_K = prod (u + t)`` over those above
(``u = exp(r - x) < 1``; ``k - 1`` factors at most, taken from a top-k:
:func:`_top_k_by_block_maxima`, one pass over the scores and two small top-k in place of a top-k
of each row). Every coefficient of
every sub-product lies between 0 and ``C(n, j)`` (``n`` rivals), and ``Q_k, Q_{k-1} >= 1``
(the term of the ``k`` highest rivals, and of ``k - 1`` of them, is a product of ones), so what
underflows is negligible; a power of two ``s`` divides ``t`` (coefficient ``j`` by ``s^j``,
exactly) so that ``Q_k`` stays inside float32 where ``C(n, k)`` is not (``k = 10``, ``n`` of
tens of thousands). The differences ``x - r`` and ``r - x_y`` are taken from the scores before
the division by ``k tau`` (one rounding each). ``k = 1`` is the log-sum-exp.

The gradient is written out (:func:`tfrank4class.backend.custom_gradient`; Sec. 3.2's
``d log e_j / d x_i = exp(x_i) e_{j-1}(x without i) / e_j``): ``pi_k - pi_{k-1}``, ``pi_j`` the
probability that class ``i`` is in a ``j``-subset drawn with weights ``prod exp(x)``. The
product without a class comes from ``Q`` by division: for a rival at or below ``r``,
``Q'_j = Q_j - b Q'_{j-1}`` upward (``b <= 1``), so that its ``pi_k - pi_{k-1}`` is a
polynomial of degree ``k`` in its ``b`` with ``[B]`` coefficients from ``Q`` (Horner's rule:
``2 k - 1`` passes over ``[B, C]``); for one above it from the top coefficient of ``Q_K`` down
(``Q_K`` has all its ``k`` coefficients; ``u < 1``), and those ``k - 1`` places and the true
class's go into the ``[B, C]`` result by one scatter. The forward pass keeps no sub-product for
the backward: one tensor of ``[B, C]`` (``b``) and ``k + 1`` coefficients per row, against every
round's operands under autodiff. Deviation from the authors' code on purpose: their custom
backward (Sec. 3.2) has an instability threshold and a series approximation for large values;
here each division is by a factor whose coefficient on the side divided from is at most 1 (``b``
upward, ``u`` from the top), so neither is needed (the tests compare with 40-digit decimals up to
spreads of ``10^6 tau``). There is no switch to the hard loss for large score gaps either;
``tau = 0`` selects the hard loss explicitly.
"""

import functools
import math
import operator

from tfrank4class import backend, checks, compat
from tfrank4class.compat import ops
from tfrank4class.labels import num_items
from tfrank4class.losses.base import ListwiseLoss
from tfrank4class.losses.registry import register
from tfrank4class.losses.topk.single_label import single_label


def _minus_infinity(like):
  return ops.full_like(like, -math.inf)


def _scale_of(num_rivals, k):
  """``s``, a power of two: the rivals' ``b`` are divided by it, so that the products'
  coefficient ``j`` is ``s^-j`` times its value and ``Q_k``, ``Q_{k-1}`` lie between about
  ``C(n, k)^(-1/2)`` and ``C(n, k)^(1/2)`` (``n`` rivals), centred in the float's range."""
  log2_binomial = (
    math.lgamma(num_rivals + 1) - math.lgamma(k + 1) - math.lgamma(num_rivals - k + 1)
  ) / math.log(2)
  return 2.0 ** round(log2_binomial / (2 * k))


def _product(polys, k):
  """The coefficients ``0 .. min(k, degree)`` (each ``[B]``, or the number 1) of the product over
  the columns of the polynomials whose coefficients ``0 .. d`` ``polys`` holds, each a ``[B, n]``
  tensor or the number 1 (the same for every column: the constant 1 of ``1 + v t``).

  Multiplied pairwise in ``ceil(log2 n)`` rounds, truncated to degree ``k``: each round
  multiplies the first half of the columns by the second (a column of the polynomial 1 added
  where their count is odd); sums of products of nonnegative numbers, exact to a few units in
  the last place per round.
  """
  while polys[-1].shape[-1] > 1:
    if polys[-1].shape[-1] % 2:
      polys = [_padded(c, float(d == 0)) for d, c in enumerate(polys)]
    halves = [(c, c) if isinstance(c, float) else ops.split(c, 2, axis=-1) for c in polys]
    polys = _multiply([h[0] for h in halves], [h[1] for h in halves], k)
    constant = polys[:1] if isinstance(polys[0], float) else []
    polys = constant + backend.materialized(polys[len(constant) :])
  return [c if isinstance(c, float) else c[:, 0] for c in polys]


def _padded(coefficient, value):
  return (
    coefficient
    if isinstance(coefficient, float)
    else ops.pad(coefficient, [[0, 0], [0, 1]], constant_values=value)
  )


def _times(p, q):
  """``p q``, where either may be the number 1."""
  return q if isinstance(p, float) else p if isinstance(q, float) else p * q


def _multiply(left, right, k):
  """The coefficients ``0 .. min(k, a + b)`` of the product of the polynomials whose
  coefficients ``0 .. a`` (``left``) and ``0 .. b`` (``right``) are given (tensors or the number
  1): ``c_d = sum_{i + j = d} left_i right_j``."""
  a, b = len(left) - 1, len(right) - 1
  return [
    functools.reduce(
      operator.add, [_times(left[i], right[d - i]) for i in range(max(0, d - b), min(a, d) + 1)]
    )
    for d in range(min(k, a + b) + 1)
  ]


def _log_ratio(scores, rival_scores, true_index, kth, top_scores, top_index, k, tau, s):
  """``log Q_k - log Q_{k-1} + (s_r - s_y) / (k tau)`` (``[B]``) of ``Q = prod (a + b t)`` over
  the rivals (the module docstring), with its gradient in ``scores`` written out. ``x = (s - s_r)
  / (k tau)``, ``s_r`` the ``k``-th highest rival score ``kth`` ``[B, 1]``; ``rival_scores``: the
  scores (held constant), ``-inf`` at the classes that are not rivals (but ``y``, set here);
  ``true_index`` ``[B]``: ``y``; ``top_scores``, ``top_index``: the scores and classes of the
  ``k - 1`` highest rivals. A row of fewer than ``k`` rivals (``Q_k = 0``, read as 1) has a value
  to be masked.

  ``Q`` is ``Q_R Q_K``: ``Q_R`` the product of the ``1 + b t`` of the rivals at or below ``r``
  (``b = exp(x) / s``, 0 at the rivals above ``r`` and at ``y``: their scores set to ``-inf`` by
  one scatter of ``B k`` entries) over all classes, coefficient 0 left implicit, and ``Q_K`` that
  of the ``u + t / s`` (``u = exp(-x)``) of those above ``r``, among the ``k - 1`` highest. The
  gradient is one ``[B, C]`` polynomial in ``b`` (:func:`_rest_gradient`) and one scatter of the
  ``k - 1`` highest rivals' and the true class's ``B k`` entries into it.
  """
  top_x = (top_scores - kth) / (k * tau)
  in_top = top_x > 0
  rows = ops.repeat(ops.arange(ops.shape(scores)[0], dtype="int32")[:, None], k, axis=1)
  places = ops.stack([rows, ops.concatenate([top_index, true_index[:, None]], axis=1)], axis=-1)
  places = ops.reshape(places, (-1, 2))  # [B k, 2]: row, class (k - 1 highest rivals, then y)
  # Outside the function of the written-out gradient, whose inputs live until its result does.
  hidden = backend.where(in_top, _minus_infinity(top_scores), top_scores)
  hidden = ops.concatenate([hidden, _minus_infinity(kth)], axis=1)
  rival_scores = ops.scatter_update(rival_scores, places, ops.reshape(hidden, (-1,)))
  b = ops.exp((rival_scores - kth) / (k * tau)) / s

  @backend.custom_gradient
  def log_ratio(scores, b, true_index, kth, top_x, top_index, places):
    in_top = top_x > 0
    u = backend.where(in_top, ops.exp(-top_x), ops.ones_like(top_x))
    q_rest = _product([1.0, b], k)
    q_top = _product([u, backend.where(in_top, ops.full_like(u, 1 / s), ops.zeros_like(u))], k)
    q = [_coefficient(q_rest, q_top, j, like=u[:, 0]) for j in range(k + 1)]
    q_k, q_before = (backend.where(c > 0, c, ops.ones_like(c)) for c in (q[k], q[k - 1]))
    true_score = backend.take_along_axis(scores, true_index[:, None], axis=1)[:, 0]

    def grad(upstream):
      slope = upstream / (k * tau)
      rest = _rest_gradient(b, q, q_k, q_before, k, slope)  # 0 above r and at y (b = 0)
      top = _top_gradient(u, q_rest, q_top, q_k, q_before, k, s) * slope[:, None]
      top = backend.where(in_top, top, backend.take_along_axis(rest, top_index, axis=1))
      updates = ops.reshape(ops.concatenate([top, -slope[:, None]], axis=1), (-1,))
      return (ops.scatter_update(rest, places, updates),) + (None,) * 6

    log_q = ops.log(q_k) - ops.log(q_before)
    return log_q + (kth[:, 0] - true_score) / (k * tau), grad

  return log_ratio(scores, b, true_index, kth, top_x, top_index, places)


def _coefficient(left, right, j, like):
  """Coefficient ``j`` of the product of the polynomials of coefficients ``left``, ``right``."""
  terms = [_times(left[i], right[j - i]) for i in range(max(0, j - len(right) + 1), j + 1)]
  total = functools.reduce(operator.add, terms)
  return ops.ones_like(like) * total if isinstance(total, float) else total


def _rest_gradient(b, q, q_k, q_before, k, slope):
  """``slope`` (``[B]``) times ``d (log Q_k - log Q_{k-1}) / dx`` at the rivals at or below
  ``r`` (0 where ``b = 0``): ``pi_k - pi_{k-1}``, ``pi_j = b Q'_{j-1} / Q_j`` (the probability
  that the class is in a ``j``-subset drawn with weights ``prod b``), ``Q'`` the product without
  the class, ``Q'_j = Q_j - b Q'_{j-1} = sum_{i <= j} (-b)^(j - i) Q_i`` (``b <= 1 / s``). So
  ``b sum_m c_m b^m`` with ``c_m = slope (-1)^m (Q_{k-1-m} / Q_k - Q_{k-2-m} / Q_{k-1})``
  (``Q_{-1} = 0``; ``[B]`` each), by Horner's rule: ``2 k - 1`` passes over ``[B, C]``."""
  c = [
    (-1) ** m * slope * (q[k - 1 - m] / q_k - (q[k - 2 - m] / q_before if m < k - 1 else 0.0))
    for m in range(k)
  ]
  total = c[k - 1][:, None] * b
  for m in range(k - 2, -1, -1):
    total = (total + c[m][:, None]) * b
  return total


def _top_gradient(u, q_rest, q_top, q_k, q_before, k, s):
  """``d (log Q_k - log Q_{k-1}) / dx`` at the ``k - 1`` highest rivals (``[B, k - 1]``; where
  they are above ``r``):
  ``(1 - pi_k) - (1 - pi_{k-1})`` with ``1 - pi_j = u Q'_j / Q_j``, ``Q' = Q_R Q_K'``, ``Q_K'``
  the product of the other factors of ``Q_K``, from the top coefficient down (``Q_K`` has all
  its coefficients: ``Q_K'_{m-1} = s (Q_K_m - u Q_K'_m)``, ``u < 1``)."""
  without = [s * q_top[k - 1][:, None]]  # Q_K'_{k-2}, Q_K'_{k-3}, ... Q_K'_0
  for m in range(k - 2, 0, -1):
    without.append(s * (q_top[m][:, None] - u * without[-1]))
  without = without[::-1]
  rest = [c if isinstance(c, float) else c[:, None] for c in q_rest]
  without_top = [_coefficient(rest, without, j, like=u) for j in (k - 1, k)]
  return u * (without_top[0] / q_before[:, None] - without_top[1] / q_k[:, None])


def smooth_topk_svm_loss(scores, labels, *, where=None, k=5, tau=1.0, alpha=1.0):
  """Per-example smooth top-k SVM loss ``L_{k,tau}`` (``tau > 0``) or hard ``l_k`` (``tau = 0``).

  Berrada et al., ICLR 2018, Sec. 2.1-2.2 (formulas in the module docstring):

      L_{k,tau}(s, y) = tau * softplus(log e_k(exp(x_{\\y})) + alpha / tau
                                       - log e_{k-1}(exp(x_{\\y})) - x_y),   x = s / (k tau)
      l_k(s, y)       = max(alpha + ((s_{\\y})_[k] - s_y) / k, 0)

  Padded classes (dense relevance ``< 0``) are left out. A row without a true class, or with
  fewer than ``k`` other non-padded classes (the true class is then always in the top k), has
  loss 0.

  Args:
    scores: ``[B, C]`` class scores, ``C > k`` known when traced.
    labels: class ids ``[B]`` / ``[B, 1]`` or single-label dense relevance ``[B, C]`` (see
      :mod:`tfrank4class.losses.topk.single_label`).
    where: optional bool ``[B, C]``; classes where it is False are padding.
    k: the ``k`` of top-k, an integer ``>= 1``.
    tau: the temperature ``>= 0``; ``0`` gives the hard loss ``l_k``.
    alpha: the margin ``>= 0``.

  Returns:
    ``[B]`` losses in the scores' float dtype (at least float32).

  Example:
    >>> import numpy as np
    >>> s, y = np.array([[3.0, 1.0, 0.0]], np.float32), np.array([1])
    >>> round(float(smooth_topk_svm_loss(s, y, k=1, tau=0.0)[0]), 4)  # max(1 + 3 - 1, 0)
    3.0
    >>> round(float(smooth_topk_svm_loss(s, y, k=2, tau=0.0)[0]), 4)  # max(1 + (0-1)/2, 0)
    0.5
    >>> round(float(smooth_topk_svm_loss(s, y, k=2, tau=1e-3)[0]), 4)
    0.5
  """
  k = checks.check_int("k", k, minimum=1)
  tau = checks.check_float("tau", tau, minimum=0.0)
  alpha = checks.check_float("alpha", alpha, minimum=0.0)
  scores = _check_classes(checks.check_scores("y_pred", scores, finite=False), k)
  parsed = single_label(labels, scores, where=where)
  checks.check_scores("y_pred", backend.where(parsed.valid, scores, ops.zeros_like(scores)))
  return _loss_of_checked(scores, parsed, where is None, k, tau, alpha)


def _check_classes(scores, k):
  """``scores`` after the check that their number of classes ``C`` is known and ``> k``."""
  num_classes = num_items(scores)
  if not isinstance(num_classes, int):
    raise ValueError(
      f"`y_pred` must have a number of classes known when traced, got shape {scores.shape}."
    )
  if num_classes <= k:
    raise ValueError(
      f"`k` must be smaller than the number of classes, got k={k} for {num_classes} classes "
      f"(`y_pred` of shape {scores.shape})."
    )
  return scores


def _loss_of_checked(scores, parsed, every_class, k, tau, alpha):
  """:func:`smooth_topk_svm_loss` of scores that passed its checks (finite at every class that
  is not padding) and ``parsed``, their :class:`~tfrank4class.losses.topk.single_label.
  SingleLabel`. Class ids with ``every_class`` (no ``where``) need no mask: every row has its
  true class and ``C - 1 >= k`` rivals, the classes other than it."""
  if tau == 0.0 and backend.BACKEND == "torch" and parsed.parsed.is_class_ids and every_class:
    loss = backend.hard_topk_svm(scores, parsed.ids, None, None, k, alpha)  # no mask to build
    return parsed.mark_invalid(loss)
  classes = ops.arange(num_items(scores), dtype="int32")
  is_true = ops.equal(classes[None, :], parsed.ids[:, None])
  rivals = ops.logical_not(is_true)
  if parsed.parsed.is_class_ids and every_class:
    enough = None
  else:
    rivals = ops.logical_and(parsed.valid, rivals)
    enough = ops.logical_and(parsed.has_true, ops.sum(ops.cast(rivals, "int32"), axis=-1) >= k)
  if tau == 0.0:
    loss = _hard_loss(scores, parsed.ids, is_true, rivals, enough, k, alpha)
  else:
    loss = _smooth_loss(scores, is_true, parsed.ids, rivals, enough, k, tau, alpha)
  if enough is not None:
    loss = backend.where(enough, loss, ops.zeros_like(loss))
  return parsed.mark_invalid(loss)


def _hard_loss(scores, ids, is_true, rivals, enough, k, alpha):
  """``l_k = max(alpha + ((s_{\\y})_[k] - s_y) / k, 0)`` per row (0 where not ``enough``;
  ``enough = None``: every row has ``k`` rivals), ``ids`` (int ``[B]``) and ``is_true`` (bool
  ``[B, C]``) the true class.

  ``(s_{\\y})_[k]`` is the score of the ``k``-th rival in the order (score descending, index
  ascending: ties go to the lowest index first, the order of a stable top-k). On PyTorch
  :func:`tfrank4class.backend.hard_topk_svm` (its own ops, gathers); elsewhere found by
  :func:`_kth_rival`, its gradient one ``where``.
  """
  if backend.BACKEND == "torch":
    return backend.hard_topk_svm(scores, ids, rivals, enough, k, alpha)
  true_score = _take(scores, is_true)
  last = _kth_rival(scores, rivals, k)
  kth = ops.sum(backend.where(last, scores, 0.0), axis=-1)
  if enough is not None:
    kth = backend.where(enough, kth, true_score)
  return ops.relu(alpha + (kth - true_score) / k)


def _kth_rival(scores, rivals, k):
  """Bool ``[B, C]``: the ``k``-th of the ``rivals`` of each row in the order (score descending,
  index ascending), none where a row has fewer than ``k``: ``k`` rounds of argmax over the rivals
  not yet picked, ``O(k C)`` per row, a Python loop of ``k`` steps (``k`` is a small Python int),
  unrolled when traced (TensorFlow, JAX). Not a top-k over the masked scores: under XLA on CPU
  that version (its forward pass and its scatter gradient) ran 5-17x slower than in a plain graph
  at ``C = 1,000``; the rounds are no slower under XLA than in a plain graph
  (``benchmarks/topk.py``, ``docs/topk.md``).
  """
  classes = ops.arange(scores.shape[-1], dtype="int32")[None, :]
  lowest = _minus_infinity(scores)
  left, last = rivals, None
  for _ in range(k):
    best = ops.cast(ops.argmax(backend.where(left, scores, lowest), axis=-1), "int32")
    last = ops.equal(classes, best[:, None])
    left = ops.logical_and(left, ops.logical_not(last))
  return last


def _take(values, chosen):
  """``values`` ``[B, C]`` at the one class per row where ``chosen`` (bool ``[B, C]``) holds,
  ``[B]``: a ``where`` and a sum, whose gradient is a ``where`` (a gather's is a segment sum over
  all ``B C`` entries, slower on TensorFlow)."""
  return ops.sum(backend.where(chosen, values, 0.0), axis=-1)


def _smooth_loss(scores, is_true, true_index, rivals, enough, k, tau, alpha):
  """``L_{k,tau}`` per row through the elementary symmetric polynomials (Sec. 3), in linear space
  for any spread: ``r + log Q_k - log Q_{k-1}`` with ``Q = prod (a + b t)`` over the rivals (the
  module docstring has the derivation), ``r`` the ``k``-th largest rival ``x`` (held constant),
  other classes the factor 1 (``a = 1``, ``b = 0``); ``true_index`` ``[B]`` the class where
  ``is_true``.
  """
  # Class ids on TensorFlow: y dropped from the k + 1 highest classes, no [B, C] pass to mask it
  # (XLA fuses the mask into its consumers; eager PyTorch pays for the ops on [B, k + 1]).
  if enough is None and backend.BACKEND == "tensorflow":
    rival_scores = ops.stop_gradient(scores)  # y's score too, replaced in _log_ratio
    top_scores, top_index = _top_rivals(rival_scores, true_index, k)
  else:
    rival_scores = backend.where(rivals, ops.stop_gradient(scores), _minus_infinity(scores))
    top_scores, top_index = _top_k_by_block_maxima(rival_scores, k)
  kth = top_scores[:, k - 1 :]
  if enough is not None:
    kth = backend.where(enough[:, None], kth, ops.zeros_like(kth))  # -inf: fewer than k rivals
  if k == 1:  # e_1 / e_0: the sum; x - r: differences first, rounded once
    s = 1.0
    rival_scores = backend.where(rivals, scores, _minus_infinity(scores))
    log_ratio = ops.logsumexp((rival_scores - kth) / tau, axis=-1)
    log_ratio = log_ratio + (kth[:, 0] - _take(scores, is_true)) / tau  # r - x_y
  else:
    s = _scale_of(num_items(scores) - 1, k)
    top_scores = top_scores[:, : k - 1]
    # A place beyond the classes (padding of the blocks) only in a row of fewer than k rivals.
    top_index = ops.minimum(top_index[:, : k - 1], num_items(scores) - 1)
    log_ratio = _log_ratio(scores, rival_scores, true_index, kth, top_scores, top_index, k, tau, s)
  margin = log_ratio + math.log(s) + alpha / tau
  if enough is not None:
    margin = backend.where(enough, margin, ops.zeros_like(margin))
  return tau * backend.softplus(margin)


def _top_rivals(scores, true_index, k):
  """``(values, classes)`` ``[B, k]`` of the ``k`` highest rivals of each row, every class but
  ``true_index`` ``[B]`` a rival: the ``k + 1`` highest classes without ``y`` (or without the
  last, where ``y`` is not among them); no pass over ``[B, C]`` to mask ``y`` first."""
  values, index = _top_k_by_block_maxima(scores, k + 1)
  after_y = ops.cumsum(ops.cast(ops.equal(index, true_index[:, None]), "int32"), axis=1)
  pick = ops.arange(k, dtype="int32")[None, :] + after_y[:, :k]
  return backend.take_along_axis(values, pick, axis=1), backend.take_along_axis(index, pick, axis=1)


def _block_size(n, size):
  """A divisor of ``n`` within a factor 2 of ``size`` (the closest in ratio), else ``size``
  rounded to a power of two."""
  divisors = [d for d in range(math.ceil(size / 2), math.floor(2 * size) + 1) if n % d == 0]
  if divisors:
    return min(divisors, key=lambda d: abs(math.log(d / size)))
  return 2 ** round(math.log2(size))


def _top_k_by_block_maxima(x, k):
  """``(values, indices)`` of the ``k`` largest entries of each row of ``x`` (``[B, n]``),
  largest first, ties in any order: the row cut into blocks of ``m`` (about ``sqrt(n / k)``:
  :func:`_block_size`; the last padded with ``-inf``), a top-k of the blocks' maxima, then one of
  the ``k m`` entries of the ``k`` blocks found (they hold the ``k`` largest: a block left out
  has ``k`` blocks whose maxima are at least its own). One pass over ``[B, n]`` (the maxima) and
  two top-k of about ``sqrt(n k)`` entries, in place of a top-k of ``n`` (on TensorFlow's CPU
  kernel, several times slower than the pass). A plain top-k where there are fewer than ``8 k``
  blocks, and on PyTorch, whose ``topk`` is fast and each of the dozen ops here costs a
  dispatch. Materialized: else XLA on CPU turns a top-k and the slices of it into a full sort."""
  n = x.shape[-1]
  m = _block_size(n, math.sqrt(n / k))
  num_blocks = -(-n // m)
  if num_blocks < 8 * k or backend.BACKEND == "torch":
    return backend.materialized(backend.top_k(x, k))
  if num_blocks * m > n:
    x = ops.pad(x, [[0, 0], [0, num_blocks * m - n]], constant_values=-math.inf)
  blocks = ops.reshape(x, (-1, m))  # [B num_blocks, m]
  _, best = backend.top_k(ops.reshape(ops.max(blocks, axis=-1), (-1, num_blocks)), k)
  rows = ops.arange(ops.shape(best)[0], dtype="int32")[:, None] * num_blocks
  candidates = ops.reshape(ops.take(blocks, rows + best, axis=0), (-1, k * m))
  values, places = backend.top_k(candidates, k)
  index = backend.take_along_axis(best, places // m, axis=1) * m + places % m
  return backend.materialized([values, index])


@register("smooth_topk_svm_loss")
class SmoothTopKSVMLoss(ListwiseLoss):
  """The smooth top-k SVM loss ``L_{k,tau}`` (Berrada et al., ICLR 2018, Sec. 2.2) as a Keras loss.

  ``tau = 0`` gives the hard top-k SVM loss ``l_k`` (Sec. 2.1). See
  :func:`smooth_topk_svm_loss` for the formula, the labels and padding. A
  :class:`~tfrank4class.losses.ListwiseLoss`: ``loss_values(scores, labels)`` takes class ids
  ``[B]`` as they are (:attr:`~tfrank4class.losses.ListwiseLoss.takes_class_ids`) and reads the
  one true class of each list from dense relevance ``[B, C]`` (a row with several entries ``> 0``
  raises, see :mod:`tfrank4class.losses.topk.single_label`).

  Args:
    k: the ``k`` of top-k (the paper's experiments use 5).
    tau: the temperature ``>= 0`` (``0``: the hard loss).
    alpha: the margin ``>= 0``.

  Example:
    >>> import numpy as np
    >>> loss = SmoothTopKSVMLoss(k=1, tau=1.0, alpha=0.0, reduction="none")
    >>> values = loss(np.array([0]), np.array([[2.0, 0.0, 0.0]], np.float32))
    >>> [round(float(v), 4) for v in ops.convert_to_numpy(values)]  # cross-entropy
    [0.2395]
    >>> from tfrank4class.compat import keras
    >>> model = keras.Sequential([keras.layers.Dense(10)])
    >>> model.compile(optimizer="adam", loss=SmoothTopKSVMLoss(k=5, tau=1.0))
  """

  def __init__(
    self,
    k=5,
    tau=1.0,
    alpha=1.0,
    reduction=compat.DEFAULT_REDUCTION,
    name="smooth_topk_svm_loss",
  ):
    self.k = checks.check_int("k", k, minimum=1)
    self.tau = checks.check_float("tau", tau, minimum=0.0)
    self.alpha = checks.check_float("alpha", alpha, minimum=0.0)
    super().__init__(reduction=reduction, name=name)

  takes_class_ids = True

  def loss_values(self, scores, labels):
    # The scores passed the base's check (finite at every class that is not padding).
    parsed = single_label(labels, _check_classes(scores, self.k))
    return _loss_of_checked(scores, parsed, True, self.k, self.tau, self.alpha)

  def get_config(self):
    config = super().get_config()
    config.update({"k": self.k, "tau": self.tau, "alpha": self.alpha})
    return config
