"""``pairwise_mse_loss`` with an NDCG lambda weight under ``jax.jit``: XLA's planned temporaries
and the time of one loss + gradient call, B = 32 lists of C classes with 5 relevant classes each
(graded 1-3), in the checkout the script is run from (run it from two checkouts to compare).

Usage: ``KERAS_BACKEND=jax python benchmarks/scale-after/pairwise_mse_lambda_xla.py 2000``
"""

import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from tfrank4class.losses import tf_ranking  # noqa: E402
from tfrank4class.losses.lambda_weights import NDCGLambdaWeight  # noqa: E402


def main(classes, batch=32, relevant=5, calls=3):
  rng = np.random.default_rng(0)
  labels = np.zeros((batch, classes), "float32")
  for row in labels:
    row[rng.choice(classes, relevant, replace=False)] = rng.integers(1, 4, relevant)
  scores = rng.normal(size=(batch, classes)).astype("float32")
  loss = tf_ranking.RankingLoss("pairwise_mse_loss", lambda_weight=NDCGLambdaWeight())
  step = jax.jit(jax.value_and_grad(lambda s, y: jnp.sum(loss.weighted_values(s, y))))
  planned = step.lower(scores, labels).compile().memory_analysis().temp_size_in_bytes
  step(scores, labels)[0].block_until_ready()
  start = time.perf_counter()
  for _ in range(calls):
    step(scores, labels)[0].block_until_ready()
  seconds = (time.perf_counter() - start) / calls
  print(f"C = {classes}: XLA temporaries {planned / 1e6:.1f} MB, {seconds:.3f} s a call")


if __name__ == "__main__":
  main(int(sys.argv[1]))
