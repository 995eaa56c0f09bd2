"""The top-k cross-entropy of Petersen et al., "Differentiable Top-k Classification Learning"
(ICML 2022, Sec. 3 and Fig. 1).

Given a relaxed permutation ``P`` of the ``n`` class scores (an operator of
:mod:`tfrank4class.ranking`: a differentiable sorting network, NeuralSort or SoftSort), the
probability that class ``c`` is among the top ``k`` is the sum of its weights at the ``k`` highest
positions, ``p_k(c) = sum_{j >= n - k} P[c, j]`` (0-based ascending positions). A distribution
``P_K`` over ``k = 1..K`` mixes them into one (Fig. 1: the weights of the ranks are a cumulative
sum of ``P_K``), and the loss is the cross-entropy of the true class ``y`` (Sec. 3):

    q(c) = sum_{k=1..K} P_K(k) * p_k(c)
    L    = -log( q(y) (1 - 2e-7) + 1e-7 )

(the small constants are those of the authors' code: they keep the log finite when a relaxed
probability underflows to 0). ``top1_mode`` chooses how the ``k = 1`` term is formed, as
difftopk 0.2.0's ``TopKCrossEntropyLoss`` does:

* ``"sm"`` (default): ``p_1(c)`` is the softmax of the scores instead of the sorting relaxation;
* ``"smce"``: the ``k = 1`` term is a separate softmax cross-entropy,
  ``L = P_K(1) * CE(s, y) - sum_{k >= 2} P_K(k) * log(q'(y) (1 - 2e-7) + 1e-7)`` with
  ``q'(c) = sum_{k >= 2} P_K(k) p_k(c)``;
* ``"sort"``: every ``p_k`` from the relaxed permutation.

Top-``m`` pre-selection (the paper's way to scale to 1,000+ classes): with ``m`` set, only
the true class and the ``m - 1`` highest-scoring other classes of each example are ranked (a
hard selection; the gradient reaches the selected scores only), so the operator runs on ``m``
instead of ``n`` items; for ``"sm"`` / ``"smce"`` the softmax is over those ``m`` scores too,
as in difftopk.

The sorting networks here run in their top-``k`` form
(:func:`~tfrank4class.ranking.sorting_network_topk`, ``O(n k)`` per layer); NeuralSort and
SoftSort build the full ``n x n`` matrix, which is inherent to them.

Cost, and when to set ``m``. Without ``m`` the operator runs on all ``n`` classes, and every
layer's weights and ``[n, k]`` carry are kept for the gradient, so time *and* memory per example
are ``O(n k log^2 n)`` for ``"bitonic"`` (the default, as in difftopk: ``ceil(log2 n) (ceil(log2
n) + 1) / 2`` layers), ``O(n^2 k)`` for ``"odd_even"`` (``n`` layers) and ``O(n^2)`` for
NeuralSort and SoftSort. With ``m`` it is one top-``m`` selection, ``O(n log m)``, plus the
operator on ``m`` items (``O(m k log^2 m)`` for ``"bitonic"``), linear in ``n``. Keep the
default ``m = None`` for up to a few hundred classes (every class is ranked, as in the paper's
CIFAR-100 runs); set ``m`` (the paper uses 16 for ImageNet's 1,000 classes) beyond that: at
1,000 classes the default network is tens of times slower than with ``m = 16``, and at 10,000
hundreds of times, with memory growing as above (docs/topk.md, "Cost at many classes").

Labels. Class ids ``[B]`` / ``[B, 1]`` as in the paper. Dense labels ``[B, C]`` (parsed by
:func:`tfrank4class.labels.parse_labels`) are read as a target distribution over the classes, ``t(c)
= max(r_c, 0) / sum_c' max(r_c', 0)``, and the loss is ``-sum_c t(c) log(...)`` with the same term
per class as above: one-hot rows give exactly the class-id loss, multi-hot rows the mean over their
relevant classes (an extension of ours; the paper has one true class). A row without a positive
entry has loss 0. ``where`` (bool ``[B, n]``, optional) marks the classes that take part: a class
where it is False is padding, as a dense entry below 0. Entries below 0 mark padded classes: they
are not targets, they are left out of the softmax of ``"sm"`` / ``"smce"``, and before ranking their
scores are moved below every valid score of the row (to ``lo - (hi - lo) - 1``, ``lo`` / ``hi`` the
smallest / largest valid score, a constant for the gradient), so they occupy the lowest positions;
with the heavy-tailed sigmoids (Cauchy, reciprocal, optimal) a sorting network still mixes a little
of their weight into the others, as it does for any low-scoring class. With ``m`` set, every row
must have exactly one positive entry (one-hot), which is taken as the class id: another row raises a
``ValueError`` eagerly (a failed assertion inside ``tf.function``) and gets a NaN loss where nothing
can raise (XLA, ``jax.jit``).

Deviations from difftopk 0.2.0: per-example values (Keras reduces them; the mean equals
difftopk's value); ``distribution`` defaults to ``"cauchy"`` (difftopk's ``None`` fails for the
sorting networks) and is ignored by NeuralSort / SoftSort; every argument has a default so that
the loss can be built by name; ``"bitonic"`` always runs the top-``k`` form (difftopk's
``"bitonic"`` and ``"bitonic__non_sparse"`` compute the same numbers).
"""

import math

import numpy as np

from tfrank4class import backend, checks, compat
from tfrank4class.compat import ops
from tfrank4class.labels import check_batch_size, parse_labels
from tfrank4class.losses.base import ListwiseLoss
from tfrank4class.losses.registry import register
from tfrank4class.ranking import neuralsort, softsort, sorting_network_topk
from tfrank4class.ranking.exact import sink
from tfrank4class.ranking.sorting_networks import DISTRIBUTIONS

#: The relaxed sorting methods: the sorting (selection) networks and the two softmax relaxations.
METHODS = ("odd_even", "bitonic", "splitter_selection", "neuralsort", "softsort")
TOP1_MODES = ("sm", "smce", "sort")
_EPSILON = 1e-7


def check_p_k(p_k):
  """``p_k`` as a tuple of floats: a non-empty list of numbers ``>= 0`` summing to 1 (within
  ``1e-4``, difftopk's tolerance).

  Example:
    >>> check_p_k([0.5, 0.0, 0.5])
    (0.5, 0.0, 0.5)
  """
  allowed = "a non-empty list of numbers >= 0 summing to 1 (P_K(k) for k = 1..K)"
  if isinstance(p_k, (str, bytes)) or not hasattr(p_k, "__len__") or len(p_k) == 0:
    raise ValueError(f"`p_k` must be {allowed}, got {p_k!r}.")
  values = tuple(checks.check_float(f"p_k[{i}]", v, minimum=0.0) for i, v in enumerate(p_k))
  total = sum(values)
  if not 0.9999 < total < 1.0001:
    raise ValueError(f"`p_k` must be {allowed}, got {list(p_k)!r}, which sums to {total!r}.")
  return values


def _check_arguments(p_k, method, distribution, inverse_temperature, art_lambda, m, top1_mode):
  p_k = check_p_k(p_k)
  checks.check_choice("method", method, METHODS)
  checks.check_choice("distribution", distribution, DISTRIBUTIONS)
  inverse_temperature = checks.check_float(
    "inverse_temperature", inverse_temperature, minimum=0.0, strict=True
  )
  art_lambda = checks.check_float("art_lambda", art_lambda, minimum=0.0)
  m = checks.check_int("m", m, minimum=2, allow_none=True)
  if m is not None and m <= len(p_k):
    raise ValueError(
      f"`m` must be greater than K = len(p_k) = {len(p_k)}, got m={m!r} (m = None ranks every "
      f"class: set m, e.g. 16, beyond a few hundred classes, where the cost without it grows "
      f"as n log^2 n for 'bitonic' and n^2 for the other methods)."
    )
  checks.check_choice("top1_mode", top1_mode, TOP1_MODES)
  return p_k, inverse_temperature, art_lambda, m


def _top_m(scores, logits, ids, m):
  """The true class followed by the ``m - 1`` other classes of highest score, ``[B, m]``, from
  ``scores`` and from ``logits``: one top-k serves both, as they order the valid classes alike
  and put the padded ones last (tied in both, taken by index); one gather where ``logits`` are
  ``scores``."""
  ids = ops.cast(ids, "int32")
  is_true = ops.equal(ops.arange(scores.shape[-1], dtype="int32")[None, :], ids[:, None])
  _, top = backend.top_k(ops.stop_gradient(backend.where(is_true, -math.inf, scores)), m - 1)
  index = ops.concatenate([ids[:, None], top], axis=-1)
  top_scores = backend.take_along_axis(scores, index)
  return top_scores, top_scores if logits is scores else backend.take_along_axis(logits, index)


def _top_k_columns(scores, k, method, distribution, inverse_temperature, art_lambda):
  """``[B, n, k]``: each class's weight at the ``k`` highest (ascending) positions."""
  if method == "neuralsort":
    return neuralsort(scores, temperature=1.0 / inverse_temperature)[:, :, -k:]
  if method == "softsort":
    return softsort(scores, temperature=1.0 / inverse_temperature)[:, :, -k:]
  return sorting_network_topk(
    scores, k, method, distribution, steepness=inverse_temperature, art_lambda=art_lambda
  )


def _checked_scores(scores, k, m):
  """The checked scores ``[B, n]``: ``n`` known when traced, ``n >= K`` and ``n > m``."""
  scores = checks.check_scores("scores", scores, rank=2, min_length=2)
  n = scores.shape[-1]
  if n is None:
    raise ValueError(
      f"`scores` must have a number of classes known when traced, got {scores.shape}"
    )
  if m is not None and m >= n:
    raise ValueError(
      f"`m` must be smaller than the number of classes n={n}, got m={m!r}: `m` ranks only the "
      f"true class and the m - 1 best others, for many classes (beyond a few hundred; the paper "
      f"uses m=16 at 1,000); leave m=None to rank all n."
    )
  if k > n:
    raise ValueError(f"`p_k` has K={k} entries, more than the n={n} classes of `scores`.")
  return scores


def _targets(parsed, scores, where):
  """The relevance ``[B, n]`` of the parsed labels, the target distribution ``t`` ``[B, n]`` (all
  zero for a row without a positive entry) and the non-padded classes ``[B, n]`` (see the module
  docstring)."""
  relevance = parsed.to_relevance(scores.shape[-1], scores.dtype)
  if where is not None:
    relevance = backend.where(where, relevance, -ops.ones_like(relevance))
  valid = relevance >= 0
  target = backend.where(valid, backend.maximum(relevance, 0.0), 0.0)
  mass = ops.sum(target, axis=-1, keepdims=True)
  return relevance, backend.divide_no_nan(target, mass), valid


def _preselect(scores, logits, target, parsed, relevance, m):
  """Top-``m`` pre-selection: scores, logits and target ``[B, m]``, the true class first, and
  the rows that are not one-hot (bool ``[B]``; ``None`` for class ids)."""
  ids, not_one_hot = parsed.ids, None
  if ids is None:
    not_one_hot = ops.sum(ops.cast(relevance > 0, "int32"), axis=-1) != 1
    checks.check_values(
      ops.logical_not(not_one_hot),
      "With `m` set, dense labels must have one positive entry per row (one-hot); rows "
      "without exactly one:",
      ops.arange(ops.shape(not_one_hot)[0], dtype="int32"),
    )
    ids = ops.argmax(relevance, axis=-1)
  has_target = ops.cast(ops.any(target > 0, axis=-1, keepdims=True), scores.dtype)
  first = ops.cast(ops.equal(ops.arange(m), 0), scores.dtype)
  target = first[None, :] * has_target
  return *_top_m(scores, logits, ids, m), target, not_one_hot


def _preselect_class_ids(scores, ids, m):
  """:func:`_preselect` of class ids without padding, where the target is one-hot at the true
  class and every class is valid (the logits are the scores): the top-``m`` scores, the same
  as logits, and the target ``[B, m]`` (1 at the true class, first), with no ``[B, n]``
  target, mask or sink."""
  scores, logits = _top_m(scores, scores, ids, m)
  first = ops.cast(ops.equal(ops.arange(m), 0), scores.dtype)
  return scores, logits, ops.zeros_like(scores) + first[None, :]


def _sorted_mass(scores, p_k, with_top1, relaxation):
  """``sum_k P_K(k) p_k(c)`` ``[B, n]`` from the relaxed permutation, over ``k = 1..K`` when
  ``with_top1`` (``top1_mode="sort"``), else over ``k >= 2``; ``relaxation`` is ``(method,
  distribution, inverse_temperature, art_lambda)``."""
  k = len(p_k)
  weights = np.array(p_k[::-1])  # weights[j]: P_K(K - j) of ascending column j
  if not with_top1:
    weights[-1] = 0.0
  if not (any(p_k[1:]) or with_top1):
    return ops.zeros_like(scores)
  columns = _top_k_columns(scores, k, *relaxation)
  in_top = ops.flip(backend.cumsum(ops.flip(columns, -1), axis=-1), -1)  # [..., j]: top K - j
  return ops.sum(in_top * ops.cast(weights, scores.dtype), axis=-1)


def _nll(q):
  return -ops.log(q * (1.0 - 2.0 * _EPSILON) + _EPSILON)


def topk_cross_entropy(
  scores,
  labels,
  *,
  where=None,
  p_k=(0.5, 0.0, 0.0, 0.0, 0.5),
  method="bitonic",
  distribution="cauchy",
  inverse_temperature=2.0,
  art_lambda=0.25,
  m=None,
  top1_mode="sm",
):
  """Per-example top-k cross-entropy (Petersen et al., ICML 2022, Sec. 3), see the module
  docstring for the formula, the labels and the deviations from difftopk.

  Args:
    scores: ``[B, n]`` class scores, ``n >= K`` known when traced (float16 / bfloat16 are
      computed in float32).
    labels: class ids ``[B]`` / ``[B, 1]`` or dense labels ``[B, n]`` (``< 0``: padding).
    where: optional bool ``[B, n]``; classes where it is False are padding.
    p_k: ``P_K``, the weights of top-1 .. top-K, numbers ``>= 0`` summing to 1.
    method: the relaxed sorting operator, one of ``METHODS``.
    distribution: the sigmoid of a sorting network, one of
      :data:`tfrank4class.ranking.sorting_networks.DISTRIBUTIONS`.
    inverse_temperature: ``> 0``; the steepness of a sorting network, ``1 / tau`` for NeuralSort
      and SoftSort.
    art_lambda: the ART exponent of ``distribution="logistic_phi"``.
    m: ``None`` (rank all ``n`` classes) or the number of classes to rank,
      ``K < m < n``; set it beyond a few hundred classes (the cost without it grows as
      ``n log^2 n`` for ``"bitonic"`` and ``n^2`` for the others, see the module docstring).
    top1_mode: ``"sm"``, ``"smce"`` or ``"sort"``.

  Returns:
    ``[B]`` losses in the scores' dtype (float16 / bfloat16 scores: float32).

  Example:
    >>> import numpy as np
    >>> s = np.array([[2.0, 1.0, 0.0]], np.float32)
    >>> loss = topk_cross_entropy(s, np.array([1]), p_k=[0.5, 0.5], method="odd_even",
    ...                           distribution="logistic", inverse_temperature=1e3)
    >>> # top-1: softmax; the top-2 probability of class 1 is 1: -log(0.5 * 0.24473 + 0.5)
    >>> ops.convert_to_numpy(loss).round(4)
    array([0.4742], dtype=float32)
  """
  # Over 60 lines by its signature and docstring (every argument of the paper's loss).
  p_k, inverse_temperature, art_lambda, m = _check_arguments(
    p_k, method, distribution, inverse_temperature, art_lambda, m, top1_mode
  )
  scores = _checked_scores(scores, len(p_k), m)
  parsed = parse_labels(labels, scores.shape[-1], dtype=scores.dtype)
  check_batch_size(parsed, scores)
  not_one_hot = None
  if m is not None and parsed.is_class_ids and where is None:
    scores, logits, target = _preselect_class_ids(scores, parsed.ids, m)
  else:
    relevance, target, valid = _targets(parsed, scores, where)
    scores = sink(scores, valid)
    lowest = np.finfo(ops.dtype(scores)).min
    logits = backend.where(valid, scores, ops.full_like(scores, lowest))  # padded: no mass
    if m is not None:
      scores, logits, target, not_one_hot = _preselect(scores, logits, target, parsed, relevance, m)
  relaxation = (method, distribution, inverse_temperature, art_lambda)
  q = _sorted_mass(scores, p_k, top1_mode == "sort", relaxation)
  if top1_mode == "sm":
    q += p_k[0] * ops.softmax(logits, axis=-1)
  per_class = _nll(q)
  if top1_mode == "smce":
    per_class = sum(p_k[1:]) * per_class - p_k[0] * ops.log_softmax(logits, axis=-1)
  values = ops.sum(backend.where(target > 0, target * per_class, 0.0), axis=-1)
  if not_one_hot is not None:
    values = backend.where(not_one_hot, ops.full_like(values, math.nan), values)
  return parsed.mark_invalid(values)


@register("topk_cross_entropy_loss")
class TopKCrossEntropyLoss(ListwiseLoss):
  """The top-k cross-entropy of Petersen et al. (ICML 2022, Sec. 3) as a Keras loss.

  A thin wrapper over :func:`topk_cross_entropy` (see the module docstring for the formula,
  the labels and the deviations from difftopk's ``TopKCrossEntropyLoss``); the arguments are
  checked here, at construction. A :class:`~tfrank4class.losses.ListwiseLoss`:
  ``loss_values(scores, labels)`` takes class ids ``[B]`` as they are
  (:attr:`~tfrank4class.losses.ListwiseLoss.takes_class_ids`) and dense relevance ``[B, C]``.

  Args:
    p_k, method, distribution, inverse_temperature, art_lambda, m, top1_mode: see
      :func:`topk_cross_entropy`.
    reduction, name: as for every Keras loss.

  Example:
    >>> import numpy as np
    >>> loss = TopKCrossEntropyLoss(p_k=[0.5, 0.5], method="odd_even", distribution="logistic",
    ...                             inverse_temperature=1e3, reduction="none")
    >>> s = np.array([[2.0, 1.0, 0.0]], np.float32)
    >>> ops.convert_to_numpy(loss(np.array([1]), s)).round(4)
    array([0.4742], dtype=float32)
    >>> from tfrank4class.compat import keras
    >>> model = keras.Sequential([keras.layers.Dense(10)])
    >>> model.compile(optimizer="adam", loss=TopKCrossEntropyLoss(m=6))
  """

  def __init__(
    self,
    p_k=(0.5, 0.0, 0.0, 0.0, 0.5),
    method="bitonic",
    distribution="cauchy",
    inverse_temperature=2.0,
    art_lambda=0.25,
    m=None,
    top1_mode="sm",
    reduction=compat.DEFAULT_REDUCTION,
    name="topk_cross_entropy_loss",
  ):
    super().__init__(reduction=reduction, name=name)
    p_k, inverse_temperature, art_lambda, m = _check_arguments(
      p_k, method, distribution, inverse_temperature, art_lambda, m, top1_mode
    )
    self.p_k = list(p_k)
    self.method = method
    self.distribution = distribution
    self.inverse_temperature = inverse_temperature
    self.art_lambda = art_lambda
    self.m = m
    self.top1_mode = top1_mode

  min_list_size = 2
  takes_class_ids = True

  def loss_values(self, scores, labels):
    return topk_cross_entropy(
      checks.check_scores("y_pred", scores, min_length=2, finite=False),  # the base checked them
      labels,
      p_k=self.p_k,
      method=self.method,
      distribution=self.distribution,
      inverse_temperature=self.inverse_temperature,
      art_lambda=self.art_lambda,
      m=self.m,
      top1_mode=self.top1_mode,
    )

  def get_config(self):
    config = super().get_config()
    config.update(
      {
        "p_k": list(self.p_k),
        "method": self.method,
        "distribution": self.distribution,
        "inverse_temperature": self.inverse_temperature,
        "art_lambda": self.art_lambda,
        "m": self.m,
        "top1_mode": self.top1_mode,
      }
    )
    return config
