"""The linear paths of TF-Ranking's ported losses against brute-force numpy over every pair.

Class ids: every pairwise key with every lambda weight (also under the Gumbel sampler: Yeti) takes
the true class's row of pairs, ``O(C)`` after the ranks' sort; pairwise MSE is ``O(C)`` for any
labels; Coupled-RankDistil takes a suffix log-sum-exp. The references here loop over every pair
(or mask a ``[k, n]`` matrix, as TF-Ranking does) in float64, with ties of scores, padding
(labels ``< 0``) and sample weights; the gradients are compared with those of the one-hot rows
(the quadratic form, which TF-Ranking itself checks in ``tests/test_tf_ranking_oracle.py``) or
with the gradient written out. Random draws are fixed numbers per shape (:func:`_draw`).
"""

import math

import numpy as np
import pytest
from backend_testing import compile_modes, compiled, float64, numpy, value_and_grad

from tfrank4class.compat import ops
from tfrank4class.losses import lambda_weights as lw
from tfrank4class.losses import tf_ranking
from tfrank4class.losses.ranking_losses import listwise, sampling

C, B = 6, 5
IDS = np.array([0, 1, 5, 3, 1])
# float32 compares at 1e-5, float64 at 1e-10 (JAX in float64 inside `float64()`); Keras 3 casts
# a reduced loss to its dtype, float32, so values there compare at float32's.
TOLERANCE = {"float32": 1e-5, "float64": 1e-10}


def _draw(shape, seed=None, like=None):
  shape = tuple(int(d) for d in shape)
  values = np.random.default_rng(sum(shape) * 7919 + len(shape)).uniform(size=shape)
  return values if like is None else ops.convert_to_tensor(values, like.dtype)


@pytest.fixture
def fixed_draws(monkeypatch):
  monkeypatch.setattr(sampling, "uniform", _draw)
  monkeypatch.setattr(listwise, "uniform", _draw)


def _scores(dtype="float32", seed=0):
  scores = np.random.default_rng(seed).normal(size=(B, C))
  scores[0, 2] = scores[0, 4]  # a tie of scores
  scores[2, 1] = scores[2, 5] = scores[2, 0]  # three
  return scores.astype(dtype)


def _ranks(scores):
  """1-based ranks by score, a tie by the lower index."""
  order = np.lexsort((np.arange(len(scores)), -scores))
  ranks = np.empty(len(scores), int)
  ranks[order] = np.arange(1, len(scores) + 1)
  return ranks


def _log2_inverse(r):
  return 0.0 if r == 0 else 1.0 / math.log2(1.0 + r)


def _inverse(r):
  return 0.0 if r == 0 else 1.0 / r


# Each lambda weight: ours, and its weight of a pair (i, j) of one list written out from
# TF-Ranking's formulas: w(labels, ranks, i, j).
def _dcg_pair(gain, discount, topn=None, smooth=0.0, normalized=False, v2=False, yeti=False):
  def weight(labels, ranks, i, j):
    n = len(labels)
    top = n if topn is None else topn
    gains = np.array([gain(x) for x in labels])
    if normalized:
      ideal = sorted(labels, reverse=True)
      best = sum(gain(x) * discount(r + 1) for r, x in enumerate(ideal) if r + 1 <= top)
      gains = gains / best if best > 0 else gains * 0.0
    ri, rj = ranks[i], ranks[j]
    diff = abs(ri - rj)
    u = abs(discount(diff) - discount(diff + 1)) if diff > 0 else 0.0
    if v2:
      low = max(ri, rj)
      factor = u * (1.0 / (1.0 - discount(low)) if low > top else 1.0)
      if yeti and diff != 1:
        factor = 0.0
    else:
      in_top = ri <= top or rj <= top
      capped = [0.0 if r > top else discount(r) for r in (ri, rj)]
      factor = (1 - smooth) * u + smooth * abs(capped[0] - capped[1]) if in_top else 0.0
    return abs(gains[i] - gains[j]) * factor * n

  return weight


def _pow(x):
  return 2.0**x - 1.0


WEIGHTS = {
  "label_diff": (
    lw.LabelDiffLambdaWeight(),
    lambda labels, ranks, i, j: abs(labels[i] - labels[j]),
  ),
  "dcg": (
    lw.DCGLambdaWeight(topn=3, smooth_fraction=0.3),
    _dcg_pair(lambda x: x, _inverse, topn=3, smooth=0.3),
  ),
  "dcg_normalized": (
    lw.DCGLambdaWeight(normalized=True, gain_fn=lw.pow_minus_1),
    _dcg_pair(_pow, _inverse, normalized=True),
  ),
  "ndcg": (lw.NDCGLambdaWeight(topn=2), _dcg_pair(_pow, _log2_inverse, topn=2, normalized=True)),
  "ndcg_v2": (
    lw.NDCGLambdaWeightV2(topn=2),
    _dcg_pair(_pow, _log2_inverse, topn=2, normalized=True, v2=True),
  ),
  "yeti": (lw.YetiDCGLambdaWeight(), _dcg_pair(_pow, _log2_inverse, v2=True, yeti=True)),
  "precision": (
    lw.PrecisionLambdaWeight(topn=2),
    lambda labels, ranks, i, j: (
      float((labels[i] >= 1) != (labels[j] >= 1)) * float((ranks[i] <= 2) != (ranks[j] <= 2))
    ),
  ),
}


def _logistic(x):
  return np.logaddexp(0.0, -x)


PAIR_LOSSES = {
  "pairwise_logistic_loss": _logistic,
  "pairwise_hinge_loss": lambda x: max(0.0, 1.0 - x),
  "pairwise_soft_zero_one_loss": lambda x: 1.0 / (1.0 + np.exp(x)),
}


def _pairwise_reference(key, weight, labels, logits, item_weights):
  """A list's loss: the sum over pairs of valid items ``l_i > l_j`` (MSE: ``i != j``) of
  ``w_i * lambda_ij * loss_ij``, one pair at a time."""
  valid = labels >= 0
  ranks = _ranks(np.where(valid, logits, -np.inf))
  cleaned = np.where(valid, labels, 0.0)
  total = 0.0
  for i in range(len(labels)):
    for j in range(len(labels)):
      if not (valid[i] and valid[j]) or i == j:
        continue
      if key == "pairwise_mse_loss":
        loss = ((logits[i] - logits[j]) - (labels[i] - labels[j])) ** 2
      elif labels[i] > labels[j]:
        loss = PAIR_LOSSES[key](logits[i] - logits[j])
      else:
        continue
      factor = 1.0 if weight is None else WEIGHTS[weight][1](cleaned, ranks, i, j)
      total += item_weights[i] * factor * loss
  return total


def _gumbel_logits(scores, sample_size, temperature):
  """TF-Ranking's Gumbel samples of each list ``[B, S, C]``, from the fixed draws."""
  u = _draw((len(scores), sample_size, scores.shape[1]))
  noisy = (scores[:, None, :] - np.log(-np.log(u + 1e-20) + 1e-20)) / temperature
  noisy = noisy - noisy.max(axis=-1, keepdims=True)
  return np.log(np.exp(noisy) / np.exp(noisy).sum(axis=-1, keepdims=True) + 1e-20)


def _assert_close(got, want, dtype):
  """At ``dtype``'s tolerance, or float32's where the Keras reduction cast ``got`` to it."""
  tolerance = TOLERANCE["float32" if np.asarray(got).dtype == np.float32 else dtype]
  np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)


def _loss_of(key, **kwargs):
  return tf_ranking.RankingLoss(key, reduction="none", **kwargs)


@pytest.mark.parametrize("weight", [None, *WEIGHTS])
@pytest.mark.parametrize("key", [*PAIR_LOSSES, "pairwise_mse_loss"])
def test_class_ids_of_pairwise_keys_equal_every_pair(key, weight):
  scores = _scores("float64")
  item_weights = np.random.default_rng(1).uniform(0.5, 2.0, size=(B, C))
  kwargs = {} if weight is None else {"lambda_weight": WEIGHTS[weight][0]}
  one_hot = np.eye(C)[IDS]
  want = [
    _pairwise_reference(key, weight, one_hot[b], scores[b], item_weights[b]) for b in range(B)
  ]
  with float64():
    got = numpy(_loss_of(key, **kwargs)(IDS, scores, item_weights))
  _assert_close(got, want, "float64")


def _sigmoid_cross_entropy(z, s):
  return np.logaddexp(0.0, s) - z * s, 1.0 / (1.0 + np.exp(-s)) - z  # value, d/ds


# Each pointwise key's loss of an item and its derivative in the score.
POINTWISE = {
  "sigmoid_cross_entropy_loss": _sigmoid_cross_entropy,
  "mean_squared_loss": lambda z, s: ((z - s) ** 2, 2.0 * (s - z)),
  "ordinal_loss": _sigmoid_cross_entropy,  # the ordinal of a 0/1 label is the label
}


@pytest.mark.parametrize("key", POINTWISE)
def test_class_ids_of_pointwise_keys_equal_each_item(key):
  scores = _scores("float64")
  scores[1, 3] = scores[1, IDS[1]] = 0.0  # scores of 0: the gradient there is sigmoid(0) - z
  item_weights = np.random.default_rng(1).uniform(0.5, 2.0, size=(B, C))
  want, want_grad = (x * item_weights for x in POINTWISE[key](np.eye(C)[IDS], scores))
  loss = _loss_of(key)
  with float64():
    for labels in (IDS, np.eye(C)[IDS]):  # class ids and their one-hot rows
      got, (grad,) = value_and_grad(lambda s, y=labels: ops.sum(loss(y, s, item_weights)), scores)
      _assert_close(numpy(loss(labels, scores, item_weights)), want.sum(axis=1), "float64")
      _assert_close(grad, want_grad, "float64")


@pytest.mark.parametrize("weight", [None, "ndcg", "yeti", "precision"])
def test_yeti_logistic_of_class_ids_equals_every_pair_of_every_sample(fixed_draws, weight):
  scores = _scores("float64")
  kwargs = {"sample_size": 3, "gumbel_temperature": 0.5}
  if weight is not None:
    kwargs["lambda_weight"] = WEIGHTS[weight][0]
  weight = weight or "yeti"  # the key's default
  samples = _gumbel_logits(scores, 3, 0.5)
  one_hot = np.eye(C)[IDS]
  want = [
    np.mean(
      [
        _pairwise_reference("pairwise_logistic_loss", weight, one_hot[b], s, [1.0] * C)
        for s in samples[b]
      ]
    )
    for b in range(B)
  ]
  with float64():
    got = numpy(_loss_of("yeti_logistic_loss", **kwargs)(IDS, scores))
  _assert_close(got, want, "float64")


def test_gumbel_approx_ndcg_of_class_ids_equals_its_samples(fixed_draws):
  scores = _scores("float64")
  samples = _gumbel_logits(scores, 4, 1.0) / 0.1  # ApproxNDCG's temperature
  # One relevant item: NDCG = log(2) / log(1 + r) at its approximate rank 1/2 + sum sigmoid.
  true = samples[np.arange(B), :, IDS][..., None]
  ranks = 0.5 + (1.0 / (1.0 + np.exp(true - samples))).sum(axis=-1)
  want = -np.mean(math.log(2.0) / np.log1p(ranks), axis=1)
  with float64():
    got = numpy(_loss_of("gumbel_approx_ndcg_loss", sample_size=4)(IDS, scores))
  _assert_close(got, want, "float64")


def _dense_labels():
  labels = np.random.default_rng(2).integers(0, 3, size=(B, C)).astype(np.float64)
  labels[0, -2:] = -1.0  # padding
  labels[3, 0] = -1.0
  labels[4] = 0.0  # no relevance
  return labels


def _mse_gradient(labels, scores, item_weights):
  """d/ds of ``sum_i w_i sum_j (d_i - d_j)^2`` over valid ``i != j``, ``d = s - l``:
  ``2 sum_j (w_i + w_j)(d_i - d_j)``."""
  valid = labels >= 0
  d = scores - labels
  pair = valid[:, :, None] & valid[:, None, :]
  w = item_weights[:, :, None] + item_weights[:, None, :]
  return np.where(valid, 2.0 * (pair * w * (d[:, :, None] - d[:, None, :])).sum(axis=2), 0.0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pairwise_mse_of_dense_labels_is_every_pair_in_linear_time(dtype):
  labels, scores = _dense_labels(), _scores(dtype) * 3.0 + 10.0  # offset: the centring matters
  item_weights = np.random.default_rng(3).uniform(0.5, 2.0, size=(B, C))
  want = [
    _pairwise_reference(
      "pairwise_mse_loss", None, labels[b], scores[b].astype(np.float64), item_weights[b]
    )
    for b in range(B)
  ]
  want_grad = _mse_gradient(labels, scores.astype(np.float64), item_weights)
  loss = _loss_of("pairwise_mse_loss")
  with float64():  # the values before the Keras reduction, which casts to float32
    relevance, w = (ops.convert_to_tensor(x.astype(dtype)) for x in (labels, item_weights))
    for mode in compile_modes()[:2]:
      fn = compiled(lambda s: loss.weighted_values(ops.convert_to_tensor(s), relevance, w), mode)
      got, (grad,) = value_and_grad(lambda s, fn=fn: ops.sum(fn(s)), scores)
      _assert_close(numpy(fn(scores)), want, dtype)
      _assert_close(grad, want_grad, dtype)


@pytest.mark.parametrize("per_item", [True, False])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pairwise_mse_of_class_ids_is_every_pair_with_its_gradient(dtype, per_item):
  # Class ids take a closed form with its own gradient: values and gradients against every pair.
  scores = _scores(dtype) * 3.0 + 10.0  # offset: the centring matters
  shape = (B, C) if per_item else (B, 1)
  item_weights = np.random.default_rng(4).uniform(0.5, 2.0, size=shape)
  one_hot, wide = np.eye(C)[IDS], np.broadcast_to(item_weights, (B, C))
  temperature = 0.5
  logits = scores.astype(np.float64) / temperature
  want = [
    _pairwise_reference("pairwise_mse_loss", None, one_hot[b], logits[b], wide[b]) for b in range(B)
  ]
  want_grad = _mse_gradient(one_hot, logits, wide) / temperature
  loss = _loss_of("pairwise_mse_loss", temperature=temperature)
  with float64():  # the values before the Keras reduction, which casts to float32
    w = ops.convert_to_tensor(item_weights.astype(dtype))
    for mode in compile_modes():
      fn = compiled(lambda s: loss(IDS, s, w), mode)
      got, (grad,) = value_and_grad(lambda s, fn=fn: ops.sum(fn(s)), scores)
      _assert_close(numpy(fn(scores)), want, dtype)
      _assert_close(grad, want_grad, dtype)


def _coupled_reference(labels, scores, sample_size, topk):
  """TF-Ranking's Coupled-RankDistil of one batch: orders sampled from the labels (fixed draws),
  each position's denominator a log-sum-exp over a ``[k, n]`` mask (``log(1e-10)`` outside)."""
  eps = math.log(1e-10)
  valid = labels >= 0
  cleaned = np.where(valid, labels, 0.0)
  teacher = np.where(valid, cleaned, eps)[:, None, :]
  teacher = teacher - np.log(-np.log(_draw((B, sample_size, C)) + 1e-20) + 1e-20)
  teacher = np.exp(teacher - teacher.max(axis=-1, keepdims=True))
  teacher = np.log(teacher / teacher.sum(axis=-1, keepdims=True) + 1e-10).reshape(-1, C)
  student = np.repeat(np.where(valid, scores, eps), sample_size, axis=0)
  tiebreak = _draw(teacher.shape)
  losses = np.zeros(len(teacher))
  for row in range(len(teacher)):
    order = np.lexsort((np.arange(C), tiebreak[row], -teacher[row]))
    s = student[row, order]
    for p in range(topk):
      denominator = np.where(np.arange(C) >= p, s, eps)
      top = denominator.max()
      losses[row] -= s[p] - (top + np.log(np.exp(denominator - top).sum()))
  has_relevance = cleaned.sum(axis=1) > 0
  return losses.reshape(B, sample_size).mean(axis=1) * has_relevance


@pytest.mark.parametrize("topk", [2, None])
def test_coupled_rankdistil_equals_its_masked_log_sum_exp(fixed_draws, topk):
  labels, scores = _dense_labels(), _scores("float64")
  want = _coupled_reference(labels, scores, 3, C if topk is None else topk)
  with float64():
    got = numpy(_loss_of("coupled_rankdistil_loss", sample_size=3, topk=topk)(labels, scores))
    got_ids = numpy(_loss_of("coupled_rankdistil_loss", sample_size=3)(IDS, scores))
  _assert_close(got, want, "float64")
  _assert_close(got_ids, _coupled_reference(np.eye(C)[IDS], scores, 3, C), "float64")


# The new paths whose old form (the one-hot rows) still runs: values and gradients.
ROWS_CASES = [
  ("pairwise_logistic_loss", {"lambda_weight": lw.NDCGLambdaWeight(topn=2)}),
  ("pairwise_hinge_loss", {"lambda_weight": lw.DCGLambdaWeight(topn=3, smooth_fraction=0.3)}),
  ("pairwise_soft_zero_one_loss", {"lambda_weight": lw.PrecisionLambdaWeight(topn=2)}),
  ("pairwise_logistic_loss", {"lambda_weight": lw.LabelDiffLambdaWeight()}),
  ("pairwise_mse_loss", {"lambda_weight": lw.NDCGLambdaWeightV2(topn=2)}),
  ("yeti_logistic_loss", {"sample_size": 2}),
  ("gumbel_approx_ndcg_loss", {"sample_size": 2}),
  # The written-out gradients of class ids (no lambda weight; every key's in float32 in
  # tests/test_tf_ranking.py) and calibrated softmax without the rows' virtual item.
  ("pairwise_soft_zero_one_loss", {"temperature": 0.7}),
  ("pairwise_hinge_loss", {}),
  ("approx_mrr_loss", {"temperature": 0.5}),
  ("calibrated_softmax_loss", {"virtual_label": 0.5, "temperature": 0.7}),
]


def _check_rows(key, kwargs, modes, dtypes=("float32", "float64"), normalizations=None, spread=1.0):
  item_weights = np.random.default_rng(4).uniform(0.5, 2.0, size=(B, C))
  for normalization in normalizations or tf_ranking.NORMALIZATIONS:
    loss = tf_ranking.RankingLoss(key, reduction="none", normalization=normalization, **kwargs)
    for dtype, mode in ((dtype, mode) for dtype in dtypes for mode in modes):
      scores, rows = (_scores() * spread).astype(dtype), np.eye(C, dtype=dtype)[IDS]
      with float64():
        fn = compiled(loss, mode)
        w = item_weights.astype(dtype)
        got, (grad,) = value_and_grad(lambda s, fn=fn, w=w: ops.sum(fn(IDS, s, w)), scores)
        want, (want_grad,) = value_and_grad(
          lambda s, fn=fn, w=w, rows=rows: ops.sum(fn(rows, s, w)), scores
        )
        _assert_close(numpy(fn(IDS, scores, w)), numpy(fn(rows, scores, w)), dtype)
        _assert_close(got, want, dtype)
        _assert_close(grad, want_grad, dtype)


@pytest.mark.parametrize("key, kwargs", ROWS_CASES)
def test_class_ids_give_the_values_and_gradients_of_their_rows(fixed_draws, key, kwargs):
  # Eager here, and the first compiled mode of the per-list values; every mode in the slow test.
  _check_rows(key, kwargs, ("eager",))
  _check_rows(key, kwargs, compile_modes()[1:2], dtypes=("float32",), normalizations=("lists",))


def _gain_of_one_more(label):
  return label + 1.0  # a gain whose g(0) is not 0


@pytest.mark.parametrize(
  "weight",
  [
    lw.YetiDCGLambdaWeight(topn=2),
    lw.YetiDCGLambdaWeight(topn=3, normalized=True, gain_fn=_gain_of_one_more),
    lw.YetiDCGLambdaWeight(rank_discount_fn=lw.inverse, normalized=True),
  ],
)
@pytest.mark.parametrize("spread", [1.0, 60.0])
def test_yeti_neighbours_of_class_ids_give_the_values_and_gradients_of_their_rows(
  fixed_draws, weight, spread
):
  # The true class's two neighbours (no sort) against every pair of the rows (the ranks' sort),
  # with ranks past `topn`; a spread of 60 saturates TF-Ranking's `log(softmax + 1e-20)` in
  # float32, so many sampled logits tie (the true class's too): ties go by the lower index.
  kwargs = {"sample_size": 3, "lambda_weight": weight}
  _check_rows("yeti_logistic_loss", kwargs, ("eager",), normalizations=("lists",), spread=spread)


def test_true_class_neighbours_are_those_of_the_sorted_order():
  keys = np.random.default_rng(6).integers(0, 3, size=(40, 7)).astype("float32")  # many ties
  keys[:3] = [0.0, -0.0, 0.0, 0.0, 1.0, -0.0, 2.0]  # -0.0 ties 0.0
  ids = np.random.default_rng(7).integers(0, 7, size=40)
  ids[:3] = [0, 5, 6]
  for dtype in ("float32", "float64"):
    rank, before, after = (
      numpy(x)[:, 0]
      for x in sampling.true_class_neighbours(
        ops.convert_to_tensor(keys.astype(dtype)), ops.convert_to_tensor(ids, "int32")
      )
    )
    for row, (key, y) in enumerate(zip(keys, ids)):
      order = list(np.lexsort((np.arange(7), -key)))  # higher key first, then lower index
      p = order.index(y)
      assert rank[row] == p + 1
      assert before[row] == (order[p - 1] if p > 0 else -1)
      assert after[row] == (order[p + 1] if p < 6 else -1)


@pytest.mark.slow
@pytest.mark.parametrize("key, kwargs", ROWS_CASES)
def test_class_ids_give_the_values_and_gradients_of_their_rows_in_every_mode(
  fixed_draws, key, kwargs
):
  _check_rows(key, kwargs, compile_modes())


def _linear_cases():
  """Each key once, with a lambda weight of each kind on one pairwise key."""
  for key in tf_ranking.TFR_KEYS:
    yield key, None
  for weight in WEIGHTS:
    yield "pairwise_logistic_loss", weight
  yield "pairwise_mse_loss", "ndcg"


@pytest.mark.tensorflow_only
def test_no_key_builds_a_square_of_the_classes_for_class_ids():
  # Loss and gradient traced with class ids: no tensor of the graph has two axes of C classes.
  import tensorflow as tf  # noqa: PLC0415

  size, ids = 40, tf.constant([0, 7, 39])
  scores = tf.constant(np.random.default_rng(5).normal(size=(3, size)), tf.float32)
  for key, weight in _linear_cases():
    kwargs = {} if weight is None else {"lambda_weight": WEIGHTS[weight][0]}
    loss = tf_ranking.RankingLoss(key, **kwargs)

    @tf.function
    def step(s, loss=loss):
      with tf.GradientTape() as tape:
        tape.watch(s)
        value = loss(ids, s)
      return value, tape.gradient(value, s)

    graph = step.get_concrete_function(scores).graph
    squares = [
      op.name
      for op in graph.get_operations()
      for out in op.outputs
      if out.shape.rank is not None and list(out.shape).count(size) >= 2
    ]
    assert not squares, (key, weight, squares[:5])


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("key", ["pairwise_hinge_loss", "approx_mrr_loss", "ordinal_loss"])
def test_a_tape_inside_the_traced_step_differentiates_the_class_id_forms(key):
  """As Keras's ``fit`` does, the gradient of class ids (the written-out gradients) taken inside
  ``tf.function``, with and without XLA, against the gradient of the one-hot rows, eagerly."""
  import tensorflow as tf  # noqa: PLC0415

  loss, scores = tf_ranking.RankingLoss(key), tf.constant(_scores())

  def step(s, y):
    with tf.GradientTape() as tape:
      tape.watch(s)
      value = loss(y, s)
    return value, tape.gradient(value, s)

  want, want_grad = step(scores, tf.constant(np.eye(C, dtype="float32")[IDS]))
  for jit_compile in (False, True):
    value, grad = tf.function(step, jit_compile=jit_compile)(scores, tf.constant(IDS))
    _assert_close(numpy(value), numpy(want), "float32")
    _assert_close(numpy(grad), numpy(want_grad), "float32")
