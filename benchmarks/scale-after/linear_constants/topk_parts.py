"""The record behind benchmarks/scale-after/linear_constants.md, "`top_5` against Keras": the
TensorFlow ops (one thread, ``tf.function``, no XLA) that a top-k update of class ids could be
built from, each timed alone on ``[32, C]`` trained-model scores (the true class first), 5
interleaved rounds of 20 calls, process CPU time. Run:
``python benchmarks/scale-after/linear_constants/topk_parts.py 100000``.
"""

import statistics
import sys
import time

import numpy as np
import tensorflow as tf

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)


def parts(s, y, c):
  true = tf.gather(s, y, batch_dims=1)[:, None]

  def sign_counts():  # our update's counts (functional._single)
    q = tf.sign(s - true)
    return tf.reduce_sum(q, -1), tf.reduce_sum(tf.abs(q), -1)

  return {
    "in_top_k(s, y, 5) (Keras' kernel)": lambda: tf.math.in_top_k(y, s, 5),
    "in_top_k(-s, y, C - 5)": lambda: tf.math.in_top_k(y, -s, c - 5),
    "is_finite + reduce_all (our score check)": lambda: tf.reduce_all(tf.math.is_finite(s)),
    "sign(s - s_y), two sums (our counts)": sign_counts,
    "s - s_y alone": lambda: tf.reduce_sum((s - true)[:, :1]),
    "top_k(s, 6)": lambda: tf.math.top_k(s, 6).values,
    "reduce_sum(s)": lambda: tf.reduce_sum(s),
  }


def main(c):
  rng = np.random.default_rng(0)
  scores = rng.normal(size=(32, c)).astype(np.float32)
  ids = rng.integers(0, c, 32)
  scores[np.arange(32), ids] = scores.max(axis=1) + 0.1
  s, y = tf.constant(scores), tf.constant(ids, tf.int32)
  fns = {name: tf.function(fn) for name, fn in parts(s, y, c).items()}
  for fn in fns.values():
    fn()
  times = {name: [] for name in fns}
  for _ in range(5):
    for name, fn in fns.items():
      start = time.process_time()
      for _ in range(20):
        fn()
      times[name].append((time.process_time() - start) / 20 * 1e3)
  for name, t in times.items():
    print(f"| {name} | {statistics.median(t):.2f} ({min(t):.2f}-{max(t):.2f}) |")


if __name__ == "__main__":
  main(int(sys.argv[1]))
