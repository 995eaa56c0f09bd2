"""Forms of the counting pass's row sums under jax.jit (functional._row_sums swapped in):
F.top_k_accuracy at [B, C] trained scores, one process, process CPU time, 7 interleaved rounds.

  KERAS_BACKEND=jax python benchmarks/scale-after/topk_metric/jax_row_sums.py C B
"""

import statistics
import sys
import time

import jax
import jax.numpy as jnp

sys.path.insert(0, "benchmarks")
from metrics import score_form

from tfrank4class.compat import ops
from tfrank4class.metrics import functional as F

C = int(sys.argv[1])
B = int(sys.argv[2])
ids, scores = (jnp.asarray(x) for x in score_form(C, B, "trained"))
orig = F._row_sums


def old(s, t):
  q = ops.sign(s - t)
  a = ops.sum(q, -1)
  return ops.stack([a, ops.sum(ops.abs(q), -1), a], -1)


def v_abs(s, t):
  q = ops.sign(s - t)
  a = ops.sum(q + s * 0.0, -1)
  return ops.stack([a, ops.sum(ops.abs(q), -1), a], -1)


def v_sep(s, t):
  q = ops.sign(s - t)
  return ops.stack([ops.sum(q, -1), ops.sum(ops.abs(q), -1), ops.sum(s * 0.0, -1)], -1)


def v_qp(s, t):
  q = ops.sign(s - t) + s * 0.0
  a = ops.sum(q, -1)
  return ops.stack([a, ops.sum(ops.abs(q), -1), a], -1)


def v_qp2(s, t):
  q = ops.sign(s - t + (s - s))
  a = ops.sum(q, -1)
  return ops.stack([a, ops.sum(ops.abs(q), -1), a], -1)


def make(rs):
  def f(y, s):
    F._row_sums = rs
    try:
      return F.top_k_accuracy(y, s, 5)
    finally:
      F._row_sums = orig

  return jax.jit(f)


fns = {
  "current": make(orig),
  "old 2 sums (no inf check)": make(old),
  "q+0s": make(v_abs),
  "3 separate": make(v_sep),
  "q'=q+0s both": make(v_qp),
  "sign(d+(s-s))": make(v_qp2),
}
for f in fns.values():
  jax.block_until_ready(f(ids, scores))
times = {k: [] for k in fns}
for _ in range(7):
  for k, f in fns.items():
    t0 = time.process_time()
    for _ in range(10):
      jax.block_until_ready(f(ids, scores))
    times[k].append((time.process_time() - t0) / 10 * 1e3)
for k, t in times.items():
  print(f"{k:28s} {statistics.median(t):7.3f} ms ({min(t):.3f}-{max(t):.3f})")
