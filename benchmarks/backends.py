"""Forward + backward time and peak memory of every loss family and rank operator on Keras 3's
TensorFlow, JAX and PyTorch backends, beside today's main (A/B), rax and difftopk.

Cells: B = 64 lists of C classes, one thread, the same scores and class ids in every process
(``topk.inputs``). Losses are built with :func:`tfrank4class.losses.get` (``LOSSES``) and called
as Keras losses on class ids; rank operators (``OPERATORS``) are reduced to ``mean(op(s) ** 2)``.
The full sorting network runs at C <= 100 only (at 1000 its backward would hold 55 layers of
64 x 1000 x 1000 floats); ``--quadratic_max_c`` caps the C of the cells in ``QUADRATIC`` and of
the baselines' cells in ``QUADRATIC_ON_ROWS``.
Variants (``VARIANTS``): ``tf`` (``tf.function``) and ``xla`` (``jit_compile=True``) of this
checkout, ``main:tf`` and ``main:xla`` of the checkout given as ``--reference``, ``jax``
(``jax.jit(jax.value_and_grad(...))``), ``rax`` (its softmax, pairwise logistic, ListMLE with a
PRNG key, so that tied labels come in a random order as in TF-Ranking's, and
``approx_t12n(ndcg_metric)`` at TF-Ranking's temperature 0.1, on one-hot labels made inside the
jitted function; ``softmax_graded`` on graded dense labels, ``GRADED``, for every variant),
``torch`` (eager, ``backward``) and ``difftopk`` (its top-k cross-entropy, bitonic and
NeuralSort, and its smooth and hard top-k SVM, built as ``benchmarks/topk.py`` does).

One worker process per backend (``KERAS_BACKEND`` is fixed per process; ``WORKER_ENV``, thread
pools of one, the allocator's defaults). Warm-up (build, trace, compile) runs in all workers at
once; then every round times each (cell, C) in all its variants in turn, one worker at a time,
the order rotated from round to round. A timing is the fastest of up to ``--repeats`` calls
(``CALL_BUDGET_MS`` of calls, at least one): on a shared machine a call's time is its cost plus the
time it was preempted. The table gives the median over rounds; each ratio is taken within a
round (median and min-max over rounds). Peak memory: ``_common.peak_rss_mb`` of one call at the
largest C, after the rounds, in a second set of workers started with ``_common.PEAK_MEMORY_ENV``
(whose mmap threshold would slow every timing that allocates buffers above 64 KiB). A cell that
cannot be built (a module not ported to that backend yet, a missing package) reads "n/a" and its
error is listed. benchmarks/backends.md has the tables and the reasons.

Usage (writes benchmarks/out/backends.json and .png; side venvs are found beside the checkout):
  nice python benchmarks/backends.py --reference ../wt-ref \\
      --jax_python ../venv-jax/bin/python --torch_python ../venv-torch/bin/python
  python benchmarks/backends.py --quick    # C = 10, 2 cells, TensorFlow against itself, 2 rounds
  python benchmarks/backends.py --cells softmax,neuralsort --sizes 10,100 --rounds 3
"""

import argparse
import concurrent.futures
import importlib
import json
import os
import pathlib
import statistics
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _common  # noqa: E402
import topk  # noqa: E402  (the same inputs, spread and difftopk losses)

B, K, M_AT_1000 = topk.B, topk.K, topk.M_AT_1000
REPLY = "@backends-worker "
CALL_BUDGET_MS, MIN_CALLS = 100.0, 1
FULL_SORT_MAX_C = 100
#: The cells whose cost grows as C^2 per list (pairs, C x C matrices): ``--quadratic_max_c``.
QUADRATIC = {"sodeep_spearman", "neuralsort", "softsort"}
#: The cells that are quadratic only in the baselines, which take one-hot rows: this checkout's
#: cores take class ids in O(C) (``compute_per_list_from_ids``).
QUADRATIC_ON_ROWS = ({"pairwise_logistic", "approx_ndcg"}, {"main:tf", "main:xla", "rax"})
#: Table name -> (registry key, constructor arguments).
LOSSES = {
  "softmax": ("softmax_loss", {}),
  "pairwise_logistic": ("pairwise_logistic_loss", {}),
  "list_mle": ("list_mle_loss", {}),
  "approx_ndcg": ("approx_ndcg_loss", {}),
  "rambo_recall": ("recall_loss", {}),
  "rambo_ap": ("average_precision_loss", {}),
  "sodeep_spearman": ("spearman_loss", {}),
  "topk_cross_entropy": ("topk_cross_entropy_loss", {"p_k": topk.P_K, "inverse_temperature": 2.0}),
  "smooth_topk_svm": ("smooth_topk_svm_loss", {"k": K, "tau": 1.0}),
  # Issue 56's cells against difftopk: the hard loss (tau = 0), the smooth one at k = 1, the
  # top-k cross-entropy over NeuralSort (m = 16 at C = 1,000, as the bitonic one).
  "topk_svm": ("smooth_topk_svm_loss", {"k": K, "tau": 0.0}),
  "smooth_topk_svm_k1": ("smooth_topk_svm_loss", {"k": 1, "tau": 1.0}),
  "topk_ce_neuralsort": (
    "topk_cross_entropy_loss",
    {"p_k": topk.P_K, "inverse_temperature": 2.0, "method": "neuralsort"},
  ),
  # Softmax on graded dense relevance (0-3, ``graded_labels``), against rax's on the same rows.
  "softmax_graded": ("softmax_loss", {}),
  "soft_rank_topk": ("soft_rank_topk_loss", {"k": K, "regularization_strength": 1.0}),
}
#: Rank operator -> its call, given the package's ``ranking`` module and the scores.
OPERATORS = {
  "blackbox_rank": lambda ranking, s: ranking.blackbox_rank(s, 1.0),
  "neuralsort": lambda ranking, s: ranking.neuralsort(s, 1.0),
  "softsort": lambda ranking, s: ranking.softsort(s, 1.0),
  "sorting_network": lambda ranking, s: ranking.sorting_network_sort(s, "bitonic")[1],
  "sorting_network_topk": lambda ranking, s: ranking.sorting_network_topk(s, K, "bitonic"),
  "soft_rank": lambda ranking, s: ranking.soft_rank(s, 1.0),
}
QUICK_CELLS = ("softmax", "soft_rank")
RAX = {"softmax", "pairwise_logistic", "list_mle", "approx_ndcg", "softmax_graded"}
#: The names benchmarks/topk.py gives them.
DIFFTOPK = {
  "smooth_topk_svm",
  "topk_cross_entropy",
  "topk_svm",
  "smooth_topk_svm_k1",
  "topk_ce_neuralsort",
}
#: The cells on graded dense labels ``[B, C]`` (``graded_labels``) in place of class ids.
GRADED = {"softmax_graded"}
#: The cells of a top-k cross-entropy, which rank ``M_AT_1000`` classes at C >= 1,000.
TOPK_CE = {"topk_cross_entropy", "topk_ce_neuralsort"}
#: Variant -> (worker, the cells it has or None for all).
VARIANTS = {
  "tf": ("tf", None),
  "main:tf": ("main", None),
  "xla": ("tf", None),
  "main:xla": ("main", None),
  "jax": ("jax", None),
  "rax": ("jax", RAX),
  "torch": ("torch", None),
  "difftopk": ("torch", DIFFTOPK),
}
#: The ratios of the table: (variant, its baseline, goal).
RATIOS = (
  ("tf", "main:tf", 1.05),
  ("xla", "main:xla", 1.05),
  ("jax", "rax", 1.0),
  ("torch", "difftopk", 1.0),
)
WORKER_ENV = {
  "tf": {"KERAS_BACKEND": "tensorflow"},
  "main": {"KERAS_BACKEND": "tensorflow"},
  "jax": {
    "KERAS_BACKEND": "jax",
    "JAX_PLATFORMS": "cpu",
    "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
  },
  "torch": {"KERAS_BACKEND": "torch", "OMP_NUM_THREADS": "1"},
}


def has_cell(variant, name, c, quadratic_max_c):
  names, baselines = QUADRATIC_ON_ROWS
  quadratic = name in QUADRATIC or (name in names and variant in baselines)
  cells, largest = VARIANTS[variant][1], quadratic_max_c if quadratic else c
  largest = min(quadratic_max_c, FULL_SORT_MAX_C) if name == "sorting_network" else largest
  return (cells is None or name in cells) and c <= largest


def our_function(name, c):
  """``f(scores, labels)`` -> scalar on the active Keras backend, from this process's package."""
  import keras  # pylint: disable=g-import-not-at-top

  if name in LOSSES:
    from tfrank4class import losses  # pylint: disable=g-import-not-at-top

    key, kwargs = LOSSES[name]
    if name in TOPK_CE and c >= 1000:
      kwargs = {**kwargs, "m": M_AT_1000}
    loss = losses.get(key, **kwargs)
    return lambda s, y: loss(y, s)
  from tfrank4class import ranking  # pylint: disable=g-import-not-at-top

  return lambda s, y: keras.ops.mean(keras.ops.square(OPERATORS[name](ranking, s)))


def rax_function(name):
  import jax  # pylint: disable=g-import-not-at-top

  if not hasattr(jax, "util"):
    # rax 0.4.0 decorates approx_t12n's result with jax.util.wraps (gone in jax 0.8+), which only
    # copies a name and a docstring: an identity decorator stands in for it.
    import types  # pylint: disable=g-import-not-at-top

    jax.util = types.SimpleNamespace(wraps=lambda *a, **k: lambda f: f)
  import rax  # pylint: disable=g-import-not-at-top

  loss = {
    "softmax": rax.softmax_loss,
    "pairwise_logistic": rax.pairwise_logistic_loss,
    # Tied labels in a random order, as TF-Ranking's ListMLE (and ours) draws them: rax's own
    # advice for labels with ties. Without a key rax keeps their index order (a different loss).
    "list_mle": lambda s, y: rax.listmle_loss(s, y, key=jax.random.PRNGKey(37)),
    "approx_ndcg": rax.approx_t12n(rax.ndcg_metric, temperature=0.1),
    "softmax_graded": rax.softmax_loss,
  }[name]
  if name in GRADED:
    return loss
  return lambda s, y: loss(s, jax.nn.one_hot(y, s.shape[-1], dtype=s.dtype))


def tf_call(f, compile_mode, scores, labels):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  def step(s, y):
    with tf.GradientTape() as tape:
      tape.watch(s)
      value = f(s, y)
    return value, tape.gradient(value, s)

  fn = tf.function(step, autograph=False, jit_compile=compile_mode == "xla")
  s, y = tf.constant(scores), tf.constant(labels)
  return lambda: [t.numpy() for t in fn(s, y)]


def jax_call(f, scores, labels):
  import jax  # pylint: disable=g-import-not-at-top

  fn = jax.jit(jax.value_and_grad(f))
  s, y = jax.numpy.asarray(scores), jax.numpy.asarray(labels)
  return lambda: jax.block_until_ready(fn(s, y))


def torch_call(f, scores, labels):
  import torch  # pylint: disable=g-import-not-at-top

  y = torch.tensor(labels)

  def call():
    s = torch.tensor(scores, requires_grad=True)
    f(s, y).backward()
    return s.grad

  return call


def build(variant, name, c):
  """The call that times one cell in this worker (module docstring)."""
  scores, labels = topk.inputs(c)
  if name in GRADED:
    labels = graded_labels(c)
  if variant in ("tf", "xla", "main:tf", "main:xla"):
    return tf_call(our_function(name, c), variant.split(":")[-1], scores, labels)
  if variant == "jax":
    return jax_call(our_function(name, c), scores, labels)
  if variant == "rax":
    return jax_call(rax_function(name), scores, labels)
  if variant == "torch":
    return torch_call(our_function(name, c), scores, labels)
  return topk.torch_calls([c], [name])["torch", name, c]


def graded_labels(c):
  """Graded relevance ``[B, C]`` in ``{0, 1, 2, 3}`` (float32, fixed seed), the same in every
  worker."""
  import numpy as np  # pylint: disable=g-import-not-at-top

  return np.random.default_rng(c + 1).integers(0, 4, size=(B, c)).astype(np.float32)


def setup_worker(worker, package):
  """Fixes the thread pools, puts ``package`` first on ``sys.path`` and imports its losses and
  rank operators now, so that a checkout changing during the run cannot mix versions; returns
  the package's path and what failed to import (each failure is then every such cell's error)."""
  if worker in ("tf", "main"):
    _common.setup_tensorflow(1).get_logger().setLevel("ERROR")  # no retracing notices
  elif worker == "torch":
    import torch  # pylint: disable=g-import-not-at-top

    torch.set_num_threads(1)
  sys.path.insert(0, package)
  imported = []
  for module in ("tfrank4class", "tfrank4class.losses", "tfrank4class.ranking"):
    try:
      imported.append(importlib.import_module(module).__file__)
    except Exception as e:  # pylint: disable=broad-except  (see the docstring)
      imported.append(f"{module} not importable ({type(e).__name__}: {e})")
  return "; ".join(imported)


def fastest(call, calls):
  """The least ms of ``calls`` calls: on a shared machine a call's time is its cost plus the
  time it was preempted, and the fastest call is the least inflated."""
  times = []
  for _ in range(calls):
    start = time.perf_counter()
    call()
    times.append((time.perf_counter() - start) * 1e3)
  return min(times)


def answer(calls, request):
  cell = tuple(request.get("warm") or request.get("time") or request.get("memory"))
  if "warm" in request:
    calls[cell] = build(*cell)
    calls[cell]()
    return {"ms": fastest(calls[cell], 1)}
  if "time" in request:
    return {"ms": fastest(calls[cell], request["calls"])}
  return {"peak_mb": _common.peak_rss_mb(calls[cell])}


def serve(worker, package):
  """A worker: one JSON request per stdin line, one ``REPLY``-prefixed JSON line per answer.

  ``{"hello": true}``: the package it imports; ``{"warm": cell}``: builds the cell, calls it
  twice, returns the ms of the second; ``{"time": cell, "calls": n}``: the median ms of ``n``
  calls; ``{"memory": cell}``: ``_common.peak_rss_mb`` of one call. A cell that fails to build
  or run answers ``{"error": ...}`` (any exception: the port lands module by module, and the
  table lists each failure rather than stopping).
  """
  imported = setup_worker(worker, package)
  calls = {}
  for line in sys.stdin:
    request = json.loads(line)
    try:
      reply = {"package": imported} if "hello" in request else answer(calls, request)
    except Exception as e:  # pylint: disable=broad-except  (see the docstring)
      reply = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"}
    print(REPLY + json.dumps(reply), flush=True)


class Worker(_common.WorkerProcess):
  """A ``serve`` process: ``ask(request)`` sends one request and returns its reply. ``memory``:
  started with ``_common.PEAK_MEMORY_ENV`` for ``peak_rss_mb``; its 64 KiB mmap threshold makes
  every larger buffer a fresh mapping (page faults included), so such a worker does not time."""

  def __init__(self, worker, python, package, memory=False):
    # no PYTHONPATH: the package comes from ``package`` only
    extra = _common.PEAK_MEMORY_ENV if memory else {}
    env = {**os.environ, **extra, **WORKER_ENV[worker], "PYTHONPATH": ""}
    command = [python, __file__, "--worker", worker, "--package", package]
    super().__init__(command, env, REPLY)
    self.package = self.ask({"hello": True})["package"]


def warm_up(workers, names, sizes, repeats, quadratic_max_c):
  """Builds every cell and calls it twice, the workers in parallel (nothing here is timed but
  the second call, which sets the calls per timing); returns the rows and
  ``{cell: calls per timing}`` of the cells that ran."""
  cells = [
    (variant, name, c)
    for name in names
    for c in sizes
    for variant, (worker, _) in VARIANTS.items()
    if worker in workers and has_cell(variant, name, c, quadratic_max_c)
  ]

  def warm(worker):
    replies = {}
    for cell in (cell for cell in cells if VARIANTS[cell[0]][0] == worker):
      replies[cell] = workers[worker].ask({"warm": cell})
      print(f"warm {' '.join(map(str, cell))}: {replies[cell]}", file=sys.stderr, flush=True)
    return replies

  replies = {}
  with concurrent.futures.ThreadPoolExecutor(len(workers)) as pool:
    for part in pool.map(warm, workers):
      replies.update(part)
  rows, calls = {}, {}
  for cell in cells:
    rows[cell] = {"variant": cell[0], "cell": cell[1], "C": cell[2]}
    if "error" in replies[cell]:
      rows[cell]["error"] = replies[cell]["error"]
      continue
    budget = int(CALL_BUDGET_MS / max(replies[cell]["ms"], 1e-3))
    calls[cell] = max(MIN_CALLS, min(repeats, budget))
    rows[cell].update(warm_ms=replies[cell]["ms"], rounds=[])
  return rows, calls


def measure(workers, names, sizes, rounds, repeats, quadratic_max_c):
  """Per cell the per-round timings, interleaved (module docstring)."""
  rows, calls = warm_up(workers, names, sizes, repeats, quadratic_max_c)
  groups = {}
  for cell in calls:
    groups.setdefault(cell[1:], []).append(cell)
  for r in range(rounds):
    for group in groups.values():
      for cell in group[r % len(group) :] + group[: r % len(group)]:
        reply = workers[VARIANTS[cell[0]][0]].ask({"time": list(cell), "calls": calls[cell]})
        rows[cell]["rounds"].append(reply["ms"])
    print(f"round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
  for cell in calls:
    rows[cell].update(calls=calls[cell], ms=statistics.median(rows[cell]["rounds"]))
  return rows


def measure_memory(pythons, rows, c):
  """Peak MB of one call of every cell at ``C = c`` that ran, in memory workers (``Worker``)."""
  for worker, (python, package) in pythons.items():
    cells = [
      cell
      for cell, row in rows.items()
      if cell[2] == c and "error" not in row and VARIANTS[cell[0]][0] == worker
    ]
    if not cells:
      continue
    probe = Worker(worker, python, package, memory=True)
    for cell in cells:
      probe.ask({"warm": list(cell)})
      rows[cell]["peak_mb"] = probe.ask({"memory": list(cell)}).get("peak_mb")
    probe.close()


def ratios(index, variant, baseline, name, c):
  """The per-round ratios ``variant / baseline`` of one cell, or None where either is missing."""
  a, b = index.get((variant, name, c), {}), index.get((baseline, name, c), {})
  return (
    [x / y for x, y in zip(a["rounds"], b["rounds"])] if "rounds" in a and "rounds" in b else None
  )


def time_table(index, variants, names, sizes):
  lines = [f"{'cell':<21}{'C':>5}" + "".join(f"{v:>10}" for v in variants)]
  lines[0] += "".join(f"  {a + '/' + b:>17}" for a, b, _ in RATIOS)
  for name, c in ((name, c) for name in names for c in sizes):
    ms = [index.get((v, name, c), {}).get("ms") for v in variants]
    line = f"{name:<21}{c:>5}" + "".join(f"{m:>10.2f}" if m else f"{'n/a':>10}" for m in ms)
    for a, b, _ in RATIOS:
      values = ratios(index, a, b, name, c)
      line += f"  {topk.spread(values) if values else 'n/a':>17}"
    lines.append(line)
  return lines


def goals(index, names, sizes):
  """One line per ratio: in how many cells its median over the rounds meets the goal."""
  lines = []
  for variant, baseline, goal in RATIOS:
    medians = {
      (name, c): statistics.median(values)
      for name in names
      for c in sizes
      if (values := ratios(index, variant, baseline, name, c))
    }
    missed = [f"{n} C={c} ({m:.2f})" for (n, c), m in medians.items() if m > goal]
    lines.append(
      f"{variant}/{baseline} <= {goal}: met in {len(medians) - len(missed)} of {len(medians)} "
      f"cells" + (f"; missed: {', '.join(missed)}" if missed else "")
    )
  return lines


def memory_table(index, variants, names, c):
  """Peak MB of one call at the largest C, where the methods' costs part (the record:
  benchmarks/backends.md)."""
  lines = [f"peak MB of one call at C = {c}: " + _common.PEAK_MEMORY_DESCRIPTION]
  lines.append(f"{'cell':<21}" + "".join(f"{v:>10}" for v in variants))
  for name in names:
    values = [index.get((v, name, c), {}).get("peak_mb") for v in variants]
    text = [f"{max(m, 0.0):>10.1f}" if m is not None else f"{'n/a':>10}" for m in values]
    lines.append(f"{name:<21}" + "".join(text))
  return lines


def report(rows, names, sizes, rounds, packages):
  index = {(r["variant"], r["cell"], r["C"]): r for r in rows}
  variants = [v for v in VARIANTS if any(r["variant"] == v for r in rows)]
  lines = [
    f"B = {B}, one thread; ms = forward + backward, median over {rounds} interleaved rounds; "
    "ratios taken within each round: median (min-max)",
    *time_table(index, variants, names, sizes),
    "",
    *goals(index, names, sizes),
    "",
    *memory_table(index, variants, names, max(sizes)),
    "",
    *(f"{worker} imports: {imported}" for worker, imported in packages.items()),
  ]
  lines += sorted(
    f"n/a: {r['variant']} {r['cell']} C={r['C']}: {r['error']}" for r in rows if "error" in r
  )
  return "\n".join(lines)


def plot(rows, names, path):
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  shape = (-(-len(names) // 4), min(4, len(names)))
  fig, axes = plt.subplots(*shape, figsize=(3.2 * shape[1], 2.6 * shape[0]), squeeze=False)
  for ax, name in zip(axes.flat, names):
    for variant in VARIANTS:
      points = sorted(
        (r["C"], r["ms"])
        for r in rows
        if (r["cell"], r["variant"]) == (name, variant) and "ms" in r
      )
      if points:
        ax.plot(*zip(*points), marker="o", ls="--" if ":" in variant else "-", label=variant)
    ax.set(xscale="log", yscale="log")
    ax.set_title(name, fontsize=9)
  for ax in axes.flat[len(names) :]:
    ax.axis("off")
  axes.flat[0].legend(fontsize=7)
  fig.supxlabel("classes C")
  fig.supylabel(f"ms, forward + backward, B = {B}, 1 thread")
  fig.tight_layout()
  fig.savefig(path, dpi=110)


def side_python(given, venv):
  """``given``, else the side venv beside the checkout when it exists, else None."""
  if given:
    return given
  candidate = _common.ROOT.parent / venv / "bin" / "python"
  return str(candidate) if candidate.exists() else None


def worker_pythons(args):
  """``{worker: (interpreter, package checkout)}`` of the workers this run starts."""
  pythons = {"tf": (sys.executable, str(_common.ROOT))}
  if args.reference:
    pythons["main"] = (sys.executable, str(pathlib.Path(args.reference).resolve()))
  for worker, given, venv in (
    ("jax", args.jax_python, "venv-jax"),
    ("torch", args.torch_python, "venv-torch"),
  ):
    python = None if args.quick else side_python(given, venv)
    if python:
      pythons[worker] = (python, str(_common.ROOT))
  return pythons


def main(argv):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true", help="C = 10, 2 cells, TF A/A only, 2 rounds")
  parser.add_argument("--reference", help="a checkout of the A/B baseline (today's main)")
  parser.add_argument("--jax_python", help="an interpreter with jax, keras and rax")
  parser.add_argument("--torch_python", help="an interpreter with torch, keras and difftopk")
  parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (default 7)")
  parser.add_argument("--repeats", type=int, default=30, help="most calls per timing (30)")
  parser.add_argument("--sizes", default="10,100,1000", help="the C values (default 10,100,1000)")
  parser.add_argument("--quadratic_max_c", type=int, default=1000, help="largest C of QUADRATIC")
  parser.add_argument("--cells", help="a comma-separated subset of the cells (default: all)")
  parser.add_argument("--worker", choices=list(WORKER_ENV), help=argparse.SUPPRESS)
  parser.add_argument("--package", help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.worker:
    serve(args.worker, args.package)
    return
  names = args.cells.split(",") if args.cells else [*LOSSES, *OPERATORS]
  unknown = sorted(set(names) - {*LOSSES, *OPERATORS})
  if unknown:
    parser.error(f"unknown cells {unknown}; known: {', '.join([*LOSSES, *OPERATORS])}")
  sizes = [int(c) for c in args.sizes.split(",")]
  if args.quick:
    names, sizes, args.rounds = list(QUICK_CELLS), [10], 2
    args.reference = str(_common.ROOT)  # an A/A run: the A/B machinery, in seconds
  pythons = worker_pythons(args)
  workers = {w: Worker(w, python, package) for w, (python, package) in pythons.items()}
  rows = measure(workers, names, sizes, args.rounds, args.repeats, args.quadratic_max_c)
  packages = {w: worker.package for w, worker in workers.items()}
  for worker in workers.values():
    worker.close()
  measure_memory(pythons, rows, max(sizes))
  rows = list(rows.values())
  text = report(rows, names, sizes, args.rounds, packages)
  print(text)
  _common.OUT.mkdir(parents=True, exist_ok=True)
  with open(_common.OUT / "backends.json", "w") as f:
    json.dump({"rows": rows, "table": text, "rounds": args.rounds, "packages": packages}, f)
  plot(rows, names, _common.OUT / "backends.png")
  print(f"wrote {_common.OUT / 'backends.json'} and {_common.OUT / 'backends.png'}")


if __name__ == "__main__":
  main(sys.argv[1:])
