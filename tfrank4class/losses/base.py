"""The base class of every loss of the package: labels reach ``call`` as the caller gave them.

Keras 2's ``Loss.__call__`` hands ``y_true`` to ``call`` unchanged; Keras 3's converts it (and
``y_pred``) to the loss dtype, a float, first. Our losses take integer class ids ``[B]`` /
``[B, 1]`` or dense relevance ``[B, C]`` and parse them with the one label parser
(:func:`tfrank4class.labels.parse_labels`), which must see the ids as the caller gave them, under
both flavours: integer ids stay integers (no whole-number check, no float rounding of large ids),
non-numeric labels raise the parser's ``TypeError``, and ``y_pred`` keeps its dtype (the score
check, :func:`tfrank4class._validation.check_scores`, decides the computation dtype).

:class:`Loss` therefore computes the values itself, ``values = call(y_true, y_pred)`` on the raw
arguments, and only then hands them to the bound Keras's own ``Loss.__call__`` through a
pass-through loss with the same attributes, so that sample weights, the reduction and (Keras 3)
the scaling by the number of replicas under a distribution strategy are the flavour's own:

    loss(y, s, w) = reduce_K(call(y, s) * w)      reduce_K: Keras's "sum", "sum_over_batch_size"
                                                  (Keras 2: also "auto") or "none"
"""

import re

import tensorflow as tf

from tfrank4class import compat
from tfrank4class.compat import keras


class _PassThrough(keras.losses.Loss):
  """The identity loss: Keras's own weighting and reduction of values that are already losses."""

  def call(self, y_true, y_pred):
    del y_true
    return y_pred


class Loss(keras.losses.Loss):
  """A ``keras.losses.Loss`` whose ``call(y_true, y_pred)`` receives the raw labels and scores.

  Subclass it and implement ``call`` (per-example losses, or a batch-level scalar); construct
  it with ``reduction`` in either flavour's spelling (Keras 2's ``"auto"`` is Keras 3's
  ``"sum_over_batch_size"``, see :func:`tfrank4class.compat.loss_reduction`).

  Example:
    >>> class FirstScore(Loss):
    ...   def call(self, y_true, y_pred):
    ...     return tf.cast(y_true, y_pred.dtype) * y_pred[:, 0]
    >>> loss = FirstScore(reduction="sum")
    >>> float(loss(tf.constant([1, 2]), tf.constant([[1.0, 0.0], [3.0, 0.0]])))
    7.0
    >>> float(loss(tf.constant([1, 2]), tf.constant([[1.0, 0.0], [3.0, 0.0]]), [[1.0], [0.0]]))
    1.0
    >>> model = keras.Sequential([keras.layers.Dense(2)])
    >>> model.compile(optimizer="adam", loss=FirstScore())
  """

  def __init__(self, reduction=compat.DEFAULT_REDUCTION, name=None):
    super().__init__(reduction=compat.loss_reduction(reduction), name=name)

  def __call__(self, y_true, y_pred, sample_weight=None):
    with tf.name_scope(self._scope()):
      values = self.call(y_true, y_pred)
    return self.reduce(values, sample_weight)

  def _scope(self):
    """The name as a valid name scope (Keras 2 leaves ``name=None`` as it is)."""
    return re.sub(r"[^A-Za-z0-9_.\-/]", "_", self.name or type(self).__name__)

  def reduce(self, values, sample_weight=None):
    """``values`` times ``sample_weight``, reduced by the bound Keras as ``self.reduction`` says.

    A sample weight with one trailing axis of size 1 more than ``values`` (``[B, 1]`` for
    per-list losses ``[B]``) is squeezed first, and one with an axis fewer gets that axis, as
    Keras 2 matches them (Keras 3 would instead give ``reduction="none"`` values of shape
    ``[B, 1]``), so that the values have the same shape under both flavours.
    """
    if sample_weight is not None:
      values = tf.convert_to_tensor(values)
      sample_weight = tf.convert_to_tensor(sample_weight)
      rank, weight_rank = values.shape.rank, sample_weight.shape.rank
      if rank is not None and weight_rank == rank + 1 and sample_weight.shape[-1] == 1:
        sample_weight = tf.squeeze(sample_weight, -1)
      elif rank is not None and weight_rank is not None and weight_rank == rank - 1 > 0:
        sample_weight = sample_weight[..., None]
    # The pass-through loss with this loss's attributes: everything Keras reads (reduction, name,
    # dtype, Keras 2's permission to reduce "auto" under a distribution strategy, which `compile`
    # sets on the loss it is given).
    view = _PassThrough.__new__(_PassThrough)
    view.__dict__.update(vars(self))
    return view(values, values, sample_weight)
