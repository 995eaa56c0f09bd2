"""The losses that draw random numbers under a compiler the user drives (issue 58, item 3).

``Loss.stateless_call(seed_states, y_true, y_pred)`` is the loss as a pure function of its seed
generators' states: it must draw what the eager calls of a twin loss (same seeds) draw, call
after call, compiled or not, and under ``jax.lax.scan``. A plain call inside ``jax.jit`` must
neither leave a tracer in the generator (``UnexpectedTracerError`` on the next trace, or in a
later eager call) nor advance it. The reference is the eager loss, independent of the
``keras.StatelessScope`` the stateless call runs in. Backend-neutral; tf-keras has no
``StatelessScope`` (skipped there).
"""

import warnings

import numpy as np
import pytest
from backend_testing import compile_modes, compiled, numpy

from tfrank4class import losses
from tfrank4class.compat import BACKEND, KERAS_3

pytestmark = pytest.mark.skipif(not KERAS_3, reason="keras.StatelessScope is Keras 3's")

RANDOM = (
  "list_mle_loss",
  "gumbel_approx_ndcg_loss",
  "yeti_logistic_loss",
  "coupled_rankdistil_loss",
)
SEEDED = {"gumbel_approx_ndcg_loss": {"seed": 3}, "yeti_logistic_loss": {"seed": 3}}
LABELS = np.array([1, 0, 2, 2])
SCORES = np.random.default_rng(3).normal(size=(4, 6)).astype(np.float32)


# One per way of drawing in the default run (the random order of ties, the Gumbel sampler); the
# other two, which draw the same ways, with `make test-slow`.
PARAMS = ["list_mle_loss", "gumbel_approx_ndcg_loss"] + [
  pytest.param(name, marks=pytest.mark.slow) for name in RANDOM[2:]
]


def _loss(name):
  return losses.get(name, reduction="none", **SEEDED.get(name, {}))


def _eager_twin(name, calls):
  loss = _loss(name)
  return [numpy(loss(LABELS, SCORES)) for _ in range(calls)]


def test_the_random_losses_are_those_with_seed_generators():
  drawing = [name for name in losses.names() if _loss_or_none(name)]
  assert sorted(drawing) == sorted(RANDOM)


def _loss_or_none(name):
  try:
    return losses.get(name).seed_generators
  except (TypeError, ValueError):  # a loss that needs arguments draws nothing either
    return []


# Under XLA TensorFlow draws another stream of the same law (tfrank4class.backend.uniform).
@pytest.mark.parametrize("mode", [m for m in compile_modes() if m != "xla"])
@pytest.mark.parametrize("name", PARAMS)
def test_stateless_call_draws_what_eager_calls_draw(name, mode):
  want = _eager_twin(name, 2)
  loss = _loss(name)
  step = compiled(loss.stateless_call, mode)
  states = loss.seed_states()
  first, states = step(states, LABELS, SCORES)
  second, states = step(states, LABELS, SCORES)
  np.testing.assert_allclose(numpy(first), want[0], rtol=1e-5)
  np.testing.assert_allclose(numpy(second), want[1], rtol=1e-5)
  assert not np.allclose(want[0], want[1])  # the states moved on


def test_stateless_call_wants_one_state_per_generator():
  loss = _loss("list_mle_loss")
  with pytest.raises(ValueError, match=r"`seed_states` must hold one state per seed generator"):
    loss.stateless_call([], LABELS, SCORES)


@pytest.mark.skipif(BACKEND != "jax", reason="jax.jit and jax.lax.scan")
@pytest.mark.parametrize("name", PARAMS)
def test_jax_jit_and_scan(name):
  import jax  # noqa: PLC0415

  want = _eager_twin(name, 3)
  loss = _loss(name)
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    jitted = jax.jit(lambda labels, scores: loss(labels, scores))
    jitted(LABELS, SCORES)
    jitted(LABELS[:3], SCORES[:3])  # a second trace
  assert any("stateless_call" in str(w.message) for w in caught)
  # The jitted calls left the generator as it was: the eager call draws the first numbers.
  np.testing.assert_allclose(numpy(loss(LABELS, SCORES)), want[0], rtol=1e-5)

  fresh = _loss(name)

  def step(states, _):
    value, states = fresh.stateless_call(states, LABELS, SCORES)
    return states, value

  _, values = jax.lax.scan(step, fresh.seed_states(), None, length=3)
  np.testing.assert_allclose(numpy(values), np.stack(want), rtol=1e-5)
