"""Tests of tfrank4class.losses.rambo.score_memory.ScoreMemory (RaMBO Sec. 4.3), on every backend
(tf.function and strategies: TensorFlow only)."""

import backend_testing as bt
import numpy as np
import pytest

from tfrank4class.compat import BACKEND, keras, ops
from tfrank4class.losses import ScoreMemory

#: float64 inputs stay float64 on every backend (JAX: ``jax_enable_x64``, on for each test).
pytestmark = pytest.mark.usefixtures("float64_inputs")


def batches(sizes, width=3):
  return [
    (np.full((b, width), 10.0 * k + 1, np.float32), np.full((b, width), k, np.float32))
    for k, b in enumerate(sizes)
  ]


def expected_concat(data, t, tau):
  """Batch t followed by batches t-1, ..., t-tau (those that exist)."""
  keep = [data[k] for k in range(t, max(-1, t - tau - 1), -1)]
  return np.concatenate([v for v, _ in keep]), np.concatenate([lab for _, lab in keep])


ONES, ZEROS = np.ones([2, 3], np.float32), np.zeros([2, 3], np.float32)


def test_keeps_last_tau_batches():
  memory = ScoreMemory(batches=2)
  # Batches of varying size, but on JAX, whose ring of variables keeps a fixed batch size and
  # hands every list (tau + 1) b rows, the slots not yet filled as padding (values 0, labels -1).
  data = batches([2, 2, 2, 2, 2] if BACKEND == "jax" else [2, 3, 1, 4, 2])
  for t, (v, lab) in enumerate(data):
    got_v, got_l = memory(v, lab)
    ref_v, ref_l = expected_concat(data, t, 2)
    if BACKEND == "jax":
      missing = 3 * 2 - len(ref_v)
      ref_v = np.concatenate([ref_v, np.zeros((missing, 3))])
      ref_l = np.concatenate([ref_l, -np.ones((missing, 3))])
    np.testing.assert_array_equal(bt.numpy(got_v), ref_v)
    np.testing.assert_array_equal(bt.numpy(got_l), ref_l)


@pytest.mark.tensorflow_only
def test_keeps_last_tau_batches_inside_a_tf_function():
  import tensorflow as tf  # noqa: PLC0415

  memory = ScoreMemory(batches=2)
  call = tf.function(memory.__call__)
  data = batches([2, 3, 1, 4, 2])
  for t, (v, lab) in enumerate(data):
    got_v, got_l = call(tf.constant(v), tf.constant(lab))
    ref_v, ref_l = expected_concat(data, t, 2)
    np.testing.assert_array_equal(got_v.numpy(), ref_v)
    np.testing.assert_array_equal(got_l.numpy(), ref_l)


def test_zero_batches_is_identity_and_reset():
  memory = ScoreMemory(0)
  v, lab = memory(ONES, ZEROS)
  assert tuple(v.shape) == (2, 3) and tuple(lab.shape) == (2, 3)
  memory = ScoreMemory(3)
  assert memory.remembered() == (None, None)
  memory(ONES, ZEROS)
  np.testing.assert_array_equal(bt.numpy(memory.remembered()[0]), np.ones([2, 3]))
  memory.reset()
  v, lab = memory(ONES, ZEROS)
  if BACKEND == "jax":  # the ring's 3 emptied slots come back as padding
    assert tuple(v.shape) == (8, 3)
    np.testing.assert_array_equal(bt.numpy(lab)[2:], -np.ones((6, 3)))
  else:
    assert tuple(v.shape) == (2, 3)


@pytest.mark.skipif(BACKEND == "jax", reason="a memory keeps no traced values (jax.grad traces)")
def test_gradient_flows_only_through_current_batch():
  memory = ScoreMemory(1)
  memory(np.ones([2, 2], np.float32), np.zeros([2, 2], np.float32))

  def total(x):
    v, _ = memory(x * 1.0, np.zeros([2, 2], np.float32))
    assert tuple(v.shape) == (4, 2)
    return ops.sum(v * v)

  # d/dx sum(x^2) = 2x = 4 for the current rows; the remembered rows are constants.
  _, (grad,) = bt.value_and_grad(total, np.full([2, 2], 2.0, np.float32))
  np.testing.assert_array_equal(grad, np.full((2, 2), 4.0))


def test_traced_values_are_refused_on_jax_only():
  memory = ScoreMemory(1)
  for mode in bt.compile_modes():
    if mode == "jit":
      with pytest.raises(ValueError, match="first called inside a traced function"):
        bt.compiled(lambda v: memory(v, ZEROS)[0], mode)(ONES)


@pytest.mark.tensorflow_only
def test_per_replica_memory_under_mirrored_strategy(mirrored_strategy):
  import tensorflow as tf  # noqa: PLC0415

  memory = ScoreMemory(1)

  @tf.function
  def step(x):
    def replica_fn(x):
      replica = tf.cast(tf.distribute.get_replica_context().replica_id_in_sync_group, tf.float32)
      v, _ = memory(x + 100.0 * replica, tf.zeros_like(x))
      return v

    return mirrored_strategy.run(replica_fn, (x,))

  outs = [step(tf.fill([2, 2], float(t))) for t in range(3)]
  last = [t.numpy() for t in mirrored_strategy.experimental_local_results(outs[-1])]
  # Replica r sees its own current batch (2 + 100 r) and its own previous one (1 + 100 r).
  np.testing.assert_array_equal(last[0][:, 0], [2, 2, 1, 1])
  np.testing.assert_array_equal(last[1][:, 0], [102, 102, 101, 101])


def test_bad_arguments():
  with pytest.raises(ValueError, match=r"`batches` must be an integer >= 0, got -1"):
    ScoreMemory(-1)
  with pytest.raises(ValueError, match=r"`batches` must be an integer >= 0, got 1.5"):
    ScoreMemory(1.5)
  memory = ScoreMemory(1)
  memory(ONES, ZEROS)
  with pytest.raises(ValueError, match="built for values float32"):
    memory(ONES.astype(np.float64), ZEROS)


def test_config_round_trip():
  memory = ScoreMemory(4, name="mem")
  clone = ScoreMemory.from_config(memory.get_config())
  assert clone.batches == 4 and clone.name == "mem"
  assert keras.utils.get_registered_object("tfrank4class>ScoreMemory") is ScoreMemory


@pytest.mark.tensorflow_only
def test_per_replica_memory_in_keras_fit_under_mirrored_strategy(mirrored_strategy):
  """In ``fit`` (Keras 3 and Keras 2 alike) each replica remembers the shards it trained on.

  Global batches of 4 rows over 2 replicas: replica 0 gets rows 0-1 of each batch, replica 1 rows
  2-3. With ``batches=1`` after two steps each replica holds its own shard of the second batch.
  """
  memory = ScoreMemory(1)

  class MemoryLoss(keras.losses.Loss):
    def call(self, y_true, y_pred):
      values, _ = memory(y_pred, y_true)
      return ops.mean(values) + 0.0 * y_pred[:, 0]

  x = np.arange(8, dtype=np.float32)[:, None]
  with mirrored_strategy.scope():
    inputs = keras.Input([1])
    dense = keras.layers.Dense(1, use_bias=False, kernel_initializer="ones")
    model = keras.Model(inputs, dense(inputs))
    model.compile(keras.optimizers.SGD(0.0), loss=MemoryLoss())
  model.fit(x, x, batch_size=4, epochs=1, shuffle=False, verbose=0)
  per_replica = mirrored_strategy.experimental_local_results(
    mirrored_strategy.run(memory.remembered)
  )
  held = [values.numpy()[:, 0].tolist() for values, _ in per_replica]
  assert held == [[4.0, 5.0], [6.0, 7.0]], held
