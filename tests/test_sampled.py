"""Tests of tfrank4class.heads.sampled: the samplers' laws, the lists against numpy, and sampled
softmax's gradient against the full softmax's (Monte Carlo over many draws on a small C)."""

import numpy as np
import pytest

from tests import _loss_arguments
from tests.backend_testing import numpy, quickest, value_and_grad
from tfrank4class import compat, losses
from tfrank4class.compat import ops
from tfrank4class.heads import sampled

#: The sampler draws with ``keras.random`` and layers hold ``keras.Variable``s: Keras 3 only.
keras_3_only = pytest.mark.skipif(
  not compat.KERAS_3, reason="tf-keras has no keras.random or keras.Variable"
)


def _log_uniform(c):
  k = np.arange(c, dtype=np.float64)
  return np.log((k + 2) / (k + 1)) / np.log(c + 1)


@keras_3_only
@pytest.mark.parametrize("distribution", ["uniform", "log_uniform", "table"])
def test_sample_classes_follows_its_law(distribution):
  c, s = 6, 60_000
  table = np.array([5.0, 0.0, 1.0, 2.0, 1.0, 1.0])
  expected = {"uniform": np.full(c, 1 / c), "log_uniform": _log_uniform(c), "table": table / 10}
  given = table if distribution == "table" else distribution
  ids, log_q = sampled.sample_classes(c, s, given, seed=3)
  ids, log_q = numpy(ids), numpy(log_q)
  assert ids.min() >= 0 and ids.max() < c
  frequencies = np.bincount(ids, minlength=c) / s
  np.testing.assert_allclose(frequencies, expected[distribution], atol=0.01)
  np.testing.assert_allclose(log_q, np.log(expected[distribution][ids]), rtol=1e-5)


def test_class_log_probabilities_refuses_bad_tables():
  with pytest.raises(ValueError, match="`distribution` must be one of"):
    sampled.class_log_probabilities(5, "zipf")
  with pytest.raises(ValueError, match=r"must have shape \(5,\), got \(4,\)"):
    sampled.class_log_probabilities(5, np.ones(4))
  for bad in ([1.0, -1.0, 1.0], [0.0, 0.0, 0.0], [1.0, np.nan, 1.0]):
    with pytest.raises(ValueError, match="finite weights >= 0 with a positive sum"):
      sampled.class_log_probabilities(3, np.array(bad))


def test_sampled_lists_against_numpy_with_accidental_hits():
  rng = np.random.default_rng(0)
  h, table = rng.normal(size=(3, 4)), rng.normal(size=(7, 4))
  labels, negatives = np.array([2, 5, 0]), np.array([5, 1, 2, 2])
  log_q = np.log(np.array([0.1, 0.2, 0.3, 0.3]))
  positives = np.zeros((3, 7))
  positives[2, 1] = 1.0  # row 2 is also of class 1: a draw of class 1 is a hit there
  scores, relevance = sampled.sampled_lists(
    h.astype("float32"), table.astype("float32"), labels, negatives, log_q, positives=positives
  )
  true = np.sum(h * table[labels], axis=1)
  negative = h @ table[negatives].T - np.log(4 * np.exp(log_q))
  np.testing.assert_allclose(numpy(scores), np.c_[true, negative], rtol=1e-5, atol=1e-5)
  expected = np.array([[1, 0, 0, -1, -1], [1, -1, 0, 0, 0], [1, 0, -1, 0, 0]], dtype=np.float32)
  np.testing.assert_array_equal(numpy(relevance), expected)
  kept, _ = sampled.sampled_lists(h, table, labels, negatives, log_q, log_q_correction=False)
  np.testing.assert_allclose(numpy(kept)[:, 1:], h @ table[negatives].T, rtol=1e-5, atol=1e-5)


def _mean_sampled_gradient(z, label, distribution, correction, draws=4000, samples=64):
  """The mean over ``draws`` independent sampled lists (one a row, each with its own negatives)
  of the gradient of sampled softmax w.r.t. the logits ``z``."""
  c = len(z)
  eye = np.eye(c, dtype="float32")  # class embeddings: s_c = z . e_c = z_c
  loss = losses.get("softmax_loss", reduction="sum")
  negatives, log_q = sampled.sample_classes(c, draws * samples, distribution, seed=7)
  negatives = ops.reshape(negatives, (draws, samples))
  log_q = ops.reshape(log_q, (draws, samples))

  def sampled_loss(queries):
    scores, relevance = sampled.sampled_lists(
      queries, eye, np.full(draws, label), negatives, log_q, log_q_correction=correction
    )
    return loss(relevance, scores)

  _, (grad,) = value_and_grad(quickest(sampled_loss), np.tile(z, (draws, 1)).astype("float32"))
  return grad.mean(axis=0)


@keras_3_only
def test_sampled_softmax_with_log_q_has_the_full_gradient_in_expectation():
  z = np.array([2.0, 1.0, 0.5, 0.0, -0.5, -1.0, 1.5, 0.2])
  label = 3
  p = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
  exact = p - np.eye(len(z))[label]
  # Corrected: consistent, its bias (Jensen's, through the log of an unbiased partition) shrinks
  # as the number of negatives grows.
  few = _mean_sampled_gradient(z, label, "log_uniform", True, samples=16) - exact
  many = _mean_sampled_gradient(z, label, "log_uniform", True, samples=64) - exact
  assert np.abs(many).max() < 0.01 and np.abs(many).max() < np.abs(few).max() / 2, (few, many)
  # Uncorrected: each negative weighs S q_j e^{s_j} instead of e^{s_j}, so the push on a class,
  # relative to the exact one, grows with how often the sampler draws it (log-uniform: low ids).
  raw = _mean_sampled_gradient(z, label, "log_uniform", False, samples=64)
  others = [c for c in range(len(z)) if c != label]
  ratio = raw[others] / exact[others]
  assert np.all(np.diff(ratio) < 0) and ratio[0] > 1.5 and ratio[-1] < 0.5, ratio


def test_in_batch_lists_against_numpy():
  rng = np.random.default_rng(1)
  h, e = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
  labels, log_q = np.array([3, 1, 3, 0]), np.log(np.array([0.5, 0.25, 0.5, 0.25]))
  scores, relevance = sampled.in_batch_lists(
    h.astype("float32"), e.astype("float32"), labels, candidate_log_q=log_q
  )
  np.testing.assert_allclose(numpy(scores), h @ e.T - log_q[None, :], rtol=1e-5, atol=1e-5)
  expected = np.where(labels[:, None] == labels[None, :], -1.0, 0.0)
  np.fill_diagonal(expected, 1.0)
  np.testing.assert_array_equal(numpy(relevance), expected)


def test_hardest_negatives_against_numpy():
  rng = np.random.default_rng(2)
  scores = rng.normal(size=(5, 9)).astype("float32")
  relevance = np.where(rng.random((5, 9)) < 0.2, -1.0, 0.0).astype("float32")
  relevance[:, 0] = 1.0
  s, r = sampled.hardest_negatives(scores, relevance, 3)
  for b in range(5):
    valid = [j for j in range(1, 9) if relevance[b, j] == 0]
    best = sorted(valid, key=lambda j: -scores[b, j])[:3]
    np.testing.assert_allclose(numpy(s)[b], scores[b, [0] + best])
    np.testing.assert_array_equal(numpy(r)[b], [1.0, 0.0, 0.0, 0.0])
  with pytest.raises(ValueError, match="`num_negatives` must be at most the 8 sampled"):
    sampled.hardest_negatives(scores, relevance, 9)


# One loss of each family the issue names (the registry-wide tests already run every loss on
# dense relevance with padded items, which is what a sampled list is).
FAMILIES = (
  "softmax_loss",
  "pairwise_logistic_loss",
  "approx_ndcg_loss",
  "average_precision_loss",
  "smooth_topk_svm_loss",
  "topk_cross_entropy_loss",
)


@pytest.mark.parametrize("name", FAMILIES)
def test_each_family_trains_on_sampled_lists(name):
  rng = np.random.default_rng(3)
  h, table = rng.normal(size=(4, 5)).astype("float32"), rng.normal(size=(50, 5)).astype("float32")
  labels = np.array([0, 1, 0, 7])
  negatives = np.array([0, 3, 9, 11, 20])  # a hit for rows 0 and 2
  log_q = np.full(5, -np.log(50.0))
  loss = _loss_arguments.loss(name)

  def fn(query):
    scores, relevance = sampled.sampled_lists(query, table, labels, negatives, log_q)
    return ops.sum(loss(relevance, scores))

  value, (grad,) = value_and_grad(quickest(fn), h)
  assert np.isfinite(value) and np.all(np.isfinite(grad))  # RaMBO's may be 0: its ranks held


def test_mixed_lists_against_numpy():
  rng = np.random.default_rng(4)
  h, table = rng.normal(size=(4, 3)), rng.normal(size=(9, 3))
  labels = np.array([2, 5, 2, 7])  # rows 0 and 2 share a class: a duplicate in-batch candidate
  negatives = np.array([5, 2, 8, 0])  # class 5: a hit for row 1; class 2: for rows 0 and 2
  log_q = np.log(np.array([0.1, 0.2, 0.05, 0.3]))
  batch_log_q = np.log(np.array([0.4, 0.1, 0.4, 0.1]))
  positives = np.zeros((4, 9))
  positives[3, [7, 8]] = 1.0  # row 3 is also of class 8: the draw of 8 is a hit there
  scores, relevance = sampled.mixed_lists(
    h.astype("float32"),
    table.astype("float32"),
    labels,
    negatives,
    log_q,
    candidate_log_q=batch_log_q,
    positives=positives,
  )
  in_batch = h @ table[labels].T - batch_log_q[None, :]
  drawn = h @ table[negatives].T - np.log(4 * np.exp(log_q))[None, :]
  np.testing.assert_allclose(numpy(scores), np.c_[in_batch, drawn], rtol=1e-5, atol=1e-5)
  expected = np.array(
    [
      [1, 0, -1, 0, 0, -1, 0, 0],
      [0, 1, 0, 0, -1, 0, 0, 0],
      [-1, 0, 1, 0, 0, -1, 0, 0],
      [0, 0, 0, 1, 0, 0, -1, 0],
    ],
    dtype=np.float32,
  )
  np.testing.assert_array_equal(numpy(relevance), expected)
  raw, _ = sampled.mixed_lists(h, table, labels, negatives, log_q, log_q_correction=False)
  np.testing.assert_allclose(
    numpy(raw), np.c_[h @ table[labels].T, h @ table[negatives].T], rtol=1e-5, atol=1e-5
  )


@keras_3_only
def test_sampled_lists_of_a_keras_variable_against_numpy():
  """A table held in a Keras variable (a layer's weights) gives the same lists."""
  from tfrank4class.compat import keras  # noqa: PLC0415

  rng = np.random.default_rng(7)
  h, table = rng.normal(size=(3, 4)).astype("float32"), rng.normal(size=(9, 4)).astype("float32")
  labels, negatives, log_q = np.array([1, 8, 1]), np.array([8, 0, 5]), np.full(3, -np.log(9.0))
  scores, relevance = sampled.sampled_lists(h, keras.Variable(table), labels, negatives, log_q)
  expected, expected_relevance = sampled.sampled_lists(h, table, labels, negatives, log_q)
  np.testing.assert_allclose(numpy(scores), numpy(expected), rtol=1e-6)
  np.testing.assert_array_equal(numpy(relevance), numpy(expected_relevance))


@keras_3_only
@pytest.mark.tensorflow_only
def test_a_tensorflow_table_is_read_row_by_row():
  """On TensorFlow the table's rows are gathered from the variable (``ResourceGather``), never
  by a dense read: after a sparse update TensorFlow copies the whole buffer on a dense read."""
  import tensorflow as tf  # noqa: PLC0415

  from tfrank4class.compat import keras  # noqa: PLC0415

  variable = keras.Variable(np.ones((50, 4), "float32"))
  h = tf.ones((3, 4))

  @tf.function
  def lists():
    return sampled.sampled_lists(h, variable, [1, 2, 3], [4, 5], tf.zeros(2))

  kinds = {op.type for op in lists.get_concrete_function().graph.get_operations()}
  assert "ResourceGather" in kinds and "ReadVariableOp" not in kinds, sorted(kinds)
