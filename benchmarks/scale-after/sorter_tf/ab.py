"""A/B in one TensorFlow process (graph, no XLA, one thread): sorter_ap_loss with class ids,
loss + gradient, with the attention sorter's XLA clusters (this branch: window counts, gap, the
comparison sum's two backward passes), the window counts' alone, and none (the same functions
as TensorFlow's kernels), beside softmax_loss; interleaved rounds,
the fastest of 5 calls each. Asserts the variants give the same values and gradients.

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
VARIANTS = {  # which of the module's clusters each variant keeps
  "clusters": (
    "_WINDOW_COUNT",
    "_NEAREST_GAP",
    "_SLOPE_SUMS",
    "_SCORE_GRADIENT",
    "_COMPARISON_SUM",
  ),
  "no_forward": ("_WINDOW_COUNT", "_NEAREST_GAP", "_SLOPE_SUMS", "_SCORE_GRADIENT"),
  "counts": ("_WINDOW_COUNT",),
  "kernels": (),
}
scores, ids = scale.inputs("ids", b, c)
# The module's clusters and the functions they compile.
sorter = attention_sorter
clusters = {name: getattr(sorter, name) for name in VARIANTS["clusters"]}
plain = {
  "_WINDOW_COUNT": sorter._window_count,
  "_NEAREST_GAP": sorter.nearest_gap_at,
  "_COMPARISON_SUM": sorter._comparison_sum,
  "_SLOPE_SUMS": sorter._slope_sums,
  "_SCORE_GRADIENT": sorter._score_gradient,
}
calls = {}
for key, clustered in VARIANTS.items():
  for name in plain:
    setattr(sorter, name, clusters[name] if name in clustered else plain[name])
  calls[key] = backends.tf_call(scale.loss_function("ours", "sorter_ap_loss", c), "tf", scores, ids)
  calls[key]()  # traced with these clusters
softmax = scale.loss_function("ours", "softmax_loss", c)
calls["softmax"] = backends.tf_call(softmax, "tf", scores, ids)
value, grad = calls["kernels"]()
for key in VARIANTS:
  np.testing.assert_allclose(calls[key]()[0], value, rtol=1e-6)
  np.testing.assert_allclose(calls[key]()[1], grad, rtol=1e-5, atol=1e-5 * np.abs(grad).max())
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
