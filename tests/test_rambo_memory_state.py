"""RaMBO's score memory as state (Sec. 4.3): padding rows, the JAX ring of keras.Variables
threaded through a traced call or ``fit``, and its errors. The references are the losses without
a memory on the concatenated lists (no memory code involved)."""

import backend_testing as bt
import numpy as np
import pytest

from tfrank4class.compat import BACKEND, keras, ops
from tfrank4class.losses import MeanAveragePrecisionLoss, RecallLoss, ScoreMemory
from tfrank4class.losses.rambo.average_precision import mean_average_precision_loss_value
from tfrank4class.losses.rambo.recall import similarity_lists

B, C, TAU = 4, 3, 2


def batches(count, seed=0):
  rng = np.random.default_rng(seed)
  return [
    (rng.standard_normal((B, C)).astype(np.float32), rng.integers(0, C, B)) for _ in range(count)
  ]


def relevance(ids):
  return np.eye(C, dtype=np.float32)[ids]


def reference(step, data, padded=False):
  """Value and gradient (w.r.t. the current scores) of the memory-free loss on
  [batch_t; batch_{t-1}; ...; batch_{t-TAU}] (those that exist). ``padded``: the JAX ring's lists
  always have (TAU + 1) B rows, empty slots as padding, and ``lambda_`` is normalised by that
  length (blackbox_rank_within's ``n`` is the list's full length), i.e. the shorter list with
  ``lambda_`` scaled by (TAU + 1) B / its length."""
  past = [data[i] for i in range(step - 1, max(step - TAU, 0) - 1, -1)]
  rel = np.concatenate([relevance(data[step][1])] + [relevance(y) for _, y in past])
  rest = [s for s, _ in past]
  lambda_ = 4.0 * ((TAU + 1) * B / len(rel) if padded else 1.0)

  def fn(s):
    return mean_average_precision_loss_value(
      ops.concatenate([s, *rest], 0) if rest else s, rel, lambda_=lambda_
    )

  return bt.value_and_grad(fn, data[step][0])


def test_padded_rows_are_ignored_exactly():
  """Rows of relevance -1 (a memory's empty slots) give the value and gradient of the shorter
  lists; gallery labels -1 likewise drop out of the retrieval lists."""
  ((s, y),) = batches(1)
  pad = np.full((2 * B, C), -1.0, np.float32)
  garbage = np.random.default_rng(1).standard_normal((2 * B, C)).astype(np.float32)
  # lambda_ is normalised by the full list length (3 B here), so the shorter list (B) needs
  # lambda_ * 3 for the same blackbox step.
  short = bt.value_and_grad(
    lambda t: mean_average_precision_loss_value(t, relevance(y), lambda_=3.0), s
  )
  padded = bt.value_and_grad(
    lambda t: mean_average_precision_loss_value(
      ops.concatenate([t, ops.convert_to_tensor(garbage)], 0), np.concatenate([relevance(y), pad])
    ),
    s,
  )
  np.testing.assert_allclose(padded[0], short[0], rtol=1e-6)
  np.testing.assert_allclose(padded[1], short[1], rtol=1e-6)
  emb = s
  _, r_short = similarity_lists(emb, y)
  _, r_pad = similarity_lists(
    emb, y, np.concatenate([emb, garbage]), np.concatenate([y, -np.ones(2 * B, np.int64)])
  )
  r_pad = bt.numpy(r_pad)
  np.testing.assert_array_equal(r_pad[:, :B], bt.numpy(r_short))
  np.testing.assert_array_equal(r_pad[:, B:], -1.0)


def test_eager_memory_values_match_concatenated_lists():
  data = batches(4)
  loss = MeanAveragePrecisionLoss(memory=TAU, lambda_=4.0)
  for step, (s, y) in enumerate(data):
    np.testing.assert_allclose(bt.numpy(loss(y, s)), reference(step, data)[0], rtol=1e-6)
  held, labels = loss._memory.remembered()
  np.testing.assert_array_equal(bt.numpy(held), np.concatenate([data[3][0], data[2][0]]))
  np.testing.assert_array_equal(
    bt.numpy(labels), np.concatenate([relevance(data[3][1]), relevance(data[2][1])])
  )


def test_memory_dtype_change_raises():
  memory = ScoreMemory(batches=1)
  s, y = batches(1)[0]
  memory(s, relevance(y))
  with pytest.raises(ValueError, match="built for values float32.*got int32"):
    memory(s.astype(np.int32), relevance(y))


@pytest.mark.skipif(BACKEND == "jax", reason="JAX: fixed batch size (tested below)")
def test_other_backends_keep_batches_of_any_size_and_no_state_variables():
  loss = MeanAveragePrecisionLoss(memory=1)
  s, y = batches(1)[0]
  loss(y, s)
  loss(y[:2], s[:2])
  assert loss.state_variables == []


# ---------------------------------------------------------------------------------------------
# JAX: the ring of keras.Variables.

jax_only = pytest.mark.skipif(BACKEND != "jax", reason="the variable ring is the JAX store")


@jax_only
def test_jitted_calls_with_threaded_state_match_concatenated_lists():
  import jax  # noqa: PLC0415

  data = batches(4)
  loss = MeanAveragePrecisionLoss(memory=TAU, lambda_=4.0)
  state = loss.build_state(data[0][1], data[0][0])
  assert [tuple(v.shape) for v in state] == [(TAU * B, C), (TAU * B, C), (TAU,)]

  @jax.jit
  def step(values, y, s):
    def fn(s):
      with keras.StatelessScope(state_mapping=list(zip(state, values))) as scope:
        value = loss(y, s)
      return value, [scope.get_current_value(v) for v in state]

    (value, new), grad = jax.value_and_grad(fn, has_aux=True)(s)
    return value, grad, new

  values = [v.value for v in state]
  for t, (s, y) in enumerate(data):
    value, grad, values = step(values, y, s)
    want_value, (want_grad,) = reference(t, data, padded=True)
    np.testing.assert_allclose(np.asarray(value), want_value, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(grad), want_grad, rtol=1e-5, atol=1e-7)
  np.testing.assert_array_equal(np.asarray(values[0]), np.concatenate([data[3][0], data[2][0]]))


def _model():
  model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(C)])
  return model


@jax_only
def test_fit_with_state_assigned_keeps_the_last_batches():
  rng = np.random.default_rng(2)
  x = rng.standard_normal((3 * B, 5)).astype(np.float32)
  y = rng.integers(0, C, 3 * B)
  model = _model()
  loss = MeanAveragePrecisionLoss(memory=TAU)
  model.compile(optimizer=keras.optimizers.SGD(0.0), loss=loss)
  loss.build_state(y[:B], model(x[:B]))
  model.loss_state_variables = loss.state_variables
  model.fit(x, y, batch_size=B, epochs=1, shuffle=False, verbose=0)
  held, labels = loss._memory.remembered()
  scores = bt.numpy(model(x))  # learning rate 0: the scores fit saw
  np.testing.assert_allclose(
    bt.numpy(held), np.concatenate([scores[2 * B :], scores[B : 2 * B]]), atol=1e-6
  )
  np.testing.assert_array_equal(
    bt.numpy(labels), np.concatenate([relevance(y[2 * B :]), relevance(y[B : 2 * B])])
  )


@jax_only
def test_fit_without_state_assigned_raises():
  rng = np.random.default_rng(2)
  x, y = rng.standard_normal((2 * B, 5)).astype(np.float32), rng.integers(0, C, 2 * B)
  model = _model()
  loss = MeanAveragePrecisionLoss(memory=TAU)
  model.compile(optimizer="sgd", loss=loss)
  loss.build_state(y[:B], model(x[:B]))
  with pytest.raises(ValueError, match="model.loss_state_variables = loss.state_variables"):
    model.fit(x, y, batch_size=B, epochs=1, verbose=0)


@jax_only
def test_jax_state_errors():
  import jax  # noqa: PLC0415

  s, y = batches(1)[0]
  loss = MeanAveragePrecisionLoss(memory=1)
  with pytest.raises(ValueError, match=r"MeanAveragePrecisionLoss\(memory=1\) has no state"):
    loss.state_variables  # noqa: B018
  with pytest.raises(ValueError, match="first called inside a traced function"):
    jax.jit(lambda t: loss(y, t))(s)
  loss.build_state(y, s)
  with pytest.raises(ValueError, match="fixed size, 4.*got `values` of shape \\(2, 3\\)"):
    loss(y[:2], s[:2])
  emb = RecallLoss(from_embeddings=True, memory=1)
  emb.build_state(y, s)
  assert [tuple(v.shape) for v in emb.state_variables] == [(B, C), (B,), (1,)]
