"""TF-Ranking's listwise losses: ``softmax_loss`` (and ``calibrated_softmax_loss``, the same core
with a virtual item), ``unique_softmax_loss``, ``list_mle_loss``, ``coupled_rankdistil_loss``.

Padded items get the logit ``log(1e-10)`` as in TF-Ranking. Every log-sum-exp is taken with its
maximum out, so the losses stay finite at any score spread
(TF-Ranking's ListMLE sums ``exp(s - max s)`` and returns ``-inf`` once the scores spread by about
90). ``list_mle_loss`` and ``unique_softmax_loss`` cost ``O(n log n)`` per list (a sort, then a
cumulative log-sum-exp); ``softmax_loss`` ranks the items only for a :class:`DCGLambdaWeight`.

Example:
  >>> import numpy as np
  >>> from keras import ops
  >>> losses, weights = SoftmaxLoss().compute_per_list(
  ...   np.array([[0.0, 0.0, 1.0]]), np.array([[0.0, 1.0, 3.0]]), None)
  >>> round(float(ops.convert_to_numpy(losses * weights)[0]), 4)   # -log softmax(s)_2
  0.1698
"""

from tfrank4class import backend
from tfrank4class.backend import (
  cumulative_logsumexp,
  logaddexp,
  logsumexp_of_finite,
  mean,
  searchsorted,
  stable_argsort,
  take_along_axis,
)
from tfrank4class.compat import ops
from tfrank4class.losses.lambda_weights import DCGLambdaWeight, ListMLELambdaWeight
from tfrank4class.losses.ranking_losses.base import (
  Core,
  at_true_class,
  true_class_mask,
  true_class_weight,
)
from tfrank4class.losses.ranking_losses.sampling import (
  LOG_EPSILON,
  first_then_drawn,
  gather,
  order,
  ranks,
  uniform,
)


def _true_class_nll(ids, logits):
  """``-log softmax(logits)`` at the class ids ``ids`` ``[B]``, ``[B, 1]``.

  On JAX the log-sum-exp less the masked sum at the true class, which XLA fuses (the gather's
  scatter gradient took 1.07-1.52x rax's one-hot form at C = 10 to 1,000); elsewhere a gather of
  the log-softmax (the masked form took 1.12x under ``tf.function`` at C = 1,000 and 1.1-1.3x on
  PyTorch): benchmarks/backends.md, "The smooth SVM on PyTorch's own ops, and softmax on JAX".
  """
  if backend.name() == "jax":
    is_true = true_class_mask(ids, logits)
    return ops.logsumexp(logits, axis=-1, keepdims=True) - at_true_class(is_true, logits)
  return -take_along_axis(ops.log_softmax(logits, axis=-1), ids[:, None], axis=-1)


def _cleaned(labels, logits):
  valid = labels >= 0
  return valid, backend.where(valid, labels, 0.0), backend.where(valid, logits, LOG_EPSILON)


class SoftmaxLoss(Core):
  """The cross-entropy of the normalised labels and the softmax of the scores, per list,
  weighted by the label sum; a :class:`DCGLambdaWeight` replaces the labels by its item weights."""

  weighting = "list"

  @property
  def shows_non_finite(self):
    """Without a :class:`DCGLambdaWeight`, a list's loss is non-finite wherever one of its
    labels, or the score of an item that is not padding, is: a NaN or +-inf score enters the
    log-sum-exp and the sum of labels times scores (even at a label of 0), a +-inf or NaN label
    that sum and the label sum (:meth:`compute_per_list`)."""
    return not isinstance(self.lambda_weight, DCGLambdaWeight)

  def compute_per_list(self, labels, logits, weights):
    """``(losses [B], weights [B])``; ``weights`` (``[B, 1]`` or ``[B, n]``) scale the labels."""
    logits = self.get_logits(logits)
    valid = labels >= 0
    if isinstance(self.lambda_weight, DCGLambdaWeight):
      return self._lambda_weighted(labels, logits, valid, weights)
    # A label that `>= 0` reads as padding becomes `label * 0`: 0, or NaN for a NaN or -inf label,
    # which then makes the list's loss NaN (shows_non_finite).
    labels = backend.where(valid, labels, labels * 0.0)
    logits = backend.where(valid, logits, LOG_EPSILON)
    if weights is not None:
      labels = labels * weights
    label_sum = ops.sum(labels, axis=1)
    # -sum(l * log_softmax(s)) without the [B, n] log-softmax. The labels are >= 0 here, so a
    # label sum is 0 only where every label is: TF-Ranking's uniform labels there give a finite
    # loss it weighs by that 0, and the loss here is 0 (weighed by 0 too).
    cross_entropy = label_sum * logsumexp_of_finite(logits) - ops.sum(labels * logits, axis=1)
    return cross_entropy / backend.where(label_sum > 0, label_sum, 1.0), label_sum

  def _lambda_weighted(self, labels, logits, valid, weights):
    """:meth:`compute_per_list` with a :class:`DCGLambdaWeight`'s item weights as the labels
    (any sign with a custom gain: TF-Ranking's uniform labels where their sum is not > 0)."""
    item_ranks = ranks(logits, valid)
    _, labels, logits = _cleaned(labels, logits)
    labels = self.lambda_weight.individual_weights(labels, item_ranks)
    if weights is not None:
      labels = labels * weights
    label_sum = ops.sum(labels, axis=1)
    labels = backend.where(ops.expand_dims(label_sum > 0, 1), labels, 1e-10)
    labels = backend.where(valid, labels, 0.0)
    total = ops.sum(labels, axis=1, keepdims=True)
    target = backend.where(total == 0, 0.0, labels / backend.where(total == 0, 1.0, total))
    losses = -ops.sum(target * ops.log_softmax(logits, axis=-1), axis=1)
    return losses, label_sum

  def compute_per_list_from_ids(self, ids, logits, weights):
    """:meth:`compute_per_list` of the one-hot rows of int32 class ids ``ids`` ``[B]``: ``-log
    softmax(logits)`` at the true class, weighted by that class's weight (the label sum of the
    row); ``None`` with a :class:`DCGLambdaWeight`, which ranks the items."""
    if isinstance(self.lambda_weight, DCGLambdaWeight):
      return None
    losses = _true_class_nll(ids, self.get_logits(logits))[:, 0]
    return losses, true_class_weight(ids, weights, logits)[:, 0]


class UniqueSoftmaxLoss(Core):
  """For each item ``i``, ``(2^l_i - 1)`` times ``-log`` of its softmax among itself and the
  items of lower label; summed per list ``[B, 1]``."""

  weighting = "list"

  def compute_unreduced_loss(self, labels, logits):
    valid, labels, logits = _cleaned(labels, logits)
    # Valid items by label ascending (padded ones last): the items of lower label than item i
    # are the first `lower[i]` of that order, so their log-sum-exp is a prefix scan's.
    key = backend.where(valid, labels, float("inf"))
    permutation = stable_argsort(key)
    sorted_key, sorted_logits = gather(permutation, key, logits)
    lower = searchsorted(sorted_key, key)
    prefix = take_along_axis(
      cumulative_logsumexp(sorted_logits), ops.maximum(lower - 1, 0), axis=-1
    )
    has_lower = ops.logical_and(valid, lower > 0)
    per_item = backend.where(has_lower, logaddexp(prefix, logits), logits) - logits
    losses = ops.sum(per_item * (ops.power(2.0, labels) - 1.0), axis=1, keepdims=True)
    return losses, ops.ones_like(losses)

  def compute_per_list_from_ids(self, ids, logits, weights):
    """The loss of one-hot rows of class ids ``ids`` ``[B]``: the true class is the one item
    above the others, so ``-log softmax(logits)`` at it ``[B, 1]``, weighted by its sample weight
    ``[B, 1]``."""
    return _true_class_nll(ids, self.get_logits(logits)), true_class_weight(ids, weights, logits)


class ListMLELoss(Core):
  """``-log`` of the Plackett-Luce probability of the scores for the order of the labels (ties
  in a random order, as TF-Ranking draws it); a :class:`ListMLELambdaWeight` discounts each
  position's term. ``seed``: the ``keras.random.SeedGenerator`` of the tie order."""

  weighting = "list"

  def __init__(self, lambda_weight=None, temperature=1.0, seed=None):
    super().__init__(lambda_weight, temperature)
    self.seed = seed

  def compute_unreduced_loss(self, labels, logits):
    valid, labels, logits = _cleaned(labels, logits)
    tiebreak = uniform(ops.shape(labels), self.seed, logits)
    sorted_labels, sorted_logits = gather(order(labels, valid, tiebreak), labels, logits)
    terms = cumulative_logsumexp(sorted_logits, reverse=True) - sorted_logits
    if isinstance(self.lambda_weight, ListMLELambdaWeight):
      positions = ops.cast(ops.expand_dims(ops.arange(ops.shape(labels)[1]) + 1, 0), labels.dtype)
      terms = terms * self.lambda_weight.individual_weights(sorted_labels, positions)
    losses = ops.sum(terms, axis=1, keepdims=True)
    return losses, ops.ones_like(losses)

  def compute_per_list_from_ids(self, ids, logits, weights):
    """The loss of one-hot rows of class ids ``ids`` ``[B]``, ``[B, 1]``: the order is the true
    class first, then the others by the same random draws as for the rows (one int32 sort of the
    draws' bits, :func:`~.sampling.first_then_drawn`); weighted by its sample weight ``[B, 1]``.
    ``None`` with a :class:`ListMLELambdaWeight`."""
    if self.lambda_weight is not None:
      return None
    logits = self.get_logits(logits)
    is_true = true_class_mask(ids, logits)
    tiebreak = uniform(ops.shape(logits), self.seed, logits)
    (sorted_logits,) = gather(first_then_drawn(is_true, tiebreak), logits)
    terms = cumulative_logsumexp(sorted_logits, reverse=True) - sorted_logits
    losses = ops.sum(terms, axis=1, keepdims=True)
    return losses, true_class_weight(ids, weights, logits)


class CoupledRankDistilLoss(Core):
  """Coupled-RankDistil (Reddi et al. 2021): the mean over ``sample_size`` orders drawn from the
  labels (Gumbel noise) of ``-log`` the top-``topk`` Plackett-Luce probability of the scores;
  weighted 0 for a list without relevance. ``seed``: the ``keras.random.SeedGenerator``.
  ``O(n log n)`` per sample for any labels: a sort by the sampled order, then a suffix
  log-sum-exp (TF-Ranking masks a ``[k, n]`` matrix per sample)."""

  weighting = "list"

  def __init__(self, sample_size=8, topk=None, temperature=1.0, seed=None):
    super().__init__(None, temperature)
    self.sample_size = sample_size
    self.topk = topk
    self.seed = seed

  def compute_unreduced_loss(self, labels, logits):
    valid, labels, student = _cleaned(labels, logits)
    has_relevance = ops.sum(labels, axis=1, keepdims=True) > 0
    teacher = backend.where(valid, labels, LOG_EPSILON)
    batch, size, samples = ops.shape(labels)[0], ops.shape(labels)[1], self.sample_size
    u = uniform((batch, samples, size), self.seed, logits)
    teacher = ops.expand_dims(teacher, 1) - ops.log(-ops.log(u + 1e-20) + 1e-20)
    teacher = ops.reshape(ops.log(ops.softmax(teacher, axis=-1) + 1e-10), (-1, size))
    student = ops.reshape(ops.repeat(ops.expand_dims(student, 1), samples, axis=1), (-1, size))
    tiebreak = uniform(ops.shape(teacher), self.seed, logits)
    (student,) = gather(order(teacher, tiebreak=tiebreak), student)
    topk = size if self.topk is None else self.topk  # slicing stops at the list's end
    # TF-Ranking's denominator at position p is a log-sum-exp over every item, those before p
    # taken as log(1e-10): the items from p on (a suffix log-sum-exp, O(n)) and p times 1e-10.
    later = cumulative_logsumexp(student, reverse=True)[:, :topk]
    before = ops.cast(ops.arange(ops.shape(later)[1]), student.dtype)[None, :]
    padding = ops.log(ops.maximum(before, 1.0)) + LOG_EPSILON
    denominator = backend.where(before > 0, logaddexp(later, padding), later)
    log_prob = student[:, :topk] - denominator
    nll = -ops.reshape(ops.sum(log_prob, axis=1), (-1, samples))
    losses = mean(nll, axis=1, keepdims=True)
    return losses, ops.cast(has_relevance, logits.dtype)
