"""One op set a block (2 rows) at a time on TensorFlow's graph, as the counting pass runs it: which
op costs what at [64, C] trained scores (one thread, process CPU time, 5 interleaved rounds).

  python benchmarks/scale-after/topk_metric/update_ops.py C [B]   (from the repository root)
"""

import statistics
import sys
import time

import tensorflow as tf

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
sys.path.insert(0, "benchmarks")
from metrics import score_form  # noqa: E402

from tfrank4class import backend  # noqa: E402

C = int(sys.argv[1])
B = int(sys.argv[2]) if len(sys.argv) > 2 else 64
ids, scores = (tf.constant(x) for x in score_form(C, B, "trained"))
true = tf.gather(scores, ids[:, None], batch_dims=1)
R = tf.reduce_sum
N = tf.math.reduce_euclidean_norm
V = {
  "sub+sum": lambda s, t: R(s - t, -1, keepdims=True),
  "sub,sign,sum": lambda s, t: R(tf.sign(s - t), -1, keepdims=True),
  "cur2: sub,sign,sum,abs,sum": lambda s, t: (lambda q: tf.stack([R(q, -1), R(tf.abs(q), -1)], -1))(
    tf.sign(s - t)
  ),
  "euclid: sub,sign,sum,norm": lambda s, t: (lambda q: tf.stack([R(q, -1), N(q, -1)], -1))(
    tf.sign(s - t)
  ),
  "cur3 (+mul,sum)": lambda s, t: (
    lambda q: tf.stack([R(q, -1), R(tf.abs(q), -1), R(s * 0, -1)], -1)
  )(tf.sign(s - t)),
  "euclid3 (+mul,sum)": lambda s, t: (lambda q: tf.stack([R(q, -1), N(q, -1), R(s * 0, -1)], -1))(
    tf.sign(s - t)
  ),
  "isfinite,all": lambda s, t: tf.cast(
    tf.reduce_all(tf.math.is_finite(s), -1, keepdims=True), tf.float32
  ),
  "mul,sum": lambda s, t: R(s * 0, -1, keepdims=True),
  "sum(s)": lambda s, t: R(s, -1, keepdims=True),
}
fns = {
  k: tf.function((lambda f: lambda: backend._blocks(f, [scores, true], 2))(f))  # noqa: B023
  for k, f in V.items()
}
fns["in_top_k"] = tf.function(lambda: tf.math.in_top_k(ids, scores, 5))
for f in fns.values():
  f()
calls = max(5, int(2e6 / (C * B)))
times = {k: [] for k in fns}
for _ in range(5):
  for k, f in fns.items():
    t0 = time.process_time()
    for _ in range(calls):
      f()
    times[k].append((time.process_time() - t0) / calls * 1e3)
for k, t in times.items():
  print(f"{k:32s} {statistics.median(t):7.3f} ms ({min(t):.3f}-{max(t):.3f})")
