"""The Rank4Class head on sampled candidates in training, and a blocked top-k at serving.

:class:`SampledRank4ClassHead` is a :class:`~tfrank4class.heads.Rank4ClassHead` (a class encoder
and an interaction ``s_{b,i} = f(h_b, c_i)``: dot product, latent cross ``MLP((1 + c_i) * h)`` or
concat ``MLP([h, c_i])``; Rank4Class, ICLR 2022 submission, Sec. 3.2 and 4.2) that, in
training, evaluates the interaction only for each example's candidates:

* ``negatives="sampled"``: the true class and ``S`` classes drawn from the layer's
  ``distribution`` (shared by the batch, or each example's own with
  ``per_example_negatives=True``): scores and relevance ``[B, 1 + S]`` as
  :func:`tfrank4class.heads.sampled.sampled_lists` gives them for the dot product (the log-Q
  correction ``log(S q_j)`` subtracted from each negative when ``log_q_correction``, accidental
  hits masked as padding when ``remove_accidental_hits``); with ``num_hard_negatives=m`` only
  the ``m`` highest-scoring of the ``S`` (:func:`~tfrank4class.heads.sampled.hardest_negatives`);
* ``negatives="in_batch"``: the batch's true classes, ``[B, B]`` with the diagonal relevant and
  duplicates masked (:func:`~tfrank4class.heads.sampled.in_batch_lists`; with
  ``log_q_correction``, column ``j`` loses ``log q_{y_j}`` of ``distribution``, Yi et al.'s
  correction when ``distribution`` is the data's class frequencies);
* ``negatives="mixed"``: both, ``[B, B + S]`` (:func:`~tfrank4class.heads.sampled.mixed_lists`).

The candidates' class embeddings are gathered (``[S, e]`` shared, ``[B, 1 + S, e]`` per example;
a class table's rows are read with :func:`~tfrank4class.heads.sampled.gather_rows`) and the
interaction runs on those pairs only (:meth:`~tfrank4class.heads.Interaction.score` takes each
example's own ``[B, L, e]``): a step of the MLP interactions holds ``[B, L, w]`` activations per
hidden layer, not ``[B, C, w]``. A class encoder over class features still computes every
class's embedding, an ``O(C)`` pass that does not grow with ``B``. On JAX, with plain SGD or
Adagrad, a training step gathers, differentiates and updates only the candidates' rows of the
class-encoder table (the MLP's weights densely; :mod:`tfrank4class.heads.row_sparse`).

Called, the head scores every class ``[B, C]`` (the full head); :meth:`~SampledRank4ClassHead.
top_k` returns the ``k`` best classes by a brute-force scan in blocks
(:func:`tfrank4class.heads.blocked_top_k.blocked_top_k`, memory ``O(B (n + k))``).
:func:`tfrank4class.retrieval.export.export_top_k_model` writes it as a SavedModel on
TensorFlow. :class:`~tfrank4class.heads.SampledClassifier` trains it with any loss of the
registry. Keras 3 only (the draws use ``keras.random``).

The example is :class:`SampledRank4ClassHead`'s.
"""

import math

import numpy as np

from tfrank4class import checks
from tfrank4class.compat import keras, ops
from tfrank4class.heads import sampled
from tfrank4class.heads.blocked_top_k import blocked_top_k
from tfrank4class.heads.rank4class_head import Rank4ClassHead
from tfrank4class.labels import class_ids
from tfrank4class.registry import export

#: Where :class:`SampledRank4ClassHead` takes its negatives from.
NEGATIVES = ("sampled", "in_batch", "mixed")


@export()
class SampledRank4ClassHead(Rank4ClassHead):
  """A :class:`~tfrank4class.heads.Rank4ClassHead` that scores sampled candidates in training
  and every class (or a blocked top-k) otherwise (see the module doc).

  Args:
    num_classes, interaction, **kwargs: as :class:`~tfrank4class.heads.Rank4ClassHead`.
    num_negatives: ``S >= 1`` classes drawn per step (``"sampled"``, ``"mixed"``).
    negatives: ``"sampled"``, ``"in_batch"`` or ``"mixed"``.
    num_hard_negatives: ``None`` or ``m`` in ``[1, S]``: keep the ``m`` highest-scoring of the
      ``S`` drawn negatives (``"sampled"`` only).
    per_example_negatives: each example draws its own ``S`` negatives (``[B, S]``; the batch size
      must be known when traced) instead of the batch sharing them.
    distribution: ``"uniform"``, ``"log_uniform"`` or a table of ``C`` class frequencies
      (:func:`tfrank4class.heads.sampled.class_log_probabilities`).
    log_q_correction: subtract each sampled negative's ``log(S q_j)`` (and, in-batch, ``log q``
      of each column's class).
    remove_accidental_hits: mask a sampled negative equal to the row's true class.
    seed: an int or ``None``, the seed of the layer's ``keras.random.SeedGenerator``.

  Example:
    >>> import numpy as np
    >>> head = SampledRank4ClassHead(
    ...   1000, "latent_cross", hidden_units=(8,), num_negatives=16, seed=0
    ... )
    >>> h = np.ones((4, 6), "float32")
    >>> tuple(head(h).shape)  # every class
    (4, 1000)
    >>> scores, relevance = head.sampled_lists(h, [3, 1, 4, 1])
    >>> tuple(scores.shape)  # the true class and 16 negatives, through the MLP
    (4, 17)
    >>> top_scores, top_ids = head.top_k(h, k=5, block_size=128)
    >>> tuple(top_ids.shape)
    (4, 5)
  """

  def __init__(
    self,
    num_classes,
    interaction="dot",
    num_negatives=100,
    negatives="sampled",
    num_hard_negatives=None,
    per_example_negatives=False,
    distribution="uniform",
    log_q_correction=True,
    remove_accidental_hits=True,
    seed=None,
    **kwargs,
  ):
    super().__init__(num_classes, interaction=interaction, **kwargs)
    self.num_negatives = checks.check_int("num_negatives", num_negatives, minimum=1)
    self.negatives = checks.check_choice("negatives", negatives, NEGATIVES)
    self.num_hard_negatives = checks.check_int(
      "num_hard_negatives", num_hard_negatives, minimum=1, allow_none=True
    )
    if self.num_hard_negatives is not None:
      if self.negatives != "sampled":
        raise ValueError(
          f"`num_hard_negatives` needs negatives='sampled', got negatives={self.negatives!r}."
        )
      if self.num_hard_negatives > self.num_negatives:
        raise ValueError(
          f"`num_hard_negatives` must be at most num_negatives={self.num_negatives}, got "
          f"{self.num_hard_negatives}."
        )
    self.per_example_negatives = bool(per_example_negatives)
    if not isinstance(distribution, str):
      distribution = [float(w) for w in np.asarray(distribution, "float64").reshape(-1)]
    sampled.class_log_probabilities(self.num_classes, distribution)  # raises if it is bad
    self.distribution = distribution
    self.log_q_correction = bool(log_q_correction)
    self.remove_accidental_hits = bool(remove_accidental_hits)
    self.seed = checks.check_int("seed", seed, allow_none=True)
    self.seed_generator = keras.random.SeedGenerator(seed)

  def class_rows(self, ids):
    """The class embeddings ``[..., e]`` of class ids of any shape."""
    if self.class_encoder.uses_class_features:
      return self.class_encoder(ids)
    return sampled.gather_rows(self.class_encoder.table, ids)

  def candidate_scores(self, queries, candidates, read_rows=None):
    """Scores ``[B, L]`` of each query against candidate class ids ``[L]`` (shared by the batch)
    or ``[B, L]`` (each example's own): the interaction on those pairs only. ``read_rows``
    (default :meth:`class_rows`) reads the candidates' class embeddings."""
    read_rows = read_rows or self.class_rows
    rows = ops.cast(read_rows(ops.cast(candidates, "int32")), queries.dtype)
    return self.interaction.score(queries, rows)

  def draw_negatives(self, batch_size):
    """``(ids, log q)``, ``[S]`` or (per example) ``[batch_size, S]``, fresh at each call."""
    if not self.per_example_negatives:
      return sampled.sample_classes(
        self.num_classes, self.num_negatives, self.distribution, seed=self.seed_generator
      )
    if batch_size is None:
      raise ValueError("per_example_negatives=True needs a batch size known when traced, got None.")
    ids, log_q = sampled.sample_classes(
      self.num_classes, batch_size * self.num_negatives, self.distribution, seed=self.seed_generator
    )
    shape = (batch_size, self.num_negatives)
    return ops.reshape(ids, shape), ops.reshape(log_q, shape)

  def sampled_lists(self, queries, labels, positives=None, rows=None):
    """``(scores, relevance)`` of each example's candidates: ``[B, 1 + S]`` (``[B, 1 + m]`` with
    hard negatives), ``[B, B]`` in-batch, ``[B, B + S]`` mixed.

    Args:
      queries: ``h`` ``[B, d]``.
      labels: true class ids ``[B]`` / ``[B, 1]``.
      positives: optional multi-hot ``[B, C]``: a candidate that is another positive of its row
        is padding too.
      rows: a :class:`~tfrank4class.heads.row_sparse.GatheredRows` of the row-sparse training
        step: the candidates (true classes, and negatives drawn beforehand) are positions in the
        class-table rows it gathered, which are read instead of the table (without
        ``positives``: the positions keep every equality between the candidates).
    """
    queries = checks.check_scores("queries", queries)
    if not self.built:
      self.build(queries.shape)
    ids = class_ids(labels, self.num_classes)
    keys, read_rows = ids, None  # the candidates as the table's row ids
    if rows is not None:
      if positives is not None:
        raise ValueError("`positives` needs the class ids, which a row-sparse step renumbers.")
      keys, read_rows = rows.ids, lambda at: ops.take(rows.embeddings, at, axis=0)
    lists = []
    if self.negatives != "sampled":
      scores = self.candidate_scores(queries, keys, read_rows)  # [B, B]: the batch's classes
      if self.log_q_correction:
        log_q = sampled.class_log_probabilities(self.num_classes, self.distribution)
        scores = scores - ops.cast(ops.take(log_q, ids), scores.dtype)[None, :]
      lists.append((scores, sampled.in_batch_relevance(keys, positives=positives)))
    if self.negatives != "in_batch":
      drawn = None if rows is None else (rows.negatives, rows.log_q)
      lists.append(self._sampled_part(queries, keys, positives, read_rows, drawn))
    if self.negatives == "mixed":  # the true class is the in-batch diagonal already
      lists[1] = (lists[1][0][:, 1:], lists[1][1][:, 1:])
    scores = ops.concatenate([s for s, _ in lists], axis=1)
    relevance = ops.concatenate([ops.cast(r, scores.dtype) for _, r in lists], axis=1)
    if self.num_hard_negatives is not None:
      return sampled.hardest_negatives(scores, relevance, self.num_hard_negatives)
    return scores, relevance

  def _sampled_part(self, queries, ids, positives, read_rows=None, drawn=None):
    """The true class and ``S`` negatives (``drawn``, else fresh): scores and relevance
    ``[B, 1 + S]``."""
    negatives, log_q = drawn or self.draw_negatives(queries.shape[0])
    if self.per_example_negatives:  # one [B, 1 + S, e] gather, one interaction call
      candidates = ops.concatenate([ids[:, None], negatives], axis=1)
      scores = self.candidate_scores(queries, candidates, read_rows)
      true_scores, negative_scores = scores[:, :1], scores[:, 1:]
    else:  # the [S, e] negatives shared: the interaction on [B, S] pairs, broadcast
      true_scores = self.candidate_scores(queries, ids[:, None], read_rows)
      negative_scores = self.candidate_scores(queries, negatives, read_rows)
    if self.log_q_correction:
      correction = ops.cast(log_q, negative_scores.dtype) + math.log(self.num_negatives)
      negative_scores = negative_scores - correction
    relevance = sampled.sampled_relevance(
      ids, negatives, positives=positives, remove_accidental_hits=self.remove_accidental_hits
    )
    return ops.concatenate([true_scores, negative_scores], axis=1), relevance

  def top_k(self, queries, k, block_size=1024):
    """``(scores [B, k], class ids [B, k] int32)``, best first, ties by the lower id: every
    class scored ``block_size`` at a time (:func:`~tfrank4class.heads.blocked_top_k.
    blocked_top_k`)."""
    queries = ops.convert_to_tensor(queries)
    if not self.built:
      self.build(queries.shape)
    table = ops.cast(self.class_encoder.all_embeddings(), queries.dtype)
    return blocked_top_k(self.interaction.score, queries, table, k, block_size)

  def get_config(self):
    config = super().get_config()
    config.update(
      {
        "num_negatives": self.num_negatives,
        "negatives": self.negatives,
        "num_hard_negatives": self.num_hard_negatives,
        "per_example_negatives": self.per_example_negatives,
        "distribution": self.distribution,
        "log_q_correction": self.log_q_correction,
        "remove_accidental_hits": self.remove_accidental_hits,
        "seed": self.seed,
      }
    )
    return config
