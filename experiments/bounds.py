"""Bruch et al.'s bounds of softmax cross-entropy on ranking metrics, checked on real outputs.

Bruch, Wang, Bendersky and Najork, "An Analysis of the Softmax Cross Entropy Loss for
Learning-to-Rank with Binary Relevance" (ICTIR 2019); see the summary in
``../shared/papers/000_8cf2ea1c8a5c48f9.txt`` ("Proposition: Softmax CE bounds ranking metrics").
For one list of scores ``s`` over ``C`` classes with the true class ``y``:

    p_y = exp(s_y) / sum_j exp(s_j)                          (the softmax probability of y)
    rank_y = #{j : s_j >= s_y}                               (1 = top; ties count AGAINST y)

Part 1. Every class ranked at or above ``y`` adds at least ``exp(s_y)`` to the partition, so

    p_y <= 1 / rank_y                                        (the probability bounds the RR)

Part 2. Over ``N`` examples, with ``CE = mean(-log p_y)`` and ``MRR = mean(1 / rank_y)``, Part 1
and Jensen's inequality (log is concave) give

    CE >= mean(log rank_y) >= -log(MRR).

Counting ties against the true class makes ``rank_y`` the largest rank the class can get under
any tie-breaking, the rank for which Part 1 holds; the package's MRR metric averages over
tie-breaking orders instead and is never below this ``MRR``, so ``CE >= -log`` of that MRR holds
too. Both parts are identities of the softmax: they hold for the softmax of any scores, whatever
trained them; on real outputs the interesting part is the *slack*: how far from the bound a model
sits (``1/rank_y - p_y`` per example, ``CE + log MRR`` overall).

Computation is in float64 (``log p_y = s_y - logsumexp(s)``), and Part 1 is checked in the log
domain as ``log p_y <= -log rank_y + atol``; ``atol`` (default 1e-9) absorbs float64 rounding
of the log-sum-exp, which is about 1e-16 relative.

Example:
  >>> check = softmax_rank_bound([0], [[1.0, 1.0, 0.0]])   # the true class tied with class 1
  >>> int(check.rank[0]), round(float(check.p_true[0]), 4), check.violations
  (2, 0.4223, 0)
"""

import collections
import math

import tensorflow as tf

from tfrank4class import checks
from tfrank4class.labels import class_ids


class BoundCheck(
  collections.namedtuple(
    "BoundCheck",
    [
      "p_true",
      "rank",
      "violations",
      "min_slack",
      "mean_slack",
      "cross_entropy",
      "mrr",
      "neg_log_mrr",
      "ce_gap",
    ],
  )
):
  """What :func:`softmax_rank_bound` found.

  Attributes:
    p_true: float64 numpy ``[N]``, the softmax probability of the true class.
    rank: int64 numpy ``[N]``, its rank with ties counted against it.
    violations: how many examples have ``p_y > 1 / rank_y`` (beyond ``atol`` in the log domain).
    min_slack, mean_slack: the smallest and the mean of ``1 / rank_y - p_y``.
    cross_entropy: ``mean(-log p_y)``.
    mrr: ``mean(1 / rank_y)`` with ties counted against the true class.
    neg_log_mrr: ``-log(mrr)``.
    ce_gap: ``cross_entropy - neg_log_mrr`` (``>= 0`` by Part 2).
  """

  __slots__ = ()

  @property
  def holds(self):
    """Whether both parts hold: no Part 1 violation and ``ce_gap >= 0``."""
    return self.violations == 0 and self.ce_gap >= 0.0

  def summary(self):
    """The scalar fields as a ``{name: Python number}`` dict (JSON-ready)."""
    return {
      "violations": int(self.violations),
      "min_slack": float(self.min_slack),
      "mean_slack": float(self.mean_slack),
      "cross_entropy": float(self.cross_entropy),
      "mrr": float(self.mrr),
      "neg_log_mrr": float(self.neg_log_mrr),
      "ce_gap": float(self.ce_gap),
    }


def softmax_rank_bound(labels, scores, atol=1e-9):
  """Checks ``p_y <= 1/rank_y`` per example and ``CE >= -log MRR`` (see the module docstring).

  Args:
    labels: class ids ``[N]`` or ``[N, 1]`` in ``[0, C)``.
    scores: finite scores (logits) ``[N, C]``; the softmax is taken over the ``C`` classes.
    atol: tolerance ``>= 0`` of the Part 1 check in the log domain.

  Returns:
    A :class:`BoundCheck`.

  Raises:
    ValueError: ``scores`` not ``[N, C]``, ``labels`` not ``[N]`` / ``[N, 1]``, a different
      ``N``, an empty batch, a negative ``atol``, non-finite scores or ids outside ``[0, C)``.
  """
  atol = checks.check_float("atol", atol, minimum=0.0)
  scores = tf.cast(checks.check_scores("scores", scores), tf.float64)
  num_classes = int(scores.shape[-1])
  ids = class_ids(labels, num_classes)
  if int(ids.shape[0]) != int(scores.shape[0]):
    raise ValueError(
      f"`labels` and `scores` must have the same number of examples, got "
      f"{int(ids.shape[0])} labels for {int(scores.shape[0])} score lists."
    )
  if int(ids.shape[0]) == 0:
    raise ValueError("`scores` must hold at least one example, got an empty batch.")
  s_true = tf.gather(scores, ids, batch_dims=1)
  rank = tf.reduce_sum(tf.cast(scores >= s_true[:, None], tf.int64), axis=-1)
  log_p = s_true - tf.reduce_logsumexp(scores, axis=-1)
  rank_f = tf.cast(rank, tf.float64)
  violations = int(tf.reduce_sum(tf.cast(log_p > -tf.math.log(rank_f) + atol, tf.int64)))
  p_true = tf.exp(log_p)
  slack = 1.0 / rank_f - p_true
  cross_entropy = float(tf.reduce_mean(-log_p))
  mrr = float(tf.reduce_mean(1.0 / rank_f))
  neg_log_mrr = -math.log(mrr)
  return BoundCheck(
    p_true.numpy(),
    rank.numpy(),
    violations,
    float(tf.reduce_min(slack)),
    float(tf.reduce_mean(slack)),
    cross_entropy,
    mrr,
    neg_log_mrr,
    cross_entropy - neg_log_mrr,
  )
