"""Tests of the contrastive and triplet losses and the smoothed cross-entropy against
loop-by-loop numpy references, on every backend (strategies and the assertions inside
tf.function: TensorFlow only)."""

import backend_testing as bt
import numpy as np
import pytest

import tfrank4class.losses as losses
from tfrank4class import backend
from tfrank4class.compat import keras, ops
from tfrank4class.losses.metric_learning import (
  ContrastiveLoss,
  EmbeddingLoss,
  SmoothedCrossEntropy,
  TripletLoss,
  pairwise_distances,
  smoothed_cross_entropy,
)


def _dist(e, normalize=True):
  e = np.asarray(e, np.float64)
  if normalize:
    e = e / np.linalg.norm(e, axis=1, keepdims=True)
  b = len(e)
  return np.array(
    [[np.sqrt(max(((e[i] - e[j]) ** 2).sum(), 1e-12)) for j in range(b)] for i in range(b)]
  )


def _ref_contrastive(y, e, m, mining, normalize=True):
  d = _dist(e, normalize)
  out = []
  for i in range(len(y)):
    p = [j for j in range(len(y)) if j != i and y[j] == y[i]]
    n = [j for j in range(len(y)) if y[j] != y[i]]
    if mining == "all":
      pos = np.mean([d[i, j] ** 2 / 2 for j in p]) if p else 0.0
      act = [j for j in n if d[i, j] < m]
      neg = np.mean([(m - d[i, j]) ** 2 / 2 for j in act]) if act else 0.0
    else:
      pos = max(d[i, j] for j in p) ** 2 / 2 if p else 0.0
      neg = max(m - min(d[i, j] for j in n), 0) ** 2 / 2 if n else 0.0
    out.append(pos + neg)
  return np.array(out)


def _ref_triplet(y, e, m, mining, normalize=True):
  d = _dist(e, normalize)
  out = []
  for i in range(len(y)):
    p = [j for j in range(len(y)) if j != i and y[j] == y[i]]
    n = [j for j in range(len(y)) if y[j] != y[i]]
    if not p or not n:
      out.append(0.0)
      continue
    if mining == "batch_hard":
      out.append(max(m + max(d[i, p]) - min(d[i, n]), 0.0))
    elif mining == "batch_all":
      h = [max(m + d[i, a] - d[i, c], 0.0) for a in p for c in n]
      nz = [v for v in h if v > 0]
      out.append(sum(nz) / len(nz) if nz else 0.0)
    else:
      vals = []
      for a in p:
        farther = [d[i, c] for c in n if d[i, c] > d[i, a]]
        dn = min(farther) if farther else max(d[i, n])
        vals.append(max(m + d[i, a] - dn, 0.0))
      out.append(np.mean(vals))
  return np.array(out)


def _batch(seed, b=12, dim=5, classes=4):
  rng = np.random.default_rng(seed)
  y = rng.integers(0, classes, size=b)
  return y, rng.normal(size=(b, dim)).astype(np.float32)


NONE = "none"


@pytest.mark.parametrize("mining", ["all", "hard"])
@pytest.mark.parametrize("seed", [0, 1])
def test_contrastive_matches_reference(mining, seed):
  y, e = _batch(seed)
  got = bt.numpy(ContrastiveLoss(margin=1.2, mining=mining, reduction=NONE)(y, e))
  np.testing.assert_allclose(got, _ref_contrastive(y, e, 1.2, mining), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mining", ["batch_hard", "batch_all", "semi_hard"])
@pytest.mark.parametrize("seed", [0, 1])
def test_triplet_matches_reference(mining, seed):
  y, e = _batch(seed)
  got = bt.numpy(TripletLoss(margin=0.3, mining=mining, reduction=NONE)(y, e))
  np.testing.assert_allclose(got, _ref_triplet(y, e, 0.3, mining), rtol=1e-5, atol=1e-6)


def test_unnormalized_and_default_reduction():
  y, e = _batch(2)
  got = bt.numpy(TripletLoss(margin=1.0, normalize=False)(y[:, None], e))
  assert float(got) == pytest.approx(_ref_triplet(y, e, 1.0, "batch_hard", False).mean(), rel=1e-5)
  got = bt.numpy(ContrastiveLoss(margin=2.0, normalize=False)(y, e))
  assert float(got) == pytest.approx(_ref_contrastive(y, e, 2.0, "all", False).mean(), rel=1e-5)


def test_hand_computed_triplet():
  # Unit vectors at angles 0, 90 (class 0) and 60 degrees (class 1): anchor 0 has d_ap = sqrt(2),
  # d_an = 1, so the batch-hard hinge is 0.1 + sqrt(2) - 1.
  e = [[1.0, 0.0], [0.0, 1.0], [0.5, np.sqrt(3) / 2]]
  got = bt.numpy(TripletLoss(margin=0.1, reduction=NONE)([0, 0, 1], e))
  assert got[0] == pytest.approx(0.1 + np.sqrt(2) - 1, abs=1e-6)
  assert got[2] == 0.0  # no positive for item 2


def test_pairwise_distances():
  d = bt.numpy(pairwise_distances(np.array([[3.0, 4.0], [0.0, 2.0]], np.float32), normalize=False))
  assert float(d[0, 1]) == pytest.approx(np.sqrt(9 + 4))


def test_gradients_finite_with_duplicates():
  e = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 1.0]], np.float32)
  for loss in (ContrastiveLoss(), TripletLoss(mining="batch_all"), TripletLoss(mining="semi_hard")):
    _, (g,) = bt.value_and_grad(lambda v, loss=loss: loss(np.array([0, 0, 1, 1]), v), e)
    assert np.all(np.isfinite(g)), loss.name


@pytest.mark.parametrize("mode", [m for m in bt.compile_modes() if m != "eager"])
def test_compiled_modes_agree_with_eager(mode):
  y, e = _batch(3)
  for loss in (
    ContrastiveLoss(mining="hard"),
    TripletLoss(mining="semi_hard"),
    TripletLoss(mining="batch_all"),
  ):
    eager = float(bt.numpy(loss(y, e)))
    got = float(bt.numpy(bt.compiled(lambda v, loss=loss: loss(y, v), mode)(e)))
    assert got == pytest.approx(eager, rel=1e-5)


@pytest.mark.tensorflow_only
def test_mirrored_strategy_mines_per_replica(mirrored_strategy):
  rng = np.random.default_rng(4)
  y = np.array([0, 0, 1, 1, 2, 2, 3, 3])
  x = rng.normal(size=(8, 3)).astype(np.float32)
  with mirrored_strategy.scope():
    inputs = keras.Input((3,))
    model = keras.Model(inputs, keras.layers.Dense(3, kernel_initializer="identity")(inputs))
    model.compile(loss=TripletLoss(margin=0.5), optimizer="sgd")
  got = model.evaluate(x, y, batch_size=8, verbose=0)
  want = np.concatenate(
    [_ref_triplet(y[:4], x[:4], 0.5, "batch_hard"), _ref_triplet(y[4:], x[4:], 0.5, "batch_hard")]
  ).mean()
  assert got == pytest.approx(want, rel=1e-5)
  model.fit(x, y, batch_size=8, epochs=1, verbose=0)


def test_registry_config_and_keras_save(tmp_path):
  loss = losses.get("triplet_loss", margin=0.4, mining="semi_hard")
  assert isinstance(loss, TripletLoss)
  clone = TripletLoss.from_config(loss.get_config())
  assert (clone.margin, clone.mining, clone.normalize) == (0.4, "semi_hard", True)
  assert isinstance(losses.get("contrastive_loss"), ContrastiveLoss)
  inputs = keras.Input((3,))
  model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
  model.compile(loss=ContrastiveLoss(margin=0.7, mining="hard"), optimizer="sgd")
  model.save(tmp_path / "m.keras")
  loaded = keras.models.load_model(tmp_path / "m.keras")
  assert loaded.loss.get_config()["margin"] == 0.7 and loaded.loss.mining == "hard"
  y, x = _batch(5, b=6, dim=3)
  assert loaded.evaluate(x, y, verbose=0) == pytest.approx(
    model.evaluate(x, y, verbose=0), rel=1e-6
  )


@keras.utils.register_keras_serializable("tfrank4class_tests")
class _PullPush(EmbeddingLoss):
  """A user's embedding loss: ``mean_P d^2 + mean_N [m - d]_+`` per anchor."""

  def __init__(self, margin=1.0, **kwargs):
    super().__init__(**kwargs)
    self.margin = margin

  def anchor_values(self, distances, positives, negatives):
    dtype = backend.dtype_name(distances)
    pos, neg = ops.cast(positives, dtype), ops.cast(negatives, dtype)
    pull = backend.divide_no_nan(ops.sum(pos * distances**2, 1), ops.sum(pos, 1))
    push = ops.relu(self.margin - distances)
    return pull + backend.divide_no_nan(ops.sum(neg * push, 1), ops.sum(neg, 1))

  def get_config(self):
    return {**super().get_config(), "margin": self.margin}


def _ref_pull_push(y, e, m, normalize):
  d = _dist(e, normalize)
  out = []
  for i in range(len(y)):
    p = [d[i, j] ** 2 for j in range(len(y)) if j != i and y[j] == y[i]]
    n = [max(m - d[i, j], 0.0) for j in range(len(y)) if y[j] != y[i]]
    out.append((np.mean(p) if p else 0.0) + (np.mean(n) if n else 0.0))
  return np.array(out)


@pytest.mark.parametrize("normalize", [True, False])
def test_user_embedding_loss_matches_its_formula_eagerly_and_in_a_function(normalize):
  y, x = _batch(7, b=8, dim=3)
  loss = _PullPush(margin=0.8, normalize=normalize, reduction="none")
  want = _ref_pull_push(y, x, 0.8, normalize)
  for mode in bt.compile_modes():
    got = bt.numpy(bt.compiled(lambda v: loss(y, v), mode)(x))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=mode)
  weights = np.linspace(0.0, 2.0, 8).astype(np.float32)
  summed = bt.numpy(_PullPush(margin=0.8, normalize=normalize, reduction="sum")(y, x, weights))
  np.testing.assert_allclose(float(summed), np.sum(weights * want), rtol=1e-5)


def test_user_embedding_loss_trains_saves_and_loads(tmp_path):
  y, x = _batch(3, b=16, dim=4)
  inputs = keras.Input((4,))
  model = keras.Model(inputs, keras.layers.Dense(3)(inputs))
  model.compile(loss=_PullPush(margin=0.6), optimizer="sgd")
  before = model.get_weights()[0].copy()
  history = model.fit(x, y, batch_size=16, epochs=3, verbose=0).history["loss"]
  assert np.all(np.isfinite(history)) and not np.allclose(model.get_weights()[0], before)
  model.save(tmp_path / "user.keras")
  loaded = keras.models.load_model(tmp_path / "user.keras")
  assert isinstance(loaded.loss, _PullPush) and loaded.loss.margin == 0.6
  embeddings = model.predict(x, verbose=0)
  want = _ref_pull_push(y, embeddings, 0.6, True).mean()
  assert loaded.evaluate(x, y, batch_size=16, verbose=0) == pytest.approx(want, rel=1e-5)


def test_embedding_loss_without_anchor_values_says_what_to_implement():
  with pytest.raises(NotImplementedError, match=r"must implement anchor_values\(distances, "):
    EmbeddingLoss()([0, 0, 1], np.eye(3, dtype=np.float32))


def test_bad_input():
  with pytest.raises(ValueError, match=r"`margin` must be a finite number >= 0.0, got -1"):
    TripletLoss(margin=-1)
  with pytest.raises(
    ValueError,
    match=r"`mining` must be one of \['batch_all', 'batch_hard', "
    r"'semi_hard'\], got 'hard'",
  ):
    TripletLoss(mining="hard")
  with pytest.raises(
    ValueError,
    match=r"`y_true` and `y_pred` must have the same batch size, "
    r"got 3 labels for 4",
  ):
    TripletLoss()([0, 1, 1], np.ones((4, 2), np.float32))
  with pytest.raises(
    ValueError,
    match=r"`y_true` must be class ids of shape \[B\] or \[B, 1\], "
    r"got shape \(4, 4\)\. The embedding losses take class ids, "
    r"not dense relevance",
  ):
    ContrastiveLoss()(np.eye(4), np.ones((4, 2), np.float32))
  with pytest.raises(ValueError, match=r"`y_pred` must be finite"):
    ContrastiveLoss()([0, 0, 1, 1], np.array([[1.0, np.nan]] * 4, np.float32))


@pytest.mark.parametrize("loss", [ContrastiveLoss, TripletLoss])
@pytest.mark.parametrize("normalize", ["False", 0, 1.0, None])
def test_normalize_must_be_a_bool(loss, normalize):
  # bool("False") is True: a string or a number is refused, not read as a truth value.
  with pytest.raises(ValueError, match=r"`normalize` must be True or False, got "):
    loss(normalize=normalize)
  assert loss(normalize=np.bool_(False)).normalize is False


@pytest.mark.parametrize("loss", [ContrastiveLoss(), TripletLoss()], ids=["contrastive", "triplet"])
def test_identity_ids_must_be_whole_and_non_negative(loss):
  """Ids 0.5 or -1 were rounded or taken as a class: now an error naming y_true and the value
  (eagerly)."""
  e = np.eye(4, dtype=np.float32)
  with pytest.raises(ValueError, match=r"`y_true` given as class ids must be whole numbers.*0\.5"):
    loss(np.array([0.0, 0.5, 1.0, 1.0], np.float32), e)
  with pytest.raises(ValueError, match=r"`y_true` must be class ids >= 0.*-1"):
    loss(np.array([0, -1, 1, 1]), e)
  # Whole-valued float ids are accepted: the same value as integer ids.
  whole = bt.numpy(loss(np.array([0.0, 0.0, 1.0, 1.0], np.float32), e))
  assert float(whole) == float(bt.numpy(loss(np.array([0, 0, 1, 1]), e)))


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("loss", [ContrastiveLoss(), TripletLoss()], ids=["contrastive", "triplet"])
def test_identity_ids_fail_the_assertion_inside_tf_function(loss):
  import tensorflow as tf  # noqa: PLC0415

  e = np.eye(4, dtype=np.float32)
  graph = tf.function(loss.__call__)
  with pytest.raises(tf.errors.InvalidArgumentError, match=r"must be whole numbers"):
    graph(np.array([0.0, 0.5, 1.0, 1.0], np.float32), e)
  with pytest.raises(tf.errors.InvalidArgumentError, match=r"must be class ids >= 0"):
    graph(np.array([0, -1, 1, 1]), e)


# ---------------------------------------------------------------- smoothed cross-entropy
def _ref_smoothed_ce(y, logits, eps, spread="other_classes"):
  """Boudiaf et al.'s target (1 - eps on y, eps / (C - 1) elsewhere) or Szegedy's (eps / C)."""
  logits = np.asarray(logits, np.float64)
  c = logits.shape[1]
  out = []
  for i, label in enumerate(y):
    z = logits[i] - logits[i].max()
    logp = z - np.log(np.exp(z).sum())
    if spread == "other_classes":
      q = np.full(c, eps / (c - 1))
      q[label] = 1 - eps
    else:
      q = np.full(c, eps / c)
      q[label] += 1 - eps
    out.append(-(q * logp).sum())
  return np.array(out)


def test_smoothed_cross_entropy_matches_reference_and_keras():
  rng = np.random.default_rng(11)
  logits = rng.normal(size=(6, 5)).astype(np.float32) * 3
  y = rng.integers(0, 5, size=6)
  got = bt.numpy(SmoothedCrossEntropy(0.1, reduction=NONE)(y, logits))
  np.testing.assert_allclose(got, _ref_smoothed_ce(y, logits, 0.1), rtol=1e-5)
  uniform = bt.numpy(SmoothedCrossEntropy(0.1, spread="all_classes", reduction=NONE)(y, logits))
  np.testing.assert_allclose(uniform, _ref_smoothed_ce(y, logits, 0.1, "all_classes"), rtol=1e-5)
  keras_loss = keras.losses.CategoricalCrossentropy(from_logits=True, label_smoothing=0.1)
  ours = bt.numpy(SmoothedCrossEntropy(0.1, spread="all_classes")(y, logits))
  assert float(ours) == pytest.approx(float(bt.numpy(keras_loss(np.eye(5)[y], logits))), rel=1e-5)
  for mode in bt.compile_modes():
    compiled = bt.compiled(lambda v: SmoothedCrossEntropy(0.2)(y, v), mode)
    assert float(bt.numpy(compiled(logits))) == pytest.approx(
      _ref_smoothed_ce(y, logits, 0.2).mean(), rel=1e-5
    ), mode
  assert isinstance(losses.get("smoothed_cross_entropy"), SmoothedCrossEntropy)
  restored = SmoothedCrossEntropy.from_config(SmoothedCrossEntropy(0.3, "all_classes").get_config())
  assert (restored.label_smoothing, restored.spread) == (0.3, "all_classes")
  with pytest.raises(
    ValueError, match=r"`label_smoothing` must be a finite number in \[0, 1\), got 1.0"
  ):
    SmoothedCrossEntropy(1.0)
  with pytest.raises(
    ValueError,
    match=r"`spread` must be one of \['all_classes', "
    r"'other_classes'\], got 'k'",
  ):
    SmoothedCrossEntropy(spread="k")


@pytest.mark.parametrize("spread", SmoothedCrossEntropy.SPREADS)
def test_smoothed_cross_entropy_of_class_ids_has_the_gradient_softmax_minus_target(spread):
  # The form of class ids (no one-hot rows) against numpy: values and the gradient
  # softmax(z) - q, float32 in every compile mode, float64 eagerly at 1e-10.
  rng = np.random.default_rng(12)
  logits, y = rng.normal(size=(4, 5)) * 3, np.array([0, 4, 2, 2])
  logits[0, 1] = logits[0, 0]  # a tie with the true class
  target = np.full((4, 5), 0.1 / (4 if spread == "other_classes" else 5))
  target[np.arange(4), y] = 0.9 + (0.0 if spread == "other_classes" else 0.1 / 5)
  p = np.exp(logits - logits.max(axis=1, keepdims=True))
  want_grad = p / p.sum(axis=1, keepdims=True) - target
  loss = SmoothedCrossEntropy(0.1, spread, reduction="sum")  # its value in Keras's float32

  def total(s):  # in the scores' dtype
    return ops.sum(smoothed_cross_entropy(s, y, label_smoothing=0.1, spread=spread))

  cases = [("float64", "eager", 1e-10)] + [("float32", m, 1e-5) for m in bt.compile_modes()]
  for dtype, mode, tolerance in cases:
    with bt.float64():
      fn = bt.compiled(total if dtype == "float64" else lambda s: loss(y, s), mode)
      value, (grad,) = bt.value_and_grad(fn, logits.astype(dtype))
    want = _ref_smoothed_ce(y, logits, 0.1, spread).sum()
    np.testing.assert_allclose(value, want, rtol=tolerance, err_msg=mode)
    np.testing.assert_allclose(grad, want_grad, rtol=tolerance, atol=tolerance, err_msg=mode)


def test_smoothed_cross_entropy_matches_boudiaf_kl_up_to_the_target_entropy():
  """Their code returns KL(q || p) = CE - H(q); hand-computed for C = 3, eps = 0.3."""
  logits = np.array([[1.0, 0.0, -1.0]])
  logp = logits[0] - np.log(np.exp(logits[0]).sum())
  q = np.array([0.7, 0.15, 0.15])
  kl = (q * (np.log(q) - logp)).sum()
  got = float(bt.numpy(SmoothedCrossEntropy(0.3)([0], logits.astype(np.float32))))
  assert got == pytest.approx(kl - (q * np.log(q)).sum(), rel=1e-6)


def test_smoothed_cross_entropy_config_saved_before_spread_loads_as_all_classes():
  """A config without `spread` was written when the loss always used eps / C."""
  old = {"reduction": "auto", "name": "smoothed_cross_entropy", "label_smoothing": 0.2}
  loaded = keras.utils.deserialize_keras_object(
    {"class_name": "tfrank4class>SmoothedCrossEntropy", "config": old}
  )
  assert isinstance(loaded, SmoothedCrossEntropy) and loaded.spread == "all_classes"


def test_smoothed_cross_entropy_excludes_padding():
  """A padded list is not scored -1.237 (a negative cross-entropy), as it once was."""
  logits = np.array([[2.0, 0.5, -1.0], [0.1, 0.2, 0.3]], np.float32)
  labels = np.array([[1, 0, 0], [-1, -1, -1]], np.float32)
  got = bt.numpy(SmoothedCrossEntropy(0.1, reduction=NONE)(labels, logits))
  np.testing.assert_allclose(got, [_ref_smoothed_ce([0], logits[:1], 0.1)[0], 0.0], rtol=1e-6)
  # A padded item leaves the softmax and gets no target: the list is the list without it.
  partly = np.array([[1, 0, -1]], np.float32)
  for spread in SmoothedCrossEntropy.SPREADS:
    got = float(bt.numpy(SmoothedCrossEntropy(0.1, spread, reduction=NONE)(partly, logits[:1]))[0])
    assert got == pytest.approx(_ref_smoothed_ce([0], logits[:1, :2], 0.1, spread)[0], rel=1e-6)
    assert got > 0
  # Multi-hot relevance: the target is (1 - eps) * relevance / sum(relevance) plus eps spread.
  multi = np.array([[1, 1, 0]], np.float32)
  logp = logits[0] - np.log(np.exp(logits[0].astype(np.float64)).sum())
  want_other = -(np.array([0.45, 0.45, 0.1]) * logp).sum()
  want_all = -(np.array([0.45 + 0.1 / 3, 0.45 + 0.1 / 3, 0.1 / 3]) * logp).sum()
  other = bt.numpy(SmoothedCrossEntropy(0.1)(multi, logits[:1]))
  assert float(other) == pytest.approx(want_other, rel=1e-6)
  every = bt.numpy(SmoothedCrossEntropy(0.1, "all_classes")(multi, logits[:1]))
  assert float(every) == pytest.approx(want_all, rel=1e-6)


def test_smoothed_cross_entropy_bad_class_ids_raise_eagerly():
  with pytest.raises(ValueError, match=r"`y_true` must be class ids in \[0, num_classes=3\)"):
    SmoothedCrossEntropy()([-1], np.zeros((1, 3), np.float32))


@pytest.mark.parametrize("mode", [m for m in bt.compile_modes() if m in ("xla", "jit")])
def test_smoothed_cross_entropy_bad_class_ids_show_as_nan_in_jit_compiled_training(mode):
  """Under XLA or jax.jit (no assertion can run) the loss of a bad class id is NaN."""
  del mode
  keras.utils.set_random_seed(0)
  model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3)])
  model.compile(optimizer=keras.optimizers.SGD(1.0), loss=SmoothedCrossEntropy(), jit_compile=True)
  loss = model.train_on_batch(np.ones((4, 4), np.float32), np.full(4, -1))
  assert np.isnan(loss)
