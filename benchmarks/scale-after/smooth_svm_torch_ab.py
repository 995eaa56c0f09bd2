"""One process per tree: fastest of 30 calls of SmoothTopKSVMLoss (class ids) + backward, B = 64,
one thread, C = 100 / 1000, k = 1 / 5, tau = 1 (benchmarks/backends.py's cells).

Usage: ``python benchmarks/scale-after/smooth_svm_torch_ab.py LABEL`` (PyTorch venv; the
checkout imported is the one on ``PYTHONPATH``)."""

import os
import sys
import time

os.environ["KERAS_BACKEND"] = "torch"

import numpy as np  # noqa: E402
import torch  # noqa: E402

from tfrank4class.losses.topk.smooth_svm import SmoothTopKSVMLoss  # noqa: E402


def main(label):
  torch.set_num_threads(1)
  rng = np.random.default_rng(0)
  out = []
  for c in (100, 1000):
    s0 = torch.tensor(rng.normal(size=(64, c)).astype(np.float32))
    y = torch.tensor(rng.integers(0, c, 64))
    for k in (1, 5):
      loss = SmoothTopKSVMLoss(k=k, tau=1.0)
      best = 1e9
      for _ in range(30):
        s = s0.clone().requires_grad_(True)
        start = time.perf_counter()
        loss(y, s).backward()
        best = min(best, time.perf_counter() - start)
      out.append(f"C={c} k={k}: {best * 1e3:.2f} ms")
  print(label, "; ".join(out), flush=True)


if __name__ == "__main__":
  main(sys.argv[1])
