"""One process per tree: fastest of 30 calls of SmoothTopKSVMLoss (class ids) + backward, B = 64,
one thread, C = 100 / 1000, k = 1 / 5, tau = 1 (benchmarks/backends.py's cells)."""
import os, sys, time
os.environ["KERAS_BACKEND"] = "torch"
import numpy as np, torch
torch.set_num_threads(1)
from tfrank4class.losses.topk.smooth_svm import SmoothTopKSVMLoss
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
      t = time.perf_counter(); loss(y, s).backward(); best = min(best, time.perf_counter() - t)
    out.append(f"C={c} k={k}: {best * 1e3:.2f} ms")
print(sys.argv[1], "; ".join(out), flush=True)
