"""Sampled lists: the true class and sampled negatives, scored without the ``[B, C]`` matrix.

When the classes are a catalogue (``C`` of ``10^5`` to ``10^7``), scoring every class is the cost
of a training step before any loss runs. A *sampled list* scores the true class of each example
and a few negatives: it is a list like any other, so every loss of the registry (softmax, the
pairwise keys, ApproxNDCG, RaMBO, the Top-K losses) trains on it.

For query embeddings ``h`` ``[B, d]``, class embeddings ``E`` ``[C, d]`` (a table, or the output of
a class encoder) and true classes ``y`` ``[B]``, :func:`sampled_lists` returns

    scores     [B, 1 + S]:  s_{b,0} = h_b . E_{y_b},   s_{b,k} = h_b . E_{j_k} - log(S q_{j_k})
    relevance  [B, 1 + S]:  1 at column 0; 0 for a negative; -1 (padding) for an accidental hit

with ``j_1..j_S`` drawn with replacement from ``q`` (:func:`sample_classes`: uniform, log-uniform
(Zipf) as catalogue frequencies are, or any frequency table) and shared by the batch. The log-Q
correction (``log_q_correction=True``, the default) subtracts the log of each negative's
expected count ``S q_j``: then ``e^{s_y} + sum_k e^{s_{j_k}} / (S q_{j_k})`` is an unbiased
estimate of the full softmax's partition ``sum_c e^{s_c}`` once the draws equal to the true class
(*accidental hits*) are masked, so sampled softmax's loss and gradient tend to the full
softmax's as ``S`` grows (Bengio and Senecal, IEEE TNN 2008; Jean et al., ACL 2015; the true
class is not corrected, since it is not drawn). Without the correction, the classes ``q`` favours
are pushed down too hard and the rare ones too little. A negative equal to another positive of a
multi-label example (``positives`` ``[B, C]``) is an accidental hit too.

:func:`in_batch_lists` uses the other examples' true classes as the negatives (``[B, B]``, the
diagonal relevant; a column of the same class as the row's masked), with the log-Q correction of
the classes' frequency in the batch when it is given (Yi et al., RecSys 2019); :func:`mixed_lists`
joins both; :func:`hardest_negatives` keeps the ``m`` highest-scoring negatives of a larger
sample. :func:`sampled_relevance` and :func:`in_batch_relevance` are the lists' relevance rules
alone, for heads that score the candidates otherwise (the MLP interactions of
:class:`~tfrank4class.heads.SampledRank4ClassHead`). Cost: ``O(B S d)`` for the scores (one
``[S, d]`` gather and one matmul), ``O(B S)`` besides; no ``[B, C]`` tensor (``positives``
aside, which the caller holds anyway).

Example:
  >>> import numpy as np
  >>> from keras import ops
  >>> h = np.ones((2, 3), "float32")
  >>> table = np.eye(5, 3, dtype="float32")
  >>> negatives, log_q = sample_classes(5, 4, seed=0)
  >>> scores, relevance = sampled_lists(h, table, [0, 1], negatives, log_q)
  >>> tuple(scores.shape), tuple(relevance.shape)
  ((2, 5), (2, 5))
  >>> from tfrank4class import losses
  >>> loss = losses.get("softmax_loss")(relevance, scores)  # any loss of the registry
"""

import math

from tfrank4class import backend, checks
from tfrank4class.compat import keras, ops
from tfrank4class.labels import class_ids

#: The named sampling distributions of :func:`sample_classes`; a frequency table also works.
DISTRIBUTIONS = ("uniform", "log_uniform")


def class_log_probabilities(num_classes, distribution="uniform"):
  """``log q`` ``[C]`` of a named distribution or a frequency table ``[C]`` (counts or weights).

  ``"uniform"``: ``q_c = 1 / C``. ``"log_uniform"``: ``q_c = log((c + 2) / (c + 1)) / log(C + 1)``
  (Zipf's law over class ids sorted by decreasing frequency, TensorFlow's
  ``log_uniform_candidate_sampler``). A table: ``q_c = w_c / sum(w)``.

  Raises:
    ValueError: an unknown name, or a table of the wrong length, with a negative or non-finite
      entry, or summing to 0.

  Example:
    >>> import numpy as np
    >>> from keras import ops
    >>> q = np.exp(ops.convert_to_numpy(class_log_probabilities(4, "log_uniform")))
    >>> round(float(q.sum()), 6), bool(q[0] > q[3])
    (1.0, True)
  """
  checks.check_int("num_classes", num_classes, minimum=2)
  if isinstance(distribution, str):
    checks.check_choice("distribution", distribution, DISTRIBUTIONS)
    if distribution == "uniform":
      return ops.full((num_classes,), -math.log(num_classes))
    c = ops.arange(num_classes, dtype="float32")
    return ops.log(ops.log1p(1.0 / (c + 1.0)) / math.log(num_classes + 1.0))
  weights = ops.convert_to_tensor(distribution, "float32")
  if tuple(weights.shape) != (num_classes,):
    raise ValueError(
      f"`distribution` given as a table must have shape ({num_classes},), got "
      f"{tuple(weights.shape)}."
    )
  ok = ops.logical_and(ops.all(ops.isfinite(weights)), ops.all(weights >= 0))
  checks.check_values(
    ops.logical_and(ok, ops.sum(weights) > 0)[None],
    "`distribution` must be finite weights >= 0 with a positive sum,",
  )
  return ops.log(weights / ops.sum(weights))


def sample_classes(num_classes, num_samples, distribution="uniform", seed=None):
  """``(ids [S] int32, log q [S])``: ``S`` classes drawn with replacement from ``q``.

  Args:
    num_classes: ``C >= 2``.
    num_samples: ``S >= 1``.
    distribution: ``"uniform"``, ``"log_uniform"`` or a frequency table ``[C]``
      (:func:`class_log_probabilities`).
    seed: what ``keras.random`` takes: an int, a ``keras.random.SeedGenerator`` (in a layer or
      loss), or a seed tensor (JAX's ``jit``: pass a new one each step).

  Example:
    >>> ids, log_q = sample_classes(1000, 3, "log_uniform", seed=1)
    >>> from tfrank4class import backend
    >>> tuple(ids.shape), backend.dtype_name(ids)
    ((3,), 'int32')
  """
  checks.check_int("num_samples", num_samples, minimum=1)
  log_q = class_log_probabilities(num_classes, distribution)
  if isinstance(distribution, str):
    u = keras.random.uniform((num_samples,), seed=seed)
    if distribution == "uniform":
      ids = ops.floor(u * num_classes)
    else:  # inverse of the log-uniform CDF F(c) = log(c + 2) / log(C + 1)
      ids = ops.floor(ops.exp(u * math.log(num_classes + 1.0))) - 1.0
    ids = ops.cast(ops.clip(ids, 0, num_classes - 1), "int32")
  else:
    ids = ops.cast(keras.random.categorical(log_q[None, :], num_samples, seed=seed)[0], "int32")
  return ids, ops.take(log_q, ids)


def _sparse_readable(table):
  """The TensorFlow variable behind ``table`` (a Keras variable on TensorFlow), else ``None``."""
  variable = getattr(table, "value", None)
  return variable if hasattr(variable, "sparse_read") else None


def gather_rows(table, ids):
  """``table[ids]`` (``ids`` of any shape). A TensorFlow variable is read with ``sparse_read``
  (``ResourceGather``): once a sparse update (an optimizer applying ``IndexedSlices``) has
  touched it, TensorFlow copies the whole buffer on every dense read, an ``O(C d)`` cost per
  training step. A variable without one (a ``tf.distribute`` mirrored variable's
  ``sparse_read`` raises ``AttributeError``, as ``tf.gather`` expects) is read whole."""
  variable = _sparse_readable(table)
  if variable is not None:
    try:
      return variable.sparse_read(ids)
    except AttributeError:
      pass
  return ops.take(table, ids, axis=0)


def sampled_lists(
  queries,
  class_embeddings,
  labels,
  negatives,
  negative_log_q,
  *,
  positives=None,
  log_q_correction=True,
  remove_accidental_hits=True,
):
  """Scores ``[B, 1 + S]`` and relevance ``[B, 1 + S]`` of the true class and shared negatives.

  Args:
    queries: query embeddings ``h`` ``[B, d]``.
    class_embeddings: ``E`` ``[C, d]``.
    labels: true class ids ``[B]`` / ``[B, 1]``.
    negatives: sampled class ids ``[S]`` shared by the batch (:func:`sample_classes`), or
      ``[B, S]``, each example's own (``sample_classes(C, B * S)`` reshaped).
    negative_log_q: their ``log q``, of the same shape.
    positives: optional multi-hot ``[B, C]``: a negative that is any positive of its row is an
      accidental hit too.
    log_q_correction: subtract ``log(S q_j)`` from each negative's score.
    remove_accidental_hits: mark a negative equal to a positive as padding (relevance -1).

  Returns:
    ``(scores, relevance)``, both ``[B, 1 + S]`` in the embeddings' dtype.
  """
  queries = checks.check_scores("queries", queries)
  # No finiteness check on the table (sampling avoids passes over it); see gather_rows.
  if _sparse_readable(class_embeddings) is None:
    class_embeddings = checks.check_scores("class_embeddings", class_embeddings, finite=False)
  num_classes = class_embeddings.shape[0]
  ids = class_ids(labels, num_classes)
  true_scores = ops.sum(queries * gather_rows(class_embeddings, ids), axis=-1)
  negatives = ops.cast(negatives, "int32")
  drawn = gather_rows(class_embeddings, negatives)
  if len(negatives.shape) == 1:  # shared by the batch: one [S, d] gather and one matmul
    negative_scores = ops.matmul(queries, ops.transpose(drawn))
  else:  # per example [B, S]: a [B, S, d] gather
    negative_scores = ops.einsum("bd,bsd->bs", queries, drawn)
  if log_q_correction:
    count = ops.cast(negatives.shape[-1], negative_scores.dtype)
    log_q = ops.cast(negative_log_q, negative_scores.dtype)
    negative_scores = negative_scores - (log_q + ops.log(count))
  scores = ops.concatenate([true_scores[:, None], negative_scores], axis=1)
  relevance = sampled_relevance(
    ids, negatives, positives=positives, remove_accidental_hits=remove_accidental_hits
  )
  return scores, ops.cast(relevance, scores.dtype)


def sampled_relevance(labels, negatives, *, positives=None, remove_accidental_hits=True):
  """Relevance ``[B, 1 + S]`` of a sampled list: 1 for the true class (column 0), 0 for a
  negative, -1 (padding) for an accidental hit (a negative equal to the row's true class or, with
  ``positives`` ``[B, C]``, to another positive of the row) when ``remove_accidental_hits``.

  ``negatives``: ``[S]`` shared by the batch or ``[B, S]``, as in :func:`sampled_lists`.

  Example:
    >>> from keras import ops
    >>> ops.convert_to_numpy(sampled_relevance([2, 0], [2, 1]))
    array([[ 1., -1.,  0.],
           [ 1.,  0.,  0.]], dtype=float32)
  """
  ids = class_ids(labels)
  negatives = ops.cast(negatives, "int32")
  shared = len(negatives.shape) == 1
  hits = ops.equal(ids[:, None], negatives[None, :] if shared else negatives)
  if positives is not None:
    positives = ops.convert_to_tensor(positives)
    if shared:
      hit_positives = ops.take(positives, negatives, axis=1)
    else:
      hit_positives = backend.take_along_axis(positives, negatives, axis=1)
    hits = ops.logical_or(hits, hit_positives > 0)
  negative_relevance = ops.zeros(ops.shape(hits), "float32")
  if remove_accidental_hits:
    negative_relevance = backend.where(hits, -1.0, negative_relevance)
  true = ops.ones_like(negative_relevance[:, :1])
  return ops.concatenate([true, negative_relevance], axis=1)


def in_batch_relevance(labels, *, positives=None):
  """Relevance ``[B, B]`` of in-batch lists (:func:`in_batch_lists`): 1 on the diagonal; -1
  (padding) where column ``j`` holds the row's own class from another example or, with
  ``positives`` ``[B, C]``, another positive of the row; 0 otherwise.

  Example:
    >>> from keras import ops
    >>> ops.convert_to_numpy(in_batch_relevance([4, 7, 4]))
    array([[ 1.,  0., -1.],
           [ 0.,  1.,  0.],
           [-1.,  0.,  1.]], dtype=float32)
  """
  ids = class_ids(labels)
  same = ops.equal(ids[:, None], ids[None, :])
  if positives is not None:
    positives = ops.convert_to_tensor(positives)
    same = ops.logical_or(same, ops.take(positives, ids, axis=1) > 0)
  diagonal = ops.eye(ops.shape(ids)[0], dtype="bool")
  return ops.cast(backend.where(diagonal, 1.0, backend.where(same, -1.0, 0.0)), "float32")


def in_batch_lists(queries, candidates, labels, *, candidate_log_q=None, positives=None):
  """Scores ``[B, B]`` and relevance ``[B, B]`` with the batch's true classes as negatives.

  ``s_{b,j} = h_b . e_j - log q_j``: row ``b`` scores the candidate embedding ``e_j`` ``[B, d]``
  of every example's true class; ``candidate_log_q`` ``[B]`` (optional) is the log of each
  candidate's sampling probability (its class's frequency in the data, Yi et al.'s in-batch
  correction), subtracted from every column. Relevance: 1 on the diagonal; -1 (padding) where
  column ``j`` holds the row's own class from another example (``y_j = y_b``, a duplicate) or,
  with ``positives`` ``[B, C]``, another positive of the row; 0 otherwise.

  Example:
    >>> import numpy as np
    >>> from keras import ops
    >>> _, relevance = in_batch_lists(np.ones((3, 2), "float32"), np.ones((3, 2), "float32"),
    ...                               [4, 7, 4])
    >>> ops.convert_to_numpy(relevance)
    array([[ 1.,  0., -1.],
           [ 0.,  1.,  0.],
           [-1.,  0.,  1.]], dtype=float32)
  """
  queries = checks.check_scores("queries", queries)
  candidates = checks.check_scores("candidates", candidates)
  ids = class_ids(labels)
  scores = ops.matmul(queries, ops.transpose(candidates))
  if candidate_log_q is not None:
    scores = scores - ops.cast(candidate_log_q, scores.dtype)[None, :]
  relevance = in_batch_relevance(ids, positives=positives)
  return scores, ops.cast(relevance, scores.dtype)


def mixed_lists(
  queries,
  class_embeddings,
  labels,
  negatives,
  negative_log_q,
  *,
  candidate_log_q=None,
  positives=None,
  log_q_correction=True,
):
  """Scores and relevance ``[B, B + S]``: the batch's true classes, then sampled negatives.

  Mixed negative sampling (Yang et al., WWW 2020 companion): the in-batch candidates
  are drawn from the data (popular classes often, the tail rarely), the sampled ones from ``q``
  (uniform reaches the tail); here each part keeps its own log-Q correction. Columns ``0..B-1`` are
  :func:`in_batch_lists` (the diagonal relevant, ``candidate_log_q`` subtracted, a duplicate of
  the row's class or another positive masked); columns ``B..B+S-1`` are the negatives of
  :func:`sampled_lists` (``log(S q_j)`` subtracted when ``log_q_correction``, an accidental hit
  masked). Arguments as in those two functions.

  Example:
    >>> import numpy as np
    >>> from keras import ops
    >>> h, table = np.ones((2, 2), "float32"), np.eye(4, 2, dtype="float32")
    >>> _, relevance = mixed_lists(h, table, [1, 1], [0, 1, 3], np.zeros(3, "float32"))
    >>> ops.convert_to_numpy(relevance)
    array([[ 1., -1.,  0., -1.,  0.],
           [-1.,  1.,  0., -1.,  0.]], dtype=float32)
  """
  class_embeddings = checks.check_scores("class_embeddings", class_embeddings, finite=False)
  ids = class_ids(labels, class_embeddings.shape[0])
  batch_scores, batch_relevance = in_batch_lists(
    queries,
    ops.take(class_embeddings, ids, axis=0),
    ids,
    candidate_log_q=candidate_log_q,
    positives=positives,
  )
  scores, relevance = sampled_lists(
    queries,
    class_embeddings,
    ids,
    negatives,
    negative_log_q,
    positives=positives,
    log_q_correction=log_q_correction,
  )
  return (
    ops.concatenate([batch_scores, ops.cast(scores[:, 1:], batch_scores.dtype)], axis=1),
    ops.concatenate([batch_relevance, ops.cast(relevance[:, 1:], batch_scores.dtype)], axis=1),
  )


def hardest_negatives(scores, relevance, num_negatives):
  """The true class (column 0) and the ``m`` highest-scoring negatives of each sampled list.

  Takes :func:`sampled_lists`' output with ``S >= m`` negatives; padded negatives (accidental
  hits) are never chosen while a real one is left, and keep relevance -1 when one must fill a
  slot. Returns ``(scores, relevance)`` ``[B, 1 + m]``.

  Example:
    >>> from keras import ops
    >>> s, r = hardest_negatives([[5.0, 1.0, 9.0, 3.0]], [[1.0, 0.0, -1.0, 0.0]], 1)
    >>> ops.convert_to_numpy(s), ops.convert_to_numpy(r)
    (array([[5., 3.]], dtype=float32), array([[1., 0.]], dtype=float32))
  """
  scores = checks.check_scores("scores", scores)
  relevance = ops.convert_to_tensor(relevance, scores.dtype)
  available = scores.shape[-1] - 1
  checks.check_int("num_negatives", num_negatives, minimum=1)
  if available is not None and num_negatives > available:
    raise ValueError(
      f"`num_negatives` must be at most the {available} sampled negatives, got {num_negatives}."
    )
  negative_scores, negative_relevance = scores[:, 1:], relevance[:, 1:]
  lowest = ops.min(negative_scores, axis=1, keepdims=True)
  ranked = backend.where(negative_relevance < 0, lowest - 1.0, negative_scores)
  _, index = backend.top_k(ranked, num_negatives)
  chosen = [
    backend.take_along_axis(x, index, axis=-1) for x in (negative_scores, negative_relevance)
  ]
  return (
    ops.concatenate([scores[:, :1], chosen[0]], axis=1),
    ops.concatenate([relevance[:, :1], chosen[1]], axis=1),
  )
