"""A JAX training step of :class:`~tfrank4class.heads.SampledClassifier` that reads and updates only
the class-table rows of the step's sampled lists.

JAX has no sparse gradients: the gradient of a gather from the class table ``E`` ``[C, d]`` is a
dense ``[C, d]`` array (a scatter-add into zeros), and the optimizer then updates every row, an
``O(C d)`` cost per step that sampling was meant to remove. TensorFlow does not have this cost:
the gather's gradient is an ``IndexedSlices`` and Keras's optimizers apply it to the touched rows
(a scatter).

:func:`train_step` draws the step's negatives first, takes the ``U`` distinct candidates of the
step (the batch's true classes and the negatives; ``jnp.unique`` with the static size ``B + S``,
so ``U`` pads to ``B + S`` with a repeated id), gathers their rows ``E[u]`` ``[B + S, d]`` (and
the bias ``b[u]``), differentiates the loss with respect to those rows and the other weights,
applies the compiled optimizer to the other weights, and ``E[u] -= lr * g_u`` to the rows
(``.at[u].add``). The candidates are renumbered by their position in ``u``, which keeps every
equality between them, so accidental hits are masked as in the dense step.

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
from tfrank4class.labels import class_ids

#: What a row-sparse step hands :meth:`SampledDotProduct.sampled_lists`: the true classes
#: ``[B]`` and negatives ``[S]`` as positions in ``embeddings`` ``[B + S, d]`` (the gathered
#: rows) and ``bias`` ``[B + S]`` (or ``None``), and the negatives' ``log q`` ``[S]``.
GatheredRows = collections.namedtuple(
  "GatheredRows", ["ids", "negatives", "log_q", "embeddings", "bias"]
)


def applies(model):
  """Whether ``model``'s training step is :func:`train_step`: JAX, the dot head's class table
  (``SampledDotProduct``; a Rank4Class head's MLP reads more than the table's rows), and plain
  SGD or Adagrad."""
  from tfrank4class.heads.sampled_classifier import SampledDotProduct  # noqa: PLC0415 (a cycle)

  optimizer = model.optimizer
  return (
    keras.backend.backend() == "jax"
    and type(model.head) is SampledDotProduct
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


def _draw(model, non_trainable):
  """The head's negatives, drawn statelessly; returns them and the new non-trainable values."""
  variables = model.non_trainable_variables
  with keras.StatelessScope(state_mapping=list(zip(variables, non_trainable))) as scope:
    negatives, log_q = model.head.draw_negatives()
  return negatives, log_q, [scope.get_current_value(v) for v in variables]


def train_step(model, state, data):
  """The JAX trainer's ``train_step(state, data)`` with the row-sparse class-table update."""
  import jax  # noqa: PLC0415  (the JAX backend's step)

  trainable, non_trainable, optimizer_values, metric_values = state
  x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
  head = model.head
  negatives, log_q, non_trainable = _draw(model, non_trainable)
  ids = class_ids(y, head.num_classes)
  candidates = ops.concatenate([ids, negatives])
  unique, position = jax.numpy.unique(candidates, size=candidates.shape[0], return_inverse=True)
  position = position.reshape(-1)
  batch = ids.shape[0]
  tables = [t for t in (head.class_embeddings, head.bias) if t is not None]
  at = [_index(model.trainable_variables, t) for t in tables]
  others = [i for i in range(len(trainable)) if i not in at]

  def loss_of(rows, other_values):
    values = list(trainable)  # the whole tables are read by no op of the loss
    for i, value in zip(others, other_values):
      values[i] = value
    gathered = GatheredRows(
      position[:batch], position[batch:], log_q, rows[0], rows[1] if len(rows) > 1 else None
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
