"""Forward + backward time and peak memory of the Top-K losses, beside difftopk's PyTorch ones.

Losses (B = 64 examples, C classes, k = 5):

* ``smooth_topk_svm``: :func:`tfrank4class.losses.topk.smooth_svm.smooth_topk_svm_loss`,
  ``tau = 1``; PyTorch: difftopk's ``Topk_Smooth_SVM`` (Berrada et al.'s code);
* ``topk_svm``: the same with ``tau = 0`` (the hard loss); PyTorch: ``Topk_Hard_SVM``;
* ``soft_rank_topk``: :func:`tfrank4class.losses.topk.soft_rank.soft_rank_topk_loss`
  (``eps = 1``, "l2"); no PyTorch counterpart in difftopk;
* ``topk_cross_entropy`` (when the package has it): Petersen et al.'s top-k cross-entropy,
  ``P_K = (.5, 0, 0, 0, .5)``, bitonic network, Cauchy, inverse temperature 2, and ``m = 16``
  ranked classes at ``C = 1000`` (all classes below); PyTorch: difftopk's
  ``TopKCrossEntropyLoss`` with the same arguments and its dense bitonic network
  (``"bitonic__non_sparse"``: its sparse one needs the compiled ``torch-sparse``).

Each thread count runs in its own subprocess per framework (TensorFlow and PyTorch fix their
thread pools at start-up); both draw the same inputs from the same seed. TensorFlow times a
``tf.function`` (graph) of loss + gradient, PyTorch its eager loss + ``backward``; both report the
median wall-clock ms over the repeats after one warm-up call. Peak memory (one thread): the
growth of the worker's resident set during one call (see ``peak_mb`` below), after the warm-up.

The PyTorch column needs an interpreter with torch and difftopk: ``--torch_python PY``, else the
side venv ``../venv-torch`` beside the checkout when it exists (``tools/side_venv.py`` builds
one); without it the column reads "n/a".

Usage:
  nice python benchmarks/topk.py                       # C = 10, 100, 1000; 1 and 2 threads
  python benchmarks/topk.py --quick                    # C = 10, one thread, no PyTorch
  python benchmarks/topk.py --torch_python /work/venv-torch/bin/python
  python benchmarks/topk.py --isotonic                 # soft rank: eager / function / XLA
Writes benchmarks/out/topk.json and benchmarks/out/topk.png.
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _common  # noqa: E402

B, K, M_AT_1000 = 64, 5, 16
P_K = (0.5, 0.0, 0.0, 0.0, 0.5)
MEMORY = (
  "peak MB = growth of the worker's resident set (Linux VmHWM after a reset through "
  "/proc/self/clear_refs, minus VmRSS before) during one loss + gradient call"
)


def inputs(c):
  """The same scores and labels in every worker (numpy, fixed seed)."""
  import numpy as np  # pylint: disable=g-import-not-at-top

  rng = np.random.default_rng(c)
  return rng.normal(size=(B, c)).astype(np.float32), rng.integers(0, c, size=B)


def _status_bytes(key):
  with open("/proc/self/status") as f:
    for line in f:
      if line.startswith(key + ":"):
        return int(line.split()[1]) * 1024
  raise RuntimeError(f"/proc/self/status has no {key} line.")


def peak_mb(fn):
  """``benchmarks/_common.peak_rss_mb`` when the checkout has it, else the same measurement:
  MiB by which the resident set peaked above its size before ``fn()`` (Linux only)."""
  if hasattr(_common, "peak_rss_mb"):
    return _common.peak_rss_mb(fn)
  with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
  before = _status_bytes("VmRSS")
  fn()
  return (_status_bytes("VmHWM") - before) / 2**20


def timed(fn, repeats):
  fn()
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    fn()
    times.append((time.perf_counter() - start) * 1e3)
  return statistics.median(times)


def tf_losses():
  from tfrank4class.losses.topk import smooth_svm, soft_rank  # pylint: disable=g-import-not-at-top

  losses = {
    "smooth_topk_svm": lambda y, s, c: smooth_svm.smooth_topk_svm_loss(y, s, K, 1.0),
    "topk_svm": lambda y, s, c: smooth_svm.smooth_topk_svm_loss(y, s, K, 0.0),
    "soft_rank_topk": lambda y, s, c: soft_rank.soft_rank_topk_loss(y, s, K, 1.0),
  }
  try:
    from tfrank4class.losses.topk import cross_entropy  # pylint: disable=g-import-not-at-top
  except ImportError:
    cross_entropy = None
  if cross_entropy is not None:
    losses["topk_cross_entropy"] = lambda y, s, c: cross_entropy.topk_cross_entropy(
      s, y, P_K, "bitonic", "cauchy", 2.0, m=M_AT_1000 if c >= 1000 else None
    )
  return losses


def tf_worker(threads, sizes, repeats, memory):
  tf = _common.setup_tensorflow(threads)
  results = []
  for name, loss in tf_losses().items():
    for c in sizes:
      scores, labels = inputs(c)
      s, y = tf.constant(scores), tf.constant(labels)

      @tf.function(autograph=False)  # no tensor-dependent Python control flow to convert
      def step(s, y, loss=loss, c=c):
        with tf.GradientTape() as tape:
          tape.watch(s)
          value = tf.reduce_mean(loss(y, s, c))
        return value, tape.gradient(value, s)

      call = lambda step=step, s=s, y=y: [t.numpy() for t in step(s, y)]
      row = {"framework": "tf", "loss": name, "C": c, "threads": threads}
      row["ms"] = timed(call, repeats)
      if memory:
        row["peak_mb"] = peak_mb(call)
      results.append(row)
  return results


def torch_worker(threads, sizes, repeats, memory):
  import torch  # pylint: disable=g-import-not-at-top
  from difftopk import TopKCrossEntropyLoss, smooth_topk  # pylint: disable=g-import-not-at-top

  torch.set_num_threads(threads)
  results = []
  for c in sizes:
    classes = torch.arange(c)
    m = M_AT_1000 if c >= 1000 else None
    losses = {
      "smooth_topk_svm": smooth_topk.Topk_Smooth_SVM(classes, K, 1.0),
      "topk_svm": smooth_topk.Topk_Hard_SVM(classes, K),
      "topk_cross_entropy": TopKCrossEntropyLoss(
        "bitonic__non_sparse", 2.0, list(P_K), n=c, m=m, distribution="cauchy"
      ),
    }
    scores, labels = inputs(c)
    for name, loss in losses.items():
      y = torch.tensor(labels)

      def call(loss=loss, y=y, name=name, scores=scores):
        s = torch.tensor(scores, requires_grad=True)
        value = loss(s.clone() if name == "smooth_topk_svm" else s, y).mean()
        value.backward()
        return s.grad

      row = {"framework": "torch", "loss": name, "C": c, "threads": threads}
      try:
        row["ms"] = timed(call, repeats)
      except (AssertionError, ImportError) as e:  # e.g. difftopk's sparse top-m needs torch-sparse
        row["error"] = f"{type(e).__name__}: {e}"
        results.append(row)
        continue
      if memory:
        row["peak_mb"] = peak_mb(call)
      results.append(row)
  return results


def isotonic_table(threads, repeats):
  """Soft rank (parallel PAV, :mod:`tfrank4class.ranking.permutahedron`) forward + backward,
  B = 64, eps = 1, "l2", eagerly, in ``tf.function`` and with ``jit_compile=True``."""
  tf = _common.setup_tensorflow(threads)
  from tfrank4class.ranking import soft_rank  # pylint: disable=g-import-not-at-top

  def step(x):
    with tf.GradientTape() as tape:
      tape.watch(x)
      value = tf.reduce_sum(tf.square(soft_rank(x, 1.0)))
    return tape.gradient(value, x)

  modes = {"eager": step, "function": tf.function(step), "xla": tf.function(step, jit_compile=True)}
  lines = [
    f"soft rank + gradient, B = {B}, {threads} thread(s), median ms",
    f"{'n':>6}" + "".join(f"{m:>10}" for m in modes),
  ]
  for n in (10, 100, 1000):
    x = tf.constant(inputs(n)[0])
    times = [timed(lambda f=f, x=x: f(x).numpy(), repeats) for f in modes.values()]
    lines.append(f"{n:>6}" + "".join(f"{t:>10.2f}" for t in times))
  return "\n".join(lines)


def run_worker(python, framework, threads, args, env=None):
  command = [python, __file__, "--worker", framework, "--threads", str(threads)]
  command += ["--sizes", ",".join(map(str, args.sizes)), "--repeats", str(args.repeats)]
  if threads == 1:
    command.append("--memory")
  result = subprocess.run(
    command, stdout=subprocess.PIPE, text=True, check=True, env={**os.environ, **(env or {})}
  )
  return json.loads(result.stdout.strip().splitlines()[-1])


def find_torch_python(given):
  if given:
    return given
  candidate = _common.ROOT.parent / "venv-torch" / "bin" / "python"
  return str(candidate) if candidate.exists() else None


def table(rows, sizes, thread_counts, torch_available):
  names = list(dict.fromkeys(r["loss"] for r in rows if r["framework"] == "tf"))
  index = {(r["framework"], r["loss"], r["C"], r["threads"]): r for r in rows}
  lines = [
    f"B = {B}, k = {K}, m = {M_AT_1000} at C = 1000 (topk_cross_entropy); ms = median "
    "forward + backward; " + MEMORY,
    f"{'loss':<20}{'C':>6}{'thr':>4}{'TF ms':>10}{'torch ms':>10}{'torch/TF':>9}"
    f"{'TF MB':>8}{'torch MB':>9}",
  ]
  errors = set()
  for name in names:
    for c in sizes:
      for t in thread_counts:
        tf_row = index.get(("tf", name, c, t))
        torch_row = index.get(("torch", name, c, t))
        if torch_row and "error" in torch_row:
          errors.add(f"torch {name} at C = {c}: {torch_row['error']}")
          torch_row = None
        torch_ms = f"{torch_row['ms']:.2f}" if torch_row else "n/a"
        ratio = f"{torch_row['ms'] / tf_row['ms']:.2f}" if torch_row else "n/a"
        tf_mb = f"{tf_row['peak_mb']:.1f}" if "peak_mb" in tf_row else ""
        torch_mb = f"{torch_row['peak_mb']:.1f}" if torch_row and "peak_mb" in torch_row else ""
        lines.append(
          f"{name:<20}{c:>6}{t:>4}{tf_row['ms']:>10.2f}{torch_ms:>10}{ratio:>9}{tf_mb:>8}"
          f"{torch_mb:>9}"
        )
  lines += [f"n/a: {error}" for error in sorted(errors)]
  if not torch_available:
    lines.append("PyTorch column not available: pass --torch_python (torch + difftopk).")
  return "\n".join(lines)


def plot(rows, sizes, path):
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  fig, ax = plt.subplots(figsize=(7, 4.5))
  keys = dict.fromkeys((r["framework"], r["loss"]) for r in rows if r["threads"] == 1)
  for framework, name in keys:
    points = sorted(
      (r["C"], r["ms"])
      for r in rows
      if r["threads"] == 1 and r["framework"] == framework and r["loss"] == name and "ms" in r
    )
    ax.plot(
      *zip(*points), marker="o", ls="-" if framework == "tf" else "--", label=f"{framework} {name}"
    )
  ax.set(xscale="log", yscale="log", xlabel="classes C", ylabel="ms (forward + backward, 1 thread)")
  ax.set_xticks(sizes, [str(c) for c in sizes])
  ax.legend(fontsize=8)
  ax.set_title(f"Top-K losses, B = {B}, k = {K}")
  fig.tight_layout()
  fig.savefig(path, dpi=120)


def main(argv):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true", help="small shapes, 1 thread, no PyTorch")
  parser.add_argument("--torch_python", help="an interpreter with torch and difftopk")
  parser.add_argument(
    "--isotonic", action="store_true", help="only: soft rank eager / tf.function / XLA times"
  )
  parser.add_argument("--worker", choices=["tf", "torch"], help=argparse.SUPPRESS)
  parser.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
  parser.add_argument("--sizes", help=argparse.SUPPRESS)
  parser.add_argument("--repeats", type=int, default=10, help=argparse.SUPPRESS)
  parser.add_argument("--memory", action="store_true", help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.worker:
    sizes = [int(c) for c in args.sizes.split(",")]
    worker = tf_worker if args.worker == "tf" else torch_worker
    print(json.dumps(worker(args.threads, sizes, args.repeats, args.memory)))
    return
  if args.isotonic:
    print(isotonic_table(1, 3 if args.quick else args.repeats))
    return
  args.sizes = (10,) if args.quick else (10, 100, 1000)
  args.repeats = 2 if args.quick else args.repeats
  thread_counts = (1,) if args.quick else (1, 2)
  torch_python = None if args.quick else find_torch_python(args.torch_python)
  # glibc returns every freed block above 64 KiB to the kernel at once, so that a buffer counts
  # in the resident set exactly while it is live (``_common.PEAK_MEMORY_ENV`` where it exists).
  memory_env = getattr(_common, "PEAK_MEMORY_ENV", {"MALLOC_MMAP_THRESHOLD_": "65536"})
  rows = []
  for threads in thread_counts:
    rows += run_worker(sys.executable, "tf", threads, args, memory_env)
    if torch_python:
      rows += run_worker(torch_python, "torch", threads, args, memory_env)
  text = table(rows, args.sizes, thread_counts, torch_python is not None)
  print(text)
  _common.OUT.mkdir(parents=True, exist_ok=True)
  with open(_common.OUT / "topk.json", "w") as f:
    json.dump({"rows": rows, "table": text}, f, indent=1)
  plot(rows, args.sizes, _common.OUT / "topk.png")
  print(f"wrote {_common.OUT / 'topk.json'} and {_common.OUT / 'topk.png'}")


if __name__ == "__main__":
  main(sys.argv[1:])
