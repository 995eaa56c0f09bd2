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

Three timings per loss and C: TensorFlow's loss + gradient as a ``tf.function`` (plain graph,
"TF") and with ``jit_compile=True`` ("XLA"), PyTorch's eager loss + ``backward`` ("torch").
Each runs in a long-lived worker process per framework and thread count (TensorFlow and PyTorch
fix their thread pools at start-up); both draw the same inputs from the same seed. The timings
are interleaved: every round times each loss and C in all three in turn (the order rotated
from round to round) before the next loss, so that a change in the machine's load hits all three
alike. A timing in a round is the median of up to ``--repeats`` calls (at least 3; fewer where a
call takes long, ``CALL_BUDGET_MS`` per timing) after warm-up calls; the table gives the median
over the rounds and their range, and each ratio is taken within a round (median and range).
Peak memory (one thread): the growth of the worker's resident set during one call
(``_common.peak_rss_mb``), after the rounds.

The PyTorch column needs an interpreter with torch and difftopk: ``--torch_python PY``, else the
side venv ``../venv-torch`` beside the checkout when it exists (``tools/side_venv.py`` builds
one); without it the column reads "n/a".

Usage:
  nice python benchmarks/topk.py                       # C = 10, 100, 1000; 1 and 2 threads
  python benchmarks/topk.py --quick                    # C = 10, one thread, 2 rounds, no PyTorch
  python benchmarks/topk.py --torch_python /work/venv-torch/bin/python --rounds 7
  python benchmarks/topk.py --losses topk_svm --threads 1   # a subset
  python benchmarks/topk.py --isotonic                 # soft rank: eager / function / XLA
Writes benchmarks/out/topk.json and benchmarks/out/topk.png.
"""

import argparse
import json
import os
import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _common  # noqa: E402

B, K, M_AT_1000 = 64, 5, 16
P_K = (0.5, 0.0, 0.0, 0.0, 0.5)
MEMORY = _common.PEAK_MEMORY_DESCRIPTION
REPLY = "@topk-worker "  # marks the protocol lines among what a worker prints
CALL_BUDGET_MS, MIN_CALLS = 500.0, 3
#: difftopk's losses that only ``benchmarks/backends.py`` times (against the PyTorch backend):
#: built when named, never by default here.
PEER_ONLY = ("smooth_topk_svm_k1", "topk_ce_neuralsort")


def inputs(c):
  """The same scores and labels in every worker (numpy, fixed seed)."""
  import numpy as np  # pylint: disable=g-import-not-at-top

  rng = np.random.default_rng(c)
  return rng.normal(size=(B, c)).astype(np.float32), rng.integers(0, c, size=B)


def timed(fn, repeats):
  fn()
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    fn()
    times.append((time.perf_counter() - start) * 1e3)
  return statistics.median(times)


def tf_losses(names=None):
  from tfrank4class.losses.topk import smooth_svm, soft_rank  # pylint: disable=g-import-not-at-top

  losses = {
    "smooth_topk_svm": lambda y, s, c: smooth_svm.smooth_topk_svm_loss(s, y, k=K, tau=1.0),
    "topk_svm": lambda y, s, c: smooth_svm.smooth_topk_svm_loss(s, y, k=K, tau=0.0),
    "soft_rank_topk": lambda y, s, c: soft_rank.soft_rank_topk_loss(
      s, y, k=K, regularization_strength=1.0
    ),
  }
  try:
    from tfrank4class.losses.topk import cross_entropy  # pylint: disable=g-import-not-at-top
  except ImportError:
    cross_entropy = None
  if cross_entropy is not None:
    losses["topk_cross_entropy"] = lambda y, s, c: cross_entropy.topk_cross_entropy(
      s,
      y,
      p_k=P_K,
      method="bitonic",
      distribution="cauchy",
      inverse_temperature=2.0,
      m=M_AT_1000 if c >= 1000 else None,
    )
  return {n: f for n, f in losses.items() if names is None or n in names}


def tf_calls(sizes, names):
  """``{(mode, loss, C): call}``, ``mode`` "tf" (plain graph) or "xla" (``jit_compile``)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  calls = {}
  for name, loss in tf_losses(names).items():
    for c in sizes:
      scores, labels = inputs(c)
      s, y = tf.constant(scores), tf.constant(labels)

      def step(s, y, loss=loss, c=c):
        with tf.GradientTape() as tape:
          tape.watch(s)
          value = tf.reduce_mean(loss(y, s, c))
        return value, tape.gradient(value, s)

      for mode in ("tf", "xla"):
        # autograph off: no tensor-dependent Python control flow to convert
        fn = tf.function(step, autograph=False, jit_compile=mode == "xla")
        calls[mode, name, c] = lambda fn=fn, s=s, y=y: [t.numpy() for t in fn(s, y)]
  return calls


def torch_calls(sizes, names):
  """``{("torch", loss, C): call}``: difftopk's losses, eager forward + ``backward``."""
  import torch  # pylint: disable=g-import-not-at-top
  from difftopk import TopKCrossEntropyLoss, smooth_topk  # pylint: disable=g-import-not-at-top

  calls = {}
  for c in sizes:
    classes = torch.arange(c)
    m = M_AT_1000 if c >= 1000 else None
    losses = {
      "smooth_topk_svm": lambda classes=classes: smooth_topk.Topk_Smooth_SVM(classes, K, 1.0),
      "topk_svm": lambda classes=classes: smooth_topk.Topk_Hard_SVM(classes, K),
      "topk_cross_entropy": lambda c=c, m=m: TopKCrossEntropyLoss(
        "bitonic__non_sparse", 2.0, list(P_K), n=c, m=m, distribution="cauchy"
      ),
      "smooth_topk_svm_k1": lambda classes=classes: smooth_topk.Topk_Smooth_SVM(classes, 1, 1.0),
      "topk_ce_neuralsort": lambda c=c, m=m: TopKCrossEntropyLoss(
        "neuralsort", 2.0, list(P_K), n=c, m=m
      ),
    }
    scores, labels = inputs(c)
    y = torch.tensor(labels)
    for name, make in losses.items():
      if (names is None and name in PEER_ONLY) or (names is not None and name not in names):
        continue
      loss = make()

      def call(loss=loss, name=name, scores=scores, y=y):
        s = torch.tensor(scores, requires_grad=True)
        value = loss(s.clone() if name.startswith("smooth_topk_svm") else s, y).mean()
        value.backward()
        return s.grad

      calls["torch", name, c] = call
  return calls


def serve(framework, threads, sizes, names):
  """A worker: answers one JSON request per stdin line with one ``REPLY``-prefixed JSON line.

  ``{"cells": true}``: the cells it times; ``{"warm": cell}``: two calls (tracing, compiling),
  returns the ms of the second; ``{"time": cell, "calls": n}``: the median ms of ``n`` calls;
  ``{"memory": cell}``: ``_common.peak_rss_mb`` of one call. A cell that raises (e.g. difftopk's
  sparse top-m without torch-sparse) answers ``{"error": ...}``.
  """
  if framework == "tf":
    _common.setup_tensorflow(threads)
    calls = tf_calls(sizes, names)
  else:
    import torch  # pylint: disable=g-import-not-at-top

    torch.set_num_threads(threads)
    calls = torch_calls(sizes, names)
  for line in sys.stdin:
    request = json.loads(line)
    cell = tuple(request.get("warm") or request.get("time") or request.get("memory") or ())
    try:
      if "cells" in request:
        reply = {"cells": list(calls)}
      elif "warm" in request:
        calls[cell]()
        reply = {"ms": timed(calls[cell], 1)}
      elif "time" in request:
        reply = {"ms": timed(calls[cell], request["calls"] - 1)}
      else:
        reply = {"peak_mb": _common.peak_rss_mb(calls[cell])}
    except (AssertionError, ImportError) as e:
      reply = {"error": f"{type(e).__name__}: {e}"}
    print(REPLY + json.dumps(reply), flush=True)


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


class Worker(_common.WorkerProcess):
  """A ``serve`` process: ``ask(request)`` sends one request and returns its reply."""

  def __init__(self, python, framework, threads, args, env):
    command = [python, __file__, "--worker", framework, "--threads", str(threads)]
    command += ["--sizes", ",".join(map(str, args.sizes))]
    if args.losses:
      command += ["--losses", ",".join(args.losses)]
    super().__init__(command, {**os.environ, **env}, REPLY)


def measure(workers, threads, args):
  """Rows of one thread count: per cell the per-round timings, interleaved (module docstring)."""
  owner = {tuple(cell): w for w in workers for cell in w.ask({"cells": True})["cells"]}
  rows, calls = {}, {}
  for cell, worker in owner.items():
    reply = worker.ask({"warm": cell})
    rows[cell] = {"framework": cell[0], "loss": cell[1], "C": cell[2], "threads": threads}
    if "error" in reply:
      rows[cell]["error"] = reply["error"]
      continue
    calls[cell] = max(MIN_CALLS, min(args.repeats, int(CALL_BUDGET_MS / max(reply["ms"], 1e-3))))
    rows[cell]["rounds"] = []
  groups = {}
  for cell in calls:
    groups.setdefault(cell[1:], []).append(cell)
  for r in range(args.rounds):
    for group in groups.values():
      for cell in group[r % len(group) :] + group[: r % len(group)]:
        rows[cell]["rounds"].append(owner[cell].ask({"time": cell, "calls": calls[cell]})["ms"])
  for cell in calls:
    rows[cell].update(calls=calls[cell], ms=statistics.median(rows[cell]["rounds"]))
    if threads == 1:
      rows[cell]["peak_mb"] = owner[cell].ask({"memory": cell})["peak_mb"]
  return list(rows.values())


def find_torch_python(given):
  if given:
    return given
  candidate = _common.ROOT.parent / "venv-torch" / "bin" / "python"
  return str(candidate) if candidate.exists() else None


def spread(values, digits=2):
  """``median (min-max)`` of the per-round values."""
  lo, mid, hi = min(values), statistics.median(values), max(values)
  return f"{mid:.{digits}f} ({lo:.{digits}f}-{hi:.{digits}f})"


def table(rows, sizes, thread_counts, rounds, torch_available):
  names = list(dict.fromkeys(r["loss"] for r in rows if r["framework"] == "tf"))
  index = {(r["framework"], r["loss"], r["C"], r["threads"]): r for r in rows}
  lines = [
    f"B = {B}, k = {K}, m = {M_AT_1000} at C = 1000 (topk_cross_entropy); ms = forward + "
    f"backward, median over {rounds} interleaved rounds (min-max); ratios taken within each round; "
    + MEMORY,
    f"{'loss':<19}{'C':>5}{'thr':>4}  {'TF ms':>19}  {'XLA ms':>19}  {'torch ms':>21}  "
    f"{'XLA/TF':>17}  {'torch/TF':>17}{'TF MB':>7}{'torch MB':>9}",
  ]
  errors = set()
  for name in names:
    for c in sizes:
      for t in thread_counts:
        cells = {f: index.get((f, name, c, t)) for f in ("tf", "xla", "torch")}
        for f, row in cells.items():
          if row and "error" in row:
            errors.add(f"{f} {name} at C = {c}: {row['error']}")
            cells[f] = None
        text = {f: spread(row["rounds"]) if row else "n/a" for f, row in cells.items()}
        for f in ("xla", "torch"):
          pairs = zip(cells[f]["rounds"], cells["tf"]["rounds"]) if cells[f] else None
          text[f + "/tf"] = spread([a / b for a, b in pairs]) if pairs else "n/a"
        mb = {
          f: f"{row['peak_mb']:.1f}" if row and "peak_mb" in row else "" for f, row in cells.items()
        }
        lines.append(
          f"{name:<19}{c:>5}{t:>4}  {text['tf']:>19}  {text['xla']:>19}  {text['torch']:>21}  "
          f"{text['xla/tf']:>17}  {text['torch/tf']:>17}{mb['tf']:>7}{mb['torch']:>9}"
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
      *zip(*points),
      marker="o",
      ls="--" if framework == "torch" else "-",
      label=f"{framework} {name}",
    )
  ax.set(xscale="log", yscale="log", xlabel="classes C", ylabel="ms (forward + backward, 1 thread)")
  ax.set_xticks(sizes, [str(c) for c in sizes])
  ax.legend(fontsize=8)
  ax.set_title(f"Top-K losses, B = {B}, k = {K}")
  fig.tight_layout()
  fig.savefig(path, dpi=120)


def main(argv):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true", help="C = 10, 1 thread, 2 rounds, no torch")
  parser.add_argument("--torch_python", help="an interpreter with torch and difftopk")
  parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (default 7)")
  parser.add_argument("--repeats", type=int, default=10, help="most calls per timing (10)")
  parser.add_argument("--threads", default="1,2", help="thread counts (default 1,2)")
  parser.add_argument("--losses", help="a comma-separated subset of the losses (default: all)")
  parser.add_argument(
    "--isotonic", action="store_true", help="only: soft rank eager / tf.function / XLA times"
  )
  parser.add_argument("--worker", choices=["tf", "torch"], help=argparse.SUPPRESS)
  parser.add_argument("--sizes", help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  args.losses = args.losses.split(",") if args.losses else None
  if args.worker:
    sizes = [int(c) for c in args.sizes.split(",")]
    serve(args.worker, int(args.threads), sizes, args.losses)
    return
  if args.isotonic:
    print(isotonic_table(1, 3 if args.quick else args.repeats))
    return
  args.sizes = (10,) if args.quick else (10, 100, 1000)
  args.rounds = 2 if args.quick else args.rounds
  thread_counts = (1,) if args.quick else tuple(int(t) for t in args.threads.split(","))
  torch_python = None if args.quick else find_torch_python(args.torch_python)
  rows = []
  for threads in thread_counts:
    pythons = {"tf": sys.executable, "torch": torch_python}
    workers = [
      Worker(python, framework, threads, args, _common.PEAK_MEMORY_ENV)  # see peak_rss_mb
      for framework, python in pythons.items()
      if python
    ]
    rows += measure(workers, threads, args)
    for worker in workers:
      worker.close()
  text = table(rows, args.sizes, thread_counts, args.rounds, torch_python is not None)
  print(text)
  _common.OUT.mkdir(parents=True, exist_ok=True)
  with open(_common.OUT / "topk.json", "w") as f:
    json.dump({"rows": rows, "table": text, "rounds": args.rounds}, f, indent=1)
  plot(rows, args.sizes, _common.OUT / "topk.png")
  print(f"wrote {_common.OUT / 'topk.json'} and {_common.OUT / 'topk.png'}")


if __name__ == "__main__":
  main(sys.argv[1:])
