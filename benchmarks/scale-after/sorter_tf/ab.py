"""A/B in one TensorFlow process (graph, no XLA, one thread): sorter_ap_loss with class ids,
loss + gradient, with the attention sorter's window counts as XLA clusters (this branch) and as
TensorFlow's kernels (the same function unclustered), beside softmax_loss; interleaved rounds,
the fastest of 5 calls each. Asserts both variants give the same values and gradients.

  KERAS_BACKEND=tensorflow PYTHONPATH=$PWD python benchmarks/scale-after/sorter_tf/ab.py B C
"""

import sys

import numpy as np
import tensorflow as tf

sys.path.insert(0, "benchmarks")
import backends  # noqa: E402
import scale  # noqa: E402

from tfrank4class.ranking import attention_sorter  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
b, c = int(sys.argv[1]), int(sys.argv[2])
scores, ids = scale.inputs("ids", b, c)
clustered = attention_sorter._WINDOW_COUNT
calls = {}
for key, count in [("clusters", clustered), ("kernels", attention_sorter._window_count)]:
  attention_sorter._WINDOW_COUNT = count
  calls[key] = backends.tf_call(scale.loss_function("ours", "sorter_ap_loss", c), "tf", scores, ids)
  calls[key]()  # traced with this count
attention_sorter._WINDOW_COUNT = clustered
softmax = scale.loss_function("ours", "softmax_loss", c)
calls["softmax"] = backends.tf_call(softmax, "tf", scores, ids)
(va, ga), (vb, gb) = calls["clusters"](), calls["kernels"]()
np.testing.assert_array_equal(va, vb)
np.testing.assert_array_equal(ga, gb)
times = {key: [] for key in calls}
for r in range(7):
  for key in list(calls)[:: 1 if r % 2 else -1]:
    times[key].append(backends.fastest(calls[key], 5))
for key, t in times.items():
  ratio = np.array(t) / np.array(times["softmax"])
  print(
    f"B={b} C={c} {key}: {np.median(t):.1f} ms ({min(t):.1f}-{max(t):.1f}), "
    f"{np.median(ratio):.2f}x softmax ({ratio.min():.2f}-{ratio.max():.2f})"
  )
