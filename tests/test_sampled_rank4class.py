"""Tests of tfrank4class.heads.sampled_rank4class: the sampled lists of the dot, latent-cross and
concat heads against the interaction written in numpy from the head's weights (shared and
per-example negatives, in-batch, mixed, hard), the blocked top-k against a numpy full top-k,
fit / .keras round trip, config round trip, bad arguments; the SavedModel export on TensorFlow."""

import numpy as np
import pytest
from _serving import serve_in_a_fresh_process

from tests.backend_testing import numpy
from tfrank4class import compat
from tfrank4class.compat import keras, ops
from tfrank4class.heads import SampledClassifier, SampledRank4ClassHead

pytestmark = pytest.mark.skipif(
  not compat.KERAS_3, reason="the head draws with keras.random, which tf-keras lacks"
)
C, B, D = 30, 4, 5
LABELS = np.array([3, 7, 3, 29])
NEGATIVES = np.array([7, 0, 3, 12, 12, 25])


def _relu(x):
  return np.maximum(x, 0.0)


def _reference_scores(head, h, rows):
  """``f(h_b, rows[b, l])`` ``[B, L]`` in numpy from the head's weights (rows ``[B, L, e]``)."""
  weights = [numpy(w).astype(np.float64) for w in head.interaction.chunk_weights()]
  h = h.astype(np.float64)[:, None, :]
  if head.interaction_name == "dot":
    return np.sum(
      np.concatenate([h + 0 * rows[..., :1], np.ones_like(rows[..., :1])], -1) * rows, -1
    )
  if head.interaction_name == "latent_cross":
    x = h * (1.0 + rows)
  else:  # concat: the first layer on [h, c]
    x = _relu(
      np.concatenate([np.broadcast_to(h, rows.shape[:2] + h.shape[-1:]), rows], -1) @ weights[0]
      + weights[1]
    )
    weights = weights[2:]
  pairs = list(zip(weights[0::2], weights[1::2]))
  for i, (kernel, bias) in enumerate(pairs):
    x = x @ kernel + bias
    if i < len(pairs) - 1:
      x = _relu(x)
  return x[..., 0]


def _head(interaction, **kwargs):
  head = SampledRank4ClassHead(C, interaction, hidden_units=(6, 4), seed=0, **kwargs)
  h = np.random.default_rng(0).normal(size=(B, D)).astype("float32")
  head(h)  # build
  return head, h


def _fixed(head, negatives, log_q):
  head.draw_negatives = lambda batch_size: (ops.convert_to_tensor(negatives), log_q)


@pytest.mark.parametrize("interaction", ["dot", "latent_cross", "concat"])
@pytest.mark.parametrize("per_example", [False, True])
def test_sampled_lists_equal_the_interaction_at_the_candidates(interaction, per_example):
  head, h = _head(interaction, num_negatives=6, per_example_negatives=per_example)
  table = numpy(head.class_encoder.all_embeddings()).astype(np.float64)
  negatives = np.stack([np.roll(NEGATIVES, b) for b in range(B)]) if per_example else NEGATIVES
  log_q = np.log(np.linspace(0.01, 0.1, 6))[None, :] + np.zeros(negatives.shape)
  if not per_example:
    log_q = log_q[0]
  _fixed(head, negatives.astype("int32"), log_q.astype("float32"))
  scores, relevance = numpy(head.sampled_lists(h, LABELS))
  candidates = np.concatenate([LABELS[:, None], np.broadcast_to(negatives, (B, 6))], axis=1)
  want = _reference_scores(head, h, table[candidates])
  want[:, 1:] -= log_q + np.log(6)
  np.testing.assert_allclose(scores, want, rtol=1e-4, atol=1e-5)
  # The full head, gathered at the candidates, gives the same uncorrected scores.
  full = numpy(head(h))
  np.testing.assert_allclose(
    scores[:, 1:] + log_q + np.log(6), np.take_along_axis(full, candidates[:, 1:], 1), atol=1e-5
  )
  want_relevance = np.where(candidates[:, 1:] == LABELS[:, None], -1.0, 0.0)
  np.testing.assert_array_equal(relevance, np.concatenate([np.ones((B, 1)), want_relevance], 1))


@pytest.mark.parametrize("interaction", ["latent_cross", "concat"])
def test_in_batch_and_mixed_lists(interaction):
  frequencies = np.arange(1.0, C + 1.0)
  head, h = _head(interaction, num_negatives=6, negatives="mixed", distribution=frequencies)
  log_q = np.log(frequencies / frequencies.sum())
  _fixed(head, NEGATIVES.astype("int32"), log_q[NEGATIVES].astype("float32"))
  scores, relevance = numpy(head.sampled_lists(h, LABELS))
  table = numpy(head.class_encoder.all_embeddings()).astype(np.float64)
  in_batch = _reference_scores(head, h, table[np.broadcast_to(LABELS, (B, B))]) - log_q[LABELS]
  drawn = _reference_scores(head, h, table[np.broadcast_to(NEGATIVES, (B, 6))])
  drawn -= log_q[NEGATIVES] + np.log(6)
  np.testing.assert_allclose(scores, np.concatenate([in_batch, drawn], 1), rtol=1e-4, atol=1e-5)
  same = LABELS[:, None] == LABELS[None, :]
  want = np.where(np.eye(B, dtype=bool), 1.0, np.where(same, -1.0, 0.0))
  want = np.concatenate([want, np.where(NEGATIVES[None, :] == LABELS[:, None], -1.0, 0.0)], 1)
  np.testing.assert_array_equal(relevance, want)


def test_hard_negatives_are_the_highest_scoring():
  head, h = _head("concat", num_negatives=6, num_hard_negatives=2, log_q_correction=False)
  _fixed(head, NEGATIVES.astype("int32"), np.zeros(6, "float32"))
  scores, relevance = numpy(head.sampled_lists(h, LABELS))
  full = numpy(head(h)).astype(np.float64)
  for b in range(B):
    kept = [full[b, j] for j in NEGATIVES if j != LABELS[b]]
    np.testing.assert_allclose(scores[b], [full[b, LABELS[b]], *sorted(kept)[::-1][:2]], atol=1e-5)
  np.testing.assert_array_equal(relevance[:, 0], 1.0)
  np.testing.assert_array_equal(relevance[:, 1:], 0.0)


@pytest.mark.parametrize("interaction", ["dot", "latent_cross", "concat"])
def test_top_k_equals_the_full_heads_top_k(interaction):
  head, h = _head(interaction)
  full = numpy(head(h))
  scores, ids = numpy(head.top_k(h, k=7, block_size=4))
  want = np.argsort(-full, axis=1, kind="stable")[:, :7]
  np.testing.assert_array_equal(ids, want)
  np.testing.assert_allclose(scores, np.take_along_axis(full, want, 1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
  "interaction, negatives", [("dot", "mixed"), ("latent_cross", "sampled"), ("concat", "in_batch")]
)
def test_fit_and_keras_round_trip(interaction, negatives, tmp_path):
  rng = np.random.default_rng(0)
  y = rng.integers(0, C, size=64)
  x = (np.eye(C)[y] + 0.1 * rng.normal(size=(64, C))).astype("float32")
  head = SampledRank4ClassHead(
    C, interaction, hidden_units=(8,), num_negatives=5, negatives=negatives, seed=1
  )
  model = SampledClassifier(keras.layers.Dense(8), head)
  # plain SGD for one mode: on JAX it must take Keras's step (the row-sparse one is the dot
  # table's)
  model.compile(optimizer="sgd" if negatives == "sampled" else "adam", loss="softmax_loss")
  history = model.fit(x, y, batch_size=16, epochs=2, verbose=0)
  assert np.all(np.isfinite(history.history["loss"]))
  model.save(tmp_path / "m.keras")
  loaded = keras.models.load_model(tmp_path / "m.keras")
  np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0), atol=1e-5)
  assert loaded.head.get_config() == head.get_config()


def test_config_round_trip():
  head = SampledRank4ClassHead(
    C,
    "concat",
    num_negatives=9,
    num_hard_negatives=3,
    per_example_negatives=True,
    distribution=np.arange(1, C + 1),
    log_q_correction=False,
    seed=4,
    hidden_units=(3,),
  )
  config = head.get_config()
  assert SampledRank4ClassHead.from_config(config).get_config() == config
  assert (config["num_hard_negatives"], config["per_example_negatives"]) == (3, True)


def test_bad_arguments():
  with pytest.raises(ValueError, match=r"`negatives` must be one of .*, got 'random'"):
    SampledRank4ClassHead(C, negatives="random")
  with pytest.raises(ValueError, match=r"`num_hard_negatives` needs negatives='sampled', got"):
    SampledRank4ClassHead(C, negatives="in_batch", num_hard_negatives=2)
  with pytest.raises(ValueError, match=r"at most num_negatives=4, got 5"):
    SampledRank4ClassHead(C, num_negatives=4, num_hard_negatives=5)
  with pytest.raises(ValueError, match=r"`num_negatives` must be an integer >= 1, got 0"):
    SampledRank4ClassHead(C, num_negatives=0)
  with pytest.raises(ValueError, match=r"`k` must be at most the 30 classes, got 31"):
    _head("dot")[0].top_k(np.ones((1, D), "float32"), k=31)


@pytest.mark.tensorflow_only
def test_saved_model_serves_top_k_without_tfrank4class(tmp_path):
  from tfrank4class.retrieval import export_top_k_model  # noqa: PLC0415

  encoder = keras.Sequential([keras.Input((6,)), keras.layers.Dense(D)])
  head = SampledRank4ClassHead(C, "concat", hidden_units=(4,), seed=0)
  x = np.random.default_rng(2).normal(size=(3, 6)).astype("float32")
  full = numpy(head(encoder(x)))
  export_top_k_model(encoder, head, tmp_path / "export", k=5, block_size=8)
  out, imported = serve_in_a_fresh_process(tmp_path / "export", "inputs", x.tolist(), "float32")
  assert imported is False
  want = np.argsort(-full, axis=1, kind="stable")[:, :5]
  np.testing.assert_array_equal(out["top_k_ids"], want)
  np.testing.assert_allclose(out["top_k_scores"], np.take_along_axis(full, want, 1), atol=1e-5)
