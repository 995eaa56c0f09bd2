"""Score memory (Rolinek et al., "Optimizing Rank-based Metrics with Blackbox Differentiation",
CVPR 2020, Sec. 4.3).

Rank-based losses computed down a batch (per-class AP, retrieval recall) see lists only as long as
the batch. The score memory keeps the (detached) scores - or embeddings - and labels of the last
``tau`` batches and hands the loss the current batch concatenated with them:

    values_all = [values_t ; values_{t-1} ; ... ; values_{t-tau}]      (rows, newest first)

Gradients flow only through the current batch ``values_t``; the remembered rows are constants.
After each call the current batch is pushed and the oldest batch dropped.

State lives in non-trainable ``tf.Variable`` s created on the first call (their leading dimension
is dynamic, so batches of different sizes are fine); they are plain TensorFlow variables, not
Keras weights of the model.

Distribution: the variables are ``ON_READ``-synchronised, so under
``tf.distribute.MirroredStrategy`` every replica keeps and reads its OWN memory, i.e. the last
``tau`` per-replica shards it saw itself; nothing is exchanged between replicas. In ``fit`` (Keras
3 and Keras 2 alike) a global batch of ``B`` rows over ``R`` replicas gives each replica's loss
its own ``B / R`` current rows followed by the ``tau`` shards of ``B / R`` rows that the same
replica had before (so ``(tau + 1) B / R`` rows, not ``(tau + 1) B``).
:meth:`ScoreMemory.remembered`, run per replica (``strategy.run(memory.remembered)``), reads them.
Calls made during ``model.evaluate`` also push batches; reset with :meth:`ScoreMemory.reset` if
that matters.
"""

import tensorflow as tf

from tfrank4class import checks, compat


@compat.register_serializable
class ScoreMemory(tf.Module):
  """Remembers the values and labels of the last ``batches`` batches (RaMBO Sec. 4.3).

  ``memory(values, labels) -> (values_all, labels_all)`` with the current batch first.

  Args:
    batches: ``tau >= 0``, the number of past batches kept (0 = no memory: inputs returned as is).

  Example:
    >>> memory = ScoreMemory(batches=1)
    >>> v, _ = memory(tf.ones([2, 3]), tf.zeros([2, 3]))     # nothing remembered yet
    >>> v, _ = memory(2 * tf.ones([2, 3]), tf.zeros([2, 3]))
    >>> v.shape
    TensorShape([4, 3])
  """

  def __init__(self, batches, name=None):
    super().__init__(name=name)
    self.batches = checks.check_int("batches", batches, minimum=0)
    self._values = None
    self._labels = None
    self._sizes = None

  def _variable(self, initial, shape):
    return tf.Variable(
      initial,
      shape=shape,
      trainable=False,
      synchronization=tf.VariableSynchronization.ON_READ,
      aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
    )

  def _build(self, values, labels):
    for name, t in (("values", values), ("labels", labels)):
      if t.shape.rank is None or not t.shape[1:].is_fully_defined():
        raise ValueError(
          f"ScoreMemory needs `{name}` with known static inner dimensions, got shape {t.shape}."
        )
    with tf.init_scope():
      self._values = self._variable(
        tf.zeros([0] + values.shape[1:].as_list(), values.dtype),
        [None] + values.shape[1:].as_list(),
      )
      self._labels = self._variable(
        tf.zeros([0] + labels.shape[1:].as_list(), labels.dtype),
        [None] + labels.shape[1:].as_list(),
      )
      self._sizes = self._variable(tf.zeros([self.batches], tf.int32), [self.batches])

  @tf.autograph.experimental.do_not_convert
  def __call__(self, values, labels):
    """Returns the current batch followed by the remembered ones, then remembers this batch.

    Args:
      values: ``[b, ...]`` scores or embeddings of the current batch (gradients flow through).
      labels: ``[b, ...]`` their labels or relevance.

    Returns:
      ``(values_all, labels_all)``: ``[b + m, ...]`` with the ``m`` remembered rows detached.
    """
    values = tf.convert_to_tensor(values)
    labels = tf.convert_to_tensor(labels)
    if self.batches == 0:
      return values, labels
    if self._values is None:
      self._build(values, labels)
    if values.dtype != self._values.dtype or labels.dtype != self._labels.dtype:
      raise ValueError(
        f"ScoreMemory was built for values {self._values.dtype.name} / labels "
        f"{self._labels.dtype.name}, got {values.dtype.name} / {labels.dtype.name}."
      )
    old_values = tf.identity(self._values)
    old_labels = tf.identity(self._labels)
    old_sizes = tf.identity(self._sizes)
    values_all = tf.concat([values, old_values], axis=0)
    labels_all = tf.concat([labels, old_labels], axis=0)
    sizes = tf.concat([tf.shape(values)[:1], old_sizes[:-1]], axis=0)
    keep = tf.reduce_sum(sizes)
    with tf.control_dependencies([values_all, labels_all]):
      updates = [
        self._values.assign(tf.stop_gradient(values_all[:keep])),
        self._labels.assign(labels_all[:keep]),
        self._sizes.assign(sizes),
      ]
    with tf.control_dependencies(updates):
      return tf.identity(values_all), tf.identity(labels_all)

  def remembered(self):
    """``(values, labels)``: the rows held now, newest first (``(None, None)`` before the first
    call, with ``batches=0`` always).

    Under a ``tf.distribute`` strategy, call it per replica (``strategy.run(memory.remembered)``)
    to read each replica's own memory; in the cross-replica context it reads the first
    replica's.
    """
    if self._values is None:
      return None, None
    return tf.identity(self._values), tf.identity(self._labels)

  def reset(self):
    """Forgets every remembered batch."""
    if self._values is not None:
      self._values.assign(tf.zeros([0] + self._values.shape[1:].as_list(), self._values.dtype))
      self._labels.assign(tf.zeros([0] + self._labels.shape[1:].as_list(), self._labels.dtype))
      self._sizes.assign(tf.zeros([self.batches], tf.int32))

  def get_config(self):
    return {"batches": self.batches, "name": self.name}

  @classmethod
  def from_config(cls, config):
    return cls(**config)
