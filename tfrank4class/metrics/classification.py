"""Keras metrics for classifiers seen as rankers.

Each metric is the batch mean of a per-list function of :mod:`tfrank4class.metrics.functional`
(see there for the formulas and the tie rule: exact expectation over random tie-breaking), and
accepts integer class ids ``[B]`` / ``[B, 1]`` or dense relevance ``[B, C]`` with raw scores
``[B, C]``:

    model.compile(loss=..., metrics=[TopKAccuracy(1), TopKAccuracy(5), NDCG(5), MRR()])

Being ``keras.metrics.Mean`` subclasses, they aggregate correctly across batches and replicas
and accept ``sample_weight`` of shape ``[B]`` or ``[B, 1]`` (one weight per list).

Cost. With class ids an update is ``O(B * C)`` comparisons in float32 and no sort, about the cost
of Keras' ``SparseTopKCategoricalAccuracy``; every metric compiles with ``jit_compile=True`` and
builds no float64 op, so it runs inside a TPU step. Each metric computes its own rank statistics:
inside one compiled train step TensorFlow's graph optimiser (and XLA) merge the identical
comparisons of several metrics on the same batch, so sharing them by hand does not pay
(measured: four metrics cost about as much as one; BUILD_NOTES, issue 15).
"""
import tensorflow as tf

from tfrank4class import _validation, compat
from tfrank4class.compat import keras
from tfrank4class.metrics import functional


class _PerListMean(keras.metrics.Mean):
  """The weighted mean over lists of ``self._per_list(labels, scores)``."""

  def update_state(self, y_true, y_pred, sample_weight=None):
    values = self._per_list(y_true, y_pred)
    if sample_weight is not None:
      sample_weight = tf.reshape(tf.cast(sample_weight, values.dtype), [-1])
    return super().update_state(values, sample_weight=sample_weight)


@compat.register_serializable
class TopKAccuracy(_PerListMean):
  """Fraction of lists with a relevant item among the top ``k`` scores (ties in expectation).

  Example:
    >>> m = TopKAccuracy(k=1)
    >>> _ = m.update_state([2, 0], [[0.1, 0.2, 0.7], [0.1, 0.8, 0.1]])
    >>> float(m.result())
    0.5
  """

  def __init__(self, k=5, name=None, dtype=None):
    self.k = _validation.check_int("k", k, minimum=1)
    super().__init__(name=name or f"top_{self.k}_accuracy", dtype=dtype)

  def _per_list(self, y_true, y_pred):
    return functional.top_k_accuracy(y_true, y_pred, k=self.k)

  def get_config(self):
    return {**super().get_config(), "k": self.k}


@compat.register_serializable
class NDCG(_PerListMean):
  """Mean NDCG@k over lists (``k=None``: the full list), gains ``2^rel - 1`` or ``rel``.

  Example:
    >>> m = NDCG(k=5)
    >>> _ = m.update_state([0], [[0.2, 0.9, 0.1]])
    >>> round(float(m.result()), 4)
    0.6309
  """

  def __init__(self, k=None, gain="exp2", name=None, dtype=None):
    self.k = _validation.check_int("k", k, minimum=1, allow_none=True)
    self.gain = _validation.check_choice("gain", gain, functional.GAINS)
    super().__init__(name=name or ("ndcg" if self.k is None else f"ndcg_{self.k}"), dtype=dtype)

  def _per_list(self, y_true, y_pred):
    return functional.ndcg(y_true, y_pred, k=self.k, gain=self.gain)

  def get_config(self):
    return {**super().get_config(), "k": self.k, "gain": self.gain}


@compat.register_serializable
class MRR(_PerListMean):
  """Mean reciprocal rank of the first relevant item (0 past ``k`` if given).

  Example:
    >>> m = MRR()
    >>> _ = m.update_state([1], [[0.5, 0.2, 0.9]])
    >>> round(float(m.result()), 4)
    0.3333
  """

  def __init__(self, k=None, name=None, dtype=None):
    self.k = _validation.check_int("k", k, minimum=1, allow_none=True)
    super().__init__(name=name or ("mrr" if self.k is None else f"mrr_{self.k}"), dtype=dtype)

  def _per_list(self, y_true, y_pred):
    return functional.reciprocal_rank(y_true, y_pred, k=self.k)

  def get_config(self):
    return {**super().get_config(), "k": self.k}


@compat.register_serializable
class MeanAveragePrecision(_PerListMean):
  """Mean over lists of the per-list average precision (relevant = relevance > 0).

  Example:
    >>> m = MeanAveragePrecision()
    >>> _ = m.update_state([[1.0, 0.0, 1.0]], [[0.9, 0.8, 0.1]])
    >>> round(float(m.result()), 4)
    0.8333
  """

  def __init__(self, name="map", dtype=None):
    super().__init__(name=name, dtype=dtype)

  def _per_list(self, y_true, y_pred):
    return functional.average_precision(y_true, y_pred)


@compat.register_serializable
class Spearman(_PerListMean):
  """Mean over lists of Spearman's rank correlation between graded labels and scores.

  Example:
    >>> m = Spearman()
    >>> _ = m.update_state([[1.0, 2.0, 3.0]], [[0.1, 0.5, 0.2]])
    >>> round(float(m.result()), 6)
    0.5
  """

  def __init__(self, name="spearman", dtype=None):
    super().__init__(name=name, dtype=dtype)

  def _per_list(self, y_true, y_pred):
    return functional.spearman(y_true, y_pred)


@compat.register_serializable
class RecallAtK(_PerListMean):
  """Mean over lists of the expected fraction of relevant items among the top ``k`` scores.

  For multi-label classifiers (GoEmotions multi-label, MIND): dense relevance ``[B, C]``,
  relevant = relevance > 0, ties in expectation (see ``functional.recall_at_k``). With class ids
  it equals :class:`TopKAccuracy`.

  Example:
    >>> m = RecallAtK(k=2)
    >>> _ = m.update_state([[1.0, 0.0, 1.0, 0.0]], [[0.9, 0.8, 0.1, 0.2]])
    >>> float(m.result())
    0.5
  """

  def __init__(self, k=5, name=None, dtype=None):
    self.k = _validation.check_int("k", k, minimum=1)
    super().__init__(name=name or f"recall_{self.k}", dtype=dtype)

  def _per_list(self, y_true, y_pred):
    return functional.recall_at_k(y_true, y_pred, k=self.k)

  def get_config(self):
    return {**super().get_config(), "k": self.k}


@compat.register_serializable
class PrecisionAtK(_PerListMean):
  """Mean over lists of the expected fraction of relevant items among the top ``k`` scores,
  divided by ``min(k, valid items)`` as TF-Ranking's ``PrecisionMetric`` (see
  ``functional.precision_at_k``).

  Example:
    >>> m = PrecisionAtK(k=2)
    >>> _ = m.update_state([[1.0, 0.0, 1.0, 0.0]], [[0.9, 0.8, 0.1, 0.2]])
    >>> float(m.result())
    0.5
  """

  def __init__(self, k=5, name=None, dtype=None):
    self.k = _validation.check_int("k", k, minimum=1)
    super().__init__(name=name or f"precision_{self.k}", dtype=dtype)

  def _per_list(self, y_true, y_pred):
    return functional.precision_at_k(y_true, y_pred, k=self.k)

  def get_config(self):
    return {**super().get_config(), "k": self.k}
