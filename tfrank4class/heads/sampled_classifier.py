"""A classifier that trains on sampled lists and scores every class at evaluation and serving.

:class:`SampledDotProduct` holds the class table ``E`` ``[C, d]`` (and an optional bias ``b``
``[C]``): called, it returns every class's scores ``h E^T + b`` ``[B, C]``; its
:meth:`~SampledDotProduct.sampled_lists` returns the ``(scores, relevance)`` ``[B, 1 + S]`` of
:func:`tfrank4class.heads.sampled.sampled_lists` (the true class and ``S`` negatives drawn from
the layer's distribution with its own ``keras.random.SeedGenerator``, the log-Q correction and
accidental hits as set), so a training step costs ``O(B S d)`` and builds no ``[B, C]`` tensor.

:meth:`~SampledDotProduct.top_k` returns the ``k`` best classes by a brute-force scan of the
table in blocks (:func:`tfrank4class.heads.blocked_top_k.blocked_top_k`, memory ``O(B (n + k))``),
which :func:`tfrank4class.retrieval.export.export_top_k_model` writes as a SavedModel on
TensorFlow.

:class:`SampledClassifier` joins an encoder (any Keras layer or model, ``x -> h`` ``[B, d]``) and
that head, or a :class:`~tfrank4class.heads.sampled_rank4class.SampledRank4ClassHead`. Keras 3's
trainers call ``compute_loss(x, y, y_pred, sample_weight, training)`` on every backend; the model
overrides it so that, in training, the compiled loss (any loss of the registry:
``compile(loss="softmax_loss")``) sees the sampled list as ``(relevance, scores)`` in place of
``(y, y_pred)``. At evaluation, prediction and serving the model returns the full
scores ``[B, C]``, so ``evaluate`` reports the compiled loss and metrics over every class.

In training, ``model(x, training=True)`` returns ``{"queries": h}`` (what the loss step needs),
and the compiled metrics are not updated (a sampled list is not the ranking the metrics read):
read them from ``evaluate`` or ``validation_data``. Keras 3 only (tf-keras has no
``keras.random``, which the sampler draws with).

On JAX, with ``keras.optimizers.SGD`` (no momentum) or ``keras.optimizers.Adagrad``, a training
step reads, differentiates and updates only the class-table rows of its candidates (either
head's table; :mod:`tfrank4class.heads.row_sparse`; the dense step's result); otherwise it is
Keras's step.

The example is :class:`SampledClassifier`'s.
"""

import numpy as np

from tfrank4class import checks
from tfrank4class.compat import keras, ops
from tfrank4class.heads import row_sparse, sampled
from tfrank4class.heads.blocked_top_k import blocked_top_k
from tfrank4class.heads.sampled_rank4class import SampledRank4ClassHead
from tfrank4class.labels import class_ids
from tfrank4class.registry import export


def _dot_scores(queries, class_embeddings):
  """``[B, n]``: each query against each of ``n`` class embeddings."""
  return ops.matmul(queries, ops.transpose(class_embeddings))


@export()
class SampledDotProduct(keras.layers.Layer):
  """Dot-product class scores ``h E^T + b``: every class when called, a sampled list on demand.

  Args:
    num_classes: ``C >= 2``.
    num_negatives: ``S >= 1``, the negatives drawn per training step (shared by the batch).
    distribution: ``"uniform"``, ``"log_uniform"`` (class ids sorted by decreasing frequency) or
      a frequency table of ``C`` non-negative weights
      (:func:`tfrank4class.heads.sampled.class_log_probabilities`).
    log_q_correction: subtract ``log(S q_j)`` from each negative's score (sampled softmax).
    remove_accidental_hits: mask a negative equal to the row's true class as padding.
    use_bias: add a per-class bias ``b`` ``[C]``.
    embeddings_initializer: the class table's initializer.
    seed: an int or ``None``: the seed of the layer's ``keras.random.SeedGenerator``.

  Example:
    >>> import numpy as np
    >>> head = SampledDotProduct(num_classes=100, num_negatives=8, distribution="log_uniform")
    >>> h = np.ones((4, 16), "float32")
    >>> tuple(head(h).shape)  # every class
    (4, 100)
    >>> scores, relevance = head.sampled_lists(h, [3, 1, 4, 1])
    >>> tuple(scores.shape), tuple(relevance.shape)  # the true class and 8 negatives
    ((4, 9), (4, 9))
  """

  def __init__(
    self,
    num_classes,
    num_negatives,
    distribution="uniform",
    log_q_correction=True,
    remove_accidental_hits=True,
    use_bias=False,
    embeddings_initializer="glorot_uniform",
    seed=None,
    **kwargs,
  ):
    super().__init__(**kwargs)
    self.num_classes = checks.check_int("num_classes", num_classes, minimum=2)
    self.num_negatives = checks.check_int("num_negatives", num_negatives, minimum=1)
    if not isinstance(distribution, str):
      distribution = [float(w) for w in np.asarray(distribution, "float64").reshape(-1)]
    sampled.class_log_probabilities(self.num_classes, distribution)  # raises if it is bad
    self.distribution = distribution
    self.log_q_correction = bool(log_q_correction)
    self.remove_accidental_hits = bool(remove_accidental_hits)
    self.use_bias = bool(use_bias)
    self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
    self.seed = checks.check_int("seed", seed, allow_none=True)
    self.seed_generator = keras.random.SeedGenerator(seed)

  def build(self, query_shape):
    dim = query_shape[-1]
    if dim is None:
      raise ValueError(f"SampledDotProduct needs a known query width, got shape {query_shape}.")
    self.class_embeddings = self.add_weight(
      name="class_embeddings",
      shape=(self.num_classes, dim),
      initializer=self.embeddings_initializer,
    )
    self.bias = (
      self.add_weight(name="bias", shape=(self.num_classes,), initializer="zeros")
      if self.use_bias
      else None
    )

  def call(self, queries):
    """Every class's scores ``[B, C]``."""
    scores = _dot_scores(queries, ops.cast(self.class_embeddings, queries.dtype))
    return scores if self.bias is None else scores + ops.cast(self.bias, scores.dtype)

  def compute_output_shape(self, query_shape):
    return (query_shape[0], self.num_classes)

  def draw_negatives(self):
    """``(ids [S], log q [S])``: fresh negatives from the layer's distribution and seed."""
    return sampled.sample_classes(
      self.num_classes, self.num_negatives, self.distribution, seed=self.seed_generator
    )

  def sampled_lists(self, queries, labels, rows=None):
    """``(scores, relevance)`` ``[B, 1 + S]``: the true class, then ``S`` fresh negatives.

    ``rows`` (:class:`~tfrank4class.heads.row_sparse.GatheredRows`, from the row-sparse training
    step) scores the candidates from rows gathered beforehand instead of drawing and reading the
    class table.
    """
    if rows is None:
      negatives, log_q = self.draw_negatives()
      ids = class_ids(labels, self.num_classes)
      table, bias = self.class_embeddings, self.bias
    else:
      ids, negatives, log_q = rows.ids, rows.negatives, rows.log_q
      table, bias = rows.embeddings, rows.bias
    scores, relevance = sampled.sampled_lists(
      queries,
      table,
      ids,
      negatives,
      log_q,
      log_q_correction=self.log_q_correction,
      remove_accidental_hits=self.remove_accidental_hits,
    )
    if bias is not None:
      bias = ops.cast(bias, scores.dtype)
      scores = ops.concatenate(
        [scores[:, :1] + ops.take(bias, ids)[:, None], scores[:, 1:] + ops.take(bias, negatives)],
        axis=1,
      )
    return scores, relevance

  def top_k(self, queries, k, block_size=1024):
    """``(scores [B, k], class ids [B, k] int32)``, best first, ties by the lower id: every
    class scored ``block_size`` at a time (:func:`~tfrank4class.heads.blocked_top_k.
    blocked_top_k`), never the ``[B, C]`` scores; a bias is the table's last column against
    ``[h, 1]``, as in Rank4Class's dot head."""
    queries = ops.convert_to_tensor(queries)
    if not self.built:
      self.build(queries.shape)
    table = ops.cast(self.class_embeddings, queries.dtype)
    if self.bias is not None:
      table = ops.concatenate([table, ops.cast(self.bias, queries.dtype)[:, None]], axis=1)
      queries = ops.concatenate([queries, ops.ones_like(queries[:, :1])], axis=1)
    return blocked_top_k(_dot_scores, queries, table, k, block_size)

  def get_config(self):
    config = super().get_config()
    config.update(
      {
        "num_classes": self.num_classes,
        "num_negatives": self.num_negatives,
        "distribution": self.distribution,
        "log_q_correction": self.log_q_correction,
        "remove_accidental_hits": self.remove_accidental_hits,
        "use_bias": self.use_bias,
        "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
        "seed": self.seed,
      }
    )
    return config


@export()
class SampledClassifier(keras.Model):
  """``encoder`` then a :class:`SampledDotProduct` or
  :class:`~tfrank4class.heads.sampled_rank4class.SampledRank4ClassHead` head: sampled lists in
  training, every class otherwise (see the module doc).

  Args:
    encoder: a Keras layer or model, ``x -> h`` ``[B, d]``.
    head: a :class:`SampledDotProduct` or a
      :class:`~tfrank4class.heads.sampled_rank4class.SampledRank4ClassHead`.

  Example:
    >>> import numpy as np
    >>> from tfrank4class.compat import keras
    >>> model = SampledClassifier(
    ...   keras.layers.Dense(8), SampledDotProduct(num_classes=1000, num_negatives=20, seed=0)
    ... )
    >>> model.compile(optimizer="adam", loss="softmax_loss")
    >>> x, y = np.ones((16, 4), "float32"), np.arange(16)
    >>> history = model.fit(x, y, epochs=1, verbose=0)  # the loss sees [16, 21] lists
    >>> tuple(model.predict(x, verbose=0).shape)  # every class at prediction
    (16, 1000)
  """

  def __init__(self, encoder, head, **kwargs):
    super().__init__(**kwargs)
    if not isinstance(head, (SampledDotProduct, SampledRank4ClassHead)):
      raise ValueError(
        f"`head` must be a SampledDotProduct, got {type(head).__name__}; a "
        f"SampledRank4ClassHead is the other head that fits."
      )
    self.encoder = encoder
    self.head = head
    # The rows of a row-sparse training step (heads/row_sparse.py), set while it traces the
    # loss; set past Keras's attribute tracking (a tuple of traced arrays, not state).
    object.__setattr__(self, "_gathered_rows", None)

  def call(self, inputs, training=False):
    queries = self.encoder(inputs, training=training)
    if training:
      if not self.head.built:
        self.head.build(queries.shape)
      return {"queries": queries}
    return self.head(queries)

  def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
    if isinstance(y_pred, dict):  # a training step: the loss sees the sampled list
      rows = {} if self._gathered_rows is None else {"rows": self._gathered_rows}
      y_pred, y = self.head.sampled_lists(y_pred["queries"], y, **rows)
    return super().compute_loss(x, y, y_pred, sample_weight, training)

  def train_step(self, *args):
    if row_sparse.applies(self):
      return row_sparse.train_step(self, *args)
    return super().train_step(*args)

  def compute_metrics(self, x, y, y_pred, sample_weight=None):
    compiled = self._compile_metrics
    if not isinstance(y_pred, dict):
      return super().compute_metrics(x, y, y_pred, sample_weight)
    # A training step: no full scores to measure; report the losses alone. The compiled metrics
    # are built (as for the full scores) so that Keras can read them at the epoch's end.
    if compiled is not None and not compiled.built:
      compiled.build(y, keras.KerasTensor((None, self.head.num_classes)))
    return {m.name: m.result() for m in self.metrics if m is not compiled}

  def get_config(self):
    config = super().get_config()
    config.update(
      {
        "encoder": keras.saving.serialize_keras_object(self.encoder),
        "head": keras.saving.serialize_keras_object(self.head),
      }
    )
    return config

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    encoder = keras.saving.deserialize_keras_object(config.pop("encoder"))
    head = keras.saving.deserialize_keras_object(config.pop("head"))
    return cls(encoder, head, **config)
