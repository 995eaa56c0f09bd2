"""A JAX training step of :class:`~tfrank4class.heads.SampledClassifier` that reads and updates only
the class-table rows of the step's sampled lists.

JAX has no sparse gradients: the gradient of a gather from the class table ``E`` ``[C, d]`` is a
dense ``[C, d]`` array (a scatter-add into zeros), and the optimizer then updates every row, an
``O(C d)`` cost per step that sampling was meant to remove. TensorFlow does not have this cost:
the gather's gradient is an ``IndexedSlices`` and Keras's optimizers apply it to the touched rows
(a scatter).

:func:`train_step` draws the step's negatives first, takes the ``U`` distinct candidates of the
step (the batch's true classes and the negatives; ``jnp.unique`` with the static size ``B + S``,
``B + B S`` with per-example negatives, ``B`` in-batch, so ``U`` pads to it with a repeated id),
gathers their rows ``E[u]`` (and the bias ``b[u]``), differentiates the loss with respect to
those rows and the other weights, applies the compiled optimizer to the other weights, and
``E[u] -= lr * g_u`` to the rows (``.at[u].add``). The candidates are renumbered by their
position in ``u``, which keeps every equality between them, so accidental hits and in-batch
duplicates are masked as in the dense step. The table is ``SampledDotProduct``'s class table (and
bias), or a ``SampledRank4ClassHead``'s class-encoder table for every interaction and negatives
option (dot, latent cross, concat; sampled, per-example, hard, in-batch, mixed): the
interaction's MLP weights are read whole by every step and take the compiled optimizer's dense
update with the encoder's.

Exact (the dense step's result, to float rounding of the gradient's sums) for the optimizers
whose update leaves a row with a zero gradient as it is: ``keras.optimizers.SGD`` without
momentum, and ``keras.optimizers.Adagrad`` (its accumulator grows by ``g^2 = 0`` there), each
without weight decay, clipping, EMA or gradient accumulation. With any other optimizer, or on
another backend, :func:`applies` is false and the model takes Keras's own (dense on JAX) step.
An optimizer whose per-row state moves rows with a zero gradient (momentum; Adam's moments,
which decay every step) would become another optimizer if only the touched rows were updated: a
"lazy" Adam (TensorFlow Addons' ``LazyAdam``) updates the moments and values of the touched rows
alone, so a row unseen for ``k`` steps misses ``k`` decays and steps of dense Adam; it is not
provided here.
"""

import collections

from tfrank4class.compat import keras, ops
from tfrank4class.heads.sampled_rank4class import SampledRank4ClassHead
from tfrank4class.labels import class_ids

#: What a row-sparse step hands the head's ``sampled_lists``: the true classes ``[B]`` and the
#: negatives (``[S]``, ``[B, S]``, or ``None`` in-batch) as positions in ``embeddings``
#: ``[U, e]`` (the gathered rows of the class table, ``U`` = the number of candidates) and
#: ``bias`` ``[U]`` (``SampledDotProduct``'s, or ``None``), and the negatives' ``log q``.
GatheredRows = collections.namedtuple(
  "GatheredRows", ["ids", "negatives", "log_q", "embeddings", "bias"]
)


def _tables(head):
  """The head's class-table variables whose rows the step gathers: ``SampledDotProduct``'s table
  (and bias), a ``SampledRank4ClassHead``'s class-encoder table; ``[]`` for any other head (a
  class encoder over class features computes every row from shared weights)."""
  from tfrank4class.heads.sampled_classifier import SampledDotProduct  # noqa: PLC0415 (a cycle)

  if type(head) is SampledDotProduct and head.built:
    return [t for t in (head.class_embeddings, head.bias) if t is not None]
  if type(head) is SampledRank4ClassHead and head.built:
    return [] if head.class_encoder.uses_class_features else [head.class_encoder.table]
  return []


def applies(model):
  """Whether ``model``'s training step is :func:`train_step`: JAX, a built head with a class
  table (``SampledDotProduct``, or ``SampledRank4ClassHead`` without class features, whose
  interaction's weights take the dense update), and plain SGD or Adagrad."""
  optimizer = model.optimizer
  return (
    keras.backend.backend() == "jax"
    and bool(_tables(model.head))
    and type(optimizer) in (keras.optimizers.SGD, keras.optimizers.Adagrad)
    and float(getattr(optimizer, "momentum", 0.0)) == 0.0
    and optimizer.weight_decay is None
    and optimizer.clipnorm is None
    and optimizer.clipvalue is None
    and optimizer.global_clipnorm is None
    and not optimizer.use_ema
    and optimizer.gradient_accumulation_steps is None
    and model.head.trainable  # a frozen table has no update to make sparse
  )


def _index(variables, variable):
  return next(i for i, v in enumerate(variables) if v is variable)


def _draw(model, non_trainable, batch_size):
  """The head's negatives (``None, None`` for in-batch negatives alone), drawn statelessly;
  returns them and the new non-trainable values."""
  head, variables = model.head, model.non_trainable_variables
  rank4class = type(head) is SampledRank4ClassHead
  if rank4class and head.negatives == "in_batch":
    return None, None, non_trainable
  with keras.StatelessScope(state_mapping=list(zip(variables, non_trainable))) as scope:
    negatives, log_q = head.draw_negatives(batch_size) if rank4class else head.draw_negatives()
  return negatives, log_q, [scope.get_current_value(v) for v in variables]


def train_step(model, state, data):
  """The JAX trainer's ``train_step(state, data)`` with the row-sparse class-table update."""
  import jax  # noqa: PLC0415  (the JAX backend's step)

  trainable, non_trainable, optimizer_values, metric_values = state
  x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
  ids = class_ids(y, model.head.num_classes)
  batch = ids.shape[0]
  negatives, log_q, non_trainable = _draw(model, non_trainable, batch)
  candidates = ids if negatives is None else ops.concatenate([ids, ops.reshape(negatives, [-1])])
  unique, position = jax.numpy.unique(candidates, size=candidates.shape[0], return_inverse=True)
  position = position.reshape(-1)
  negative_position = None if negatives is None else position[batch:].reshape(negatives.shape)
  at = [_index(model.trainable_variables, t) for t in _tables(model.head)]
  others = [i for i in range(len(trainable)) if i not in at]

  def loss_of(rows, other_values):
    values = list(trainable)  # the whole tables are read by no op of the loss
    for i, value in zip(others, other_values):
      values[i] = value
    gathered = GatheredRows(
      position[:batch], negative_position, log_q, rows[0], rows[1] if len(rows) > 1 else None
    )
    object.__setattr__(model, "_gathered_rows", gathered)
    try:
      return model.compute_loss_and_updates(
        values,
        non_trainable,
        metric_values,
        x,
        y,
        sample_weight,
        training=True,
        optimizer_variables=optimizer_values,
      )
    finally:
      object.__setattr__(model, "_gathered_rows", None)

  rows = [trainable[i][unique] for i in at]
  (_, aux), (row_grads, other_grads) = jax.value_and_grad(loss_of, argnums=(0, 1), has_aux=True)(
    rows, [trainable[i] for i in others]
  )
  unscaled_loss, y_pred, non_trainable, metric_values = aux
  trainable, optimizer_values = _apply(
    model, trainable, optimizer_values, others, other_grads, dict(zip(at, row_grads)), unique
  )
  logs, metric_values = model._update_metrics_variables(  # the JAX trainer's own
    metric_values, unscaled_loss, x, y, y_pred, sample_weight
  )
  return logs, (trainable, non_trainable, optimizer_values, metric_values)


def _apply(model, trainable, optimizer_values, others, other_grads, row_grads, unique):
  """The compiled optimizer on the other weights; its update on each table's rows ``u`` alone
  (SGD: ``E[u] -= lr g_u``; Adagrad: ``A[u] += g_u^2``, ``E[u] -= lr g_u / sqrt(A[u] + eps)``)."""
  optimizer, variables = model.optimizer, model.trainable_variables
  mapping = list(zip(variables, trainable)) + list(zip(optimizer.variables, optimizer_values))
  with keras.StatelessScope(state_mapping=mapping) as scope:
    # This step's (a schedule reads the step count, which `apply` then advances).
    learning_rate = ops.convert_to_tensor(optimizer.learning_rate)
    optimizer.apply(other_grads, [variables[i] for i in others])
  trainable = [scope.get_current_value(v) for v in variables]
  optimizer_values = [scope.get_current_value(v) for v in optimizer.variables]
  for i, grad in row_grads.items():
    table = trainable[i]
    grad, learning_rate = ops.cast(grad, table.dtype), ops.cast(learning_rate, table.dtype)
    if isinstance(optimizer, keras.optimizers.Adagrad):  # the dense step's formula, row-wise
      accumulator = optimizer._accumulators[optimizer._get_variable_index(variables[i])]
      k = _index(optimizer.variables, accumulator)
      optimizer_values[k] = optimizer_values[k].at[unique].add(ops.square(grad))
      denominator = ops.sqrt(ops.add(optimizer_values[k][unique], optimizer.epsilon))
      step = ops.divide(ops.multiply(learning_rate, grad), denominator)
    else:
      step = ops.multiply(grad, learning_rate)
    trainable[i] = table.at[unique].add(-step)  # a padding slot of `unique` adds -0
  return trainable, optimizer_values
