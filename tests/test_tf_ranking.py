"""RankingLoss (TF-Ranking's losses on keras.ops) on the active backend: hand-computed cases, the
per-list reduction, sample weights, dtype, argument checks, bad labels, large score spreads.

TF-Ranking itself is the oracle of ``tests/test_tf_ranking_oracle.py`` (TensorFlow leg); the
references here are computed by hand or in numpy.
"""

import math
import warnings

import numpy as np
import pytest
from backend_testing import compile_modes, compiled, finite_difference_grad, numpy, value_and_grad

from tfrank4class import backend
from tfrank4class.compat import keras, ops
from tfrank4class.losses import lambda_weights as lw
from tfrank4class.losses import tf_ranking
from tfrank4class.losses.ranking_losses import sampling
from tfrank4class.losses.ranking_losses.base import Core

C = 5
# Keys whose value does not depend on a random draw.
DETERMINISTIC = tuple(
  k
  for k in tf_ranking.TFR_KEYS
  if k
  not in (
    "yeti_logistic_loss",
    "gumbel_approx_ndcg_loss",
    "list_mle_loss",
    "coupled_rankdistil_loss",
  )
)
# JAX computes in float32 unless `jax_enable_x64` is set: float64 inputs become float32 there.
FLOAT64 = numpy(ops.convert_to_tensor(np.zeros(1))).dtype == np.float64


def _scores(seed=0, b=4, scale=1.0, dtype="float32"):
  return (np.random.default_rng(seed).normal(size=(b, C)) * scale).astype(dtype)


def _value(loss, y, scores, sample_weight=None):
  return numpy(loss(y, scores, sample_weight))


def test_hand_computed_softmax_and_virtual_label():
  want = -np.log(np.exp(3.0) / (1 + np.e + np.exp(3.0)))
  got = _value(tf_ranking.RankingLoss("softmax_loss"), np.array([2]), [[0.0, 1.0, 3.0]])
  np.testing.assert_allclose(got, want, rtol=1e-6)
  # Calibrated softmax (Yan et al. 2022): a virtual item of score 0 and label y0 = 0.5.
  denom = 1 + np.exp(0.0) + np.exp(1.0) + np.exp(3.0)
  want = -np.log(np.exp(3.0) / denom) - 0.5 * np.log(1 / denom)
  loss = tf_ranking.RankingLoss("calibrated_softmax_loss", virtual_label=0.5)
  np.testing.assert_allclose(_value(loss, np.array([2]), [[0.0, 1.0, 3.0]]), want, rtol=1e-6)


def test_hand_computed_sigmoid_cross_entropy_per_list_and_per_item():
  scores = np.array([[2.0, 0.0, -1.0], [0.0, 1.0, 0.0]], np.float32)
  labels = np.array([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
  per_item = np.log1p(np.exp(-scores)) * labels + np.log1p(np.exp(scores)) * (1 - labels)
  lists = tf_ranking.RankingLoss("sigmoid_cross_entropy_loss")
  np.testing.assert_allclose(_value(lists, np.array([0, 0]), scores), per_item.sum() / 2, 1e-6)
  items = tf_ranking.RankingLoss("sigmoid_cross_entropy_loss", normalization="tf_ranking")
  np.testing.assert_allclose(_value(items, np.array([0, 0]), scores), per_item.sum() / 6, 1e-6)


def test_hand_computed_pairwise_with_label_difference_weights():
  # Labels [2, 0, 1]: pairs (0,1) weight 2, (0,2) weight 1, (2,1) weight 1; hinge max(0, 1 - d).
  scores = np.array([[0.5, 0.0, 1.0]], np.float32)
  relevance = np.array([[2.0, 0.0, 1.0]], np.float32)
  want = 2 * max(0, 1 - 0.5) + 1 * max(0, 1 - (0.5 - 1.0)) + 1 * max(0, 1 - 1.0)
  loss = tf_ranking.RankingLoss(
    "pairwise_hinge_loss", lambda_weight=lw.LabelDiffLambdaWeight(), reduction="none"
  )
  np.testing.assert_allclose(_value(loss, relevance, scores), [want], rtol=1e-6)


def test_hand_computed_list_mle_of_distinct_labels():
  # Labels 2 > 1 > 0 fix the order (no ties): -log of its Plackett-Luce probability.
  scores = np.array([[0.3, -1.0, 2.0]], np.float32)
  relevance = np.array([[1.0, 0.0, 2.0]], np.float32)
  s = scores[0].astype(np.float64)[[2, 0, 1]]
  want = sum(np.log(np.exp(s[p:]).sum()) - s[p] for p in range(3))
  loss = tf_ranking.RankingLoss("list_mle_loss", reduction="none")
  np.testing.assert_allclose(_value(loss, relevance, scores), [want], rtol=1e-6)


def test_hand_computed_approx_mrr_and_ndcg_at_a_clear_order():
  # Temperature 0.1 and gaps of 10: the approximate ranks are the ranks; item 1 is first.
  scores = np.array([[0.0, 10.0, -10.0]], np.float32)
  mrr = tf_ranking.RankingLoss("approx_mrr_loss", reduction="none")
  np.testing.assert_allclose(_value(mrr, np.array([1]), scores), [-1.0], atol=1e-6)
  np.testing.assert_allclose(_value(mrr, np.array([2]), scores), [-1 / 3], rtol=1e-5)
  ndcg = tf_ranking.RankingLoss("approx_ndcg_loss", reduction="none")
  np.testing.assert_allclose(_value(ndcg, np.array([0]), scores), [-1 / np.log2(3)], rtol=1e-5)


@pytest.mark.parametrize("key", tf_ranking.TFR_KEYS)
def test_one_loss_per_list_and_keras_reductions(key):
  scores, y = _scores(), np.array([0, 1, 2, 4])
  kwargs = {"seed": 3} if "seed" in tf_ranking.SPECS[key].extra_args else {}
  values = _value(tf_ranking.RankingLoss(key, reduction="none", **kwargs), y, scores)
  assert values.shape == (4,) and np.all(np.isfinite(values))
  if key in DETERMINISTIC:
    mean = _value(tf_ranking.RankingLoss(key), y, scores)
    total = _value(tf_ranking.RankingLoss(key, reduction="sum"), y, scores)
    np.testing.assert_allclose([mean, total], [values.mean(), values.sum()], rtol=1e-5)


@pytest.mark.parametrize("key", DETERMINISTIC)
def test_list_weights_multiply_the_list_losses(key):
  scores, y = _scores(1), np.array([0, 1, 2, 4])
  w = np.array([0.5, 2.0, 0.0, 1.0], np.float32)
  loss = tf_ranking.RankingLoss(key, reduction="none")
  np.testing.assert_allclose(
    _value(loss, y, scores, w), w * _value(loss, y, scores), rtol=1e-5, atol=1e-7
  )


def test_item_weights_of_a_pointwise_key_weigh_each_item():
  scores, y = _scores(2), np.array([0, 1, 2, 4])
  w = np.random.default_rng(3).uniform(0.5, 2.0, size=(4, C)).astype(np.float32)
  z = np.eye(C)[y]
  per_item = np.square(z - scores)
  loss = tf_ranking.RankingLoss("mean_squared_loss", reduction="none")
  np.testing.assert_allclose(_value(loss, y, scores, w), (per_item * w).sum(1), rtol=1e-5)


@pytest.mark.parametrize("key", tf_ranking.TFR_KEYS)
@pytest.mark.skipif(not FLOAT64, reason="the backend has no float64 (JAX without x64)")
def test_float64_is_computed_in_float64(key):
  # The loss values before the Keras reduction (which casts to the loss's dtype under Keras 3).
  scores = _scores(4, dtype="float64")
  relevance = np.eye(C)[[0, 1, 2, 4]]
  kwargs = {"seed": 3} if "seed" in tf_ranking.SPECS[key].extra_args else {}
  value = tf_ranking.RankingLoss(key, **kwargs).loss_values(scores, relevance)
  assert ops.convert_to_numpy(value).dtype == np.float64
  if key in DETERMINISTIC:
    single = tf_ranking.RankingLoss(key).loss_values(
      scores.astype("float32"), relevance.astype("float32")
    )
    np.testing.assert_allclose(numpy(value), numpy(single), rtol=1e-5)


@pytest.mark.parametrize("key", tf_ranking.TFR_KEYS)
def test_large_score_spreads_stay_finite(key):
  # Scores spread by ~1000 (TF-Ranking's ListMLE is -inf from a spread of about 90).
  relevance = np.array([[2.0, 0.0, 1.0, -1.0, 0.0], [0.0, 1.0, 0.0, 0.0, 3.0]], np.float32)
  scores = _scores(5, b=2, scale=300.0)
  loss = tf_ranking.RankingLoss(key, reduction="sum")
  value, (grad,) = value_and_grad(lambda s: loss(relevance, s), scores)
  assert np.isfinite(value) and np.all(np.isfinite(grad))


@pytest.mark.parametrize(
  "key", ["softmax_loss", "pairwise_logistic_loss", "unique_softmax_loss", "approx_ndcg_loss"]
)
def test_gradients_match_finite_differences(key):
  # float64 and small steps where the backend has it (see FLOAT64), else float32 and 1e-2.
  dtype, eps, tolerance = ("float64", 1e-5, 1e-5) if FLOAT64 else ("float32", 1e-2, 1e-3)
  relevance = np.array([[2.0, 0.0, 1.0, -1.0, 0.0], [0.0, 1.0, 0.0, 0.0, 3.0]], dtype)
  scores = _scores(6, b=2, dtype=dtype)
  loss = tf_ranking.RankingLoss(key, temperature=1.0)

  def total(s):  # in float64 (the Keras reduction would cast to the loss's float32)
    return ops.sum(loss.loss_values(s, ops.convert_to_tensor(relevance)))

  _, (grad,) = value_and_grad(total, scores)
  want = finite_difference_grad(total, scores, eps=eps)
  np.testing.assert_allclose(grad, want, rtol=tolerance, atol=tolerance / 100)


# Keys whose core takes class ids without one-hot rows (a registry-derived list, pinned below).
CLASS_ID_KEYS = tuple(
  k
  for k in tf_ranking.TFR_KEYS
  if tf_ranking.SPECS[k].impl.compute_per_list_from_ids is not Core.compute_per_list_from_ids
)


def test_the_keys_that_take_class_ids_are_those_that_need_no_sort_by_the_labels():
  # Every key whose loss of a one-hot row needs no sort by the labels: the true class is first
  # (ListMLE: then the others in its random tie order), or only its pairs carry weight (pairwise
  # MSE: its O(n) form of the rows, or with a lambda weight those pairs), or each item alone
  # (the pointwise keys); not Coupled-RankDistil (orders sampled from the labels).
  assert CLASS_ID_KEYS == (
    "pairwise_hinge_loss",
    "pairwise_logistic_loss",
    "pairwise_soft_zero_one_loss",
    "pairwise_mse_loss",
    "yeti_logistic_loss",
    "softmax_loss",
    "calibrated_softmax_loss",
    "unique_softmax_loss",
    "sigmoid_cross_entropy_loss",
    "mean_squared_loss",
    "ordinal_loss",
    "list_mle_loss",
    "approx_ndcg_loss",
    "approx_mrr_loss",
    "gumbel_approx_ndcg_loss",
  )


@pytest.mark.parametrize("normalization", tf_ranking.NORMALIZATIONS)
@pytest.mark.parametrize(
  "key, kwargs",
  # The Gumbel keys draw different samples at each call: tests/test_tf_ranking_linear.py fixes them.
  [(k, {}) for k in CLASS_ID_KEYS if "seed" not in tf_ranking.SPECS[k].extra_args]
  + [
    ("softmax_loss", {"temperature": 0.7}),
    ("pairwise_logistic_loss", {"temperature": 0.7}),
    ("approx_ndcg_loss", {"temperature": 0.7}),
    ("list_mle_loss", {"temperature": 0.7}),
    ("list_mle_loss", {"lambda_weight": lw.ListMLELambdaWeight(lw.inverse)}),  # needs the rows
    ("softmax_loss", {"lambda_weight": lw.DCGLambdaWeight(topn=2)}),  # needs the rows
    ("pairwise_hinge_loss", {"lambda_weight": lw.DCGLambdaWeight(topn=2)}),
  ],
)
def test_class_ids_give_the_values_and_gradients_of_their_one_hot_rows(key, kwargs, normalization):
  # The dense path (one-hot rows) is the port TF-Ranking checks (tests/test_tf_ranking_oracle.py).
  scores, y = _scores(9), np.array([0, 1, 2, 4])
  rng = np.random.default_rng(10)
  weights = [
    None,
    np.array([0.5, 2.0, 0.0, 1.0], np.float32),
    rng.uniform(0.5, 2.0, size=(4, C)).astype(np.float32) * (np.arange(C) != 2),  # 0 at y = 2
  ]

  def loss(labels, s, w):  # a new loss each time: ListMLE's tie order is the same in each
    return tf_ranking.RankingLoss(key, reduction="none", normalization=normalization, **kwargs)(
      labels, s, w
    )

  for w in weights:
    # Elementwise, in TF-Ranking's shape with normalization="tf_ranking" ([B, n] for pairs).
    np.testing.assert_allclose(
      numpy(loss(y, scores, w)), numpy(loss(np.eye(C)[y], scores, w)), rtol=1e-5, atol=1e-6
    )
    got, (grad,) = value_and_grad(lambda s, w=w: ops.sum(loss(y, s, w)), scores)
    want, (want_grad,) = value_and_grad(lambda s, w=w: ops.sum(loss(np.eye(C)[y], s, w)), scores)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", compile_modes())
@pytest.mark.parametrize(
  "key", ["softmax_loss", "pairwise_hinge_loss", "approx_mrr_loss", "unique_softmax_loss"]
)
def test_compiled_equals_eager_and_bad_ids_give_nan(key, mode):
  scores, y = _scores(7), np.array([0, 1, 2, 4])
  loss = tf_ranking.RankingLoss(key, reduction="none")
  eager = _value(loss, y, scores)
  np.testing.assert_allclose(numpy(compiled(loss, mode)(y, scores)), eager, rtol=1e-5)
  bad = np.array([0, 1, 7, 4])  # class id 7 of 5 classes
  if mode in ("eager", "function"):  # eagerly a ValueError; tf.function: an in-graph assertion
    with pytest.raises(ValueError if mode == "eager" else Exception, match="y_true"):
      compiled(loss, mode)(bad, scores)
    return
  got = numpy(compiled(loss, mode)(bad, scores))
  assert np.isnan(got[2]) and np.allclose(got[[0, 1, 3]], eager[[0, 1, 3]], rtol=1e-5)


@pytest.mark.parametrize("mode", compile_modes())
def test_compiled_list_mle_of_distinct_labels_equals_the_plackett_luce_value(mode):
  # Distinct labels: no tie to draw; -log P(order 1, 3, 0, 2) by hand in numpy.
  relevance = np.array([[2.0, 3.0, 0.0, 1.0, -1.0]], np.float32)
  scores = _scores(8, b=1)
  s = scores[0, [1, 0, 3, 2]].astype(np.float64)
  want = sum(np.logaddexp.reduce(s[i:]) - s[i] for i in range(4))
  loss = tf_ranking.RankingLoss("list_mle_loss", reduction="none")
  got = numpy(compiled(loss, mode)(relevance, scores))
  # The padded item (logit log(1e-10)) comes last: its own term is 0.
  np.testing.assert_allclose(got, [want], rtol=1e-5)


def test_non_finite_dense_relevance_is_refused():
  relevance = np.array([[1.0, np.nan, 0.0, 0.0, 0.0]], np.float32)
  with pytest.raises(ValueError, match="y_true"):
    tf_ranking.RankingLoss("softmax_loss")(relevance, _scores(b=1))


@pytest.mark.parametrize(
  "kwargs, error, message",
  [
    ({"temperature": 0.0}, ValueError, r"`temperature` must be a finite number > 0.0, got 0.0"),
    ({"temperature": -1}, ValueError, r"`temperature` must be a finite number > 0.0, got -1"),
    ({"temperature": math.nan}, ValueError, r"`temperature` must be a finite number > 0.0, got"),
    ({"lambda_weight": "ndcg"}, TypeError, r"`lambda_weight` must be None or .*got 'ndcg'"),
    ({"lambda_weight": lw.ListMLELambdaWeight(lw.inverse)}, TypeError, r"`lambda_weight` of"),
  ],
)
def test_bad_arguments_of_a_pairwise_key(kwargs, error, message):
  with pytest.raises(error, match=message):
    tf_ranking.RankingLoss("pairwise_logistic_loss", **kwargs)


@pytest.mark.parametrize(
  "key, kwargs, error, message",
  [
    ("gumbel_approx_ndcg_loss", {"sample_size": 0}, ValueError, r"`sample_size` must be an "),
    ("yeti_logistic_loss", {"gumbel_temperature": math.inf}, ValueError, "`gumbel_temperature`"),
    ("yeti_logistic_loss", {"seed": 1.5}, ValueError, r"`seed` must be an integer or None"),
    ("coupled_rankdistil_loss", {"sample_size": 0}, ValueError, r"`sample_size`.*got 0"),
    ("coupled_rankdistil_loss", {"topk": 0}, ValueError, r"`topk` must be an integer >= 1"),
    ("ordinal_loss", {"ordinal_size": 3}, ValueError, r"`ordinal_size` must be 1 .*got 3"),
    ("ordinal_loss", {"use_fraction_label": "yes"}, ValueError, "`use_fraction_label`"),
    ("approx_ndcg_loss", {"lambda_weight": lw.NDCGLambdaWeight()}, TypeError, "ignores it"),
    ("approx_ndcg_loss", {"topn": 3}, ValueError, r"Invalid keyword arguments \['topn'\]"),
    ("calibrated_softmax_loss", {"virtual_label": -1}, ValueError, r"`virtual_label` must be"),
    ("softmax", {}, ValueError, r"`key` must be one of .*'softmax_loss'.*got 'softmax'"),
    ("softmax_loss", {"normalization": "items"}, ValueError, r"`normalization` must be one of"),
  ],
)
def test_bad_arguments(key, kwargs, error, message):
  with pytest.raises(error, match=message):
    tf_ranking.RankingLoss(key, **kwargs)


def test_bad_lambda_weight_arguments():
  with pytest.raises(ValueError, match=r"`topn` must be an integer >= 1, got None"):
    lw.PrecisionLambdaWeight()
  with pytest.raises(ValueError, match=r"`rank_discount_fn` is required"):
    lw.ListMLELambdaWeight()
  with pytest.raises(ValueError, match=r"`smooth_fraction` must be a finite number in \[0, 1\]"):
    lw.DCGLambdaWeight(smooth_fraction=1.5)
  with pytest.raises(TypeError, match=r"`gain_fn` must be a function"):
    lw.NDCGLambdaWeightV2(gain_fn="pow")
  with pytest.raises(ValueError, match=r"`topn` must be an integer >= 1 or None, got 0"):
    lw.NDCGLambdaWeight(topn=0)


def test_lambda_weight_round_trips_and_old_configs_load():
  weight = lw.NDCGLambdaWeightV2(topn=3)
  loss = tf_ranking.RankingLoss("pairwise_logistic_loss", lambda_weight=weight)
  restored = keras.utils.deserialize_keras_object(keras.utils.serialize_keras_object(loss))
  assert restored.loss_kwargs["lambda_weight"] == weight
  scores, y = _scores(8), np.array([0, 1, 2, 4])
  np.testing.assert_allclose(_value(restored, y, scores), _value(loss, y, scores), rtol=1e-6)
  # A config saved while the loss wrapped TF-Ranking names TF-Ranking's class and functions.
  config = loss.get_config()
  config["lambda_weight"] = {
    "class_name": "tensorflow_ranking>NDCGLambdaWeightV2",
    "config": {"topn": 3, "gain_fn": {"tfr_utils": "pow_minus_1"}, "rank_discount_fn": None},
  }
  old = tf_ranking.RankingLoss.from_config(config)
  assert old.loss_kwargs["lambda_weight"] == weight


def test_normalization_round_trips_and_old_configs_keep_tf_rankings():
  for normalization in tf_ranking.NORMALIZATIONS:
    loss = tf_ranking.RankingLoss("approx_ndcg_loss", normalization=normalization)
    restored = keras.utils.deserialize_keras_object(keras.utils.serialize_keras_object(loss))
    assert restored.normalization == normalization
  config = tf_ranking.RankingLoss("pairwise_logistic_loss").get_config()
  del config["normalization"]  # a config saved before the argument existed
  assert tf_ranking.RankingLoss.from_config(config).normalization == "tf_ranking"


def test_trains_in_compile():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(64, 6)).astype(np.float32)
  y = np.abs(x[:, :C]).argmax(1)
  keras.utils.set_random_seed(0)
  model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(C)])
  loss = tf_ranking.RankingLoss("pairwise_logistic_loss", lambda_weight=lw.NDCGLambdaWeightV2())
  model.compile(optimizer=keras.optimizers.Adam(0.05), loss=loss)
  history = model.fit(x, y, batch_size=16, epochs=5, verbose=0)
  assert history.history["loss"][-1] < history.history["loss"][0]


def test_ranks_are_a_lexicographic_sort_of_validity_key_tiebreak_and_index():
  # Few distinct keys and tiebreaks, so every level of the sort decides somewhere.
  rng = np.random.default_rng(7)
  keys = rng.integers(0, 3, size=(6, 9)).astype(np.float32)
  tiebreak = rng.integers(0, 2, size=(6, 9)).astype(np.float32)
  valid = rng.uniform(size=(6, 9)) > 0.3
  index = np.broadcast_to(np.arange(9), keys.shape)
  # Padded items tie among themselves whatever their keys (TF-Ranking's `sort_by_scores` gives
  # them all the same score), so tiebreak and index order them.
  padded_tie = np.where(valid, keys, 0.0)
  want = np.stack([np.lexsort(cols) for cols in zip(index, tiebreak, -padded_tie, ~valid)])
  got = sampling.order(keys, valid, tiebreak)
  np.testing.assert_array_equal(numpy(got), want)
  want_ranks = np.argsort(want, axis=-1) + 1
  np.testing.assert_array_equal(numpy(sampling.ranks(keys, valid, tiebreak)), want_ranks)
  plain = np.stack([np.lexsort(cols) for cols in zip(index, -keys)])
  np.testing.assert_array_equal(numpy(sampling.order(keys)), plain)


@pytest.mark.parametrize("mode", compile_modes())
def test_argsort_pairs_is_a_lexicographic_sort_at_the_int32_extremes(mode):
  low, high = np.iinfo(np.int32).min, np.iinfo(np.int32).max
  rng = np.random.default_rng(3)
  primary = rng.choice(np.array([low, -1, 0, 1, high], np.int32), size=(4, 11))
  secondary = rng.choice(np.array([low, 0, high], np.int32), size=(4, 11))
  index = np.broadcast_to(np.arange(11), primary.shape)
  want = np.stack([np.lexsort(cols) for cols in zip(index, secondary, primary)])
  got = compiled(backend.argsort_pairs, mode)(
    ops.convert_to_tensor(primary), ops.convert_to_tensor(secondary)
  )
  np.testing.assert_array_equal(numpy(got), want)


@pytest.mark.parametrize("key", ["gumbel_approx_ndcg_loss", "yeti_logistic_loss", "list_mle_loss"])
def test_fit_advances_the_draws_of_seed_generators_assigned_to_the_model(key):
  # Reference: the draws one eager call makes (the generators' counters), times the steps. Under
  # JAX's jitted fit, generators not assigned to the model stay put (docs/backends.md, "Caveats").
  kwargs = {"seed": 3} if "seed" in tf_ranking.SPECS[key].extra_args else {}
  probe = tf_ranking.RankingLoss(key, **kwargs)
  assert probe.seed_generators
  start = [numpy(g.state)[1] for g in probe.seed_generators]
  probe(np.eye(C, dtype="float32")[:2], _scores(b=2))
  per_call = [numpy(g.state)[1] - s for g, s in zip(probe.seed_generators, start)]
  assert all(n > 0 for n in per_call)
  steps = 3
  loss = tf_ranking.RankingLoss(key, **kwargs)
  inputs = keras.Input((C,))
  model = keras.Model(inputs, keras.layers.Dense(C)(inputs))
  model.loss_seed_generators = loss.seed_generators
  model.compile("sgd", loss)
  labels = np.eye(C, dtype="float32")[np.arange(2 * steps) % C]
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    model.fit(_scores(b=2 * steps), labels, batch_size=2, epochs=1, verbose=0)
  after = [numpy(g.state)[1] - s for g, s in zip(loss.seed_generators, start)]
  assert after == [steps * n for n in per_call]
  assert not [w for w in caught if "seed generator" in str(w.message)]


def test_fit_warns_on_jax_when_the_draws_cannot_advance():
  # Without the assignment JAX's jitted fit draws the same numbers at every step (the test
  # above); the loss says so once, with the fix. TensorFlow and PyTorch advance in place.
  loss = tf_ranking.RankingLoss("list_mle_loss")
  inputs = keras.Input((C,))
  model = keras.Model(inputs, keras.layers.Dense(C)(inputs))
  model.compile("sgd", loss)
  labels = np.eye(C, dtype="float32")[np.arange(6) % C]
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    model.fit(_scores(b=6), labels, batch_size=2, epochs=1, verbose=0)
  messages = [str(w.message) for w in caught if "seed generator" in str(w.message)]
  assert len(messages) == (1 if backend.name() == "jax" else 0), messages
  if messages:
    assert "model.loss_seed_generators = loss.seed_generators" in messages[0]
