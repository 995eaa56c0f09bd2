"""Keras metrics for classifiers seen as rankers.

Each metric is the batch mean of a per-list function of :mod:`tfrank4class.metrics.functional`
(see there for the tie rule: exact expectation over random tie-breaking), and accepts integer
class ids ``[B]`` / ``[B, 1]`` or dense relevance ``[B, C]`` with raw scores ``[B, C]``. Below,
``rk_i = 1 + #{j : s_j > s_i}`` is the rank of item ``i`` (RaMBO, Rolinek et al., Sec. 3.1,
Eq. 2) and ``P`` the relevant items of a list (relevance ``> 0``; the true class for class ids).

Being ``keras.metrics.Mean`` subclasses, they aggregate correctly across batches and replicas
and accept ``sample_weight`` of shape ``[B]`` or ``[B, 1]`` (one weight per list), or ``[B, C]``
(one weight per item, folded into one weight per list as TF-Ranking's metrics do; see
:class:`PerListMetric`).

Backends. The metrics are ``keras.metrics.Mean`` subclasses of the bound Keras
(:data:`tfrank4class.compat.keras`) over the ``keras.ops`` functions of
:mod:`~tfrank4class.metrics.functional`: they run in ``compile``/``fit``/``evaluate`` and
save/load with Keras 3 on TensorFlow, JAX and PyTorch, and with tf-keras. A list whose labels are
bad raises a ``ValueError`` eagerly; inside a compiled step (where a data-dependent raise is
impossible) it makes the metric NaN rather than a silently wrong value.

Cost. With class ids an update is ``O(B * C)`` comparisons in float32 and no sort, the same order
of work as Keras' ``SparseTopKCategoricalAccuracy``; every metric compiles with
``jit_compile=True`` (and ``jax.jit``) and builds no float64 op, so it runs inside a TPU step.
Each metric computes its own rank statistics: inside one compiled train step TensorFlow's graph
optimiser (and XLA) merge the identical comparisons of several metrics on the same batch, so
sharing them by hand does not pay (docs/metrics.md, "Sharing work between metrics: left to the
graph optimiser").

Example (the model returns its inputs as scores, so the values can be checked by hand):

  >>> import numpy as np
  >>> import tfrank4class.losses
  >>> from tfrank4class.compat import keras
  >>> model = keras.Sequential(
  ...     [keras.layers.Dense(3, use_bias=False, kernel_initializer="identity")])
  >>> model.compile(optimizer="adam", loss=tfrank4class.losses.get("softmax_loss"),
  ...               metrics=[TopKAccuracy(1), NDCG(3), MRR()])
  >>> scores = np.array([[0.1, 0.2, 0.7], [0.2, 0.7, 0.1]], np.float32)
  >>> results = model.evaluate(scores, np.array([2, 0]), verbose=0, return_dict=True)
  >>> # the true classes rank 1st and 2nd
  >>> round(results["top_1_accuracy"], 4)   # (1 + 0) / 2
  0.5
  >>> round(results["ndcg_3"], 4)   # (1 + 1/log2(3)) / 2
  0.8155
  >>> round(results["mrr"], 4)   # (1 + 1/2) / 2
  0.75
"""

from tfrank4class import backend, checks
from tfrank4class.compat import keras, ops
from tfrank4class.labels import check_list_scores, num_items, parse_labels, to_relevance
from tfrank4class.metrics import functional
from tfrank4class.metrics.registry import METRICS
from tfrank4class.registry import export


class PerListMetric(keras.metrics.Mean):
  """The base of a per-list metric: implement ``list_values(y_true, y_pred)``.

  ``list_values`` maps the raw labels (class ids ``[B]`` / ``[B, 1]`` or dense relevance
  ``[B, C]``; parse them with :func:`tfrank4class.losses.to_relevance`) and scores ``[B, C]`` to
  one value per list ``[B]``. The metric is their weighted mean over every list seen since the
  last reset, across batches and replicas (a ``keras.metrics.Mean``):

      result = sum_i w_i v_i / sum_i w_i

  with ``w`` the sample weights ``[B]`` or ``[B, 1]`` (one per list; 1 when not given), checked
  by :func:`tfrank4class.checks.check_sample_weight` (finite, ``>= 0``; other shapes
  raise a ``ValueError`` naming ``sample_weight``). Decorate a subclass with
  :func:`tfrank4class.registry.export` (``@export(METRICS, "my_name")`` also makes it a metric
  name; give it a ``get_config`` for its own arguments) to load it from ``.keras`` files.

  Before ``list_values`` the base checks the scores as the loss base does
  (:func:`tfrank4class.labels.check_list_scores`): a NaN or +-inf score at an item that is not
  padding raises a ``ValueError`` naming ``scores`` (in compiled code, its list's value is NaN),
  and padded items (dense relevance ``< 0``) reach ``list_values`` with the score 0. (With class
  ids and :attr:`checks_class_id_scores`, ``list_values`` makes that check, with that error.)

  Item weights ``[B, C]`` (as TF-Ranking's losses take them) fold into one weight per list, the
  mean of the item weights ``u_j`` over the list's relevant items, each counted by its
  :meth:`item_relevance` ``r_j`` (1 for a relevant item, relevance ``> 0``; NDCG: its gain):

      w_i = sum_j u_ij r_ij / sum_j r_ij     (a list without relevant items: the mean u_ij
                                              over its valid items)

  This is TF-Ranking's rule for its metrics (``_per_example_weights_to_per_list_weights`` in
  ``metrics_impl.py``), with two differences: a list without relevant items takes its own mean
  item weight, not the batch's mean list weight (so the result does not depend on how lists are
  batched), and an item weight of 0 does not remove the item from the ranking (TF-Ranking's
  metrics mask it; its NDCG and MAP also weigh each gain or precision inside the list's value).
  With class ids the list's weight is its true class's weight, and the values equal TF-Ranking's
  for positive weights (``tests/test_classification.py``).

  Example (the score of the first relevant item, a made-up metric):
    >>> from tfrank4class.losses import to_relevance
    >>> class FirstRelevantScore(PerListMetric):
    ...   def list_values(self, y_true, y_pred):
    ...     relevance = to_relevance(y_true, y_pred.shape[-1])
    ...     first = ops.argmax(relevance, axis=-1)[:, None]
    ...     return ops.take_along_axis(y_pred, first, axis=-1)[:, 0]
    >>> m = FirstRelevantScore(name="first_relevant_score")
    >>> scores = ops.convert_to_tensor([[0.2, 0.8], [0.4, 0.6]])
    >>> _ = m.update_state([1, 0], scores, sample_weight=[1, 3])
    >>> round(float(m.result()), 4)   # (1 * 0.8 + 3 * 0.4) / 4
    0.5
    >>> import tfrank4class.losses
    >>> model = keras.Sequential([keras.layers.Dense(2)])
    >>> model.compile(optimizer="adam", loss=tfrank4class.losses.get("softmax_loss"),
    ...               weighted_metrics=[FirstRelevantScore(name="first_relevant_score")])
  """

  #: ``True`` when ``list_values`` itself refuses non-finite scores of class ids (the metrics of
  #: this module: :mod:`~tfrank4class.metrics.functional` checks them in the pass that counts
  #: them, with the same error); the base then leaves class ids' scores to it rather than read
  #: them twice. Dense relevance is always checked by the base (its padded items' scores may be
  #: anything).
  checks_class_id_scores = False

  def list_values(self, y_true, y_pred):
    """One value per list ``[B]``; subclasses implement it."""
    raise NotImplementedError(f"{type(self).__name__} must implement list_values(y_true, y_pred).")

  def item_relevance(self, relevance):
    """How much each item counts when item weights fold into a list weight: ``1.0`` for a
    relevant item (relevance ``> 0``), else ``0.0``; ``relevance`` ``[B, C]`` (``< 0``:
    padding). A subclass may override it (NDCG: the gain)."""
    return ops.cast(relevance > 0, relevance.dtype)

  def list_weights(self, y_true, item_weights):
    """One weight per list ``[B]`` from item weights ``[B, C]`` (see the class docstring)."""
    dtype = ops.dtype(item_weights)
    relevance = to_relevance(y_true, num_items(item_weights), dtype=dtype)
    valid = ops.cast(relevance >= 0, dtype)
    counts = self.item_relevance(backend.where(relevance >= 0, relevance, 0.0)) * valid
    total = ops.sum(counts, axis=-1)
    relevant_mean = backend.divide_no_nan(ops.sum(item_weights * counts, axis=-1), total)
    valid_mean = backend.divide_no_nan(
      ops.sum(item_weights * valid, axis=-1), ops.sum(valid, axis=-1)
    )
    return backend.where(total > 0, relevant_mean, valid_mean)

  # No tensor-dependent Python control flow: excluded from AutoGraph conversion, which tf-keras
  # otherwise applies even eagerly (rewriting the error of a bad label or score into an "in user
  # code" traceback that Keras 3 does not add), so both flavours raise the same errors.
  @backend.do_not_convert
  def update_state(self, y_true, y_pred, sample_weight=None):
    # Named as the metric functions name them (metrics/functional.py).
    y_pred = checks.check_scores("scores", y_pred, finite=False)
    labels = parse_labels(y_true, num_items(y_pred), name="labels")
    if not (labels.is_class_ids and self.checks_class_id_scores):
      y_pred, labels = check_list_scores(labels, y_pred, name="scores")
    if y_pred.shape[0] == 0:  # an empty batch adds nothing (PyTorch refuses some empty ops)
      return None
    values = labels.mark_invalid(self.list_values(y_true, y_pred))
    if sample_weight is not None:
      sample_weight = checks.check_sample_weight(
        sample_weight, ops.shape(values)[0], num_items(y_pred), dtype=ops.dtype(values)
      )
      if len(sample_weight.shape) == 2:
        sample_weight = self.list_weights(y_true, sample_weight)
    return super().update_state(values, sample_weight=sample_weight)


@export(METRICS, "top_K")
class TopKAccuracy(PerListMetric):
  """Top-K accuracy: the fraction of lists with a relevant item among the ``k`` highest scores.

      Top-K = mean over lists of 1[min_{i in P} rk_i <= K]

  For one list this is RaMBO's ``r@K`` (Rolinek et al., Sec. 3.1.2, Eq. 7; its mean, Eq. 8) and
  ``min(1, K * Precision@K)`` with class ids (Rank4Class Sec. 2.2). Tied scores count in
  expectation: with ``g`` classes strictly above the true class and ``e`` tied with it,
  ``P(rk <= K) = clip((K - g) / (e + 1), 0, 1)`` (:func:`functional.top_k_accuracy`).

  Args:
    k: the cut-off ``K``, from 1 to the number of classes (a larger ``K`` would be 1 for every
      list: the first scores refuse it).

  Example:
    >>> m = TopKAccuracy(k=2)
    >>> _ = m.update_state([2, 0, 1], [[0.1, 0.2, 0.7], [0.1, 0.8, 0.3], [0.5, 0.5, 0.5]])
    >>> round(float(m.result()), 4)   # ranks 1, 3 and a three-way tie: (1 + 0 + 2/3) / 3
    0.5556
    >>> import tfrank4class.losses
    >>> model = keras.Sequential([keras.layers.Dense(10)])
    >>> model.compile(optimizer="adam", loss=tfrank4class.losses.get("softmax_loss"),
    ...               metrics=[TopKAccuracy(1), TopKAccuracy(5)])
  """

  checks_class_id_scores = True

  def __init__(self, k=5, name=None, dtype=None):
    self.k = checks.check_int("k", k, minimum=1)
    super().__init__(name=name or f"top_{self.k}_accuracy", dtype=dtype)

  def list_values(self, y_true, y_pred):
    return functional.top_k_accuracy(y_true, y_pred, k=self.k)

  def get_config(self):
    return {**super().get_config(), "k": self.k}


@export(METRICS, "ndcg[_K]")
class NDCG(PerListMetric):
  """Mean NDCG@K over lists (Rank4Class Sec. 2.2, Eq. 1); ``k=None``: the whole list.

      DCG@K = sum_{p=1}^{K} gain(rel at position p) / log2(1 + p),   NDCG@K = DCG@K / IDCG@K

  with gain ``2^rel - 1`` (``gain="exp2"``, TF-Ranking's default) or ``rel`` (``"linear"``), the
  discount ``1 / log2(1 + p)``, and ``IDCG@K`` the DCG@K of the labels sorted in decreasing order
  (lists with ``IDCG@K = 0`` score 0). With class ids the only gain is 1 and
  ``NDCG@K = 1[rk_y <= K] / log2(1 + rk_y)``. Tied scores: each position gets the mean gain of
  the tie group covering it (:func:`functional.ndcg`).

  Args:
    k: the cut-off ``K >= 1``, or ``None``.
    gain: ``"exp2"`` or ``"linear"``.

  Example:
    >>> m = NDCG(k=2)
    >>> _ = m.update_state([0, 2], [[0.2, 0.9, 0.1], [0.2, 0.9, 0.1]])
    >>> round(float(m.result()), 4)   # ranks 2 and 3 (past k): (1/log2(3) + 0) / 2
    0.3155
    >>> m = NDCG(k=2)
    >>> _ = m.update_state([[2.0, 0.0, 1.0]], [[0.1, 0.9, 0.5]])
    >>> round(float(m.result()), 4)   # gains 0, 1 at positions 1, 2; ideal 3, 1
    0.1738
    >>> import tfrank4class.losses
    >>> model = keras.Sequential([keras.layers.Dense(3)])
    >>> model.compile(optimizer="adam", loss=tfrank4class.losses.get("approx_ndcg_loss"),
    ...               metrics=[NDCG(5), NDCG()])
  """

  checks_class_id_scores = True

  def __init__(self, k=None, gain="exp2", name=None, dtype=None):
    self.k = checks.check_int("k", k, minimum=1, allow_none=True)
    self.gain = checks.check_choice("gain", gain, functional.GAINS)
    super().__init__(name=name or ("ndcg" if self.k is None else f"ndcg_{self.k}"), dtype=dtype)

  def list_values(self, y_true, y_pred):
    return functional.ndcg(y_true, y_pred, k=self.k, gain=self.gain)

  def item_relevance(self, relevance):
    """An item counts by its gain when item weights fold into a list weight (TF-Ranking's NDCG)."""
    return functional.item_gains(relevance, self.gain)

  def get_config(self):
    return {**super().get_config(), "k": self.k, "gain": self.gain}


@export(METRICS, "dcg[_K]")
class DCG(NDCG):
  """Mean DCG@K over lists, :class:`NDCG`'s numerator (keras-rs's ``DCG`` with its defaults)::

      DCG@K = sum_{p=1}^{K} gain(rel at position p) / log2(1 + p)

  Same gains, discount, ties and arguments as :class:`NDCG` (:func:`functional.dcg`). With class
  ids the only gain is 1 and DCG@K equals NDCG@K; with graded relevance it is not bounded by 1.

  Example:
    >>> m = DCG(k=2)
    >>> _ = m.update_state([[2.0, 0.0, 1.0]], [[0.1, 0.9, 0.5]])
    >>> round(float(m.result()), 4)   # gains 0, 1 at positions 1, 2: 1 / log2(3)
    0.6309
    >>> model = keras.Sequential([keras.layers.Dense(3)])
    >>> model.compile(optimizer="adam", loss="categorical_crossentropy", metrics=[DCG(5)])
  """

  def __init__(self, k=None, gain="exp2", name=None, dtype=None):
    default = "dcg" if k is None else f"dcg_{k}"
    super().__init__(k=k, gain=gain, name=name or default, dtype=dtype)

  def list_values(self, y_true, y_pred):
    return functional.dcg(y_true, y_pred, k=self.k, gain=self.gain)


@export(METRICS, "mrr[_K]")
class MRR(PerListMetric):
  """Mean reciprocal rank of the first relevant item (Rank4Class Sec. 2.2).

      RR = 1 / min_{i in P} rk_i   (0 if that rank is past ``k``, or ``P`` is empty),
      MRR = mean over lists of RR

  Softmax cross-entropy bounds it: ``CE >= -log MRR`` (Bruch et al., ICTIR 2019). Tied scores:
  the expectation over random tie-breaking (:func:`functional.reciprocal_rank`).

  Args:
    k: ``None`` or a cut-off ``K >= 1``.

  Example:
    >>> m = MRR()
    >>> _ = m.update_state([1, 0], [[0.5, 0.2, 0.9], [0.4, 0.4, 0.1]])
    >>> round(float(m.result()), 4)   # rank 3, and ranks 1 or 2 (tie): (1/3 + 3/4) / 2
    0.5417
    >>> import tfrank4class.losses
    >>> model = keras.Sequential([keras.layers.Dense(3)])
    >>> model.compile(optimizer="adam", loss=tfrank4class.losses.get("softmax_loss"),
    ...               metrics=[MRR(), MRR(k=10)])
  """

  checks_class_id_scores = True

  def __init__(self, k=None, name=None, dtype=None):
    self.k = checks.check_int("k", k, minimum=1, allow_none=True)
    super().__init__(name=name or ("mrr" if self.k is None else f"mrr_{self.k}"), dtype=dtype)

  def list_values(self, y_true, y_pred):
    return functional.reciprocal_rank(y_true, y_pred, k=self.k)

  def get_config(self):
    return {**super().get_config(), "k": self.k}


@export(METRICS, "map")
class MeanAveragePrecision(PerListMetric):
  """Mean over lists of the average precision, relevant = relevance ``> 0``.

      AP = 1/|P| sum_{i in P} Prec(i),   Prec(i) = #{j in P : rk_j <= rk_i} / rk_i

  (RaMBO, Rolinek et al., Sec. 3.1.1, Eq. 4-5; SoDeep Sec. 3.2.2, Eq. 5-6); lists without a
  relevant item score 0. The mean runs over the lists (each example's ranking of the classes),
  not over the classes as RaMBO's mAP (Eq. 6). With class ids AP is the reciprocal rank. Tied
  scores: in expectation (:func:`functional.average_precision`).

  Example:
    >>> m = MeanAveragePrecision()
    >>> _ = m.update_state([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]], [[0.9, 0.8, 0.1], [0.3, 0.2, 0.1]])
    >>> round(float(m.result()), 4)   # relevant at ranks 1, 3 and at rank 2: (5/6 + 1/2) / 2
    0.6667
    >>> import tfrank4class.losses
    >>> model = keras.Sequential([keras.layers.Dense(3)])
    >>> model.compile(optimizer="adam", loss=tfrank4class.losses.get("sigmoid_cross_entropy_loss"),
    ...               metrics=[MeanAveragePrecision()])
  """

  checks_class_id_scores = True

  def __init__(self, name="map", dtype=None):
    super().__init__(name=name, dtype=dtype)

  def list_values(self, y_true, y_pred):
    return functional.average_precision(y_true, y_pred)


@export(METRICS, "spearman")
class Spearman(PerListMetric):
  """Mean over lists of Spearman's rank correlation between graded labels and scores.

      rho = 1 - 6 sum_i (rk(y)_i - rk(s)_i)^2 / (n (n^2 - 1))   (SoDeep Sec. 3.2.1, Eq. 2)

  for ``n`` items with distinct labels and distinct scores; with ties, the Pearson correlation of
  the mid-ranks, as ``scipy.stats.spearmanr`` (:func:`functional.spearman`). Padded items
  (label ``< 0``) are left out; constant lists score 0.

  Example:
    >>> m = Spearman()
    >>> _ = m.update_state([[1.0, 2.0, 3.0]], [[0.1, 0.5, 0.2]])
    >>> round(float(m.result()), 6)   # ranks (3, 2, 1) and (3, 1, 2): 1 - 6 * 2 / (3 * 8)
    0.5
    >>> import tfrank4class.losses
    >>> model = keras.Sequential([keras.layers.Dense(4)])
    >>> model.compile(optimizer="adam", loss=tfrank4class.losses.get("spearman_loss"),
    ...               metrics=[Spearman()])
  """

  checks_class_id_scores = True

  def __init__(self, name="spearman", dtype=None):
    super().__init__(name=name, dtype=dtype)

  def list_values(self, y_true, y_pred):
    return functional.spearman(y_true, y_pred)


@export(METRICS, "recall_K")
class RecallAtK(PerListMetric):
  """Mean over lists of the fraction of the relevant items ranked among the top ``k``.

      Recall@K = #{i in P : rk_i <= K} / |P|

  For multi-label classifiers (GoEmotions multi-label, MIND): dense relevance ``[B, C]``, ties
  in expectation (:func:`functional.recall_at_k`; TF-Ranking's ``RecallMetric`` for distinct
  scores); lists without a relevant item score 0. With class ids it equals
  :class:`TopKAccuracy` (RaMBO's retrieval ``R@K``, Sec. 3.1.2, Eq. 7-8, is that Top-K form).

  Args:
    k: the cut-off ``K >= 1``.

  Example:
    >>> m = RecallAtK(k=2)
    >>> _ = m.update_state([[1.0, 0.0, 1.0, 0.0]], [[0.9, 0.8, 0.1, 0.2]])
    >>> float(m.result())   # the top 2 hold one of the two relevant items
    0.5
    >>> import tfrank4class.losses
    >>> model = keras.Sequential([keras.layers.Dense(4)])
    >>> model.compile(optimizer="adam", loss=tfrank4class.losses.get("sigmoid_cross_entropy_loss"),
    ...               metrics=[RecallAtK(1), RecallAtK(3)])
  """

  checks_class_id_scores = True

  def __init__(self, k=5, name=None, dtype=None):
    self.k = checks.check_int("k", k, minimum=1)
    super().__init__(name=name or f"recall_{self.k}", dtype=dtype)

  def list_values(self, y_true, y_pred):
    return functional.recall_at_k(y_true, y_pred, k=self.k)

  def get_config(self):
    return {**super().get_config(), "k": self.k}


@export(METRICS, "precision_K")
class PrecisionAtK(PerListMetric):
  """Mean over lists of the fraction of relevant items among the top ``k`` scores.

      Precision@K = #{i in P : rk_i <= K} / min(K, n)

  with ``n`` the valid (non-padded) items of the list, as TF-Ranking's ``PrecisionMetric``; ties
  in expectation (:func:`functional.precision_at_k`). With class ids
  ``Top-K accuracy = min(1, K * Precision@K)`` (Rank4Class Sec. 2.2).

  Args:
    k: the cut-off ``K >= 1``.

  Example:
    >>> m = PrecisionAtK(k=2)
    >>> _ = m.update_state([[1.0, 0.0, 1.0, 0.0]], [[0.9, 0.8, 0.1, 0.2]])
    >>> float(m.result())   # one relevant item in the top 2
    0.5
    >>> m = PrecisionAtK(k=2)
    >>> _ = m.update_state([0], [[0.5, 0.2, 0.9]])   # the true class ranks 2nd: Top-2 = 1
    >>> float(m.result())
    0.5
    >>> import tfrank4class.losses
    >>> model = keras.Sequential([keras.layers.Dense(4)])
    >>> model.compile(optimizer="adam", loss=tfrank4class.losses.get("sigmoid_cross_entropy_loss"),
    ...               metrics=[PrecisionAtK(1), PrecisionAtK(3)])
  """

  checks_class_id_scores = True

  def __init__(self, k=5, name=None, dtype=None):
    self.k = checks.check_int("k", k, minimum=1)
    super().__init__(name=name or f"precision_{self.k}", dtype=dtype)

  def list_values(self, y_true, y_pred):
    return functional.precision_at_k(y_true, y_pred, k=self.k)

  def get_config(self):
    return {**super().get_config(), "k": self.k}
