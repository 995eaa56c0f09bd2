"""Dense relevance with ``r`` relevant items a list: the pairwise keys (with every lambda weight)
and the approximate-rank keys compute only the rows of the relevant items, ``O(C r)``
(:func:`tfrank4class.losses.ranking_losses.base.relevant_row_values`). Checked here against
brute-force numpy over every pair (in float64), with graded labels and ties of labels and of
scores, padding, a list without relevance, sample weights, and ``r`` from 1 to ``C`` (every item
relevant), eagerly (``r`` read from the labels), traced on TensorFlow's graph and under XLA
(``jax.jit``, ``jit_compile=True``): the one row where ``r <= 1``, else a loop over blocks of
relevant rows (here of 5 rows) with its gradient written out (pairwise MSE with a lambda weight:
each block's rows and columns): values, and gradients against the gradient written out
(pairwise) or central differences of the reference (approximate ranks)"""

import numpy as np
import pytest
from backend_testing import compile_modes, compiled, float64, numpy, value_and_grad
from test_tf_ranking_linear import PAIR_LOSSES, WEIGHTS, _ranks

from tfrank4class.compat import BACKEND, ops
from tfrank4class.losses import tf_ranking
from tfrank4class.losses.ranking_losses import approx, base, pairwise

C = 12
#: The mode in which XLA compiles the step (``jax.jit``, TensorFlow's ``jit_compile=True``).
XLA = {"tensorflow": "xla", "jax": "jit"}.get(BACKEND)
needs_xla = pytest.mark.skipif(XLA is None, reason="XLA compiles JAX and TensorFlow steps")

# The derivative of each pair loss in s_i - s_j.
PAIR_SLOPES = {
  "pairwise_logistic_loss": lambda x: -1.0 / (1.0 + np.exp(x)),
  "pairwise_hinge_loss": lambda x: -(1.0 - x > 0.0).astype(float),
  "pairwise_soft_zero_one_loss": lambda x: -np.exp(x) / (1.0 + np.exp(x)) ** 2,
}


# The relevant items a list of each case: "few" at most 8 (the traced cap), "one" binary with
# one relevant item a list, "all" a list of C relevant items, "mixed" 0, 1, some and C, "none"
# no relevant item in the batch.
RELEVANT = {
  "few": [3, 8, 1, 5, 0],
  "one": [1, 1, 1, 1, 0],
  "all": [C, 2, 4, 0, 7],
  "mixed": [C, 1, 6, 0, 11],
  "none": [0, 0, 0, 0, 0],
}


def _labels(case):
  """Graded labels ``[5, C]`` of the case (:data:`RELEVANT`), with ties and padding."""
  rng = np.random.default_rng(list(RELEVANT).index(case))
  labels = np.zeros((5, C))
  for b, r in enumerate(RELEVANT[case]):
    at = rng.choice(C, size=r, replace=False)
    labels[b, at] = 1.0 if case == "one" else rng.integers(1, 4, size=r)  # ties of labels
  labels[1, 0] = labels[3, -1] = -1.0  # padding (replaces a relevant item or not)
  return labels


def _scores(seed=3):
  scores = np.random.default_rng(seed).normal(size=(5, C))
  scores[0, 2] = scores[0, 4]  # ties of scores
  scores[1, 1] = scores[1, 5] = scores[1, 7]
  return scores


def _pairwise_reference(key, weight, labels, scores, item_weights):
  """Per list the loss ``sum_{l_i > l_j} w_i lambda_ij loss(s_i - s_j)`` over pairs of valid
  items (MSE: over pairs of distinct valid items, ``((s_i - s_j) - (l_i - l_j))^2``) and its
  gradient in the scores, every pair written out."""
  values, grads = [], np.zeros_like(scores)
  for b in range(len(labels)):
    valid = labels[b] >= 0
    ranks = _ranks(np.where(valid, scores[b], -np.inf))
    cleaned = np.where(valid, labels[b], 0.0)
    total = 0.0
    for i in range(C):
      for j in range(C):
        mse = key == "pairwise_mse_loss"
        if not (valid[i] and valid[j] and (i != j if mse else labels[b, i] > labels[b, j])):
          continue
        factor = item_weights[b, i]
        if weight is not None:
          factor *= WEIGHTS[weight][1](cleaned, ranks, i, j)
        x = scores[b, i] - scores[b, j]
        if mse:
          x = x - (labels[b, i] - labels[b, j])
        total += factor * (x**2 if mse else PAIR_LOSSES[key](x))
        slope = factor * (2.0 * x if mse else PAIR_SLOPES[key](np.array(x)))
        grads[b, i] += slope
        grads[b, j] -= slope
    values.append(total)
  return np.array(values), grads


def _check(loss, labels, scores, item_weights, want, want_grad, modes):
  """Values and gradients at ``scores``, with ties (the logistic key's slope at a tie is -1/2:
  ``softplus(-x)``, not TF-Ranking's ``relu(-x) + log1p(exp(-|x|))``, whose autodiff gives 0)."""
  relevance, w = (ops.convert_to_tensor(x) for x in (labels, item_weights))
  for mode in modes:
    fn = compiled(lambda s: loss.weighted_values(ops.convert_to_tensor(s), relevance, w), mode)
    _, (grad,) = value_and_grad(lambda s, fn=fn: ops.sum(fn(s)), scores)
    values = numpy(fn(scores))
    np.testing.assert_allclose(values.reshape(len(want), -1).sum(axis=1), want, atol=1e-9)
    np.testing.assert_allclose(grad, want_grad, atol=1e-9)


# The logistic key at every r (1; up to 8, the traced cap; C, every pair), the others at r <= 8;
# each lambda weight at r <= 8 and one at r = C (the lambda weights' rows are the same whatever
# the key); pairwise MSE (with a lambda weight: the rows and their columns) at every r. Eagerly
# each; traced (TRACED) the cases that take each branch of the traced caps.
TRACED = {
  ("pairwise_logistic_loss", None, "few"),
  ("pairwise_logistic_loss", None, "one"),
  ("pairwise_logistic_loss", None, "all"),
  ("pairwise_mse_loss", "ndcg", "few"),
  ("approx_ndcg_loss", None, "few"),
}
PAIRWISE_CASES = [
  *[("pairwise_logistic_loss", None, case) for case in ("few", "one", "all")],
  *[(key, None, "few") for key in ("pairwise_hinge_loss", "pairwise_soft_zero_one_loss")],
  *[("pairwise_logistic_loss", weight, "few") for weight in WEIGHTS],
  ("pairwise_hinge_loss", "ndcg", "all"),
  *[
    ("pairwise_mse_loss", weight, case) for weight, case in [("ndcg", "few"), ("label_diff", "one")]
  ],
  ("pairwise_mse_loss", "precision", "all"),
]


@pytest.mark.parametrize(("key", "weight", "case"), PAIRWISE_CASES)
def test_pairwise_keys_of_dense_relevance_equal_every_pair(key, weight, case):
  labels, scores = _labels(case), _scores()
  item_weights = np.random.default_rng(4).uniform(0.5, 2.0, size=labels.shape)
  want, want_grad = _pairwise_reference(key, weight, labels, scores, item_weights)
  kwargs = {} if weight is None else {"lambda_weight": WEIGHTS[weight][0]}
  with float64():
    loss = tf_ranking.RankingLoss(key, **kwargs)
    _check(loss, labels, scores, item_weights, want, want_grad, _modes(key, weight, case))


def _modes(key, weight, case):
  """Eagerly; for the cases of ``TRACED`` also on TensorFlow's graph (the caps); under XLA
  (JAX's ``jit``, ``jit_compile=True``) the tests ``test_xla_*``."""
  return [
    mode for mode in compile_modes()[: 2 if (key, weight, case) in TRACED else 1] if mode != XLA
  ]


def _approx_reference(key, labels, scores, item_weights):
  """Per list minus the metric at the approximate ranks ``1/2 + sum_j sigmoid(s_j - s_i)`` of
  scores over 0.1 (padded items at ``min - 1000``), times the label-weighted mean weight, every
  pair written out."""
  valid = labels >= 0
  gains = np.where(valid, labels, 0.0)
  logits = scores / 0.1
  logits = np.where(valid, logits, logits.min(axis=1, keepdims=True) - 1e3)
  ranks = 0.5 + (0.5 - 0.5 * np.tanh((logits[:, :, None] - logits[:, None, :]) / 2)).sum(axis=2)
  total = gains.sum(axis=1)
  if key == "approx_mrr_loss":
    metric = (gains / ranks).sum(axis=1) / np.where(total > 0, total, 1.0)
  else:
    top = gains.max(axis=1, keepdims=True)
    safe = 2.0 ** (gains - top) - 2.0 ** (-top)
    ideal = -np.sort(-safe, axis=1) / np.log1p(np.arange(1, C + 1))
    metric = (safe / np.log1p(ranks)).sum(axis=1) / np.where(total > 0, ideal.sum(axis=1), 1.0)
  list_weight = (item_weights * gains).sum(axis=1) / np.where(total > 0, total, 1.0)
  return np.where(total > 0, -metric * list_weight, 0.0)


@pytest.mark.parametrize(
  ("key", "case"),
  [("approx_ndcg_loss", "few"), ("approx_ndcg_loss", "one"), ("approx_ndcg_loss", "all")]
  + [("approx_mrr_loss", "few"), ("approx_mrr_loss", "all")],
)
def test_approx_keys_of_dense_relevance_equal_every_rank(key, case):
  _check_approx(key, case, _modes(key, None, case))


def _check_approx(key, case, modes):
  """The approximate-rank key's values and gradients in ``modes`` against the reference (its
  gradient by central differences) at the case's labels."""
  labels, scores = _labels(case), _scores() * 0.05  # sigmoids away from 0 and 1
  item_weights = np.random.default_rng(4).uniform(0.5, 2.0, size=labels.shape)
  want = _approx_reference(key, labels, scores, item_weights)
  want_grad = np.zeros_like(scores)
  for index in np.ndindex(scores.shape):
    step = np.zeros_like(scores)
    step[index] = 1e-6
    up = _approx_reference(key, labels, scores + step, item_weights).sum()
    down = _approx_reference(key, labels, scores - step, item_weights).sum()
    want_grad[index] = (up - down) / 2e-6
  with float64():
    loss = tf_ranking.RankingLoss(key)
    relevance, w = (ops.convert_to_tensor(x) for x in (labels, item_weights))
    for mode in modes:
      fn = compiled(lambda s: loss.weighted_values(ops.convert_to_tensor(s), relevance, w), mode)
      _, (grad,) = value_and_grad(lambda s, fn=fn: ops.sum(fn(s)), scores)
      values = numpy(fn(scores)).reshape(len(want), -1).sum(axis=1)
      np.testing.assert_allclose(values, want, atol=1e-9)
      np.testing.assert_allclose(grad, want_grad, atol=1e-6)


def test_float32_rows_equal_every_pair(monkeypatch):
  """In float32, eagerly (``r`` read from the labels), the rows' path against every pair
  ``[B, C, C]`` (the path it replaces, forced): values and gradients at 1e-5."""
  labels, scores = _labels("few").astype("float32"), _scores().astype("float32")
  loss = tf_ranking.RankingLoss("pairwise_logistic_loss", lambda_weight=WEIGHTS["ndcg"][0])
  relevance = ops.convert_to_tensor(labels)

  def total(s):
    return ops.sum(loss.weighted_values(ops.convert_to_tensor(s), relevance))

  value_rows, (grad_rows,) = value_and_grad(total, scores)
  monkeypatch.setattr(base, "relevant_rows", lambda labels, rows_fn, pairs_fn, _: pairs_fn())
  value, (grad,) = value_and_grad(total, scores)
  np.testing.assert_allclose(value_rows, value, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(grad_rows, grad, rtol=1e-5, atol=1e-5)


@pytest.fixture
def blocks_of_five(monkeypatch):
  """Blocks of 5 relevant rows under XLA (C = 12: up to 3 blocks, the last past C when every
  item is relevant); the list records each call of the blocked loop."""
  monkeypatch.setattr(base, "ROWS_PER_BLOCK", 5)
  calls, blocked = [], base.blocks_of_relevant_rows
  spy = lambda *a: calls.append(a) or blocked(*a)  # noqa: E731
  monkeypatch.setattr(base, "blocks_of_relevant_rows", spy)
  monkeypatch.setattr(approx, "blocks_of_relevant_rows", spy)
  monkeypatch.setattr(pairwise, "blocks_of_relevant_rows", spy)
  return calls


def _slow(*args):
  return pytest.param(*args, marks=pytest.mark.slow)


# Fast: one key of each family through several blocks; slow: the other keys (the loop is the same
# whatever the row's loss), a lambda weight (a sort in each block), r = 0 in every list.
@needs_xla
@pytest.mark.parametrize(
  ("key", "weight", "case"),
  [
    ("pairwise_logistic_loss", None, "mixed"),
    ("approx_ndcg_loss", None, "mixed"),
    *[_slow(key, None, "mixed") for key in ("pairwise_hinge_loss", "pairwise_soft_zero_one_loss")],
    _slow("approx_mrr_loss", None, "mixed"),
    _slow("pairwise_logistic_loss", "ndcg", "mixed"),
    ("pairwise_mse_loss", "ndcg", "mixed"),
    _slow("pairwise_logistic_loss", None, "none"),
  ],
)
def test_xla_blocks_of_relevant_rows_equal_every_pair(blocks_of_five, key, weight, case):
  """Under XLA the loop over blocks of relevant rows (its gradient written by hand) against the
  brute force over every pair, at r = 0, 1, some and C in one batch (``"mixed"``: 3 blocks), and
  r = 0 in every list (``"none"``: the cap r <= 1 before the loop)."""
  if key.startswith("approx"):
    _check_approx(key, case, [XLA])
  else:
    labels, scores = _labels(case), _scores()
    item_weights = np.random.default_rng(4).uniform(0.5, 2.0, size=labels.shape)
    want, want_grad = _pairwise_reference(key, weight, labels, scores, item_weights)
    kwargs = {} if weight is None else {"lambda_weight": WEIGHTS[weight][0]}
    with float64():
      _check(
        tf_ranking.RankingLoss(key, **kwargs), labels, scores, item_weights, want, want_grad, [XLA]
      )
  assert blocks_of_five or case == "none"  # r = 0 in every list: the cap r <= 1, no loop


@needs_xla
@pytest.mark.parametrize("key", [_slow("pairwise_logistic_loss"), "approx_ndcg_loss"])
def test_xla_float32_blocks_equal_every_pair(blocks_of_five, key):
  """In float32, the blocks of relevant rows under XLA against every pair ``[B, C, C]`` (eagerly:
  a list of C relevant items takes every pair): values and gradients at 1e-5."""
  labels, scores = _labels("mixed").astype("float32"), _scores().astype("float32") * 0.5
  loss = tf_ranking.RankingLoss(key)
  relevance = ops.convert_to_tensor(labels)

  def value_and_gradient(mode):
    fn = compiled(lambda s: loss.weighted_values(ops.convert_to_tensor(s), relevance), mode)
    return value_and_grad(lambda s: ops.sum(fn(s)), scores)

  value_blocks, (grad_blocks,) = value_and_gradient(XLA)
  calls = len(blocks_of_five)
  value, (grad,) = value_and_gradient("eager")
  assert calls and len(blocks_of_five) == calls  # the loop under XLA; eagerly every pair
  np.testing.assert_allclose(value_blocks, value, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(grad_blocks, grad, rtol=1e-5, atol=1e-5)


@pytest.mark.tensorflow_only
@pytest.mark.parametrize(
  ("key", "weight"),
  [("pairwise_logistic_loss", None), ("approx_ndcg_loss", None), ("pairwise_mse_loss", "ndcg")],
)
def test_a_tape_inside_the_traced_step_differentiates_the_branches(key, weight):
  """As Keras's ``fit`` does, the gradient taken inside ``tf.function`` (with and without XLA),
  against the eager one: TensorFlow differentiates each ``cond`` there, and a nested ``cond``
  around the loop's hand-written gradient made it fail (an ``AssertionError`` of ``cond_v2``)."""
  import tensorflow as tf  # noqa: PLC0415

  labels = tf.constant(_labels("mixed"), "float32")
  scores = tf.constant(_scores(), "float32")
  loss = tf_ranking.RankingLoss(
    key, **({} if weight is None else {"lambda_weight": WEIGHTS[weight][0]})
  )

  def step(s, y):  # the labels an input: their counts are known when the step runs
    with tf.GradientTape() as tape:
      tape.watch(s)
      value = ops.sum(loss.weighted_values(s, y))
    return value, tape.gradient(value, s)

  want, want_grad = step(scores, labels)
  for jit_compile in (False, True):
    value, grad = tf.function(step, jit_compile=jit_compile)(scores, labels)
    np.testing.assert_allclose(numpy(value), numpy(want), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(numpy(grad), numpy(want_grad), rtol=1e-5, atol=1e-5)
