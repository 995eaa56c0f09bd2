"""Registry-wide input rules (issue 58, item 2): every loss and metric, by name, on every backend.

* A NaN or +-inf score at an item that is not padding is refused by name eagerly; compiled
  (``jax.jit``, XLA), where nothing can raise, its list's value is NaN, never a finite number.
* A padded item's score (dense relevance ``< 0``) may be anything: NaN, +-inf or ``1e30`` there
  give the value of the same lists with the padded score 0, eagerly and compiled.
* Class ids beyond int32 (``2**32 + 3``, ``2**40``) are refused, not read modulo ``2**32``.
* An empty batch (``B = 0``) gives what the bound Keras's own losses give (Keras 3: the empty
  values, whatever the reduction; tf-keras: 0 for a reduced loss); a metric ignores it.

The references are independent of the code under test: the same loss on clean scores, and
Keras's own ``CategoricalCrossentropy`` for the empty batch. One compiled trace per loss.
Backend-neutral.
"""

import math

import _loss_arguments
import numpy as np
import pytest
from backend_testing import compile_modes, compiled, numpy

from tfrank4class import losses, metrics
from tfrank4class.compat import BACKEND, keras

C = 5
RNG = np.random.default_rng(58)
SCORES = RNG.normal(size=(4, C)).astype(np.float32)
IDS = np.array([0, 1, 2, 3])
#: One-hot rows whose last item is padding.
PADDED = np.eye(C, dtype=np.float32)[IDS]
PADDED[:, -1] = -1.0
GARBAGE = (math.nan, math.inf, -math.inf, 1e30)
LOSSES = losses.names()
METRICS = [name.replace("_K", "_2") for name in metrics.names()]
#: Compiled modes where a value check cannot raise.
COMPILED = [mode for mode in compile_modes() if mode in ("jit", "xla")]


#: A fixed seed for the losses that draw random numbers, so that two objects draw alike.
SEEDED = {"gumbel_approx_ndcg_loss": {"seed": 7}, "yeti_logistic_loss": {"seed": 7}}


def _loss(name):
  return _loss_arguments.loss(name, reduction="none", **SEEDED.get(name, {}))


def _with(scores, row, column, value):
  scores = scores.copy()
  scores[row, column] = value
  return scores


#: Each list's padded item holds another garbage value.
GARBAGE_SCORES = SCORES.copy()
GARBAGE_SCORES[:, -1] = GARBAGE
NAN_SCORES = _with(SCORES, 0, 1, math.nan)


@pytest.mark.parametrize("name", LOSSES)
def test_a_non_finite_score_is_refused_by_name(name):
  loss = _loss(name)
  for value in (math.nan, math.inf, -math.inf):
    with pytest.raises(ValueError, match=r"`y_pred` must be finite \(no NaN or Inf\)"):
      loss(IDS, _with(SCORES, 0, 1, value))


@pytest.mark.parametrize("name", METRICS)
def test_a_metric_refuses_a_non_finite_score_by_name(name):
  with pytest.raises(ValueError, match=r"`scores` must be finite \(no NaN or Inf\)"):
    metrics.get(name).update_state(IDS, NAN_SCORES)


#: One loss per path through the bases, for the default run: ListwiseLoss (the score check of
#: ListwiseLoss.parse), TF-Ranking's RankingLoss on ids and on a random draw, a batch-level RaMBO
#: loss, a loss taking class ids, an embedding loss.
FAST = (
  "softmax_loss",
  "pairwise_mse_loss",
  "list_mle_loss",
  "mean_average_precision_loss",
  "soft_rank_topk_loss",
  "smoothed_cross_entropy",
  "triplet_loss",
)
SLOW = [pytest.param(name, marks=pytest.mark.slow) for name in LOSSES if name not in FAST]


# The other losses (the SoDeep sorters take about 20 s each on JAX) run with `make test-slow`;
# FAST keeps every base of the rule covered by default.
@pytest.mark.parametrize("name", list(FAST) + SLOW)
def test_padded_garbage_is_ignored_and_a_nan_score_gives_nan_compiled(name):
  # Embedding losses: rows have no padding, only the NaN case applies.
  embeddings = _loss(name).predictions == "embeddings"
  labels = IDS if embeddings else PADDED
  cases = [SCORES] if embeddings else [SCORES, GARBAGE_SCORES]
  # A fresh loss per case: the random losses then draw the same numbers for each.
  eager = [numpy(_loss(name)(labels, s)) for s in cases]
  assert np.isfinite(eager[0]).all()
  np.testing.assert_allclose(eager[-1], eager[0], rtol=1e-5, atol=1e-6)
  for mode in COMPILED:
    objects = [_loss(name) for _ in range(len(cases) + 1)]

    def all_cases(*cases, objects=objects):
      return [loss(labels, s) for loss, s in zip(objects, cases)]

    got = numpy(compiled(all_cases, mode)(*cases, NAN_SCORES))
    np.testing.assert_allclose(got[-2], got[0], rtol=1e-5, atol=1e-6)
    nan_values = np.atleast_1d(got[-1])
    if objects[0].coupling == "example":
      assert np.isnan(nan_values[0]) and np.isfinite(nan_values[1:]).all(), nan_values
    else:  # the whole batch's value depends on the list with the NaN
      assert np.isnan(nan_values).all(), nan_values


def _metric_result(name, labels, scores, mode):
  metric = metrics.get(name)
  if mode == "eager":
    metric.update_state(labels, scores)
    return numpy(metric.result())
  if BACKEND == "jax":

    def update(labels, scores):
      state = [v.value for v in metric.variables]
      return metric.stateless_result(metric.stateless_update_state(state, labels, scores))

    return numpy(compiled(update, mode)(labels, scores))

  def result(labels, scores):
    metric.update_state(labels, scores)
    return metric.result()

  return numpy(compiled(result, mode)(labels, scores))


@pytest.mark.parametrize("name", METRICS)
def test_a_metric_ignores_padded_garbage_and_is_nan_for_a_nan_score_compiled(name):
  want = _metric_result(name, PADDED, SCORES, "eager")
  assert np.isfinite(want)
  got = _metric_result(name, PADDED, GARBAGE_SCORES, "eager")
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
  for mode in COMPILED:
    assert np.isnan(_metric_result(name, PADDED, NAN_SCORES, mode))


@pytest.mark.parametrize("huge", [2**32 + 3, 2**40])
def test_class_ids_beyond_int32_are_refused(huge):
  labels = np.array([0, 1, 2, huge], np.int64)
  for name in LOSSES:
    with pytest.raises(ValueError, match=r"`y_true` must be class ids"):
      _loss(name)(labels, SCORES)
  for name in METRICS:
    with pytest.raises(ValueError, match=r"`labels` must be class ids"):
      metrics.get(name).update_state(labels, SCORES)


@pytest.mark.parametrize("reduction", ["none", "sum", "sum_over_batch_size"])
def test_an_empty_batch_gives_what_keras_own_losses_give(reduction):
  empty_scores, empty_ids = np.zeros((0, C), np.float32), np.zeros((0,), np.int64)
  keras_loss = keras.losses.CategoricalCrossentropy(reduction=reduction)
  want = numpy(keras_loss(np.zeros((0, C), np.float32), empty_scores))
  for name in LOSSES:
    got = numpy(_loss_arguments.loss(name, reduction=reduction)(empty_ids, empty_scores))
    assert got.shape == want.shape, name
    np.testing.assert_array_equal(got, want, err_msg=name)


def test_a_metric_ignores_an_empty_batch():
  for name in METRICS:
    metric, reference = metrics.get(name), metrics.get(name)
    metric.update_state(np.zeros((0,), np.int64), np.zeros((0, C), np.float32))
    metric.update_state(IDS, SCORES)
    reference.update_state(IDS, SCORES)
    np.testing.assert_allclose(numpy(metric.result()), numpy(reference.result()), err_msg=name)


#: Graded dense relevance whose last item is padding, and each bad value of a list's inputs.
GRADED = np.array([[2.0, 0.0, 1.0, 3.0, -1.0]] * 4, np.float32)
BAD_INPUTS = [
  (what, column, value)
  for what in ("score", "label")
  for column in ((1, 3) if what == "score" else (1, 3, 4))  # a label of 0, of 3, the padded one
  for value in (math.nan, math.inf, -math.inf)
]
#: The losses whose values show a non-finite input themselves (`Loss.shows_non_finite`): where no
#: check can raise, their bad lists are found from the values, not from the parser's marks.
SHOWS_NON_FINITE = [name for name in LOSSES if getattr(_loss(name), "shows_non_finite", False)]


def test_the_softmax_losses_show_non_finite_inputs():
  assert {"softmax_loss", "calibrated_softmax_loss"} <= set(SHOWS_NON_FINITE)
  assert not _loss("unique_softmax_loss").shows_non_finite  # a padded -inf label gives 0 there


@pytest.mark.parametrize("name", SHOWS_NON_FINITE)
@pytest.mark.parametrize("item_weights", [False, True])
def test_a_bad_dense_input_is_refused_eagerly_and_nan_compiled(name, item_weights):
  # Each bad value in list 0, with per-item sample weights of 0 at it where `item_weights`:
  # eagerly a ValueError naming the argument, compiled NaN for list 0 and list 1-3's clean values.
  cases = []
  for what, column, value in BAD_INPUTS:
    labels, scores = GRADED.copy(), SCORES.copy()
    (scores if what == "score" else labels)[0, column] = value
    weights = np.ones_like(labels)
    weights[0, column] = 0.0 if item_weights else 1.0
    cases.append((labels, scores, weights))
    with pytest.raises(ValueError, match=f"`{'y_pred' if what == 'score' else 'y_true'}` "):
      _loss(name)(labels, scores, weights)
  clean = numpy(_loss(name)(GRADED, SCORES, np.ones_like(GRADED)))
  assert np.isfinite(clean).all()
  for mode in COMPILED:

    def all_cases(*flat):
      return [_loss(name)(*flat[i : i + 3]) for i in range(0, len(flat), 3)]

    got = numpy(compiled(all_cases, mode)(*[x for case in cases for x in case]))
    for (what, column, value), values in zip(BAD_INPUTS, got):
      assert np.isnan(values[0]), (mode, what, column, value, values)
      np.testing.assert_allclose(values[1:], clean[1:], rtol=1e-5, atol=1e-6)
