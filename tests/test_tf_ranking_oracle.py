"""The keras.ops port of TF-Ranking's losses against TF-Ranking 0.5.5 itself (TensorFlow leg only).

Every key x lambda weight (where the key uses one) x label form (class ids, dense graded, dense
padded with ``-1``) x normalisation: the value and the gradient with respect to the scores equal
TF-Ranking's own Keras loss (``tests/_tf_ranking_reference.py``) at ``1e-5``. With
``normalization="tf_ranking"`` ours is TF-Ranking's loss as it is; with ``"lists"`` it is
TF-Ranking's unreduced values summed per list (and averaged over a list's Gumbel samples).

Random draws are shared: TF-Ranking's Gumbel noise (``losses_impl._sample_gumbel``), its random
order of ties (``utils._get_shuffle_indices``) and ours (``ranking_losses.sampling.uniform``) all
read the same uniform numbers, one fixed array per shape (:func:`_draw`), so the stochastic keys
(Gumbel ApproxNDCG, Yeti, ListMLE, Coupled-RankDistil) are compared exactly too.

Where TF-Ranking's value is not finite (its ListMLE is ``-inf`` once scores spread by about 90)
the port must stay finite: :func:`test_list_mle_is_finite_where_tf_rankings_is_not`.
"""

import sys

import _tf_ranking_reference as reference
import numpy as np
import pytest
import tensorflow as tf

from tfrank4class.losses import lambda_weights as lw
from tfrank4class.losses import tf_ranking
from tfrank4class.losses.ranking_losses import listwise, sampling

B, C = 6, 5
tfr_utils = reference.module("keras.utils")
tfr_losses = reference.module("keras.losses")
losses_impl = reference.module("losses_impl")
impl_utils = reference.module("utils")

# (ours, theirs) factories of each lambda weight, by a short name.
LAMBDA_WEIGHTS = {
  "label_diff": (lw.LabelDiffLambdaWeight, tfr_losses.LabelDiffLambdaWeight),
  "dcg": (
    lambda: lw.DCGLambdaWeight(topn=3, smooth_fraction=0.3),
    lambda: tfr_losses.DCGLambdaWeight(topn=3, smooth_fraction=0.3),
  ),
  "dcg_normalized": (
    lambda: lw.DCGLambdaWeight(normalized=True, gain_fn=lw.pow_minus_1),
    lambda: tfr_losses.DCGLambdaWeight(normalized=True, gain_fn=tfr_utils.pow_minus_1),
  ),
  "ndcg": (lambda: lw.NDCGLambdaWeight(topn=3), lambda: tfr_losses.NDCGLambdaWeight(topn=3)),
  "ndcg_v2": (lambda: lw.NDCGLambdaWeightV2(topn=2), lambda: tfr_losses.NDCGLambdaWeightV2(topn=2)),
  "yeti": (lw.YetiDCGLambdaWeight, tfr_losses.YetiDCGLambdaWeight),
  "precision": (
    lambda: lw.PrecisionLambdaWeight(topn=2),
    lambda: tfr_losses.PrecisionLambdaWeight(topn=2),
  ),
  "list_mle": (
    lambda: lw.ListMLELambdaWeight(lw.log2_inverse),
    lambda: tfr_losses.ListMLELambdaWeight(tfr_utils.log2_inverse),
  ),
}
PAIR_WEIGHTS = ("label_diff", "dcg", "dcg_normalized", "ndcg", "ndcg_v2", "yeti", "precision")
WEIGHTS_OF = {
  **{key: PAIR_WEIGHTS for key, spec in tf_ranking.SPECS.items() if spec.shape == "pair"},
  "softmax_loss": ("dcg", "dcg_normalized", "ndcg"),
  "calibrated_softmax_loss": ("dcg", "ndcg"),
  "list_mle_loss": ("list_mle",),
}
# Arguments other than the defaults, one set per key.
ARGUMENTS = {
  "yeti_logistic_loss": {"sample_size": 3, "gumbel_temperature": 0.5, "seed": 3},
  "gumbel_approx_ndcg_loss": {"sample_size": 3, "gumbel_temperature": 0.5, "seed": 1},
  "calibrated_softmax_loss": {"virtual_label": 0.5},
  "coupled_rankdistil_loss": {"sample_size": 3, "topk": 2},
  "ordinal_loss": {"use_fraction_label": True},
}
TEMPERATURE = ("sigmoid_cross_entropy_loss", "mean_squared_loss", "ordinal_loss")
LABEL_FORMS = ("class_ids", "graded", "padded")


def _cases():
  for key in tf_ranking.TFR_KEYS:
    for weight in (None, *WEIGHTS_OF.get(key, ())):
      for form in LABEL_FORMS:
        yield key, weight, form


def _draw(shape):
  """The same uniform numbers for every consumer of one shape."""
  shape = tuple(int(d) for d in np.asarray(shape).reshape(-1))
  rng = np.random.default_rng(abs(hash(shape)) % 2**32)
  return rng.uniform(size=shape).astype(np.float32)


@pytest.fixture
def shared_draws(monkeypatch):
  def ours(shape, seed, like):
    return tf.constant(_draw(shape), like.dtype)

  def gumbel(shape, eps=1e-20, seed=None):
    return -tf.math.log(-tf.math.log(tf.constant(_draw(shape)) + eps) + eps)

  def shuffle(shape, mask=None, shuffle_ties=True, seed=None):
    values = tf.constant(_draw(shape)) if shuffle_ties else tf.zeros(shape)
    if mask is not None:
      values = tf.where(mask, values, values + 2.0)
    return tf.argsort(values, stable=True)

  monkeypatch.setattr(sampling, "uniform", ours)
  monkeypatch.setattr(listwise, "uniform", ours)
  monkeypatch.setattr(losses_impl, "_sample_gumbel", gumbel)
  monkeypatch.setattr(impl_utils, "_get_shuffle_indices", shuffle)


def _inputs(form, seed=0):
  rng = np.random.default_rng(seed)
  scores = rng.normal(size=(B, C)).astype(np.float32)
  if form == "class_ids":
    ids = rng.integers(0, C, size=B)
    return ids, np.eye(C, dtype=np.float32)[ids], scores
  relevance = rng.integers(0, 4, size=(B, C)).astype(np.float32)
  relevance[1] = 0.0  # a list without relevance
  if form == "padded":
    relevance[0, -2:] = -1.0
    relevance[2, 0] = -1.0
  return relevance, relevance, scores


def _value_and_grad(fn, scores):
  scores = tf.constant(scores)
  with tf.GradientTape() as tape:
    tape.watch(scores)
    value = fn(scores)
    total = tf.reduce_sum(value)
  return value.numpy(), tape.gradient(total, scores).numpy()


def _theirs(key, weight, normalization, relevance, **kwargs):
  if weight is not None:
    kwargs["lambda_weight"] = LAMBDA_WEIGHTS[weight][1]()
  reduction = "sum_over_batch_size" if normalization == "tf_ranking" else "none"
  loss = reference.loss(key, reduction=reduction, **kwargs)

  def value(scores):
    values = loss(relevance, scores[..., None] if key == "ordinal_loss" else scores)
    if normalization == "tf_ranking":
      return values
    values = tf.reduce_sum(tf.reshape(values, [tf.shape(values)[0], -1]), axis=1)
    return tf.reduce_mean(tf.reshape(values, [B, -1]), axis=1)  # the mean of Gumbel samples

  return value


@pytest.mark.slow
@pytest.mark.parametrize("normalization", tf_ranking.NORMALIZATIONS)
@pytest.mark.parametrize("key, weight, form", list(_cases()))
def test_values_and_gradients_equal_tf_ranking(shared_draws, key, weight, form, normalization):
  y, relevance, scores = _inputs(form)
  kwargs = dict(ARGUMENTS.get(key, {}))
  ours_kwargs = {**kwargs, "lambda_weight": LAMBDA_WEIGHTS[weight][0]()} if weight else kwargs
  reduction = "sum_over_batch_size" if normalization == "tf_ranking" else "none"
  ours = tf_ranking.RankingLoss(
    key, reduction=reduction, normalization=normalization, **ours_kwargs
  )
  value, grad = _value_and_grad(lambda s: ours(y, s), scores)
  want, want_grad = _value_and_grad(
    _theirs(key, weight, normalization, relevance, **kwargs), scores
  )
  assert np.all(np.isfinite(want)), "TF-Ranking's value is finite on these inputs"
  np.testing.assert_allclose(value, want, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(grad, want_grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("key", [k for k in tf_ranking.TFR_KEYS if k not in TEMPERATURE])
def test_temperature_equals_tf_ranking(shared_draws, key):
  # One key at a time with a temperature other than its default, per-item weights.
  y, relevance, scores = _inputs("padded", seed=3)
  weights = np.random.default_rng(4).uniform(0.5, 2.0, size=(B, C)).astype(np.float32)
  kwargs = {**ARGUMENTS.get(key, {}), "temperature": 0.7}
  ours = tf_ranking.RankingLoss(key, normalization="tf_ranking", **kwargs)
  theirs = reference.loss(key, **kwargs)
  value, grad = _value_and_grad(lambda s: ours(y, s, weights), scores)
  want, want_grad = _value_and_grad(lambda s: theirs(relevance, s, weights), scores)
  np.testing.assert_allclose(value, want, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(grad, want_grad, rtol=1e-5, atol=1e-6)


def _plackett_luce_nll(scores):
  """``-log P(order)`` of scores listed in the order, in float64 with the maximum out."""
  scores = np.asarray(scores, np.float64)
  total = 0.0
  for p in range(len(scores)):
    rest = scores[p:]
    total += rest.max() + np.log(np.exp(rest - rest.max()).sum()) - scores[p]
  return total


def test_list_mle_is_finite_where_tf_rankings_is_not(shared_draws):
  # Scores spread by 100: TF-Ranking sums exp(s - max s), which underflows to 0, and log 0 = -inf.
  scores = np.array([[100.0, 0.0, -10.0, 5.0]], np.float32)
  relevance = np.array([[0.0, 1.0, 0.0, 0.0]], np.float32)
  theirs = reference.loss("list_mle_loss", reduction="none")(relevance, scores).numpy()
  assert not np.all(np.isfinite(theirs))
  value = float(tf_ranking.RankingLoss("list_mle_loss", reduction="none")([1], scores)[0])
  # The relevant item first, the three others in the random order the draws give: one of these.
  s = scores[0]
  orders = [
    [1, a, b, c] for a, b, c in ((0, 2, 3), (0, 3, 2), (2, 0, 3), (2, 3, 0), (3, 0, 2), (3, 2, 0))
  ]
  candidates = [_plackett_luce_nll(s[order]) for order in orders]
  assert np.isfinite(value)
  assert np.min(np.abs(np.array(candidates) - value) / np.abs(candidates)) < 1e-5


def test_keys_are_tf_rankings_in_order():
  assert list(tf_ranking.TFR_KEYS) == list(tfr_losses.RankingLossKey.all_keys())


@pytest.mark.parametrize("weight", PAIR_WEIGHTS)
def test_tf_rankings_lambda_weights_are_converted_to_ours(weight):
  ours_factory, theirs_factory = LAMBDA_WEIGHTS[weight]
  theirs = tf_ranking.RankingLoss("pairwise_logistic_loss", lambda_weight=theirs_factory())
  assert theirs.loss_kwargs["lambda_weight"] == ours_factory()
  y, _, scores = _inputs("graded", seed=5)
  ours = tf_ranking.RankingLoss("pairwise_logistic_loss", lambda_weight=ours_factory())
  np.testing.assert_allclose(theirs(y, scores).numpy(), ours(y, scores).numpy(), rtol=1e-6)


def test_a_config_saved_with_tf_rankings_lambda_weight_loads_as_ours():
  # What the wrapper of TF-Ranking saved (tfr_utils names TF-Ranking's gain/discount functions).
  config = tf_ranking.RankingLoss("softmax_loss").get_config()
  config["lambda_weight"] = {
    "class_name": "tensorflow_ranking>NDCGLambdaWeight",
    "config": {
      "topn": 2,
      "gain_fn": {"tfr_utils": "pow_minus_1"},
      "rank_discount_fn": {"tfr_utils": "log2_inverse"},
      "normalized": True,
      "smooth_fraction": 0.0,
    },
  }
  loaded = tf_ranking.RankingLoss.from_config(config)
  assert loaded.loss_kwargs["lambda_weight"] == lw.NDCGLambdaWeight(topn=2)


def test_missing_tf_ranking_gives_the_command(monkeypatch):
  real = reference.importlib.util.find_spec
  monkeypatch.setattr(
    reference.importlib.util,
    "find_spec",
    lambda name, *a: None if name == "tensorflow_ranking" else real(name, *a),
  )
  monkeypatch.setattr(reference, "_MODULES", {})
  with pytest.raises(ImportError, match=r"Run: python -m pip install --no-deps "):
    reference.module("losses_impl")


def test_the_loader_leaves_no_stand_in_packages():
  reference.module("keras.losses")
  # A later `import tensorflow_ranking` still runs the real package __init__.
  assert "tensorflow_ranking" not in sys.modules
  assert "tensorflow_ranking.python" not in sys.modules
