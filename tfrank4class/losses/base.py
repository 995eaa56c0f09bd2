"""The base class of every loss of the package: raw labels reach ``call``, weights are Keras's.

Keras 2's ``Loss.__call__`` hands ``y_true`` to ``call`` unchanged; Keras 3's converts it (and
``y_pred``) to the loss dtype, a float, first. Our losses take integer class ids ``[B]`` /
``[B, 1]`` or dense relevance ``[B, C]`` and parse them with the one label parser
(:func:`tfrank4class.labels.parse_labels`), which must see the ids as the caller gave them, under
both flavours: integer ids stay integers (no whole-number check, no float rounding of large ids),
non-numeric labels raise the parser's ``TypeError``, and ``y_pred`` keeps its dtype (the score
check, :func:`tfrank4class._validation.check_scores`, decides the computation dtype).

:class:`Loss` therefore computes the values itself, ``values = call(y_true, y_pred)`` on the raw
arguments, checks the sample weights (:func:`tfrank4class._validation.check_sample_weight`) and
reduces with :func:`tfrank4class.compat.reduce_loss`, which applies the bound Keras's reduction
rules (including its rules under a distribution strategy):

    loss(y, s, w) = reduce_K(call(y, s) * w)      reduce_K: "sum", "sum_over_batch_size"
                                                  (Keras 2: also "auto") or "none"

What a per-example weight ``w_i`` means depends on how the loss couples the examples of a batch,
declared by the class attribute :attr:`Loss.coupling`:

* ``"example"``: example ``i``'s loss depends on example ``i`` alone; ``w_i`` multiplies it, and
  the weighted value is ``reduce_K(w_i * l_i)``, the weighted mean under ``reduce_K``.
* ``"anchor"``: one loss per example (the anchor), computed against the whole batch (metric
  learning); ``w_i`` multiplies anchor ``i``'s loss as above, and example ``i`` still takes part
  in the other anchors' pairs and triplets (a weight of 0 removes it as an anchor only).
* ``"batch"``: one loss per batch (lists that run down the batch, as RaMBO's mAP and APC). The
  examples with ``w_i = 0`` are left out of every list (their labels become padding, so they are
  ranked neither as queries nor as items), and the batch loss of the others is scaled by the mean
  weight: ``L_w = L(batch without the w = 0 examples) * sum_i w_i / B``, whatever the reduction.
  Unit weights give the unweighted loss.
"""

import re

import tensorflow as tf

from tfrank4class import _validation, compat
from tfrank4class.compat import keras
from tfrank4class.labels import num_items, to_relevance

#: The values of :attr:`Loss.coupling`.
COUPLINGS = ("example", "anchor", "batch")


class Loss(keras.losses.Loss):
  """A ``keras.losses.Loss`` whose ``call(y_true, y_pred)`` receives the raw labels and scores.

  Subclass it and implement ``call`` (per-example losses ``[B]``, or a batch-level loss of shape
  ``[]`` or ``[1]``); construct it with ``reduction`` in either flavour's spelling (Keras 2's
  ``"auto"`` is Keras 3's ``"sum_over_batch_size"``, see
  :func:`tfrank4class.compat.loss_reduction`).
  Sample weights ``[B]`` or ``[B, 1]`` weigh the examples as the module docstring describes for
  the class's :attr:`coupling`; other shapes raise a ``ValueError`` naming ``sample_weight``.

  Example:
    >>> class FirstScore(Loss):
    ...   def call(self, y_true, y_pred):
    ...     return tf.cast(y_true, y_pred.dtype) * y_pred[:, 0]
    >>> loss = FirstScore(reduction="sum")
    >>> float(loss(tf.constant([1, 2]), tf.constant([[1.0, 0.0], [3.0, 0.0]])))
    7.0
    >>> float(loss(tf.constant([1, 2]), tf.constant([[1.0, 0.0], [3.0, 0.0]]), [1.0, 0.0]))
    1.0
    >>> model = keras.Sequential([keras.layers.Dense(2)])
    >>> model.compile(optimizer="adam", loss=FirstScore())
  """

  #: How the loss couples the examples of a batch: ``"example"`` (each example's loss depends on
  #: it alone), ``"anchor"`` (one loss per example, against the whole batch) or ``"batch"`` (one
  #: loss per batch; ``call`` must then accept dense relevance ``[B, C]`` with ``-1`` as padding).
  #: It decides what a per-example sample weight means (see the module docstring).
  coupling = "example"
  #: Whether the loss also defines per-item sample weights ``[B, C]`` (TF-Ranking's losses).
  item_weights = False

  def __init__(self, reduction=compat.DEFAULT_REDUCTION, name=None):
    super().__init__(reduction=compat.loss_reduction(reduction), name=name)

  def __call__(self, y_true, y_pred, sample_weight=None):
    with tf.name_scope(self._scope()):
      if sample_weight is not None and self.coupling == "batch":
        return self._batch_weighted(y_true, y_pred, sample_weight)
      values = self.call(y_true, y_pred)
      return self.reduce(values, sample_weight)

  def _scope(self):
    """The name as a valid name scope (Keras 2 leaves ``name=None`` as it is)."""
    return re.sub(r"[^A-Za-z0-9_.\-/]", "_", self.name or type(self).__name__)

  def _batch_weighted(self, y_true, y_pred, sample_weight):
    """A batch-level loss without the zero-weight examples, scaled by the mean weight."""
    scores = _validation.check_scores("y_pred", y_pred, finite=False)
    batch = tf.shape(scores)[0]
    weights = _validation.check_sample_weight(sample_weight, batch, dtype=scores.dtype)
    relevance = to_relevance(y_true, num_items(scores), dtype=scores.dtype)
    relevance = tf.where(weights[:, None] != 0, relevance, -tf.ones_like(relevance))
    mean_weight = tf.reduce_sum(weights) / tf.cast(batch, weights.dtype)
    return self.reduce(self.call(relevance, scores) * mean_weight)

  def reduce(self, values, sample_weight=None):
    """``values`` times ``sample_weight``, reduced as the bound Keras reduces ``self.reduction``.

    ``values`` are per-example losses ``[B]`` (the weights, ``[B]`` or ``[B, 1]``, multiply
    them) or a batch-level loss (no weights). With ``reduction="none"`` the result has the shape
    of ``values`` under both flavours.
    """
    values = tf.convert_to_tensor(values)
    if sample_weight is not None:
      if values.shape.rank is not None and values.shape.rank != 1:
        raise ValueError(
          f"{type(self).__name__} returned values of shape {values.shape} from `call`; "
          "per-example `sample_weight` needs one loss per example, shape [batch_size] (a "
          'batch-level loss declares coupling = "batch").'
        )
      weights = _validation.check_sample_weight(
        sample_weight, tf.shape(values)[0], dtype=values.dtype
      )
      values = values * weights
    return compat.reduce_loss(self, values)
