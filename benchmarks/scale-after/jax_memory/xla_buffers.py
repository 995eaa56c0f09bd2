"""XLA's own account of the buffers of loss + gradient on JAX at B = 32, C = 100,000 (class ids).

For each name, ``jax.jit(jax.value_and_grad(f)).lower(scores, ids).compile()``'s
``memory_analysis()``: the temporary buffers (beyond the arguments and the outputs, the gradient's
12.8 MB among them) that the compiled step allocates, and with ``--hlo DIR`` each step's optimised
HLO (its ``[32, 100000]`` fusions are the ``[B, C]`` tensors). ``benchmarks/scale.py`` measures the
resident set instead; this says which buffers make it up.

Usage (from the checkout's root):
  KERAS_BACKEND=jax PYTHONPATH=$PWD python benchmarks/scale-after/jax_memory/xla_buffers.py
"""

import argparse
import pathlib

import jax
import numpy as np

from tfrank4class import losses

NAMES = (
  "softmax_loss,ordinal_loss,sigmoid_cross_entropy_loss,mean_squared_loss,calibrated_softmax_loss,"
  "smoothed_cross_entropy,pairwise_logistic_loss,pairwise_hinge_loss,pairwise_soft_zero_one_loss,"
  "approx_ndcg_loss,approx_mrr_loss"
)


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--names", default=NAMES)
  parser.add_argument("--hlo", help="a folder for each step's optimised HLO")
  args = parser.parse_args()
  b, c = 32, 100_000
  rng = np.random.default_rng([b, c])  # benchmarks/scale.py's inputs of the cell
  scores = jax.numpy.asarray(rng.normal(size=(b, c)).astype(np.float32))
  ids = jax.numpy.asarray(rng.integers(0, c, size=b))
  for name in args.names.split(","):
    loss = losses.get(name)
    step = jax.jit(jax.value_and_grad(lambda s, y, loss=loss: loss(y, s)))
    compiled = step.lower(scores, ids).compile()
    memory = compiled.memory_analysis()
    print(
      f"{name}: temporary {memory.temp_size_in_bytes / 1e6:.1f} MB, "
      f"outputs {memory.output_size_in_bytes / 1e6:.1f} MB"
    )
    if args.hlo:
      pathlib.Path(args.hlo, f"{name}.hlo").write_text(compiled.as_text())


if __name__ == "__main__":
  main()
