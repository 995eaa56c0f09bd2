"""The base class of every loss of the package: raw labels reach ``call``, weights are Keras's.

Keras 2's ``Loss.__call__`` hands ``y_true`` to ``call`` unchanged; Keras 3's converts it (and
``y_pred``) to the loss dtype, a float, first. Our losses take integer class ids ``[B]`` /
``[B, 1]`` or dense relevance ``[B, C]`` and parse them with the one label parser
(:func:`tfrank4class.labels.parse_labels`), which must see the ids as the caller gave them, under
both flavours: integer ids stay integers (no whole-number check, no float rounding of large ids),
non-numeric labels raise the parser's ``TypeError``, and ``y_pred`` keeps its dtype (the score
check, :func:`tfrank4class.checks.check_scores`, decides the computation dtype).

:class:`Loss` therefore computes the values itself, ``values = call(y_true, y_pred)`` on the raw
arguments, checks the sample weights (:func:`tfrank4class.checks.check_sample_weight`) and
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

The class is written on ``keras.ops`` (:mod:`tfrank4class.compat`) and runs on every Keras 3
backend and on tf-keras. Labels that are bad in a way only their values show (a class id out of
range, a fractional id, non-finite dense relevance) raise eagerly; inside compiled code
(``tf.function``, XLA, ``jax.jit``) the parser marks them (:attr:`tfrank4class.labels.Labels.
invalid`) and :meth:`ListwiseLoss.call` returns NaN for them (:meth:`Loss.mark_invalid`): NaN for
the lists with bad labels where each list's loss depends on it alone, NaN for the whole batch
otherwise, never a silently wrong value.
"""

import math
import re

import numpy as np

from tfrank4class import backend, checks, compat
from tfrank4class.compat import keras, ops
from tfrank4class.labels import (
  check_batch_size,
  check_list_scores,
  num_items,
  parse_labels,
  to_relevance,
)

#: The values of :attr:`Loss.coupling`.
COUPLINGS = ("example", "anchor", "batch")


def _name_scope(name):
  """The bound Keras's name scope (Keras 3: every backend; tf-keras: TensorFlow's)."""
  return keras.name_scope(name) if compat.KERAS_3 else keras.backend.name_scope(name)


def batch_size(y_pred):
  """The number of examples of ``y_pred`` (a tensor, array or nested list) if known now, else
  ``None``."""
  shape = y_pred.shape if hasattr(y_pred, "shape") else np.shape(y_pred)
  try:
    return None if len(shape) == 0 or shape[0] is None else int(shape[0])
  except (TypeError, ValueError):  # an unknown rank (a TensorFlow graph input)
    return None


class Loss(keras.losses.Loss):
  """A ``keras.losses.Loss`` whose ``call(y_true, y_pred)`` receives the raw labels and scores.

  Subclass it and implement ``call`` (per-example losses ``[B]``, or a batch-level loss of shape
  ``[]`` or ``[1]``); construct it with ``reduction`` in either flavour's spelling (Keras 2's
  ``"auto"`` is Keras 3's ``"sum_over_batch_size"``, see
  :func:`tfrank4class.compat.loss_reduction`).
  Sample weights ``[B]`` or ``[B, 1]`` weigh the examples as the module docstring describes for
  the class's :attr:`coupling`; other shapes raise a ``ValueError`` naming ``sample_weight``.

  Example:
    >>> import numpy as np
    >>> class FirstScore(Loss):
    ...   def call(self, y_true, y_pred):
    ...     return ops.cast(y_true, y_pred.dtype) * y_pred[:, 0]
    >>> loss = FirstScore(reduction="sum")
    >>> y, s = np.array([1, 2]), np.array([[1.0, 0.0], [3.0, 0.0]], np.float32)
    >>> float(loss(y, s))
    7.0
    >>> float(loss(y, s, np.array([1.0, 0.0], np.float32)))
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
  #: What ``y_pred`` holds: ``"scores"``, one score per class ``[B, C]`` (a classification
  #: model's output), or ``"embeddings"``, one vector per example ``[B, D]`` (the metric-learning
  #: losses, :class:`tfrank4class.losses.EmbeddingLoss`, trained on a retrieval model). A
  #: classification run refuses an ``"embeddings"`` loss (``tfrank4class.train.experiment``).
  predictions = "scores"
  #: Whether the loss's value of a list of dense relevance is non-finite (NaN or +-inf) wherever
  #: a label, or the score of an item that is not padding, is non-finite: a property of its maths,
  #: tested per loss (tests/test_loss_inputs.py). Where no check can raise (compiled code),
  #: :meth:`mark_invalid` then finds those lists from the values, one test per list, rather than
  #: from the parser's marks, which would cost two passes over ``[B, C]`` before the loss (its
  #: finiteness tests of the labels and of the scores).
  shows_non_finite = False

  def __init__(self, reduction=compat.DEFAULT_REDUCTION, name=None):
    super().__init__(reduction=compat.loss_reduction(reduction), name=name)

  def __call__(self, y_true, y_pred, sample_weight=None):
    with _name_scope(self._scope()):
      if batch_size(y_pred) == 0:
        return self.empty_batch(y_true, y_pred, sample_weight)
      if sample_weight is not None and self.coupling == "batch":
        return self._batch_weighted(y_true, y_pred, sample_weight)
      values = self.call(y_true, y_pred)
      return self.reduce(values, sample_weight)

  @property
  def seed_generators(self):
    """The ``keras.random.SeedGenerator`` s the loss draws from; none here (a loss that draws
    random numbers, as TF-Ranking's ListMLE and Gumbel keys do, lists its own)."""
    return []

  def seed_states(self):
    """The current states of :attr:`seed_generators` (tensors): what
    :meth:`stateless_call` takes first."""
    return [generator.state.value for generator in self.seed_generators]

  def stateless_call(self, seed_states, y_true, y_pred, sample_weight=None):
    """``(loss, new_seed_states)``: the loss as a pure function of the states of its
    :attr:`seed_generators` (Keras 3), for a loss called inside a function the user compiles
    (``jax.jit``, ``jax.lax.scan``), as ``keras.Model.stateless_call`` takes its variables.

    The call runs in a ``keras.StatelessScope`` mapping each generator's state to the given one;
    pass the returned states to the next call to draw new numbers. A plain call inside
    ``jax.jit`` works too, but cannot advance the generators (every call draws alike) and warns.

    Example:
      >>> import numpy as np
      >>> from tfrank4class import losses
      >>> loss = losses.get("list_mle_loss")
      >>> states = loss.seed_states()
      >>> y, s = np.array([1, 0]), np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 0.0]], "float32")
      >>> if compat.KERAS_3:  # tf-keras has no StatelessScope
      ...   first, states = loss.stateless_call(states, y, s)
      ...   second, states = loss.stateless_call(states, y, s)
      >>> len(states)
      1
    """
    if not compat.KERAS_3:
      raise NotImplementedError("`stateless_call` needs Keras 3 (`keras.StatelessScope`).")
    generators = self.seed_generators
    if len(seed_states) != len(generators):
      raise ValueError(
        f"`seed_states` must hold one state per seed generator of {self.name!r} "
        f"({len(generators)}, from `loss.seed_states()`), got {len(seed_states)}."
      )
    mapping = [(g.state, state) for g, state in zip(generators, seed_states)]
    with keras.StatelessScope(state_mapping=mapping) as scope:
      value = self(y_true, y_pred, sample_weight)
    return value, [scope.get_current_value(g.state) for g in generators]

  def empty_batch(self, y_true, y_pred, sample_weight=None):
    """The loss of a batch of no examples (``B = 0`` known when traced), on every backend and
    whatever the coupling: no values, ``[0]``, reduced as the bound Keras reduces its own losses'
    (Keras 3: the empty ``[0]`` for every reduction; tf-keras: ``[0]`` for ``"none"``, 0 for
    the others). The labels, scores and weights are checked as for any batch."""
    scores = checks.check_scores("y_pred", y_pred, rank=None, min_length=0, finite=False)
    check_batch_size(y_true, scores, name="y_true", other_name="y_pred")
    return self.reduce(ops.zeros((0,), scores.dtype), sample_weight)

  def _scope(self):
    """The name as a valid root name scope (Keras 2 leaves ``name=None`` as it is): other
    characters become ``_``, and a leading ``_``, ``-`` or ``/`` (Keras names a class ``_Mine``
    ``_mine``) is dropped."""
    name = re.sub(r"[^A-Za-z0-9_.\-/]", "_", self.name or type(self).__name__)
    return name.lstrip("_-/") or "loss"

  def _batch_weighted(self, y_true, y_pred, sample_weight):
    """A batch-level loss without the zero-weight examples, scaled by the mean weight."""
    scores = checks.check_scores("y_pred", y_pred, finite=False)
    batch = ops.shape(scores)[0]
    weights = checks.check_sample_weight(sample_weight, batch, dtype=scores.dtype)
    mean_weight = ops.sum(weights) / ops.cast(batch, weights.dtype)
    return self.reduce(self.call_without(y_true, scores, ops.not_equal(weights, 0)) * mean_weight)

  def call_without(self, y_true, y_pred, kept):
    """:meth:`call` of a batch-level loss with the examples where ``kept`` (bool ``[B]``) is
    False left out of every list: their rows of relevance become padding (``-1``)."""
    relevance = to_relevance(y_true, num_items(y_pred), dtype=y_pred.dtype)
    relevance = backend.where(kept[:, None], relevance, -ops.ones_like(relevance))
    return self.call(relevance, y_pred)

  def reduce(self, values, sample_weight=None):
    """``values`` times ``sample_weight``, reduced as the bound Keras reduces ``self.reduction``.

    ``values`` are per-example losses ``[B]`` (the weights, ``[B]`` or ``[B, 1]``, multiply
    them) or a batch-level loss (no weights). With ``reduction="none"`` the result has the shape
    of ``values`` under both flavours.
    """
    values = ops.convert_to_tensor(values)
    if sample_weight is not None:
      if len(values.shape) != 1:
        raise ValueError(
          f"{type(self).__name__} returned values of shape {values.shape} from `call`; "
          "per-example `sample_weight` needs one loss per example, shape [batch_size] (a "
          'batch-level loss declares coupling = "batch").'
        )
      weights = checks.check_sample_weight(sample_weight, ops.shape(values)[0], dtype=values.dtype)
      values = values * weights
    return compat.reduce_loss(self, values)

  def mark_invalid(self, labels, values):
    """``values`` with NaN where ``labels`` (a :class:`tfrank4class.labels.Labels`) were bad.

    The parser sets ``labels.invalid`` (bool ``[B]``) only where it could not raise (compiled
    code). Per-list values (``coupling = "example"``) get NaN in the lists with bad labels, via
    :meth:`~tfrank4class.labels.Labels.mark_invalid`; values that couple the batch (``"anchor"``,
    ``"batch"``) are NaN throughout when any list's labels are bad. A loss that
    :attr:`shows_non_finite` has NaN at its non-finite values of dense relevance instead (the same
    lists, found without the marks).
    """
    if labels.invalid is None:
      return values
    if self.shows_non_finite and not labels.is_class_ids:
      # The parser's marks of dense relevance are its finiteness tests, and the score rule's of
      # it are too: each list they would mark has a non-finite value, made NaN here.
      return backend.where(ops.isfinite(values), values, ops.cast(math.nan, values.dtype))
    if self.coupling == "example":
      return labels.mark_invalid(values)
    nan = ops.full_like(values, math.nan)
    return backend.where(ops.any(labels.invalid), nan, values)


class ListwiseLoss(Loss):
  """The base of a ranking loss over lists: implement ``loss_values(scores, relevance)``.

  ``scores`` ``[B, C]`` are ``y_pred`` after the package's score check (a real tensor, at least
  ``float32``, each row a list of at least :attr:`min_list_size` items); ``relevance`` ``[B, C]``
  are the labels parsed by :func:`tfrank4class.losses.to_relevance` in the scores' dtype: integer
  class ids ``[B]`` / ``[B, 1]`` become one-hot rows, dense relevance passes through, and a
  value ``< 0`` marks a padded item, which the loss must leave out (its score may be anything in
  ``y_pred``: :meth:`parse` sets it to 0, and refuses NaN or +-inf at the other items);
  a subclass that sets :attr:`takes_class_ids` gets class ids as they were parsed instead (the
  :class:`tfrank4class.labels.Labels` of ids ``[B]``, which
  :func:`~tfrank4class.labels.parse_labels` passes through).
  ``loss_values`` returns one loss per list ``[B]``:

      loss(y, s, w) = reduce_K(loss_values(s, to_relevance(y)) * w)

  with the bound Keras's reduction ``reduce_K`` and sample weights ``w`` ``[B]`` / ``[B, 1]``
  checked as :class:`Loss` does. Losses that rank down the batch return one batch-level value
  and declare ``coupling = "batch"`` (see the module docstring). TF-Ranking's
  :class:`~tfrank4class.losses.RankingLoss` returns one loss per list too (with its default
  ``normalization="lists"``), but weighs the sample weights in its own ``__call__``, as
  TF-Ranking normalises them (its docstring says how).
  Register a subclass with :func:`tfrank4class.losses.register` to make it reachable by name and
  loadable from ``.keras`` files.

  Example (the softmax cross-entropy of the relevant items, ListNet's top-one loss for one-hot
  labels):
    >>> import numpy as np
    >>> class TopOneLoss(ListwiseLoss):
    ...   def loss_values(self, scores, relevance):
    ...     valid = relevance >= 0
    ...     log_p = ops.log_softmax(ops.where(valid, scores, -1e9))
    ...     target = ops.where(valid, relevance, 0.0)
    ...     target /= ops.sum(target, -1, keepdims=True)
    ...     return -ops.sum(ops.where(valid, target * log_p, 0.0), -1)
    >>> loss = TopOneLoss(reduction="none")
    >>> s = np.array([[0.0, 0.0], [1.0, 1.0]], np.float32)
    >>> ops.convert_to_numpy(loss(np.array([0, 1]), s)).round(4)   # log 2 each
    array([0.6931, 0.6931], dtype=float32)
    >>> model = keras.Sequential([keras.layers.Dense(2)])
    >>> model.compile(optimizer="adam", loss=TopOneLoss())
  """

  #: The shortest list the loss ranks (checked when the graph is traced, or at run time).
  min_list_size = 1
  #: Whether class ids reach :meth:`loss_values` as they are, their parsed
  #: :class:`~tfrank4class.labels.Labels` (ids ``[B]`` int32), in place of one-hot rows: for a
  #: loss whose function takes either label form and reads one true class per list (the Top-K
  #: losses), which then skips building ``[B, C]`` rows only to find the ids again, and parses
  #: nothing twice.
  #: Class ids then skip :meth:`extend` too: the lists are the batch.
  takes_class_ids = False

  def parse(self, y_true, y_pred):
    """``(scores, labels)`` from the raw labels and scores: the score check, the parser (whose
    messages name ``y_true`` and ``y_pred``) and the rule for scores of labelled lists
    (:func:`tfrank4class.labels.check_list_scores`: a NaN or +-inf score at an item that is not
    padding raises, or marks its list in compiled code; a padded item's score becomes 0);
    ``labels`` is a :class:`tfrank4class.labels.Labels`."""
    scores = checks.check_scores("y_pred", y_pred, min_length=self.min_list_size, finite=False)
    labels = parse_labels(y_true, num_items(scores), name="y_true", dtype=scores.dtype)
    check_batch_size(labels, scores, name="y_true", other_name="y_pred")
    return check_list_scores(labels, scores)

  def extend(self, scores, relevance):
    """The lists the loss ranks, from the batch's ``scores`` and ``relevance`` ``[B, C]``: the
    batch itself; a subclass may lengthen them (RaMBO's score memory)."""
    return scores, relevance

  def lists(self, y_true, y_pred):
    """``(scores, relevance)`` from the raw labels and scores: :meth:`parse`, the relevance of
    the labels in the scores' dtype, then :meth:`extend`."""
    scores, labels = self.parse(y_true, y_pred)
    return self.extend(scores, labels.to_relevance(num_items(scores), scores.dtype))

  def loss_values(self, scores, relevance):
    """One loss per list ``[B]`` from scores and relevance ``[B, C]``; subclasses implement it."""
    raise NotImplementedError(
      f"{type(self).__name__} must implement loss_values(scores, relevance)."
    )

  def call(self, y_true, y_pred):
    scores, labels = self.parse(y_true, y_pred)
    if self.takes_class_ids and labels.is_class_ids:
      return self.mark_invalid(labels, self.loss_values(scores, labels))
    relevance = labels.to_relevance(num_items(scores), scores.dtype)
    return self.mark_invalid(labels, self.loss_values(*self.extend(scores, relevance)))
