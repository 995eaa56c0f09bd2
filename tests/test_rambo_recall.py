"""Tests of tfrank4class.losses.rambo.recall: ``recall_loss_values`` and ``similarity_lists``
against numpy, :class:`RecallLoss`'s values against numpy, gradients against the numpy Algorithm 1
of ``_rambo_reference``, Keras integration, bad input, and a small metric-learning model on the
real ORL faces whose Recall@1 rises; on every backend (strategies: TensorFlow only)."""

import pathlib

import _rambo_reference as ref
import backend_testing as bt
import numpy as np
import pytest

from tfrank4class import losses
from tfrank4class.compat import BACKEND, keras
from tfrank4class.losses import RecallLoss
from tfrank4class.losses.rambo.recall import recall_loss_values, similarity_lists

#: float64 inputs stay float64 on every backend (JAX: ``jax_enable_x64``, on for each test).
pytestmark = pytest.mark.usefixtures("float64_inputs")


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
  np.testing.assert_allclose(bt.numpy(loss(dense, scores)), expected, rtol=1e-6)
  # Integer class ids: one relevant class per row (class 0 at 0.9 -> 0; class 1 at 0.1 -> log 3).
  np.testing.assert_allclose(bt.numpy(loss([0, 1], scores)), [0.0, np.log(3)], rtol=1e-6)
  np.testing.assert_allclose(bt.numpy(loss([[0], [1]], scores)), [0.0, np.log(3)], rtol=1e-6)
  mean = bt.numpy(RecallLoss(weighting="loglog")(dense, scores))
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
  got = bt.numpy(RecallLoss(reduction="none")(rel, sims))
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
    got = bt.numpy(loss(labels, emb))
    np.testing.assert_allclose(got, np_recall(sims, rel), rtol=1e-5, atol=1e-6)
    seen.append((emb, labels))


@pytest.mark.skipif(BACKEND == "jax", reason="a memory keeps no traced values (jax.grad traces)")
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
    _, (grad,) = bt.value_and_grad(lambda e, labels=labels: loss(labels, e), emb)
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
    np.testing.assert_allclose(grad, expected, atol=1e-12)
    assert np.count_nonzero(d_sims) > 5
    memory = (emb, labels)


def test_from_embeddings_gradient_improves_recall():
  rng = np.random.default_rng(2)
  emb = rng.standard_normal((12, 4)).astype(np.float32)
  labels = np.repeat(np.arange(3), 4)
  loss = RecallLoss(from_embeddings=True, lambda_=0.5)
  before = float(bt.numpy(loss(labels, emb)))
  for _ in range(30):
    _, (grad,) = bt.value_and_grad(lambda e: loss(labels, e), emb)
    assert np.all(np.isfinite(grad))
    emb = emb - 0.5 * grad
  assert float(bt.numpy(loss(labels, emb))) < before


def test_compiled_modes():
  rng = np.random.default_rng(3)
  scores = rng.standard_normal((4, 9)).astype(np.float32)
  labels = rng.integers(0, 9, 4)
  loss = RecallLoss(reduction="none", margin=0.1)
  emb_loss = RecallLoss(from_embeddings=True, reduction="none")
  for mode in bt.compile_modes():
    f = bt.compiled(lambda y, s: loss(y, s), mode)
    np.testing.assert_allclose(bt.numpy(f(labels, scores)), bt.numpy(loss(labels, scores)))
    g = bt.compiled(lambda y, s: emb_loss(y, s), mode)
    np.testing.assert_allclose(
      bt.numpy(g(labels % 2, scores)), bt.numpy(emb_loss(labels % 2, scores)), rtol=1e-6
    )


@pytest.mark.tensorflow_only
def test_fit_under_mirrored_strategy_with_memory(mirrored_strategy):
  rng = np.random.default_rng(4)
  x = rng.standard_normal((64, 6)).astype(np.float32)
  y = rng.integers(0, 4, 64)
  with mirrored_strategy.scope():
    model = keras.Sequential([keras.Input([6]), keras.layers.Dense(3)])
    model.compile("adam", loss=RecallLoss(from_embeddings=True, memory=2, margin=0.05))
  history = model.fit(x, y, batch_size=16, epochs=1, verbose=0)
  assert np.all(np.isfinite(history.history["loss"]))


def test_memory_trains_on_every_backend_and_jax_needs_its_state_first():
  """On JAX the memory's variables are created by a first eager call and assigned to the model
  (see ScoreMemory); a traced first call says so."""
  rng = np.random.default_rng(4)
  x = rng.standard_normal((32, 6)).astype(np.float32)
  y = rng.integers(0, 4, 32)
  model = keras.Sequential([keras.Input([6]), keras.layers.Dense(3)])
  loss = RecallLoss(from_embeddings=True, memory=2)
  model.compile("adam", loss=loss)
  if BACKEND == "jax":
    with pytest.raises(ValueError, match="first called inside a traced function"):
      model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    loss.build_state(y[:16], model(x[:16]))
    model.loss_state_variables = loss.state_variables
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
  model = keras.Sequential([keras.Input([4]), keras.layers.Dense(5)])
  model.compile("sgd", loss=loss)
  model.save(tmp_path / "m.keras")
  loaded = keras.models.load_model(tmp_path / "m.keras")
  assert isinstance(loaded.loss, RecallLoss) and loaded.loss.weighting == "loglog"
  assert keras.losses.deserialize(keras.losses.serialize(loss)).lambda_ == 2.0


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
  with pytest.raises(ValueError, match="must be finite"):
    RecallLoss()(np.array([0]), np.array([[np.nan, 0.1]], np.float32))


def test_degenerate_inputs_finite():
  # (Single-item lists are covered in test_rambo_base.py: to_relevance needs >= 2 classes.)
  for labels, scores in [([[0.0, 0.0]], [[0.2, 0.1]]), ([1], [[0.5, 0.5, 0.5]])]:
    labels = np.array(labels)
    value, (grad,) = bt.value_and_grad(
      lambda y, labels=labels: RecallLoss()(labels, y), np.array(scores, np.float32)
    )
    assert np.isfinite(value) and np.all(np.isfinite(grad))
  # Embeddings where no query has another item of its class: loss 0, zero gradient.
  value, (grad,) = bt.value_and_grad(
    lambda e: RecallLoss(from_embeddings=True)(np.array([0, 1]), e),
    np.array([[1.0, 0.0], [0.0, 1.0]], np.float32),
  )
  assert float(value) == 0.0 and np.all(grad == 0)


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
  keras.utils.set_random_seed(0)
  model = keras.Sequential([keras.Input([x.shape[1]]), keras.layers.Dense(8, use_bias=False)])
  before = _recall_at_1(model.predict(x[test], verbose=0), y[test])
  model.compile(keras.optimizers.Adam(1e-2), loss=loss)
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
@pytest.mark.skipif(BACKEND == "jax", reason="a loss with memory cannot train on JAX (see above)")
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
  """Identity ids of the embedding mode go through the one class-id parser (they were rounded);
  where nothing can raise (XLA, jax.jit) the whole batch's loss is NaN."""
  loss = RecallLoss(from_embeddings=True, reduction="none")
  embeddings = np.eye(3, dtype=np.float32)
  with pytest.raises(ValueError, match=message):
    loss(np.array(ids), embeddings)
  for mode in bt.compile_modes():
    if mode in ("xla", "jit"):
      got = bt.numpy(bt.compiled(loss, mode)(np.array(ids), embeddings))
      assert np.all(np.isnan(got)), (mode, got)


@pytest.mark.tensorflow_only
def test_from_embeddings_bad_ids_fail_a_tf_function(ids=(0.0, 0.5, 1.0)):
  import tensorflow as tf  # noqa: PLC0415

  loss = RecallLoss(from_embeddings=True)
  with pytest.raises(tf.errors.InvalidArgumentError, match="must be whole numbers"):
    tf.function(loss)(tf.constant(ids), tf.constant(np.eye(3, dtype=np.float32)))


# ---------------------------------------------------------------------------------------------
# The pure functions: recall_loss_values and similarity_lists.


def np_negatives_above(scores, relevance):
  """r_i = #{j valid, irrelevant : s_j > s_i} for relevant i, counted directly (no ties)."""
  r = np.zeros(scores.shape)
  for b in range(scores.shape[0]):
    neg = relevance[b] == 0
    for i in np.flatnonzero(relevance[b] > 0):
      r[b, i] = np.sum(neg & (scores[b] > scores[b, i]))
  return r


def random_lists(seed, batch=6, n=15, pad=True):
  """Random float64 scores and 0/1 relevance, ~15% padding; every list keeps a relevant item."""
  rng = np.random.default_rng(seed)
  scores = rng.standard_normal((batch, n))
  relevance = (rng.random((batch, n)) < 0.3).astype(np.float64)
  relevance[:, 0] = 1.0
  if pad:
    relevance[rng.random((batch, n)) < 0.15] = -1.0
    relevance[:, 0] = 1.0
  return scores, relevance


def test_recall_function_hand_cases():
  # list 1: relevant at 0.9 (r=0) and 0.5 (r=1, behind 0.7): (log 1 + log 2) / 2.
  # list 2: relevant 0.1 behind two irrelevant items: r = 2 -> log 3; loglog: log(1 + log 3).
  scores = np.array([[0.9, 0.5, 0.7], [0.3, 0.1, 0.2]], np.float32)
  relevance = np.array([[1.0, 1.0, 0.0], [0.0, 1.0, 0.0]], np.float32)
  log = bt.numpy(recall_loss_values(scores, relevance))
  np.testing.assert_allclose(log, [np.log(2) / 2, np.log(3)], rtol=1e-6)
  loglog = bt.numpy(recall_loss_values(scores, relevance, weighting="loglog"))
  np.testing.assert_allclose(loglog, [np.log(1 + np.log(2)) / 2, np.log(1 + np.log(3))], rtol=1e-6)


@pytest.mark.parametrize("weighting", ["log", "loglog"])
def test_recall_function_matches_direct_count_in_float64(weighting):
  scores, relevance = random_lists(0)
  r = np_negatives_above(scores, relevance)
  phi = np.log1p(r) if weighting == "log" else np.log1p(np.log1p(r))
  pos = relevance > 0
  expected = (phi * pos).sum(-1) / pos.sum(-1)
  got = bt.numpy(recall_loss_values(scores, relevance, weighting=weighting))
  assert got.dtype == np.float64
  np.testing.assert_allclose(got, expected, rtol=1e-10)


def test_proposition_2_weighted_recall_at_k():
  """log(1 + r) = sum_K log(1 + 1/K) * L@K with L@K = 1[relevant item not within the top K
  among the irrelevant ones] = 1[r >= K], averaged over the relevant items (Proposition 2)."""
  scores, relevance = random_lists(1, batch=5, n=60, pad=False)
  r = np_negatives_above(scores, relevance)
  pos = relevance > 0
  weighted = np.zeros(scores.shape[0])
  for k in range(1, scores.shape[1] + 1):
    loss_at_k = ((r >= k) * pos).sum(-1) / pos.sum(-1)  # 1 - Recall@K, mean over relevant items
    weighted += np.log1p(1.0 / k) * loss_at_k
  np.testing.assert_allclose(bt.numpy(recall_loss_values(scores, relevance)), weighted, rtol=1e-10)
  assert np.all(weighted > 0)


def test_similarity_lists_matches_numpy():
  rng = np.random.default_rng(5)
  emb = rng.standard_normal((4, 3))
  labels = np.array([0, 1, 0, 2])
  mem_emb, mem_labels = rng.standard_normal((3, 3)), np.array([1, 0, 2])
  gallery, gallery_labels = np.concatenate([emb, mem_emb]), np.concatenate([labels, mem_labels])
  sims, rel = similarity_lists(emb, labels, gallery, gallery_labels)
  unit = lambda a: a / np.linalg.norm(a, axis=1, keepdims=True)
  np.testing.assert_allclose(bt.numpy(sims), unit(emb) @ unit(gallery).T, rtol=1e-10)
  expected = (labels[:, None] == gallery_labels[None]).astype(float)
  expected[np.arange(4), np.arange(4)] = -1
  np.testing.assert_array_equal(bt.numpy(rel), expected)
  dot, _ = similarity_lists(emb, labels, similarity="dot")
  np.testing.assert_allclose(bt.numpy(dot), emb @ emb.T, rtol=1e-10)


def test_bad_weighting_and_similarity():
  with pytest.raises(
    ValueError, match=r"`weighting` must be one of \['log', 'loglog'\], got 'sqrt'"
  ):
    recall_loss_values(np.array([[0.1]], np.float32), np.array([[1.0]]), weighting="sqrt")
  with pytest.raises(ValueError, match="`similarity` must be one of"):
    similarity_lists(np.ones((2, 2)), np.zeros(2), similarity="l1")
