"""A top-k loss on the soft rank of the true class (soft ranks of Blondel et al., ICML 2020).

The top-k error of one example is ``1[rank(s)_y > k]`` (rank 1 = highest score). On integer ranks
``max(rank_y - k, 0) >= 1[rank_y > k]``, with equality whenever the true class is at most one
place too low, so the hinge on the rank is an upper bound of the top-k error that is tight near
the decision. Replacing the rank by the soft rank ``r_eps`` of Blondel, Teboul, Berthet and
Djolonga, "Fast Differentiable Sorting and Ranking" (ICML 2020, Sec. 3, Eq. 9; computed by
:func:`tfrank4class.ranking.permutahedron.soft_rank`, rank 1 = highest) makes it differentiable:

    loss(s, y) = max(r_eps(s)_y - k, 0)

Blondel et al. (Sec. 6) train top-k classifiers on their soft ranks with the top-k loss of
Cuturi, Teboul and Vert (NeurIPS 2019); this module uses the hinge above, whose hard limit
(``eps -> 0``) is exactly ``max(rank_y - k, 0)`` and whose gradient is the soft rank's (its
Jacobian is block-wise, Sec. 4: the loss moves the true class only against the classes whose
scores lie within about ``eps`` of it in the sorted order; pick ``regularization_strength`` on
the scale of the score gaps). With ``"l2"``, once every two consecutive sorted scores differ by
more than ``eps``, ``r_eps`` is the exact rank and the gradient is zero even for a true class
ranked below ``k``: scores that keep spreading during training (a network trained end to end can
scale them freely) leave the loss without a gradient. In the second-edition evidence grid's
CIFAR-10 runs with ``eps = 1`` the validation NDCG@5 stopped improving within 8 epochs
(docs/evidence-grid.md).

Padded classes (dense relevance ``< 0``) are moved below every valid class by more than
``(C + 1) * eps`` before ranking (a constant for the gradient), which keeps them in isotonic
blocks of their own, so the soft ranks of the valid classes are their soft ranks among the valid
classes alone.
"""

import numpy as np

from tfrank4class import backend, checks, compat
from tfrank4class.compat import ops
from tfrank4class.labels import num_items
from tfrank4class.losses.base import ListwiseLoss
from tfrank4class.losses.registry import register
from tfrank4class.losses.topk.single_label import single_label
from tfrank4class.ranking.permutahedron import REGULARIZATIONS, soft_rank


def soft_rank_topk_loss(
  scores, labels, *, where=None, k=5, regularization_strength=1.0, regularization="l2"
):
  """Per-example ``max(r_eps(s)_y - k, 0)`` on the soft rank (Blondel et al., ICML 2020, Eq. 9).

  Args:
    scores: ``[B, C]`` class scores, ``C > k``.
    labels: class ids ``[B]`` / ``[B, 1]`` or single-label dense relevance ``[B, C]`` (see
      :mod:`tfrank4class.losses.topk.single_label`; a row without a true class has loss 0).
    where: optional bool ``[B, C]``; classes where it is False are padding.
    k: the ``k`` of top-k, an integer ``>= 1``.
    regularization_strength: ``eps > 0`` of the soft rank.
    regularization: ``"l2"`` or ``"kl"``.

  Returns:
    ``[B]`` losses in the scores' float dtype (at least float32).

  Example:
    >>> s, y = np.array([[0.1, 2.0, 1.0, 0.5]], np.float32), np.array([0])  # true class: rank 4
    >>> round(float(soft_rank_topk_loss(s, y, k=2, regularization_strength=0.01)[0]), 4)
    2.0
    >>> round(float(soft_rank_topk_loss(s, y, k=2, regularization_strength=1.0)[0]), 4)
    1.3
  """
  k = checks.check_int("k", k, minimum=1)
  eps = checks.check_float(
    "regularization_strength", regularization_strength, minimum=0.0, strict=True
  )
  checks.check_choice("regularization", regularization, REGULARIZATIONS)
  scores = checks.check_scores("y_pred", scores, finite=False)
  num_classes = num_items(scores)
  if isinstance(num_classes, int) and num_classes <= k:
    raise ValueError(
      f"`k` must be smaller than the number of classes, got k={k} for {num_classes} classes "
      f"(`y_pred` of shape {scores.shape})."
    )
  parsed = single_label(labels, scores, where=where)
  valid_scores = backend.where(parsed.valid, scores, ops.zeros_like(scores))
  checks.check_scores("y_pred", valid_scores)
  infinity = ops.full_like(scores, np.inf)
  lowest = ops.min(backend.where(parsed.valid, scores, infinity), -1, keepdims=True)
  lowest = backend.where(ops.isfinite(lowest), lowest, ops.zeros_like(lowest))  # all padded
  size = ops.cast(ops.shape(scores)[-1], scores.dtype)
  sink = ops.stop_gradient(lowest - (size + 1) * eps)
  lists = backend.where(parsed.valid, scores, ops.broadcast_to(sink, ops.shape(scores)))
  ranks = soft_rank(lists, eps, regularization)
  true_rank = backend.take_along_axis(ranks, ops.cast(parsed.ids, "int32")[:, None], axis=-1)[:, 0]
  loss = ops.relu(true_rank - k)
  return parsed.mark_invalid(backend.where(parsed.has_true, loss, ops.zeros_like(loss)))


@register("soft_rank_topk_loss")
class SoftRankTopKLoss(ListwiseLoss):
  """``max(r_eps(s)_y - k, 0)`` on the soft rank of the true class, as a Keras loss.

  See :func:`soft_rank_topk_loss` and the module docstring (Blondel et al., ICML 2020, Sec. 3,
  Eq. 9 for the soft rank). A :class:`~tfrank4class.losses.ListwiseLoss`:
  ``loss_values(scores, labels)`` takes class ids ``[B]`` as they are
  (:attr:`~tfrank4class.losses.ListwiseLoss.takes_class_ids`) and reads the one true class of each
  list from dense relevance ``[B, C]`` (a row with several entries ``> 0`` raises, see
  :mod:`tfrank4class.losses.topk.single_label`).

  Args:
    k: the ``k`` of top-k.
    regularization_strength: ``eps > 0`` of the soft rank.
    regularization: ``"l2"`` or ``"kl"``.

  Example:
    >>> loss = SoftRankTopKLoss(k=1, regularization_strength=0.01, reduction="none")
    >>> s = np.array([[0.0, 1.0, 2.0], [0.0, 1.0, 2.0]], np.float32)
    >>> [round(float(v), 4) for v in ops.convert_to_numpy(loss(np.array([2, 0]), s))]
    [0.0, 2.0]
    >>> from tfrank4class.compat import keras
    >>> model = keras.Sequential([keras.layers.Dense(10)])
    >>> model.compile(optimizer="adam", loss=SoftRankTopKLoss(k=5))
  """

  def __init__(
    self,
    k=5,
    regularization_strength=1.0,
    regularization="l2",
    reduction=compat.DEFAULT_REDUCTION,
    name="soft_rank_topk_loss",
  ):
    self.k = checks.check_int("k", k, minimum=1)
    self.regularization_strength = checks.check_float(
      "regularization_strength", regularization_strength, minimum=0.0, strict=True
    )
    self.regularization = checks.check_choice("regularization", regularization, REGULARIZATIONS)
    super().__init__(reduction=reduction, name=name)

  takes_class_ids = True

  def loss_values(self, scores, labels):
    return soft_rank_topk_loss(
      scores,
      labels,
      k=self.k,
      regularization_strength=self.regularization_strength,
      regularization=self.regularization,
    )

  def get_config(self):
    config = super().get_config()
    config.update(
      {
        "k": self.k,
        "regularization_strength": self.regularization_strength,
        "regularization": self.regularization,
      }
    )
    return config
