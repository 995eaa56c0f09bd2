"""The top-5 update's parts on TensorFlow's graph, [B, C] trained scores (benchmarks/metrics.py's
score_form), one thread, process CPU time, 5 interleaved rounds: Keras's in_top_k and metric,
our metric and function, and the row sums whole or in row blocks of several sizes.

  python benchmarks/scale-after/topk_metric/update_parts.py C [B]   (from the repository root)
"""

import statistics
import sys
import time

import tensorflow as tf

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
sys.path.insert(0, "benchmarks")
from metrics import score_form  # noqa: E402

from tfrank4class import backend, metrics  # noqa: E402
from tfrank4class.compat import keras  # noqa: E402
from tfrank4class.metrics import functional as F  # noqa: E402

C = int(sys.argv[1])
B = int(sys.argv[2]) if len(sys.argv) > 2 else 64
ids, scores = (tf.constant(x) for x in score_form(C, B, "trained"))
true = tf.gather(scores, ids[:, None], batch_dims=1)


def rs(s, t):
  q = tf.sign(s - t)
  return tf.stack(
    [tf.reduce_sum(q, -1), tf.reduce_sum(tf.abs(q), -1), tf.reduce_sum(s * 0.0, -1)], -1
  )


def rs2(s, t):
  q = tf.sign(s - t)
  return tf.stack([tf.reduce_sum(q, -1), tf.reduce_sum(tf.abs(q), -1)], -1)


def rs_one(s, t):
  q = tf.sign(s - t)
  return tf.reduce_sum(tf.stack([q, tf.abs(q), s * 0.0], -1), -2)


cands = {
  "keras_in_top_k": lambda: tf.math.in_top_k(ids, scores, 5),
  "keras metric": (lambda m: lambda: m.update_state(ids, scores))(
    keras.metrics.SparseTopKCategoricalAccuracy(5)
  ),
  "ours metric": (lambda m: lambda: m.update_state(ids, scores))(metrics.TopKAccuracy(5)),
  "ours functional": lambda: F.top_k_accuracy(ids, scores, 5),
  "isfinite+all": lambda: tf.reduce_all(tf.math.is_finite(scores)),
  "rowsums3 whole": lambda: rs(scores, true),
  "rowsums2 whole": lambda: rs2(scores, true),
}
for items in (2**17, 2**18, 2**19, 2**20):
  r = max(1, items // C)
  cands[f"blocks3 rows={r}"] = (lambda r: lambda: backend._blocks(rs, [scores, true], r))(r)  # noqa: B023
  cands[f"blocks2 rows={r}"] = (lambda r: lambda: backend._blocks(rs2, [scores, true], r))(r)  # noqa: B023
fns = {k: tf.function(v) for k, v in cands.items()}
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
  print(f"{k:28s} {statistics.median(t):7.3f} ms ({min(t):.3f}-{max(t):.3f})")
