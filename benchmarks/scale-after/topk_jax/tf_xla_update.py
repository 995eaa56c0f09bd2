"""TopKAccuracy(5) against Keras's SparseTopKCategoricalAccuracy(5): update_state under
``tf.function(jit_compile=True)``, process CPU time, 5 interleaved rounds of 0.3 s, one process.

  KERAS_BACKEND=tensorflow PYTHONPATH=$PWD \
    python benchmarks/scale-after/topk_jax/tf_xla_update.py LABEL
"""

import sys
import time

import keras
import numpy as np
import tensorflow as tf

from tfrank4class.metrics import classification as C

rng = np.random.default_rng(0)
for B, N in [(32, 1000), (32, 100000), (256, 1000)]:
  s = tf.constant(rng.standard_normal((B, N)).astype(np.float32))
  y = tf.constant(rng.integers(0, N, B))
  fs = {}
  for n, m in [
    ("ours", C.TopKAccuracy(5)),
    ("keras", keras.metrics.SparseTopKCategoricalAccuracy(5)),
  ]:
    f = tf.function(lambda s, y, m=m: m.update_state(y, s), jit_compile=True, autograph=False)
    f(s, y)
    fs[n] = f
  res = {n: [] for n in fs}
  for _r in range(5):
    for n, f in fs.items():
      t = time.process_time()
      k = 0
      while time.process_time() - t < 0.3:
        f(s, y)
        k += 1
      res[n].append((time.process_time() - t) / k * 1e6)
  o, k = np.median(res["ours"]), np.median(res["keras"])
  print(
    sys.argv[1],
    B,
    N,
    "ours {:.0f} us keras {:.0f} us ratio {:.2f} (per-round {})".format(
      o, k, o / k, np.round(np.array(res["ours"]) / np.array(res["keras"]), 2)
    ),
  )
