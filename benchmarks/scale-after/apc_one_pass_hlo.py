"""XLA's plan of ``blackbox_marked_rank`` (loss + gradient) under ``jax.jit``, B = 32, C = 100,000.

Run from a checkout's root: ``KERAS_BACKEND=jax PYTHONPATH=$PWD python
benchmarks/scale-after/apc_one_pass_hlo.py OUT.hlo``; writes the compiled HLO to ``OUT.hlo`` and
prints XLA's temporary, output and argument memory (MB) and 5 timed calls (ms) after one warm-up
(apc.md, "One backward pass, no kept counts").
"""

import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from tfrank4class.ranking.blackbox import blackbox_marked_rank

BATCH, CLASSES = 32, 100000


def main(out):
  ids = jnp.asarray(np.arange(BATCH) % CLASSES, jnp.int32)
  valid = jnp.ones((BATCH, CLASSES), bool)
  weights = jnp.linspace(0.5, 1.5, BATCH)

  def loss(x):
    return jnp.sum(blackbox_marked_rank(x, ids, valid, 1.0, normalized=True) * weights)

  step = jax.jit(jax.value_and_grad(loss))
  x = jnp.asarray(np.random.default_rng(0).normal(size=(BATCH, CLASSES)), jnp.float32)
  compiled = step.lower(x).compile()
  with open(out, "w") as f:
    f.write(compiled.as_text())
  memory = compiled.memory_analysis()
  print(
    "temp MB",
    memory.temp_size_in_bytes / 1e6,
    "out",
    memory.output_size_in_bytes / 1e6,
    "arg",
    memory.argument_size_in_bytes / 1e6,
  )
  step(x)[1].block_until_ready()
  times = []
  for _ in range(5):
    start = time.perf_counter()
    step(x)[1].block_until_ready()
    times.append(time.perf_counter() - start)
  print("ms", [round(t * 1000, 1) for t in times])


if __name__ == "__main__":
  main(sys.argv[1])
