"""Our thin wrapper over TF-Ranking's loss core against TF-Ranking's own Keras losses.

The reference is TF-Ranking 0.5.5's ``python/keras/losses.py`` (loaded through the compatibility
module), in the Keras bound in this process as ours are (``tests/_tf_ranking_reference.py``).
With ``normalization="tf_ranking"`` ours must equal it; with the default ``"lists"``, its
unreduced (``"none"``) values summed per list by hand (and averaged over a list's Gumbel samples).
"""

import _tf_ranking_reference as tf_ranking_reference
import numpy as np
import pytest
import tensorflow as tf

from tfrank4class import compat
from tfrank4class.compat import keras
from tfrank4class.losses import tf_ranking

C = 5
# Losses that sample (Gumbel noise, label-tie shuffling): compared with a fixed seed where they
# take one, else on finiteness.
UNSEEDED_STOCHASTIC = ("coupled_rankdistil_loss", "list_mle_loss")
SEEDED = ("gumbel_approx_ndcg_loss", "yeti_logistic_loss")


def _theirs(key, **kwargs):
  return tf_ranking_reference.loss(key, **kwargs)


def test_keys_are_tf_rankings_in_order():
  keys = compat.tf_ranking_module("keras.losses").RankingLossKey.all_keys()
  assert list(tf_ranking.TFR_KEYS) == list(keys)


def _inputs(seed=1, b=8):
  rng = np.random.default_rng(seed)
  scores = rng.normal(size=(b, C)).astype(np.float32)
  relevance = rng.integers(0, 3, size=(b, C)).astype(np.float32)
  relevance[0] = [1, 0, 0, 0, -1]  # one padded item
  return relevance, scores


@pytest.mark.parametrize("reduction", ["auto", "sum", "none"])
@pytest.mark.parametrize("key", tf_ranking.TFR_KEYS)
def test_values_equal_tf_ranking(key, reduction):
  relevance, scores = _inputs()
  kwargs = {"seed": 3} if key in SEEDED else {}
  ours = tf_ranking.RankingLoss(key, reduction=reduction, normalization="tf_ranking", **kwargs)
  theirs = _theirs(key, reduction=reduction, **kwargs)
  tf.random.set_seed(0)  # the same Gumbel draws for both (op seeds advance per eager call)
  ours = ours(relevance, scores)
  tf.random.set_seed(0)
  theirs = theirs(relevance, scores[..., None] if key == "ordinal_loss" else scores)
  if key in UNSEEDED_STOCHASTIC:
    assert ours.shape == theirs.shape and np.all(np.isfinite(ours.numpy()))
    return
  np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
  "key",
  [
    "softmax_loss",
    "pairwise_logistic_loss",
    "approx_ndcg_loss",
    "mean_squared_loss",
    "calibrated_softmax_loss",
  ],
)
@pytest.mark.parametrize("weights", ["list", "item"])
def test_sample_weights_equal_tf_ranking(key, weights):
  relevance, scores = _inputs(seed=2)
  rng = np.random.default_rng(5)
  shape = (len(scores), 1) if weights == "list" else scores.shape
  sample_weight = rng.uniform(0.5, 2.0, size=shape).astype(np.float32)
  ours = tf_ranking.RankingLoss(key, normalization="tf_ranking")(relevance, scores, sample_weight)
  theirs = _theirs(key)(relevance, scores, sample_weight)
  np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5)


def _theirs_per_list(key, relevance, scores, sample_weight=None, **kwargs):
  """TF-Ranking's unreduced weighted losses summed over each list's items, then averaged over
  each list's Gumbel samples (its rows come list by list, ``sample_size`` rows each)."""
  theirs = _theirs(key, reduction="none", **kwargs)
  values = theirs(relevance, scores[..., None] if key == "ordinal_loss" else scores, sample_weight)
  values = np.asarray(values).reshape(values.shape[0], -1).sum(axis=1)
  return values.reshape(len(scores), -1).mean(axis=1)


@pytest.mark.parametrize("key", tf_ranking.TFR_KEYS)
def test_default_is_one_loss_per_list(key):
  relevance, scores = _inputs()
  kwargs = {"seed": 3} if key in SEEDED else {}
  tf.random.set_seed(0)
  values = tf_ranking.RankingLoss(key, reduction="none", **kwargs)(relevance, scores).numpy()
  assert values.shape == (len(scores),)
  if key in UNSEEDED_STOCHASTIC:
    assert np.all(np.isfinite(values))
    return
  tf.random.set_seed(0)
  want = _theirs_per_list(key, relevance, scores, **kwargs)
  np.testing.assert_allclose(values, want, rtol=1e-5, atol=1e-6)
  for reduction, reduce in (("sum_over_batch_size", np.mean), ("sum", np.sum)):
    tf.random.set_seed(0)
    got = tf_ranking.RankingLoss(key, reduction=reduction, **kwargs)(relevance, scores)
    np.testing.assert_allclose(float(got), reduce(want), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("key", ["pairwise_logistic_loss", "approx_ndcg_loss", "mean_squared_loss"])
@pytest.mark.parametrize("weights", ["list", "item"])
def test_default_per_list_with_sample_weights(key, weights):
  relevance, scores = _inputs(seed=2)
  rng = np.random.default_rng(5)
  shape = (len(scores), 1) if weights == "list" else scores.shape
  sample_weight = rng.uniform(0.5, 2.0, size=shape).astype(np.float32)
  ours = tf_ranking.RankingLoss(key, reduction="none")(relevance, scores, sample_weight)
  want = _theirs_per_list(key, relevance, scores, sample_weight)
  np.testing.assert_allclose(ours.numpy(), want, rtol=1e-5)


def test_hand_computed_sigmoid_cross_entropy_per_list():
  # Two lists of three classes, class 0 relevant in both; the loss of a list is the sum of the
  # items' binary cross-entropies; "tf_ranking" divides the sum by B * C = 6 items, "lists" by 2.
  scores = np.array([[2.0, 0.0, -1.0], [0.0, 1.0, 0.0]], np.float32)
  labels = np.array([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
  per_item = np.log1p(np.exp(-scores)) * labels + np.log1p(np.exp(scores)) * (1 - labels)
  lists = tf_ranking.RankingLoss("sigmoid_cross_entropy_loss")
  np.testing.assert_allclose(float(lists([0, 0], scores)), per_item.sum() / 2, rtol=1e-6)
  items = tf_ranking.RankingLoss("sigmoid_cross_entropy_loss", normalization="tf_ranking")
  np.testing.assert_allclose(float(items([0, 0], scores)), per_item.sum() / 6, rtol=1e-6)


def test_normalization_round_trips_and_old_configs_keep_tf_rankings():
  for normalization in tf_ranking.NORMALIZATIONS:
    loss = tf_ranking.RankingLoss("approx_ndcg_loss", normalization=normalization)
    restored = keras.utils.deserialize_keras_object(keras.utils.serialize_keras_object(loss))
    assert restored.normalization == normalization
  config = tf_ranking.RankingLoss("pairwise_logistic_loss").get_config()
  del config["normalization"]  # a config saved before the argument existed
  assert tf_ranking.RankingLoss.from_config(config).normalization == "tf_ranking"


def test_hand_computed_softmax_and_virtual_label():
  # softmax: -log(e^3 / (1 + e + e^3)) for the true class 2.
  want = -np.log(np.exp(3.0) / (1 + np.e + np.exp(3.0)))
  got = tf_ranking.RankingLoss("softmax_loss")([2], [[0.0, 1.0, 3.0]])
  np.testing.assert_allclose(float(got), want, rtol=1e-6)
  # calibrated softmax (Yan et al. 2022): a virtual item of score 0 and label y0 = 0.5 joins the
  # list: -sum_i y_i log(e^s_i / (1 + sum_j e^s_j)) - y0 log(1 / (1 + sum_j e^s_j)).
  denom = 1 + np.exp(0.0) + np.exp(1.0) + np.exp(3.0)
  want = -np.log(np.exp(3.0) / denom) - 0.5 * np.log(1 / denom)
  got = tf_ranking.RankingLoss("calibrated_softmax_loss", virtual_label=0.5)([2], [[0.0, 1.0, 3.0]])
  np.testing.assert_allclose(float(got), want, rtol=1e-6)


def test_lambda_weight_round_trips():
  lambda_weights = compat.tf_ranking_module("keras.losses")
  loss = tf_ranking.RankingLoss(
    "pairwise_logistic_loss", lambda_weight=lambda_weights.NDCGLambdaWeightV2(topn=3)
  )
  config = keras.utils.serialize_keras_object(loss)
  restored = keras.utils.deserialize_keras_object(config)
  assert isinstance(restored.loss_kwargs["lambda_weight"], lambda_weights.NDCGLambdaWeightV2)
  relevance, scores = _inputs()
  np.testing.assert_allclose(restored(relevance, scores).numpy(), loss(relevance, scores).numpy())


def test_bad_arguments():
  with pytest.raises(ValueError, match=r"`key` must be one of .*'softmax_loss'.*got 'softmax'"):
    tf_ranking.RankingLoss("softmax")
  with pytest.raises(
    ValueError,
    match=r"Invalid keyword arguments \['topn'\] for loss "
    r"'approx_ndcg_loss'; it takes \['lambda_weight', "
    r"'temperature'\]",
  ):
    tf_ranking.RankingLoss("approx_ndcg_loss", topn=3)
  with pytest.raises(ValueError, match=r"`virtual_label` must be a finite number >= 0.0, got -1"):
    tf_ranking.RankingLoss("calibrated_softmax_loss", virtual_label=-1)
  with pytest.raises(
    ValueError, match=r"`normalization` must be one of \['lists', 'tf_ranking'\], got 'items'"
  ):
    tf_ranking.RankingLoss("softmax_loss", normalization="items")


def test_trains_in_compile_under_tf_function():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(64, 6)).astype(np.float32)
  y = np.abs(x[:, :C]).argmax(1)
  keras.utils.set_random_seed(0)
  model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(C)])
  model.compile(optimizer=keras.optimizers.Adam(0.05), loss=tf_ranking.RankingLoss("softmax_loss"))
  history = model.fit(x, y, batch_size=16, epochs=5, verbose=0)
  assert history.history["loss"][-1] < history.history["loss"][0]
