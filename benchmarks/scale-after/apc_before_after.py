"""A/B of ``blackbox_marked_rank`` (APC's rank with class ids): a copy of the code before the
change vs this checkout's, loss + gradient of ``sum(w * rank)``, beside softmax cross-entropy, in
the same process, interleaved rounds, each the fastest of 5 calls, one thread; values and
gradients checked equal first. From the worktree root, with OLD a checkout of the commit before
(e.g. ``git archive ce077ab | tar -x -C /tmp/old``)::

  OLD=/tmp/old KERAS_BACKEND=jax PYTHONPATH=$PWD \\
    XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" \\
    python benchmarks/scale-after/apc_before_after.py 32 100000
"""

import importlib.util
import os
import sys
import time

import numpy as np

from tfrank4class import compat
from tfrank4class.ranking import blackbox as new

_path = os.path.join(os.environ["OLD"], "tfrank4class/ranking/blackbox.py")
_spec = importlib.util.spec_from_file_location("old_blackbox", _path)
old = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(old)

B, C = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
s = rng.normal(size=(B, C)).astype(np.float32)
ids = rng.integers(0, C, B).astype(np.int32)
w = rng.uniform(0.1, 1.0, B).astype(np.float32)
valid = np.ones((B, C), bool)

if compat.BACKEND == "jax":
  import jax
  import jax.numpy as jnp

  def make(mod):
    f = lambda x: jnp.sum(mod.blackbox_marked_rank(x, ids, valid, 1.0, normalized=True) * w)
    return jax.jit(jax.value_and_grad(f))

  def softmax():
    f = lambda x: -jnp.mean(jax.nn.log_softmax(x)[jnp.arange(B), ids])
    return jax.jit(jax.value_and_grad(f))

  def run(f, x):
    return jax.block_until_ready(f(x))

  x = jnp.asarray(s)
else:
  import tensorflow as tf

  tf.config.threading.set_intra_op_parallelism_threads(1)
  tf.config.threading.set_inter_op_parallelism_threads(1)

  def with_gradient(loss):
    @tf.function
    def f(x):
      with tf.GradientTape() as tape:
        tape.watch(x)
        value = loss(x)
      return value, tape.gradient(value, x)

    return f

  def make(mod):
    return with_gradient(
      lambda x: tf.reduce_sum(mod.blackbox_marked_rank(x, ids, valid, 1.0, normalized=True) * w)
    )

  def softmax():
    return with_gradient(
      lambda x: tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(ids, x))
    )

  def run(f, x):
    return [np.asarray(a) for a in f(x)]

  x = tf.constant(s)


def best(f, calls=5):
  times = []
  for _ in range(calls):
    start = time.perf_counter()
    run(f, x)
    times.append(time.perf_counter() - start)
  return 1e3 * min(times)


f_old, f_new, f_softmax = make(old), make(new), softmax()
v_old, v_new = run(f_old, x), run(f_new, x)
run(f_softmax, x)
gap = float(np.max(np.abs(np.asarray(v_old[1]) - np.asarray(v_new[1]))))
print(f"values {float(v_old[0])} / {float(v_new[0])}, gradients' largest difference {gap}")
for r in range(int(os.environ.get("ROUNDS", 3))):
  a, b, c = best(f_softmax), best(f_old), best(f_new)
  print(
    f"round {r}: softmax {a:.1f} ms, before {b:.1f} ms ({b / a:.1f}x), after {c:.1f} ms "
    f"({c / a:.1f}x)",
    flush=True,
  )
