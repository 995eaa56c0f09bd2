"""The base class of the package's losses: raw labels reach ``call``; Keras reduces the values."""

import numpy as np
import pytest
import tensorflow as tf
from _loss_arguments import loss as short_list_loss

from tfrank4class import compat, losses
from tfrank4class.compat import keras
from tfrank4class.losses import base
from tfrank4class.losses.base import Loss


class _Probe(Loss):
  """Records what ``call`` received and returns ``y_pred[:, 0]`` as the per-list losses."""

  def call(self, y_true, y_pred):
    self.seen = (y_true, y_pred)
    return y_pred[:, 0]


def test_call_receives_the_labels_and_scores_as_given():
  probe = _Probe()
  ids = tf.constant([3, 1], tf.int64)
  scores = tf.constant([[1.0, 2.0], [3.0, 4.0]], tf.float64)
  probe(ids, scores)
  assert probe.seen[0] is ids and probe.seen[1] is scores  # no float cast, no copy
  strings = np.array(["a", "b"])
  probe(strings, scores)
  assert probe.seen[0] is strings


@pytest.mark.parametrize("reduction", ["auto", "sum_over_batch_size", "sum", "none"])
def test_reductions_and_sample_weights_are_keras_rules(reduction):
  scores = np.array([[1.0, 0.0], [3.0, 0.0], [5.0, 0.0]], np.float32)
  weights = np.array([[2.0], [0.0], [1.0]], np.float32)
  probe = _Probe(reduction=reduction)
  assert probe.reduction == compat.loss_reduction(reduction)
  # Hand-computed: per-list losses 1, 3, 5; weighted 2, 0, 5.
  want = {"sum": (9.0, 7.0), "none": ([1.0, 3.0, 5.0], [2.0, 0.0, 5.0])}.get(
    reduction, (3.0, 7.0 / 3)
  )
  np.testing.assert_allclose(probe([0, 0, 0], scores).numpy(), want[0])
  np.testing.assert_allclose(probe([0, 0, 0], scores, weights).numpy(), want[1], rtol=1e-6)


def test_integer_ids_in_fit_reach_the_loss_as_integers():
  seen = []

  class Recording(Loss):
    def call(self, y_true, y_pred):
      seen.append(y_true.dtype)
      return tf.reduce_logsumexp(y_pred, -1) - tf.gather(y_pred, y_true, batch_dims=1)

  x = np.random.default_rng(0).normal(size=(8, 3)).astype(np.float32)
  y = np.arange(8, dtype=np.int64) % 3
  model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(3)])
  model.compile(optimizer="sgd", loss=Recording())
  model.fit(x, y, batch_size=4, epochs=1, verbose=0)
  assert seen and all(dtype.is_integer for dtype in seen)


def test_jit_compiled_training_with_integer_ids():
  """No op that XLA cannot compile: integer ids skip the whole-number check of float ids."""
  x = np.random.default_rng(0).normal(size=(16, 4)).astype(np.float32)
  y = np.arange(16, dtype=np.int64) % 4
  model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(4)])
  model.compile(optimizer="sgd", loss=losses.get("softmax_loss"), jit_compile=True)
  history = model.fit(x, y, batch_size=8, epochs=1, verbose=0)
  assert np.isfinite(history.history["loss"][0])


def test_unnamed_loss_gets_a_name_scope():
  class Unnamed(Loss):
    def call(self, y_true, y_pred):
      return y_pred[:, 0]

  scores = np.array([[2.0, 0.0]], np.float32)
  assert float(Unnamed()([0], scores)) == 2.0
  assert float(tf.function(Unnamed())([0], scores)) == 2.0
  assert float(tf.function(Unnamed(name="first_score"))([0], scores)) == 2.0


def test_private_class_or_odd_name_gets_a_valid_root_name_scope():
  """Keras names a class ``_First`` ``_first``; a root name scope may not start with ``_``."""

  class _First(Loss):
    def call(self, y_true, y_pred):
      return y_pred[:, 0]

  scores = np.array([[2.0, 0.0]], np.float32)
  for name in (None, "_first", "-first", "__"):
    assert float(tf.function(_First(name=name))([0], scores)) == 2.0, name


# Sample weights over the whole loss registry. A loss declares how its examples are coupled
# (`Loss.coupling`) and whether it defines per-item weights (`Loss.item_weights`); the references
# are composed here from unweighted values, independently of the weighting code under test.
B, C = 6, 4
_WEIGHT_IDS = np.array([0, 0, 1, 1, 2, 3], np.int64)  # two of a class: embedding losses mine pairs
_WEIGHT_SCORES = np.random.default_rng(11).normal(size=(B, C)).astype(np.float32)
_WEIGHTS = np.array([0.5, 2.0, 0.0, 1.0, 1.5, 0.25], np.float32)
_REDUCTIONS = ("sum_over_batch_size", "sum", "none")
_FINITE_AND_NOT_NEGATIVE = "`sample_weight` must be finite and >= 0"


def _values(loss, y, s, w=None):
  """The values of a fresh copy of ``loss``: a loss that draws random numbers holds a Keras
  ``SeedGenerator`` that advances at every call, so each copy's first call draws the same numbers
  for the same shapes (one built with ``seed=None`` seeds it from Python's ``random``)."""
  keras.utils.set_random_seed(0)
  fresh = type(loss).from_config(loss.get_config())
  return np.asarray(fresh(y, s) if w is None else fresh(y, s, w))


def _draws_random_numbers(loss, *args):
  """Whether two calls of one loss on the same inputs differ (its seed generator advanced)."""
  return not np.array_equal(np.asarray(loss(*args)), np.asarray(loss(*args)))


def _reduced(weighted, reduction):
  """Keras's reductions, written out: "sum_over_batch_size" divides by the number of elements."""
  if reduction == "none":
    return weighted
  return weighted.sum() / (weighted.size if reduction == "sum_over_batch_size" else 1)


def _per_example_values(name):
  """Unweighted ``reduction="none"`` values ``[B, ...]``: each example alone where the loss
  depends on it alone and draws no random numbers, else the whole batch's."""
  loss = short_list_loss(name, reduction="none")
  batch = _values(loss, _WEIGHT_IDS, _WEIGHT_SCORES)
  if loss.coupling == "example" and not _draws_random_numbers(loss, _WEIGHT_IDS, _WEIGHT_SCORES):
    alone = [_values(loss, _WEIGHT_IDS[i : i + 1], _WEIGHT_SCORES[i : i + 1]) for i in range(B)]
    return np.concatenate(alone)
  return batch


@pytest.mark.parametrize("name", losses.names())
def test_every_loss_weights_examples_as_keras_defines_it(name):
  coupling = short_list_loss(name).coupling
  assert coupling in base.COUPLINGS
  if coupling == "batch":
    # Unit weights: the unweighted loss. Weight 0: the example is not in the batch; the loss of
    # the others is scaled by the mean weight (see the module docstring of losses.base).
    keep = _WEIGHTS != 0
    for reduction in _REDUCTIONS:
      loss = short_list_loss(name, reduction=reduction)
      unweighted = _values(loss, _WEIGHT_IDS, _WEIGHT_SCORES)
      ones = _values(loss, _WEIGHT_IDS, _WEIGHT_SCORES, np.ones([B], np.float32))
      np.testing.assert_allclose(ones, unweighted, rtol=1e-6)
      without = _values(loss, _WEIGHT_IDS[keep], _WEIGHT_SCORES[keep])
      want = without * _WEIGHTS.sum() / B
      for w in (_WEIGHTS, _WEIGHTS[:, None]):
        got = _values(loss, _WEIGHT_IDS, _WEIGHT_SCORES, w)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=reduction)
    return
  values = _per_example_values(name)
  # TF-Ranking's Gumbel-sampling losses return sample_size rows per example, example by example.
  assert values.shape[0] % B == 0
  values = values.reshape((B, -1) + values.shape[1:])
  weights = _WEIGHTS.reshape([B] + [1] * (values.ndim - 1))
  for reduction in _REDUCTIONS:
    loss = short_list_loss(name, reduction=reduction)
    want = _reduced(values * weights, reduction)
    want = np.reshape(want, (-1,) + values.shape[2:]) if reduction == "none" else want
    for w in (_WEIGHTS, _WEIGHTS[:, None], tf.constant(_WEIGHTS)):
      got = _values(loss, _WEIGHT_IDS, _WEIGHT_SCORES, w)
      assert got.shape == np.shape(want), (reduction, np.shape(w))
      np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=reduction)


@pytest.mark.parametrize("name", [n for n in losses.names() if short_list_loss(n).item_weights])
def test_per_item_weights_compose_over_examples(name):
  """Item weights ``[B, C]``: the loss's own per-list meaning, reduced over examples by Keras."""
  item_weights = np.random.default_rng(5).uniform(0.0, 2.0, size=(B, C)).astype(np.float32)
  none = short_list_loss(name, reduction="none")
  if _draws_random_numbers(none, _WEIGHT_IDS, _WEIGHT_SCORES, item_weights):
    pytest.skip(f"{name} samples the list; its item weights are TF-Ranking's (test_tf_ranking)")
  per_example = np.concatenate(
    [
      _values(none, _WEIGHT_IDS[i : i + 1], _WEIGHT_SCORES[i : i + 1], item_weights[i : i + 1])
      for i in range(B)
    ]
  )
  for reduction in _REDUCTIONS:
    got = _values(
      short_list_loss(name, reduction=reduction), _WEIGHT_IDS, _WEIGHT_SCORES, item_weights
    )
    np.testing.assert_allclose(got, _reduced(per_example, reduction), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["softmax_loss", "recall_loss", "mean_average_precision_loss"])
@pytest.mark.parametrize(
  "weights, message",
  [
    (np.ones([B, 2, 1], np.float32), r"shape \(6, 2, 1\)"),
    (np.ones([B + 1], np.float32), r"with batch_size 6.*, got shape \(7,\)"),
    (np.ones([B, C + 1], np.float32), r"got shape \(6, 5\)"),
  ],
)
def test_bad_sample_weights_name_the_argument_and_the_allowed_shapes(name, weights, message):
  with pytest.raises(
    ValueError, match=r"`sample_weight` must have shape \[batch_size\].*" + message
  ):
    short_list_loss(name)(_WEIGHT_IDS, _WEIGHT_SCORES, weights)


@pytest.mark.parametrize("name", ["softmax_loss", "recall_loss", "mean_average_precision_loss"])
def test_nan_sample_weights_raise_eagerly_and_in_a_function(name):
  weights = _WEIGHTS.copy()
  weights[1] = np.nan
  loss = short_list_loss(name)
  with pytest.raises(ValueError, match="`sample_weight` must be finite and >= 0"):
    loss(_WEIGHT_IDS, _WEIGHT_SCORES, weights)
  with pytest.raises(
    tf.errors.InvalidArgumentError, match="`sample_weight` must be finite and >= 0"
  ):
    tf.function(loss)(_WEIGHT_IDS, _WEIGHT_SCORES, weights)


@pytest.mark.parametrize("name", ["softmax_loss", "recall_loss", "mean_average_precision_loss"])
def test_negative_sample_weights_raise(name):
  weights = _WEIGHTS.copy()
  weights[1] = -1.0
  with pytest.raises(ValueError, match="`sample_weight` must be finite and >= 0"):
    short_list_loss(name)(_WEIGHT_IDS, _WEIGHT_SCORES, weights)


# A representative set for Keras's own weighting paths: TF-Ranking per-list, per-item and
# pairwise losses, a RaMBO per-list loss, a batch-level loss and an anchor (embedding) loss.
_FIT_LOSSES = [
  "softmax_loss",
  "mean_average_precision_loss",
  *(
    pytest.param(name, marks=pytest.mark.slow)
    for name in [
      "sigmoid_cross_entropy_loss",
      "pairwise_logistic_loss",
      "recall_loss",
      "triplet_loss",
    ]
  ),
]


@pytest.mark.parametrize("name", _FIT_LOSSES)
def test_fit_and_evaluate_with_weights_class_weights_and_a_weighted_dataset(name):
  from tfrank4class import metrics

  x = np.random.default_rng(2).normal(size=(B, 3)).astype(np.float32)
  model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(C)])
  model.compile(
    optimizer="sgd",
    loss=short_list_loss(name),
    weighted_metrics=[metrics.NDCG(), metrics.TopKAccuracy(1)],
  )
  fit = dict(batch_size=B, epochs=1, verbose=0)
  histories = [
    model.fit(x, _WEIGHT_IDS, sample_weight=_WEIGHTS, **fit),
    model.fit(x, _WEIGHT_IDS, class_weight={0: 1.0, 1: 0.0, 2: 2.0, 3: 0.5}, **fit),
    model.fit(
      tf.data.Dataset.from_tensor_slices((x, _WEIGHT_IDS, _WEIGHTS)).batch(B),
      epochs=1,
      shuffle=False,
      verbose=0,
    ),
  ]
  assert all(np.isfinite(h.history["loss"][0]) for h in histories)
  results = model.evaluate(
    x, _WEIGHT_IDS, sample_weight=_WEIGHTS, batch_size=B, return_dict=True, verbose=0
  )
  scores = model.predict(x, verbose=0)
  # The weighted loss Keras reports is the loss called with the weights (checked above against
  # the unweighted values), and the weighted metrics are weighted means over the lists.
  want = float(short_list_loss(name)(_WEIGHT_IDS, scores, _WEIGHTS))
  assert results["loss"] == pytest.approx(want, rel=1e-5, abs=1e-6)
  ranks = 1 + np.sum(scores > scores[np.arange(B), _WEIGHT_IDS][:, None], axis=1)
  ndcg = 1.0 / np.log2(1.0 + ranks)
  assert results["ndcg"] == pytest.approx(np.sum(_WEIGHTS * ndcg) / np.sum(_WEIGHTS), abs=1e-6)
  top1 = (ranks == 1).astype(np.float32)
  assert results["top_1_accuracy"] == pytest.approx(
    np.sum(_WEIGHTS * top1) / np.sum(_WEIGHTS), abs=1e-6
  )


@pytest.mark.slow
@pytest.mark.parametrize("name", ["softmax_loss", "mean_average_precision_loss"])
def test_weighted_fit_under_a_mirrored_strategy(name, mirrored_strategy):
  x = np.random.default_rng(3).normal(size=(2 * B, 3)).astype(np.float32)
  y = np.concatenate([_WEIGHT_IDS, _WEIGHT_IDS])
  with mirrored_strategy.scope():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(C)])
    model.compile(optimizer="sgd", loss=short_list_loss(name))
  history = model.fit(
    x, y, sample_weight=np.concatenate([_WEIGHTS, _WEIGHTS]), batch_size=2 * B, verbose=0
  )
  assert np.isfinite(history.history["loss"][0])
