"""Score memory (Rolinek et al., "Optimizing Rank-based Metrics with Blackbox Differentiation",
CVPR 2020, Sec. 4.3).

Rank-based losses computed down a batch (per-class AP, retrieval recall) see lists only as long as
the batch. The score memory keeps the (detached) scores - or embeddings - and labels of the last
``tau`` batches and hands the loss the current batch concatenated with them:

    values_all = [values_t ; values_{t-1} ; ... ; values_{t-tau}]      (rows, newest first)

Gradients flow only through the current batch ``values_t``; the remembered rows are constants.
After each call the current batch is pushed and the oldest batch dropped.

Where the state lives depends on the backend:

* TensorFlow (Keras 3 and tf-keras): non-trainable ``tf.Variable`` s created on the first call
  (their leading dimension is dynamic, so batches of different sizes are fine), which
  ``tf.function`` and XLA update in place; plain TensorFlow variables, not Keras weights of the
  model. This part is TensorFlow by nature (variables of dynamic shape, synchronised per replica)
  and the only one of the module that imports TensorFlow, on that backend only.
* PyTorch: the remembered rows are detached tensors held by the object, updated eagerly
  (Keras's PyTorch trainer runs eagerly).
* JAX: a ring of fixed-shape non-trainable ``keras.Variable`` s (values ``[tau b, ...]``, labels
  ``[tau b, ...]``, which of the ``tau`` slots are filled), created with the batch size ``b`` of a
  first eager call, read and assigned in the call. Keras's JAX trainer traces the loss and
  carries only the model's variables between steps (through a ``keras.StatelessScope``), so
  assign them to the model: ``loss.build_state(y[:b], model(x[:b]))`` then
  ``model.loss_state_variables = loss.state_variables``. Slots not yet filled are handed out as
  padding (labels ``-1``, values 0): the lists always have ``(tau + 1) b`` rows, and ``lambda_``
  (normalised by the list length) differs from the other backends' shorter lists during the
  first ``tau`` steps. A batch of another size, a traced first call, and a traced call that does
  not carry the variables raise a ``ValueError``.

Distribution (TensorFlow): the variables are ``ON_READ``-synchronised, so under
``tf.distribute.MirroredStrategy`` every replica keeps and reads its OWN memory, i.e. the last
``tau`` per-replica shards it saw itself; nothing is exchanged between replicas. In ``fit`` (Keras
3 and Keras 2 alike) a global batch of ``B`` rows over ``R`` replicas gives each replica's loss
its own ``B / R`` current rows followed by the ``tau`` shards of ``B / R`` rows that the same
replica had before (so ``(tau + 1) B / R`` rows, not ``(tau + 1) B``).
:meth:`ScoreMemory.remembered`, run per replica (``strategy.run(memory.remembered)``), reads them.
Calls made during ``model.evaluate`` also push batches; reset with :meth:`ScoreMemory.reset` if
that matters.
"""

from tfrank4class import backend, checks, compat
from tfrank4class.compat import ops
from tfrank4class.registry import export

if compat.BACKEND == "tensorflow":
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
if compat.BACKEND == "jax":
  import keras  # pylint: disable=g-import-not-at-top


class _VariableRows:
  """The TensorFlow store: ``ON_READ`` variables of dynamic leading dimension."""

  def __init__(self, batches, values, labels):
    for name, t in (("values", values), ("labels", labels)):
      if t.shape.rank is None or not t.shape[1:].is_fully_defined():
        raise ValueError(
          f"ScoreMemory needs `{name}` with known static inner dimensions, got shape {t.shape}."
        )
    with tf.init_scope():
      self.values = self._variable(values)
      self.labels = self._variable(labels)
      self.sizes = self._variable(tf.zeros([batches], tf.int32), leading=batches)

  @staticmethod
  def _variable(like, leading=None):
    initial = like if leading else tf.zeros([0] + like.shape[1:].as_list(), like.dtype)
    return tf.Variable(
      initial,
      shape=[leading] + like.shape[1:].as_list(),
      trainable=False,
      synchronization=tf.VariableSynchronization.ON_READ,
      aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
    )

  def push(self, values, labels):
    old_sizes = tf.identity(self.sizes)
    values_all = tf.concat([values, tf.identity(self.values)], axis=0)
    labels_all = tf.concat([labels, tf.identity(self.labels)], axis=0)
    sizes = tf.concat([tf.shape(values)[:1], old_sizes[:-1]], axis=0)
    keep = tf.reduce_sum(sizes)
    with tf.control_dependencies([values_all, labels_all]):
      updates = [
        self.values.assign(tf.stop_gradient(values_all[:keep])),
        self.labels.assign(labels_all[:keep]),
        self.sizes.assign(sizes),
      ]
    with tf.control_dependencies(updates):
      return tf.identity(values_all), tf.identity(labels_all)

  def rows(self):
    return tf.identity(self.values), tf.identity(self.labels)

  def reset(self):
    self.values.assign(tf.zeros([0] + self.values.shape[1:].as_list(), self.values.dtype))
    self.labels.assign(tf.zeros([0] + self.labels.shape[1:].as_list(), self.labels.dtype))
    self.sizes.assign(tf.zeros_like(self.sizes))


class _EagerRows:
  """The PyTorch store: the remembered batches as detached tensors, newest first."""

  def __init__(self, batches, values, labels):
    del values, labels
    self.batches = batches
    self.kept = []

  def push(self, values, labels):
    if not (backend.is_concrete(values) and backend.is_concrete(labels)):
      raise ValueError(
        f"ScoreMemory (a loss's `memory` > 0) keeps the batches it saw, and on the "
        f"{backend.name()} backend it can only keep values it can read when called; it was "
        "called inside a traced function (Keras's JAX trainer traces the loss for its "
        "gradient). Use memory=0, or the TensorFlow or PyTorch backend."
      )
    values_all = ops.concatenate([values, *(v for v, _ in self.kept)], axis=0)
    labels_all = ops.concatenate([labels, *(lab for _, lab in self.kept)], axis=0)
    self.kept = [(ops.stop_gradient(values), labels), *self.kept[: self.batches - 1]]
    return values_all, labels_all

  def rows(self):
    if not self.kept:
      return None, None
    return tuple(ops.concatenate(part, axis=0) for part in zip(*self.kept))

  def reset(self):
    self.kept = []


class _RingRows:
  """The JAX store: a ring of the last ``batches`` batches in fixed-shape non-trainable
  ``keras.Variable`` s (values, labels, which slots are filled), read and assigned in the call.

  Under a traced Keras ``fit`` the trainer carries them between steps once they are attributes
  of the model (``model.loss_state_variables = loss.state_variables``): it threads the model's
  non-trainable variables through a ``keras.StatelessScope``. Slots not yet filled are handed
  out with labels ``-1`` (padding) and values 0.
  """

  def __init__(self, batches, values, labels):
    if not (backend.is_concrete(values) and backend.is_concrete(labels)):
      raise ValueError(
        "ScoreMemory on the jax backend keeps its batches in variables of fixed shape, created "
        "on a first eager call; it was first called inside a traced function. Call the loss "
        "once eagerly on a batch of the training batch size (`loss.build_state(y_true, y_pred)`)"
        " before `fit` or `jax.jit`."
      )
    self.batches = batches
    self.batch_size = int(values.shape[0])
    for name, t in (("values", values), ("labels", labels)):
      if int(t.shape[0]) != self.batch_size:
        raise ValueError(
          f"ScoreMemory needs `{name}` with {self.batch_size} rows (the batch size of `values`),"
          f" got shape {tuple(t.shape)}."
        )
    rows = batches * self.batch_size

    def variable(shape, dtype, name):
      return keras.Variable(
        ops.zeros(shape, dtype), trainable=False, dtype=dtype, name=f"score_memory_{name}"
      )

    self.values = variable((rows, *values.shape[1:]), backend.dtype_name(values), "values")
    self.labels = variable((rows, *labels.shape[1:]), backend.dtype_name(labels), "labels")
    self.filled = variable((batches,), "bool", "filled")

  @property
  def variables(self):
    return [self.values, self.labels, self.filled]

  def _updates(self, values):
    """Whether this call may assign the variables: eagerly, or traced inside a
    ``keras.StatelessScope`` that carries them. Under Keras's shape inference (a symbolic scope)
    the call only reads them; traced anywhere else (a JAX ``fit`` without the assignment, a bare
    ``jax.jit``) it raises, since the batches would be lost."""
    if backend.is_concrete(values):
      return True
    carried = backend.state_is_carried(self.values)
    if carried is None:
      return False
    if not carried:
      raise ValueError(
        "ScoreMemory was called inside a traced function that does not carry its variables: "
        "under Keras's JAX `fit`, assign them to the model first "
        "(`model.loss_state_variables = loss.state_variables`); under `jax.jit`, thread them "
        "through a `keras.StatelessScope`. Otherwise the remembered batches would be lost."
      )
    return True

  def _padded(self):
    """The remembered rows, newest first, with labels -1 (padding) in slots not yet filled."""
    filled = ops.repeat(ops.convert_to_tensor(self.filled), self.batch_size)
    labels = ops.convert_to_tensor(self.labels)
    filled = ops.reshape(filled, (-1,) + (1,) * (len(labels.shape) - 1))
    labels = backend.where(filled, labels, -ops.ones_like(labels))
    return ops.convert_to_tensor(self.values), labels

  def push(self, values, labels):
    if int(values.shape[0]) != self.batch_size or int(labels.shape[0]) != self.batch_size:
      raise ValueError(
        f"ScoreMemory on the jax backend keeps batches of a fixed size, {self.batch_size} (the "
        f"first batch's); got `values` of shape {tuple(values.shape)} and `labels` of shape "
        f"{tuple(labels.shape)}. Use a fixed batch size (e.g. drop the last partial batch)."
      )
    old_values, old_labels = self._padded()
    values_all = ops.concatenate([values, old_values], axis=0)
    labels_all = ops.concatenate([labels, old_labels], axis=0)
    if not self._updates(values):
      return values_all, labels_all
    keep = self.values.shape[0]
    self.values.assign(ops.stop_gradient(values_all[:keep]))
    self.labels.assign(ops.cast(labels_all[:keep], self.labels.dtype))
    filled = ops.convert_to_tensor(self.filled)
    self.filled.assign(ops.concatenate([ops.ones((1,), "bool"), filled[:-1]], axis=0))
    return values_all, labels_all

  def rows(self):
    count = int(ops.sum(ops.cast(ops.convert_to_tensor(self.filled), "int32")))
    if not count:
      return None, None
    keep = count * self.batch_size
    return ops.convert_to_tensor(self.values)[:keep], ops.convert_to_tensor(self.labels)[:keep]

  def reset(self):
    for v in self.variables:
      v.assign(ops.zeros(v.shape, v.dtype))


@export()
class ScoreMemory:
  """Remembers the values and labels of the last ``batches`` batches (RaMBO Sec. 4.3).

  ``memory(values, labels) -> (values_all, labels_all)`` with the current batch first.

  Args:
    batches: ``tau >= 0``, the number of past batches kept (0 = no memory: inputs returned as is).

  Example:
    >>> import numpy as np
    >>> memory = ScoreMemory(batches=1)
    >>> ones, zeros = np.ones([2, 3], np.float32), np.zeros([2, 3], np.float32)
    >>> v, _ = memory(ones, zeros)     # nothing remembered yet
    >>> v, _ = memory(2 * ones, zeros)
    >>> tuple(v.shape)
    (4, 3)
  """

  def __init__(self, batches, name=None):
    self.batches = checks.check_int("batches", batches, minimum=0)
    self.name = name or "score_memory"
    self._store = None
    self._dtypes = None

  def __call__(self, values, labels):
    """Returns the current batch followed by the remembered ones, then remembers this batch.

    Args:
      values: ``[b, ...]`` scores or embeddings of the current batch (gradients flow through).
      labels: ``[b, ...]`` their labels or relevance.

    Returns:
      ``(values_all, labels_all)``: ``[b + m, ...]`` with the ``m`` remembered rows detached.
    """
    values = ops.convert_to_tensor(values)
    labels = ops.convert_to_tensor(labels)
    if self.batches == 0:
      return values, labels
    dtypes = (backend.dtype_name(values), backend.dtype_name(labels))
    if self._store is None:
      rows = {"tensorflow": _VariableRows, "jax": _RingRows}.get(compat.BACKEND, _EagerRows)
      self._store = rows(self.batches, values, labels)
      self._dtypes = dtypes
    if dtypes != self._dtypes:
      raise ValueError(
        f"ScoreMemory was built for values {self._dtypes[0]} / labels {self._dtypes[1]}, got "
        f"{dtypes[0]} / {dtypes[1]}."
      )
    return self._store.push(values, labels)

  @property
  def variables(self):
    """The state variables of the JAX store (``[]`` on other backends and before the first call;
    assign them to the model so that a traced ``fit`` carries them, see the module docstring)."""
    return list(getattr(self._store, "variables", []))

  def remembered(self):
    """``(values, labels)``: the rows held now, newest first (``(None, None)`` before the first
    call, with ``batches=0`` always).

    Under a ``tf.distribute`` strategy, call it per replica (``strategy.run(memory.remembered)``)
    to read each replica's own memory; in the cross-replica context it reads the first
    replica's.
    """
    if self._store is None:
      return None, None
    return self._store.rows()

  def reset(self):
    """Forgets every remembered batch."""
    if self._store is not None:
      self._store.reset()

  def get_config(self):
    return {"batches": self.batches, "name": self.name}

  @classmethod
  def from_config(cls, config):
    return cls(**config)
