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
polynomials truncated to degree ``k``, ``O(C k)`` in all. The rivals' ``x`` are first shifted by
their log-sum-exp (held constant: ``log e_k - log e_{k-1}`` moves by ``c`` when every ``x`` does),
which makes them the probabilities ``p`` of a softmax over the rivals. Where every row's rivals
span ``S`` with ``k (S + log k) <=`` :data:`LINEAR_RANGE` (50 in float32, 600 in float64),
``e_j(p)``, ``j <= k``, lies between ``exp(-k (S + log k))`` and 1 (``p_i >= exp(-S) / n`` and
``C(n, j) / n^j >= j^-j``), the partial products that underflow add less than ``2e-8`` of it
(up to ``10^7`` classes), and the products are taken in linear space
(:func:`_linear_elementary_symmetric`: per coefficient and round a few multiplications and
additions of ``[B, columns]`` tensors; sums of positive terms, exact to a few units in the last
place). Else, for any spread, in log space
(:func:`log_elementary_symmetric`), each coefficient a log-sum-exp of ``<= k + 1`` terms: finite
and accurate for any scores whose spread in a row is below ``5e19 * tau`` (see
:data:`LOG_ZERO`), several times slower (an ``exp`` and a ``log`` per term). Inside the log-space
products ``log 0`` is a finite stand-in (:data:`LOG_ZERO`), so that each log-sum-exp needs no
case for terms that are all ``-inf`` (PyTorch's eager time is mostly the count of ops at tens of
classes: the log-sum-exps, the gathers and their constants are :mod:`tfrank4class.backend`'s, in
PyTorch's own ops there, and the constants are built once per shape), and the classes are padded
with values 0 to a power of two, so that no round has an odd one out. The choice is one per
batch (``keras.ops.cond``), outside XLA: under ``jax.jit`` and TensorFlow's ``jit_compile``
the products are always taken in log space (:func:`tfrank4class.backend.compiled_by_xla`).
Deviation from the authors' code on purpose: the gradient is the backend's autodiff through
those products (sums of positive terms in linear space, a softmax-weighted sum at every step in
log space: stable by construction), not their custom backward with its instability threshold and
its series approximation for large values (Sec. 3.2), and there is no switch to the hard loss
for large score gaps; ``tau = 0`` selects the hard loss explicitly.
"""

import functools
import math
import operator

import numpy as np

from tfrank4class import backend, checks, compat
from tfrank4class.compat import ops
from tfrank4class.labels import num_items
from tfrank4class.losses.base import ListwiseLoss
from tfrank4class.losses.registry import register
from tfrank4class.losses.topk.single_label import single_label


def _minus_infinity(like):
  return ops.full_like(like, -math.inf)


#: ``log 0`` inside the products: a finite stand-in, so that each coefficient is a log-sum-exp of
#: finite terms (:func:`~tfrank4class.backend.logsumexp_of_finite`) with a finite value and
#: gradient. After ``r`` rounds a coefficient is at least ``2^r * LOG_ZERO``, inside float32 for
#: any ``n <= 2^61``. A real log coefficient of the loss (``x`` shifted by its row maximum) is at
#: least ``-(score spread) / tau``, far above ``LOG_ZERO / 2`` (where
#: :func:`log_elementary_symmetric` maps coefficients back to ``-inf``) for any spread below
#: ``5e19 * tau``.
LOG_ZERO = -1e20


@functools.cache
def _product_grid(a, b, degree):
  """The constants of :func:`_multiply` for degrees ``a``, ``b``: the index ``j = c - i`` into
  ``right`` (clipped to ``0 .. b``) ``[degree + 1, a + 1]`` int32, and ``LOG_ZERO`` where it lies
  outside (else 0). Cached: they depend on the static shapes only."""
  j = np.arange(degree + 1)[:, None] - np.arange(a + 1)[None, :]
  outside = np.where((j < 0) | (j > b), LOG_ZERO, 0.0)
  return np.clip(j, 0, b).astype(np.int32), outside


def _multiply(left, right, k):
  """Log coefficients of the products of polynomials ``left * right`` truncated to degree ``k``.

  ``left`` ``[..., a + 1]`` and ``right`` ``[..., b + 1]`` hold log coefficients (degree 0 first,
  ``LOG_ZERO`` for 0); the product has degree ``min(k, a + b)``, coefficient ``c`` the
  log-sum-exp over ``i + j = c`` of ``left_i + right_j``: one gather of ``right`` into a
  ``[degree + 1, a + 1]`` grid per product, plus ``LOG_ZERO`` where ``j = c - i`` lies outside
  ``0 .. b`` (a constant).
  """
  a, b = left.shape[-1] - 1, right.shape[-1] - 1
  index, outside = _product_grid(a, b, min(k, a + b))
  grid = left[..., None, :] + (backend.take_last(right, index) + backend.constant(outside, left))
  return backend.logsumexp_of_finite(grid)


def _log_elementary_symmetric(log_values, k):
  """:func:`log_elementary_symmetric` of ``log_values`` whose ``-inf`` entries are ``LOG_ZERO``,
  with ``LOG_ZERO`` or less (rather than ``-inf``) for a coefficient 0.

  The entries are padded with ``LOG_ZERO`` (values 0, polynomials 1) to a power of two, so that
  no round has an odd one out; the first round's products ``(1 + u t)(1 + v t)`` are written
  out (``0``, ``log(exp(u) + exp(v))``, ``u + v``).
  """
  n = log_values.shape[-1]
  size = 1 << max(n - 1, 1).bit_length()
  if size > n:
    filler = ops.full_like(log_values[..., : size - n], LOG_ZERO)
    log_values = ops.concatenate([log_values, filler], axis=-1)
  u, v = log_values[..., 0::2], log_values[..., 1::2]
  polys = [ops.zeros_like(u), backend.logaddexp(u, v), u + v]
  polys = ops.stack(polys[: k + 1], axis=-1)  # [..., size / 2, min(k, 2) + 1]
  while polys.shape[-2] > 1:
    polys = _multiply(polys[..., 0::2, :], polys[..., 1::2, :], k)
  polys = polys[..., 0, :]
  missing = k + 1 - polys.shape[-1]
  if missing:
    pad = ops.full_like(ops.repeat(polys[..., :1], missing, axis=-1), LOG_ZERO)
    polys = ops.concatenate([polys, pad], axis=-1)
  return polys


#: The largest ``k (S + log k)`` (``S``: the spread of the rivals' ``x`` in a row) at which the
#: smooth loss takes the products in linear space, per dtype: ``e_k`` and ``e_{k-1}`` of the
#: rivals then lie above ``exp(-LINEAR_RANGE)``, and the partial products that fall below the
#: smallest normal float (``exp(-87)``, ``exp(-708)``) sum to less than ``2e-8`` of them for up
#: to ``10^7`` classes.
LINEAR_RANGE = {"float32": 50.0, "float64": 600.0}


def _linear_elementary_symmetric(values, k):
  """``e_1 .. e_k`` (a list of ``[B]``) of ``values`` ``[B, n] >= 0`` in linear space, ``O(n k)``.

  The coefficients ``1 .. k`` of ``prod_m (1 + v_m t)`` (``e_0 = 1`` is left implicit), each a
  ``[B, columns]`` tensor, multiplied pairwise (the first half of the columns by the second, a
  column of the polynomial 1 added where their count is odd) in ``ceil(log2 n)`` rounds; the
  sums of positive terms lose at most about ``log2 n`` units in the last place.
  """
  polys = [values]
  while polys[0].shape[-1] > 1:
    if polys[0].shape[-1] % 2:
      polys = [ops.pad(c, [[0, 0], [0, 1]]) for c in polys]
    halves = [ops.split(c, 2, axis=-1) for c in polys]
    polys = _multiply_linear([h[0] for h in halves], [h[1] for h in halves], k)
  zero = ops.zeros_like(polys[0][:, 0])
  return [c[:, 0] for c in polys] + [zero] * (k - len(polys))


def _multiply_linear(left, right, k):
  """The coefficients ``1 .. min(k, a + b)`` of the products of polynomials whose coefficients
  ``1 .. a`` (``left``) and ``1 .. b`` (``right``) are given, ``e_0 = 1`` on both sides:
  ``c_d = left_d + right_d + sum_{i + j = d, i, j >= 1} left_i right_j``."""
  a, b = len(left), len(right)
  product = []
  for d in range(1, min(k, a + b) + 1):
    terms = ([left[d - 1]] if d <= a else []) + ([right[d - 1]] if d <= b else [])
    terms += [left[i - 1] * right[d - i - 1] for i in range(max(1, d - b), min(a, d - 1) + 1)]
    product.append(functools.reduce(operator.add, terms))
  return product


def log_elementary_symmetric(log_values, k):
  """``log e_j(exp(log_values))`` for ``j = 0 .. k``, along the last axis (divide and conquer).

  The elementary symmetric polynomial ``e_j(v) = sum_{|J| = j} prod_{i in J} v_i`` is the
  coefficient of ``t^j`` in ``prod_i (1 + v_i t)`` (Berrada et al., ICLR 2018, Sec. 3.1). The
  product is taken pairwise in ``ceil(log2 n)`` rounds, in log space, truncated to degree ``k``.
  An entry ``-inf`` is a value ``0`` (a padded item), and so is any entry below
  :data:`LOG_ZERO` (``-1e20``); ``log e_j = -inf`` when fewer than ``j`` entries are not (and
  reads ``-inf`` below ``LOG_ZERO / 2``).

  Args:
    log_values: ``[..., n]`` real tensor with a static last dimension (float16, bfloat16 and
      integers are computed in float32).
    k: the highest degree, an integer ``>= 1``.

  Returns:
    ``[..., k + 1]`` (float32 or float64): ``log e_0 = 0``, ``log e_1 =
    logsumexp(log_values)``, ... ``log e_k``.

  Example:
    >>> out = log_elementary_symmetric(np.log(np.array([[1.0, 2.0, 3.0]], np.float32)), 3)
    >>> [round(float(v), 4) for v in ops.convert_to_numpy(ops.exp(out[0]))]  # 1, 6, 11, 6
    [1.0, 6.0, 11.0, 6.0]
  """
  k = checks.check_int("k", k, minimum=1)
  # float16 and integers in float32 (LOG_ZERO is beyond float16's range), as every loss does.
  log_values = checks.check_scores("log_values", log_values, rank=None, min_length=0, finite=False)
  n = log_values.shape[-1]
  if n is None:
    raise ValueError(
      f"`log_values` must have a static last dimension, got shape {log_values.shape}."
    )
  floor = ops.full_like(log_values, LOG_ZERO)
  polys = _log_elementary_symmetric(backend.where(log_values < LOG_ZERO, floor, log_values), k)
  return backend.where(polys > LOG_ZERO / 2, polys, _minus_infinity(polys))


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
  classes = ops.arange(num_items(scores), dtype="int32")
  is_true = ops.equal(classes[None, :], parsed.ids[:, None])
  rivals = ops.logical_not(is_true)
  if parsed.parsed.is_class_ids and every_class:
    enough = None
  else:
    rivals = ops.logical_and(parsed.valid, rivals)
    enough = ops.logical_and(parsed.has_true, ops.sum(ops.cast(rivals, "int32"), axis=-1) >= k)
  if tau == 0.0:
    loss = _hard_loss(scores, is_true, rivals, enough, k, alpha)
  else:
    loss = _smooth_loss(scores, is_true, rivals, enough, k, tau, alpha)
  if enough is not None:
    loss = backend.where(enough, loss, ops.zeros_like(loss))
  return parsed.mark_invalid(loss)


def _hard_loss(scores, is_true, rivals, enough, k, alpha):
  """``l_k = max(alpha + ((s_{\\y})_[k] - s_y) / k, 0)`` per row (0 where not ``enough``;
  ``enough = None``: every row has ``k`` rivals), ``is_true`` (bool ``[B, C]``) the true class.

  ``(s_{\\y})_[k]`` is the score of the ``k``-th rival in the order (score descending, index
  ascending: ties go to the lowest index first, the order of a stable top-k), found by
  :func:`_kth_rival`; its gradient is one ``where``.
  """
  true_score = _take(scores, is_true)
  last = _kth_rival(scores, rivals, k)
  kth = ops.sum(backend.where(last, scores, 0.0), axis=-1)
  if enough is not None:
    kth = backend.where(enough, kth, true_score)
  return ops.relu(alpha + (kth - true_score) / k)


def _kth_rival(scores, rivals, k):
  """Bool ``[B, C]``: the ``k``-th of the ``rivals`` of each row in the order (score descending,
  index ascending), none where a row has fewer than ``k``.

  Where the graph is traced (TensorFlow, JAX), ``k`` rounds of argmax over the rivals not yet
  picked, ``O(k C)`` per row, a Python loop of ``k`` steps (``k`` is a small Python int),
  unrolled when traced. Not a top-k over the masked scores: under XLA on CPU that version (its
  forward pass and its scatter gradient) ran 5-17x slower than in a plain graph at ``C = 1,000``;
  the rounds are no slower under XLA than in a plain graph (``benchmarks/topk.py``,
  ``docs/topk.md``). On PyTorch (eager: its time is mostly the count of ops), from the ``k``-th
  largest rival score ``v`` (one ``top_k``, no gradient): among the rivals scored ``v``, the
  ``(k - #{rivals above v})``-th from the lowest index; 7 ops in place of ``6 k``.
  """
  if backend.BACKEND == "torch":
    masked = ops.stop_gradient(backend.where(rivals, scores, -math.inf))
    kth = ops.top_k(masked, k, sorted=True)[0][:, k - 1 :]
    above = ops.sum(ops.cast(masked > kth, "int32"), axis=-1, keepdims=True)
    tied = ops.equal(masked, kth)  # rivals only where a row has k (else not read)
    return ops.logical_and(tied, ops.equal(ops.cumsum(ops.cast(tied, "int32"), axis=-1), k - above))
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


def _smooth_loss(scores, is_true, rivals, enough, k, tau, alpha):
  """``L_{k,tau}`` per row through the elementary symmetric polynomials (Sec. 3).

  ``log e_k - log e_{k-1}`` of the rivals' ``exp(x)`` moves by ``c`` when every ``x`` does, so
  the rivals are shifted by their log-sum-exp ``lse`` (held constant), which makes them the
  probabilities ``p`` of a softmax over the rivals. Where every row's rivals span ``S`` with
  ``k (S + log k) <=`` :data:`LINEAR_RANGE` (of the dtype), ``e_j(p)``, ``j <= k``, lies
  between ``exp(-k (S + log k))`` and 1, and the products are taken in linear space
  (:func:`_linear_elementary_symmetric`); else in log space (:func:`_log_elementary_symmetric`),
  for any spread, and always under XLA (:func:`tfrank4class.backend.compiled_by_xla`).
  """
  x = scores / (k * tau)
  lowest = _minus_infinity(x)
  rival_x = backend.where(rivals, x, lowest)
  lse = ops.stop_gradient(ops.logsumexp(rival_x, axis=-1, keepdims=True))
  lse = backend.where(ops.isfinite(lse), lse, ops.zeros_like(lse))  # no rival
  q = backend.where(rivals, x - lse, lowest)

  def linear():
    e = _linear_elementary_symmetric(ops.exp(q), k)
    one = ops.ones_like(e[0])
    e_k, e_before = e[k - 1], e[k - 2] if k > 1 else one
    if enough is not None:
      e_k, e_before = backend.where(enough, e_k, one), backend.where(enough, e_before, one)
    return ops.log(e_k) - ops.log(e_before)

  def logarithmic():
    log_e = _log_elementary_symmetric(backend.where(rivals, q, ops.full_like(q, LOG_ZERO)), k)
    return log_e[:, k] - log_e[:, k - 1]

  if backend.compiled_by_xla():
    log_ratio = logarithmic()
  else:
    spread = ops.max(rival_x, axis=-1) + ops.max(backend.where(rivals, -x, lowest), axis=-1)
    limit = LINEAR_RANGE[backend.dtype_name(x)] / k - math.log(k)
    narrow = spread <= limit
    if enough is not None:
      narrow = backend.where(enough, narrow, ops.ones_like(enough))
    log_ratio = ops.cond(ops.all(narrow), linear, logarithmic)
  margin = log_ratio + lse[:, 0] + alpha / tau - _take(x, is_true)
  if enough is not None:
    margin = backend.where(enough, margin, ops.zeros_like(margin))
  return tau * backend.softplus(margin)


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
