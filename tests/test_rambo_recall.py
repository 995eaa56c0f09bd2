"""Tests of tfrank4class.losses.rambo.recall.RecallLoss: values against numpy, gradients against
the numpy Algorithm 1 of ``_rambo_reference``, Keras integration, bad input, and a small
metric-learning model on the real ORL faces whose Recall@1 rises."""

import pathlib

import _rambo_reference as ref
import numpy as np
import pytest
import tensorflow as tf

from tfrank4class import losses
from tfrank4class.losses import RecallLoss


def np_recall(scores, relevance, weighting="log"):
  """Per-list E_{i relevant} phi(r_i), r_i = #irrelevant valid items with a higher score."""
  out = []
  for s, rel in zip(scores, relevance):
    pos = np.flatnonzero(rel > 0)
    r = np.array([np.sum((rel == 0) & (s > s[i])) for i in pos])
    phi = np.log1p(r) if weighting == "log" else np.log1p(np.log1p(r))
    out.append(phi.mean() if pos.size else 0.0)
  return np.array(out)


def np_retrieval_lists(emb, labels, gallery, gallery_labels):
  unit = lambda a: a / np.linalg.norm(a, axis=1, keepdims=True)
  sims = unit(emb) @ unit(gallery).T
  rel = (labels[:, None] == gallery_labels[None]).astype(float)
  rel[np.arange(len(emb)), np.arange(len(emb))] = -1.0
  return sims, rel


def test_hand_case_and_label_formats():
  loss = RecallLoss(reduction="none")
  scores = [[0.9, 0.5, 0.7], [0.3, 0.1, 0.2]]
  dense = [[1.0, 1.0, 0.0], [0.0, 1.0, 0.0]]
  expected = [np.log(2) / 2, np.log(3)]
  np.testing.assert_allclose(loss(dense, scores).numpy(), expected, rtol=1e-6)
  # Integer class ids: one relevant class per row (class 0 at 0.9 -> 0; class 1 at 0.1 -> log 3).
  np.testing.assert_allclose(loss([0, 1], scores).numpy(), [0.0, np.log(3)], rtol=1e-6)
  np.testing.assert_allclose(loss([[0], [1]], scores).numpy(), [0.0, np.log(3)], rtol=1e-6)
  mean = RecallLoss(weighting="loglog")(dense, scores).numpy()
  np.testing.assert_allclose(
    mean, np.mean(np_recall(np.array(scores), np.array(dense), "loglog")), rtol=1e-6
  )


def test_similarity_matrix_input_with_excluded_self():
  """A precomputed queries x gallery matrix, non-square, self entries marked -1."""
  rng = np.random.default_rng(0)
  emb, labels = rng.standard_normal((6, 4)), rng.integers(0, 3, 6)
  gallery = np.concatenate([emb, rng.standard_normal((5, 4))])
  gallery_labels = np.concatenate([labels, rng.integers(0, 3, 5)])
  sims, rel = np_retrieval_lists(emb, labels, gallery, gallery_labels)
  got = RecallLoss(reduction="none")(rel, sims).numpy()
  np.testing.assert_allclose(got, np_recall(sims, rel), rtol=1e-6)


def test_from_embeddings_matches_numpy_and_memory_extends_gallery():
  rng = np.random.default_rng(1)
  loss = RecallLoss(from_embeddings=True, memory=2, reduction="none")
  seen = []
  for step in range(4):
    emb = rng.standard_normal((8, 5)).astype(np.float32)
    labels = rng.integers(0, 3, 8)
    gallery = np.concatenate([emb] + [e for e, _ in seen[::-1][:2]])
    gallery_labels = np.concatenate([labels] + [lab for _, lab in seen[::-1][:2]])
    sims, rel = np_retrieval_lists(emb.astype(np.float64), labels, gallery, gallery_labels)
    assert sims.shape == (8, 8 * (1 + min(step, 2)))
    got = loss(labels, emb).numpy()
    np.testing.assert_allclose(got, np_recall(sims, rel), rtol=1e-5, atol=1e-6)
    seen.append((emb, labels))


@pytest.mark.parametrize("weighting,margin", [("log", 0.0), ("loglog", 0.1)])
def test_from_embeddings_gradient_with_memory_matches_algorithm_1(weighting, margin):
  """dL/dS by Algorithm 1 (rk+ constant) on the lists [batch; memory], then the cosine chain rule
  by hand: S = U V^T with U = E / |E| and V = [U; U_memory] (memory rows are constants)."""
  rng = np.random.default_rng(5)
  loss = RecallLoss(
    from_embeddings=True, memory=1, lambda_=2.0, margin=margin, weighting=weighting, reduction="sum"
  )
  memory = None
  for _ in range(2):
    emb, labels = rng.standard_normal((8, 3)), rng.integers(0, 3, 8)
    e = tf.constant(emb)
    with tf.GradientTape() as tape:
      tape.watch(e)
      value = loss(labels, e)
    gallery, gallery_labels = emb, labels
    if memory is not None:
      gallery = np.concatenate([emb, memory[0]])
      gallery_labels = np.concatenate([labels, memory[1]])
    sims, rel = np_retrieval_lists(emb, labels, gallery, gallery_labels)
    d_sims = ref.list_gradient(sims, rel, 2.0, weighting, margin)
    norm = np.linalg.norm(emb, axis=1, keepdims=True)
    u = emb / norm
    v = gallery / np.linalg.norm(gallery, axis=1, keepdims=True)
    d_u = d_sims @ v + (d_sims.T @ u)[:8]
    expected = (d_u - u * np.sum(u * d_u, axis=1, keepdims=True)) / norm
    np.testing.assert_allclose(tape.gradient(value, e).numpy(), expected, atol=1e-12)
    assert np.count_nonzero(d_sims) > 5
    memory = (emb, labels)


def test_from_embeddings_gradient_improves_recall():
  rng = np.random.default_rng(2)
  emb = tf.Variable(rng.standard_normal((12, 4)).astype(np.float32))
  labels = np.repeat(np.arange(3), 4)
  loss = RecallLoss(from_embeddings=True, lambda_=0.5)
  before = float(loss(labels, emb))
  opt = tf.keras.optimizers.SGD(0.5)
  for _ in range(30):
    with tf.GradientTape() as tape:
      value = loss(labels, emb)
    grad = tape.gradient(value, emb)
    assert np.all(np.isfinite(grad.numpy()))
    opt.apply_gradients([(grad, emb)])
  assert float(loss(labels, emb)) < before


@pytest.mark.parametrize("mode", ["function", "xla"])
def test_compiled_modes(mode):
  rng = np.random.default_rng(3)
  scores = rng.standard_normal((4, 9)).astype(np.float32)
  labels = rng.integers(0, 9, 4)
  loss = RecallLoss(reduction="none", margin=0.1)
  f = tf.function(lambda y, s: loss(y, s), jit_compile=(mode == "xla"))
  np.testing.assert_allclose(f(labels, scores).numpy(), loss(labels, scores).numpy())
  emb_loss = RecallLoss(from_embeddings=True, reduction="none")
  g = tf.function(lambda y, s: emb_loss(y, s), jit_compile=(mode == "xla"))
  np.testing.assert_allclose(
    g(labels % 2, scores).numpy(), emb_loss(labels % 2, scores).numpy(), rtol=1e-6
  )


def test_fit_under_mirrored_strategy_with_memory(mirrored_strategy):
  rng = np.random.default_rng(4)
  x = rng.standard_normal((64, 6)).astype(np.float32)
  y = rng.integers(0, 4, 64)
  with mirrored_strategy.scope():
    model = tf.keras.Sequential([tf.keras.Input([6]), tf.keras.layers.Dense(3)])
    model.compile("adam", loss=RecallLoss(from_embeddings=True, memory=2, margin=0.05))
  history = model.fit(x, y, batch_size=16, epochs=1, verbose=0)
  assert np.all(np.isfinite(history.history["loss"]))


def test_registry_config_and_save(tmp_path):
  loss = losses.get("recall_loss", weighting="loglog", lambda_=2.0, margin=0.1)
  assert isinstance(loss, RecallLoss)
  config = loss.get_config()
  assert (config["weighting"], config["lambda_"], config["margin"], config["memory"]) == (
    "loglog",
    2.0,
    0.1,
    0,
  )
  clone = RecallLoss.from_config(config)
  assert clone.weighting == "loglog" and clone.from_embeddings is False
  emb_loss = RecallLoss(from_embeddings=True, memory=3, similarity="dot")
  assert RecallLoss.from_config(emb_loss.get_config()).memory == 3
  model = tf.keras.Sequential([tf.keras.Input([4]), tf.keras.layers.Dense(5)])
  model.compile("sgd", loss=loss)
  model.save(tmp_path / "m.keras")
  loaded = tf.keras.models.load_model(tmp_path / "m.keras")
  assert isinstance(loaded.loss, RecallLoss) and loaded.loss.weighting == "loglog"
  assert tf.keras.losses.deserialize(tf.keras.losses.serialize(loss)).lambda_ == 2.0


def test_bad_arguments():
  with pytest.raises(ValueError, match=r"`lambda_` must be a finite number > 0\.0, got 0"):
    RecallLoss(lambda_=0)
  with pytest.raises(ValueError, match=r"`lambda_` must be a finite number > 0\.0, got -1"):
    RecallLoss(lambda_=-1.0)
  with pytest.raises(ValueError, match=r"`margin` must be a finite number >= 0\.0, got -0\.5"):
    RecallLoss(margin=-0.5)
  with pytest.raises(ValueError, match=r"`memory` must be an integer >= 0, got -2"):
    RecallLoss(memory=-2, from_embeddings=True)
  with pytest.raises(ValueError, match=r"`memory` must be an integer >= 0, got -2"):
    RecallLoss(memory=-2)
  with pytest.raises(ValueError, match="`memory` must be 0 unless from_embeddings=True"):
    RecallLoss(memory=2)
  with pytest.raises(
    ValueError, match=r"`weighting` must be one of \['log', 'loglog'\], got 'lin'"
  ):
    RecallLoss(weighting="lin")
  with pytest.raises(ValueError, match="`from_embeddings` must be True or False"):
    RecallLoss(from_embeddings="yes")


def test_non_finite_scores_raise():
  with pytest.raises(tf.errors.InvalidArgumentError, match="must be finite"):
    RecallLoss()([0], [[np.nan, 0.1]])


def test_degenerate_inputs_finite():
  # (Single-item lists are covered in test_rambo_base.py: to_relevance needs >= 2 classes.)
  for labels, scores in [([[0.0, 0.0]], [[0.2, 0.1]]), ([1], [[0.5, 0.5, 0.5]])]:
    y = tf.constant(scores)
    with tf.GradientTape() as tape:
      tape.watch(y)
      value = RecallLoss()(labels, y)
    assert np.isfinite(value.numpy()) and np.all(np.isfinite(tape.gradient(value, y).numpy()))
  # Embeddings where no query has another item of its class: loss 0, zero gradient.
  emb = tf.constant([[1.0, 0.0], [0.0, 1.0]])
  with tf.GradientTape() as tape:
    tape.watch(emb)
    value = RecallLoss(from_embeddings=True)([0, 1], emb)
  assert float(value) == 0.0 and np.all(tape.gradient(value, emb).numpy() == 0)


# ---------------------------------------------------------------------------------------------
# Metric learning on the real ORL faces (40 subjects x 10 images): train on subjects 1-30, test
# retrieval on the held-out subjects 31-40.


def _read_pgm(path):
  data = pathlib.Path(path).read_bytes()
  magic, size, maxval, pixels = data.split(b"\n", 3)
  width, height = map(int, size.split())
  assert magic == b"P5" and maxval == b"255"
  return np.frombuffer(pixels[: width * height], np.uint8).reshape(height, width)


def _orl(datasets_dir):
  x, y = [], []
  for subject in range(1, 41):
    for i in range(1, 11):
      img = _read_pgm(datasets_dir / "orl_faces" / f"s{subject}" / f"{i}.pgm") / 255.0
      x.append(img.reshape(28, 4, 23, 4).mean(axis=(1, 3)).ravel())  # 112x92 -> 28x23
      y.append(subject - 1)
  x = np.asarray(x, np.float32)
  return (x - x.mean(0)) / (x.std(0) + 1e-6), np.asarray(y)


def _recall_at_1(emb, labels):
  """Reference Recall@1: is the cosine nearest neighbour (self excluded) of the same class?"""
  unit = emb / np.linalg.norm(emb, axis=1, keepdims=True)
  sims = unit @ unit.T
  np.fill_diagonal(sims, -np.inf)
  return float(np.mean(labels[np.argmax(sims, axis=1)] == labels))


def _train_orl(datasets_dir, epochs, loss):
  x, y = _orl(datasets_dir)
  test = y >= 30
  tf.keras.utils.set_random_seed(0)
  model = tf.keras.Sequential(
    [tf.keras.Input([x.shape[1]]), tf.keras.layers.Dense(8, use_bias=False)]
  )
  before = _recall_at_1(model.predict(x[test], verbose=0), y[test])
  model.compile(tf.keras.optimizers.Adam(1e-2), loss=loss)
  rng = np.random.default_rng(0)
  for _ in range(epochs):  # batches of 10 subjects x 4 images
    order = rng.permutation(30)
    idx = np.concatenate([rng.choice(np.flatnonzero(y == c), 4, replace=False) for c in order])
    model.fit(x[idx], y[idx], batch_size=40, shuffle=False, epochs=1, verbose=0)
  after = _recall_at_1(model.predict(x[test], verbose=0), y[test])
  return before, after


def test_orl_recall_at_1_rises(datasets_dir):
  before, after = _train_orl(datasets_dir, 10, RecallLoss(from_embeddings=True, lambda_=1.0))
  print(f"ORL held-out Recall@1: {before:.3f} -> {after:.3f}")
  assert after >= before + 0.05, (before, after)


@pytest.mark.slow
def test_orl_recall_at_1_rises_loglog_memory_margin(datasets_dir):
  loss = RecallLoss(weighting="loglog", from_embeddings=True, lambda_=2.0, margin=0.02, memory=2)
  before, after = _train_orl(datasets_dir, 40, loss)
  print(f"ORL held-out Recall@1 (loglog, memory 2, margin 0.02): {before:.3f} -> {after:.3f}")
  assert after >= before + 0.05, (before, after)


@pytest.mark.parametrize(
  "ids, message",
  [
    ([0.0, 0.5, 1.0], "given as class ids must be whole numbers"),
    ([0, -1, 1], "must be class ids >= 0"),
  ],
)
def test_from_embeddings_refuses_bad_identity_ids(ids, message):
  """Identity ids of the embedding mode go through the one class-id parser (they were rounded)."""
  loss = RecallLoss(from_embeddings=True)
  embeddings = np.eye(3, dtype=np.float32)
  with pytest.raises(tf.errors.InvalidArgumentError, match=message):
    loss(np.array(ids), embeddings)
  with pytest.raises(tf.errors.InvalidArgumentError, match=message):
    tf.function(loss)(tf.constant(ids), tf.constant(embeddings))
