"""The top-k cross-entropy: difftopk fixtures, hand cases, labels, padding, m, Keras, modes, on
every backend (strategies: TensorFlow only)."""

import backend_testing as bt
import numpy as np
import pytest
from _topk_reference import case_id, cases, finite_difference, value_and_grad
from scipy import special

from tfrank4class import backend, losses
from tfrank4class.compat import keras, ops
from tfrank4class.losses.topk.cross_entropy import TopKCrossEntropyLoss, topk_cross_entropy

CASES = cases("loss")
EPS = 1e-7  # the constant of the authors' log
#: float64 inputs stay float64 on every backend (JAX: ``jax_enable_x64``, on for each test): the
#: fixtures, the hand case and the finite differences are compared at float64 resolution.
pytestmark = pytest.mark.usefixtures("float64_inputs")
TOL, RTOL = 1e-10, 1e-12
FD_EPS, FD_TOL = 1e-6, 1e-6


def _loss(config, x, labels):
  return topk_cross_entropy(
    x,
    labels,
    p_k=config["p_k"],
    method=config["method"],
    distribution=config["distribution"] or "cauchy",
    inverse_temperature=config["inverse_temperature"],
    art_lambda=config["art_lambda"],
    m=config["m"],
    top1_mode=config["top1_mode"],
  )


@pytest.mark.parametrize("config,arrays", CASES, ids=[case_id(c) for c, _ in CASES])
def test_matches_difftopk(config, arrays):
  """difftopk's TopKCrossEntropyLoss is the batch mean of our per-example values."""
  (loss,), grad = value_and_grad(
    lambda x: backend.mean(_loss(config, x, arrays["labels"])), arrays["x"], [1.0]
  )
  np.testing.assert_allclose(loss, arrays["out0"], atol=TOL)
  np.testing.assert_allclose(grad, arrays["grad"], atol=TOL)


def _nll(q):
  return -np.log(q * (1 - 2 * EPS) + EPS)


def test_two_classes_hand_computed():
  """n = 2, P_K = [p, 1 - p], "sort": class 0 is in the top-1 with weight 1 - alpha,
  alpha = sigmoid(beta (s_1 - s_0)) (the one comparator), and always in the top-2."""
  s, beta, p = np.array([[0.3, 0.8]]), 2.0, 0.6
  alpha = special.expit(beta * (s[0, 1] - s[0, 0]))
  expected = _nll(p * (1 - alpha) + (1 - p) * 1.0)
  got = topk_cross_entropy(
    s,
    [0],
    p_k=[p, 1 - p],
    method="odd_even",
    distribution="logistic",
    inverse_temperature=beta,
    top1_mode="sort",
  )
  np.testing.assert_allclose(bt.numpy(got), [expected], rtol=RTOL)


@pytest.mark.parametrize("method", ["bitonic", "neuralsort"])
def test_top1_softmax_modes_reduce_to_cross_entropy(method):
  """P_K = [1]: "sm" is the softmax cross-entropy through the authors' log, "smce" exactly it."""
  s = np.random.default_rng(0).normal(size=(3, 6))
  y = np.array([0, 4, 5])
  log_softmax = s - special.logsumexp(s, axis=-1, keepdims=True)
  sm = bt.numpy(topk_cross_entropy(s, y, p_k=[1.0], method=method, top1_mode="sm"))
  smce = bt.numpy(topk_cross_entropy(s, y, p_k=[1.0], method=method, top1_mode="smce"))
  np.testing.assert_allclose(sm, _nll(np.exp(log_softmax[np.arange(3), y])), rtol=1e-12)
  np.testing.assert_allclose(smce, -log_softmax[np.arange(3), y], rtol=1e-12)


def test_label_formats_agree():
  s = np.random.default_rng(1).normal(size=(4, 7)).astype(np.float32)
  y = np.array([1, 0, 6, 3])
  ids = bt.numpy(topk_cross_entropy(s, y, p_k=[0.5, 0.5]))
  for labels in (y[:, None], np.eye(7)[y], np.eye(7)[y] * 3.0):
    np.testing.assert_allclose(bt.numpy(topk_cross_entropy(s, labels, p_k=[0.5, 0.5])), ids)


def test_multi_hot_labels_average_the_relevant_classes():
  s = np.random.default_rng(2).normal(size=(1, 6))
  per_class = [bt.numpy(topk_cross_entropy(s, [c], p_k=[0.5, 0.5]))[0] for c in (1, 4)]
  got = bt.numpy(topk_cross_entropy(s, [[0, 1, 0, 0, 1, 0]], p_k=[0.5, 0.5]))
  np.testing.assert_allclose(got, [np.mean(per_class)], rtol=1e-12)
  assert bt.numpy(topk_cross_entropy(s, [[0, 0, 0, 0, 0, -1]], p_k=[0.5, 0.5]))[0] == 0.0


def test_padded_classes_take_no_part():
  s = np.random.default_rng(3).normal(size=(2, 6))
  labels = np.array([[0, 1, 0, -1, 0, -1], [1, 0, -1, 0, 0, 0]], np.float64)
  kwargs = dict(p_k=[0.5, 0.0, 0.5], method="neuralsort", inverse_temperature=50.0)
  (loss,), grad = value_and_grad(lambda v: topk_cross_entropy(v, labels, **kwargs), s, [1.0])
  assert np.all(grad[labels < 0] == 0.0)
  moved = np.where(labels < 0, 100.0, s)  # the scores of padded classes do not matter
  np.testing.assert_allclose(
    bt.numpy(topk_cross_entropy(moved, labels, **kwargs)), loss, rtol=1e-12
  )
  # With a sharp relaxation the loss is that of the valid classes alone.
  for b in range(2):
    keep = labels[b] >= 0
    alone = topk_cross_entropy(s[b : b + 1, keep], labels[b : b + 1, keep], **kwargs)
    np.testing.assert_allclose(bt.numpy(alone), loss[b : b + 1], rtol=1e-6)


def test_padding_in_the_softmax_top1_term_is_exact():
  s = np.random.default_rng(4).normal(size=(1, 5))
  got = topk_cross_entropy(s, [[0, 0, 1, -1, 0]], p_k=[1.0], top1_mode="smce")
  keep = [0, 1, 2, 4]
  expected = -(s[0, 2] - special.logsumexp(s[0, keep]))
  np.testing.assert_allclose(bt.numpy(got), [expected], rtol=1e-12)


@pytest.mark.parametrize("method", ["bitonic", "splitter_selection", "softsort"])
def test_top_m_ranks_the_true_class_and_the_best_others(method):
  """With m, the loss is the loss of [true score, m - 1 highest other scores] with label 0."""
  rng = np.random.default_rng(5)
  s, y, m = rng.normal(size=(3, 20)), np.array([3, 0, 19]), 6
  kwargs = dict(p_k=[0.5, 0.0, 0.5], method=method, top1_mode="sm")
  selected = []
  for b in range(3):
    others = np.delete(s[b], y[b])
    selected.append(np.concatenate([[s[b, y[b]]], np.sort(others)[::-1][: m - 1]]))
  expected = bt.numpy(topk_cross_entropy(np.array(selected), np.zeros(3, int), **kwargs))
  np.testing.assert_allclose(
    bt.numpy(topk_cross_entropy(s, y, m=m, **kwargs)), expected, rtol=1e-12
  )
  np.testing.assert_allclose(
    bt.numpy(topk_cross_entropy(s, np.eye(20)[y], m=m, **kwargs)), expected
  )
  with pytest.raises(ValueError, match="one positive entry per row"):
    topk_cross_entropy(s, np.ones((3, 20)), m=m, **kwargs)


@pytest.mark.parametrize("method", ["bitonic", "neuralsort"])
def test_top_m_of_class_ids_matches_one_hot_rows_with_ties(method):
  """With m, class ids take a path of their own (no [B, n] target or mask): the same values
  and gradients as their one-hot rows, with tied scores at the cut."""
  s = np.round(np.random.default_rng(9).normal(size=(4, 12)), 1)
  s[:, 5:9] = 0.5  # ties among the best others
  y, kwargs = np.array([2, 6, 0, 11]), dict(p_k=[0.5, 0.0, 0.5], method=method, m=5)
  (ids,), ids_grad = value_and_grad(lambda v: topk_cross_entropy(v, y, **kwargs), s, [1.0])
  (rows,), rows_grad = value_and_grad(
    lambda v: topk_cross_entropy(v, np.eye(12)[y], **kwargs), s, [1.0]
  )
  np.testing.assert_allclose(ids, rows, rtol=1e-12)
  np.testing.assert_allclose(ids_grad, rows_grad, atol=1e-12)
  assert np.all(np.count_nonzero(ids_grad, axis=-1) <= 5)


@pytest.mark.parametrize("method", ["odd_even", "splitter_selection", "softsort"])
def test_gradient_matches_finite_differences(method):
  s = np.random.default_rng(6).normal(size=(2, 5))
  kwargs = dict(p_k=[0.3, 0.3, 0.4], method=method, top1_mode="sort")
  _, grad = value_and_grad(lambda v: topk_cross_entropy(v, [1, 3], **kwargs), s, [np.ones(2)])
  numeric = finite_difference(
    lambda v: bt.numpy(topk_cross_entropy(v, [1, 3], **kwargs)), s, [1.0], FD_EPS
  )
  np.testing.assert_allclose(grad, numeric, atol=FD_TOL)


@pytest.mark.parametrize("mode", [m for m in bt.compile_modes() if m != "eager"])
def test_modes_agree(mode):
  s = np.random.default_rng(7).normal(size=(4, 12)).astype(np.float32)
  y = np.array([0, 5, 11, 2])
  loss = TopKCrossEntropyLoss(p_k=[0.5, 0.25, 0.25], m=8, reduction="none")
  np.testing.assert_allclose(
    bt.numpy(bt.compiled(lambda v: loss(y, v), mode)(s)), bt.numpy(loss(y, s)), rtol=1e-5
  )


def _model(n=8):
  inputs = keras.Input([4])
  return keras.Model(inputs, keras.layers.Dense(n)(inputs))


def test_compile_fit_save_load(tmp_path):
  x = np.random.default_rng(8).normal(size=(16, 4)).astype(np.float32)
  y = np.random.default_rng(9).integers(0, 8, size=(16,))
  model = _model()
  loss = losses.get("topk_cross_entropy_loss", p_k=[0.5, 0.0, 0.5], method="odd_even", m=5)
  model.compile("adam", loss=loss)
  history = model.fit(x, y, batch_size=8, epochs=1, verbose=0)
  assert np.isfinite(history.history["loss"]).all()
  path = str(tmp_path / "m.keras")
  model.save(path)
  loaded = keras.models.load_model(path)
  assert isinstance(loaded.loss, TopKCrossEntropyLoss)
  assert loaded.loss.get_config() == model.loss.get_config()
  np.testing.assert_allclose(
    loaded.evaluate(x, y, verbose=0), model.evaluate(x, y, verbose=0), rtol=1e-5
  )


@pytest.mark.tensorflow_only
def test_fit_under_mirrored_strategy(mirrored_strategy):
  x = np.random.default_rng(10).normal(size=(16, 4)).astype(np.float32)
  y = np.random.default_rng(11).integers(0, 8, size=(16,))
  with mirrored_strategy.scope():
    model = _model()
    model.compile("adam", loss=TopKCrossEntropyLoss(p_k=[0.5, 0.5], method="softsort"))
  history = model.fit(x, y, batch_size=8, epochs=1, verbose=0)
  assert np.isfinite(history.history["loss"]).all()


def test_float32_sort_mode_accuracy_against_float64():
  """The Gaussian relaxation in "sort" mode, float32 against float64 (which matches difftopk's
  float64 to 1e-10): comparators near certainty must not cancel (the relaxed minimum written
  ``second + alpha (first - second)`` gave a mean error of 1.3e-3 here, max 4.5e-2)."""
  rng = np.random.default_rng(13)
  s = (rng.normal(size=(64, 100)) * 3).astype(np.float32)
  y = rng.integers(0, 100, 64)
  kwargs = dict(method="bitonic", distribution="gaussian", top1_mode="sort")
  single = bt.numpy(topk_cross_entropy(s, y, **kwargs))
  double = bt.numpy(topk_cross_entropy(s.astype(np.float64), y, **kwargs))
  error = np.abs(single - double)
  assert error.mean() < 1e-4 and error.max() < 5e-3, (error.mean(), error.max())


def test_half_precision_scores_give_the_float32_value():
  s = np.random.default_rng(12).normal(size=(3, 6))
  half = ops.convert_to_tensor(s, "float16")
  got = topk_cross_entropy(half, [0, 1, 2], p_k=[0.5, 0.5])
  assert backend.dtype_name(got) == "float32"
  expected = topk_cross_entropy(s.astype(np.float16).astype(np.float32), [0, 1, 2], p_k=[0.5, 0.5])
  np.testing.assert_allclose(bt.numpy(got), bt.numpy(expected))


def test_bad_arguments():
  s = np.zeros((2, 6), np.float32)
  with pytest.raises(ValueError, match="`p_k` must be .* summing to 1 .* sums to 0.9"):
    TopKCrossEntropyLoss(p_k=[0.5, 0.4])
  with pytest.raises(ValueError, match="`p_k` must be a non-empty list"):
    TopKCrossEntropyLoss(p_k=[])
  with pytest.raises(ValueError, match="`p_k\\[1\\]` must be a finite number >= 0.0, got -0.5"):
    TopKCrossEntropyLoss(p_k=[1.5, -0.5])
  with pytest.raises(ValueError, match="`method` must be one of .*got 'sinkhorn'"):
    TopKCrossEntropyLoss(method="sinkhorn")
  with pytest.raises(ValueError, match="`distribution` must be one of .*got 'normal'"):
    TopKCrossEntropyLoss(distribution="normal")
  with pytest.raises(ValueError, match="`inverse_temperature` must be a finite number > 0.0"):
    TopKCrossEntropyLoss(inverse_temperature=0.0)
  with pytest.raises(ValueError, match="`art_lambda` must be a finite number >= 0.0"):
    TopKCrossEntropyLoss(art_lambda=-0.1)
  with pytest.raises(
    ValueError,
    match="`m` must be greater than K = len\\(p_k\\) = 5, got m=5 .*set m, e.g. 16, beyond a few",
  ):
    TopKCrossEntropyLoss(m=5)
  with pytest.raises(ValueError, match="`top1_mode` must be one of .*got 'uniform_sm'"):
    TopKCrossEntropyLoss(top1_mode="uniform_sm")
  with pytest.raises(
    ValueError,
    match="`m` must be smaller than the number of classes n=6.*leave m=None to rank all n",
  ):
    topk_cross_entropy(s, [0, 1], p_k=[0.5, 0.5], m=6)
  with pytest.raises(ValueError, match="`p_k` has K=5 entries, more than the n=4 classes"):
    topk_cross_entropy(s[:, :4], [0, 1])
  with pytest.raises(ValueError, match="class ids in \\[0, num_classes=6\\)"):
    topk_cross_entropy(s, [0, 6])
  with pytest.raises(ValueError, match="same batch size"):
    topk_cross_entropy(s, [0, 1, 2])
