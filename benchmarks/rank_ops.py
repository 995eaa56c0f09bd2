"""Speed of the blackbox ranker, and blackbox NDCG vs ApproxNDCG.

Part 1: forward + backward of ``tfrank4class.ranking.blackbox_rank`` beside ONE ``tf.argsort`` of
the same tensor (descending, stable), measured interleaved in the same process (argsort,
blackbox, argsort, blackbox, ...) and reported as the median of the per-pair time ratios, from
wall-clock time and (one thread) from process CPU time. The lower bound is two sorts
(one forward, one backward), i.e. a ratio of about 2. Each thread setting runs in its own
subprocess (TensorFlow fixes its thread pools at start-up); XLA (``jit_compile=True``) on and off
run in the same subprocess.

Part 2: TF-Ranking's ApproxNDCG loss (``losses.get("approx_ndcg_loss")``, TF-Ranking's own core
through our wrapper, so that it runs on both stacks) and ``tfrank4class.losses.BlackboxNDCGLoss``,
forward + backward time and peak memory (``_common.peak_rss_mb``: growth of the resident set
during one step, in a second subprocess started with ``_common.PEAK_MEMORY_ENV``) at list
lengths 10 .. 10,000, batch 64.

Part 3 (only with ``--baseline DIR`` and/or ``--baseline-python PY``): the RaMBO losses
(``BlackboxNDCGLoss``, ``RecallLoss``, ``AveragePrecisionLoss``), TF-Ranking's softmax and
ApproxNDCG losses through our wrapper, and ``blackbox_rank`` beside one ``tf.argsort``, forward +
backward inside ``tf.function`` and eagerly, one thread, timed by the same worker code in two
set-ups that run in alternating subprocesses (base, this, this, base, ...): "this" is this
checkout under this interpreter; "base" is the checkout ``DIR`` (e.g. ``git worktree add
/tmp/base main``; default: this checkout) under the interpreter ``PY`` (e.g. another stack's
venv; default: this interpreter). Times are process CPU ms (one
thread, so less disturbed by other users of the machine than wall time), the median over the calls
of a run; each row reports the median over the rounds of those times and of the per-round ratio
this / base.

Usage:
  nice -n 10 .venv/bin/python benchmarks/rank_ops.py            # parts 1-2
  .venv/bin/python benchmarks/rank_ops.py --quick                # a smoke run, see below
  .venv/bin/python benchmarks/rank_ops.py --skip-rank --skip-ndcg --baseline /tmp/base  # part 3
  .venv/bin/python benchmarks/rank_ops.py --skip-rank --skip-ndcg \
      --baseline-python /other/venv/bin/python      # part 3: two stacks, same checkout
``--quick`` is a smoke run of every code path, not a measurement: part 1 at one shape with one
thread, part 2 at list length 10 with both losses timed in one worker, part 3 at one shape, one
repeat each.
Writes benchmarks/out/rank_ops.png (part 1 and 2) and benchmarks/out/rank_ops.json.
"""

import argparse
import json
import os
import subprocess
import sys
import time

from _common import (  # noqa: E402
  OUT,
  PEAK_MEMORY_DESCRIPTION,
  ROOT,
  peak_rss_mb,
  run_peak_memory_child,
  setup_tensorflow,
)

SHAPES = [(1, 1_000), (1, 100_000), (1, 1_000_000), (256, 1_000), (8, 320_000)]
NDCG_LENGTHS = [10, 100, 1_000, 10_000]
NDCG_BATCH = 64
# ApproxNDCG materialises [batch, n, n] pairwise tensors: at n = 10,000 and batch 64 one such
# float32 tensor is 64 * 1e8 * 4 B = 25.6 GB, more than this machine has.
APPROX_MAX_BYTES = 8e9
PAPER_MS = {(1, 100_000): 33.0, (1, 1_000_000): 331.0}  # Rolinek et al. Table 6, one CPU core
COMPARE_LOSSES = ("BlackboxNDCGLoss", "RecallLoss", "AveragePrecisionLoss")
COMPARE_TFR_LOSSES = ("softmax_loss", "approx_ndcg_loss")
COMPARE_SHAPES = [(64, 1_000), (64, 10_000), (4, 100_000)]


def _time(fn, *args, cpu=False):
  """Wall time of one call (and the process CPU time it used, if ``cpu``)."""
  start, start_cpu = time.perf_counter(), time.process_time()
  out = fn(*args)
  out.numpy()
  wall = time.perf_counter() - start
  return (wall, time.process_time() - start_cpu) if cpu else wall


def worker_rank(threads, repeats, shapes):
  tf = setup_tensorflow(threads)
  import numpy as np

  from tfrank4class.ranking import blackbox_rank

  rows = []
  for shape in shapes:
    rng = np.random.default_rng(0)
    x = tf.constant(rng.standard_normal(shape), tf.float32)
    g = tf.constant(rng.standard_normal(shape), tf.float32)
    for xla in (False, True):

      @tf.function(jit_compile=xla)
      def argsort(x):
        return tf.argsort(x, axis=-1, direction="DESCENDING", stable=True)

      @tf.function(jit_compile=xla)
      def fwd_bwd(x, g):
        with tf.GradientTape() as tape:
          tape.watch(x)
          ranks = blackbox_rank(x, lambda_=1.0)
        return tape.gradient(ranks, x, output_gradients=g)

      @tf.function(jit_compile=xla)
      def two_argsorts(x, g):  # the lower bound: one sort forward, one backward
        return tf.argsort(x, axis=-1, direction="DESCENDING", stable=True) + tf.argsort(
          x + g, axis=-1, direction="DESCENDING", stable=True
        )

      for _ in range(2):  # trace / compile and warm up
        _time(argsort, x)
        _time(fwd_bwd, x, g)
        _time(two_argsorts, x, g)
      n = shape[0] * shape[1]
      reps = repeats if n >= 1_000_000 else (repeats * 3 if n >= 100_000 else repeats * 10)
      t_sort, t_bb, t_two = [], [], []
      for _ in range(reps):
        t_sort.append(_time(argsort, x, cpu=True))
        t_bb.append(_time(fwd_bwd, x, g, cpu=True))
        t_two.append(_time(two_argsorts, x, g))
      t_sort, t_bb, t_two = np.array(t_sort), np.array(t_bb), np.array(t_two)
      rows.append(
        {
          "shape": list(shape),
          "threads": threads or "all",
          "xla": xla,
          # Fastest run of each (least disturbed by the other users of the machine) ...
          "argsort_ms": 1e3 * float(t_sort[:, 0].min()),
          "blackbox_ms": 1e3 * float(t_bb[:, 0].min()),
          # ... and the median over the interleaved pairs of (blackbox / argsort), robust to a
          # load spike hitting one run.
          "ratio": float(np.median(t_bb[:, 0] / t_sort[:, 0])),
          "argsort_cpu_ms": 1e3 * float(t_sort[:, 1].min()),
          "blackbox_cpu_ms": 1e3 * float(t_bb[:, 1].min()),
          "ratio_cpu": float(np.median(t_bb[:, 1] / np.maximum(t_sort[:, 1], 1e-9))),
          # Two plain argsorts measured the same way: what the load does to the 2x lower bound.
          "ratio_two_sorts": float(np.median(t_two / t_sort[:, 0])),
        }
      )
      print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
  return rows


def worker_ndcg(loss_names, n, repeats, batch=NDCG_BATCH, peak_memory=False):
  """One row per NDCG loss of ``loss_names``, in turn: median forward + backward ms; with
  ``peak_memory`` (in a process started with ``_common.PEAK_MEMORY_ENV``), only
  ``_common.peak_rss_mb`` of one step after a warm-up."""
  tf = setup_tensorflow(1)
  import numpy as np

  rng = np.random.default_rng(0)
  scores = tf.constant(rng.standard_normal((batch, n)), tf.float32)
  labels = tf.constant((rng.random((batch, n)) < 0.1).astype(np.float32))
  return [
    _ndcg_case(tf, name, labels, scores, repeats, peak_memory) for name in loss_names.split(",")
  ]


def _ndcg_case(tf, loss_name, labels, scores, repeats, peak_memory):
  """One row of ``worker_ndcg``: the loss ``loss_name`` on ``(labels, scores)``."""
  import numpy as np

  from tfrank4class import losses

  batch, n = scores.shape
  if loss_name == "ApproxNDCGLoss":
    loss = losses.get("approx_ndcg_loss")  # TF-Ranking's ApproxNDCG core (tests/test_tf_ranking.py)
  else:
    loss = losses.BlackboxNDCGLoss(lambda_=1.0)

  @tf.function
  def step(scores):
    with tf.GradientTape() as tape:
      tape.watch(scores)
      value = loss(labels, scores)
    return tape.gradient(value, scores)[0, 0] + value

  if peak_memory:
    float(step(scores))  # trace and warm up
    return {"peak_mb": peak_rss_mb(lambda: float(step(scores)))}
  times = []
  for i in range(repeats + 1):
    t = _time(step, scores)
    if i:
      times.append(t)
  return {"loss": loss_name, "n": n, "batch": batch, "ms": 1e3 * float(np.median(times))}


def _ndcg_rows(args):
  """The times of an NDCG worker (one row per loss of its ``--loss``), and their peak memory from
  a second worker with ``PEAK_MEMORY_ENV`` (oneDNN off there: the times come from the first,
  default set-up)."""
  rows = _run_worker(args)
  for row, peak in zip(rows, run_peak_memory_child(__file__, [*args, "--peak_memory"])):
    row.update(peak)
  return rows


def worker_compare(root, repeats, shapes):
  """Median forward + backward CPU ms of each compared op, with the ``tfrank4class`` in ``root``."""
  sys.path.insert(0, os.path.abspath(root))  # before the first import of tfrank4class
  tf = setup_tensorflow(1)
  import numpy as np

  import tfrank4class
  from tfrank4class import losses
  from tfrank4class.ranking import blackbox_rank

  package_root = os.path.dirname(os.path.dirname(os.path.abspath(tfrank4class.__file__)))
  if package_root != os.path.abspath(root):
    raise RuntimeError(f"imported tfrank4class from {package_root}, not from {root}")
  rows = []
  for batch, n in shapes:
    rng = np.random.default_rng(0)
    scores = tf.constant(rng.standard_normal((batch, n)), tf.float32)
    labels = tf.constant((rng.random((batch, n)) < 0.1).astype(np.float32))
    ops = {name: getattr(losses, name)(lambda_=1.0, reduction="sum") for name in COMPARE_LOSSES}
    if batch * n * n * 4 <= APPROX_MAX_BYTES:  # ApproxNDCG materialises [batch, n, n]
      ops.update({name: losses.get(name, reduction="sum") for name in COMPARE_TFR_LOSSES})
    ops["blackbox_rank"] = lambda _, s: blackbox_rank(s, lambda_=1.0)
    ops["argsort"] = lambda _, s: (
      tf.cast(tf.argsort(s, axis=-1, direction="DESCENDING", stable=True), s.dtype) * s
    )
    for name, op in ops.items():

      def step(scores, op=op, labels=labels):
        with tf.GradientTape() as tape:
          tape.watch(scores)
          value = op(labels, scores)
        return tape.gradient(value, scores)[0, 0] + tf.reduce_sum(value)

      for mode, fn in (("function", tf.function(step)), ("eager", step)):
        times = [_time(fn, scores, cpu=True)[1] for _ in range(repeats + 2)][2:]  # 2 warm-ups
        rows.append(
          {"loss": name, "mode": mode, "batch": batch, "n": n, "ms": 1e3 * float(np.median(times))}
        )
  return rows


def compare(baseline, baseline_python, repeats, rounds, quick):
  """Runs the compare worker as "base" (``baseline`` checkout under ``baseline_python``) and as
  this checkout under this interpreter, alternating; one row per case."""
  extra = ["--repeats", str(repeats)] + (["--quick"] if quick else [])
  runs = {"base": [], "this": []}
  for k in range(rounds):
    order = ("base", "this") if k % 2 == 0 else ("this", "base")
    for which in order:
      root, python = (baseline, baseline_python) if which == "base" else (str(ROOT), sys.executable)
      runs[which].append(_run_worker(["--worker", "compare", "--root", root] + extra, python))
  import numpy as np

  rows = []
  for i, row in enumerate(runs["this"][0]):
    base_ms = np.array([run[i]["ms"] for run in runs["base"]])
    this_ms = np.array([run[i]["ms"] for run in runs["this"]])
    rows.append(
      {
        "loss": row["loss"],
        "mode": row["mode"],
        "batch": row["batch"],
        "n": row["n"],
        "base_ms": float(np.median(base_ms)),
        "this_ms": float(np.median(this_ms)),
        "ratio": float(np.median(this_ms / base_ms)),
      }
    )
  return rows


def _run_worker(args, python=sys.executable):
  cmd = [python, __file__] + args
  proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
  if proc.returncode != 0:
    raise RuntimeError(f"worker {args} failed:\n{proc.stderr[-3000:]}")
  return json.loads(proc.stdout.strip().splitlines()[-1])


def _stack(python):
  """'Python x.y, TensorFlow a.b.c' of an interpreter, read without importing TensorFlow."""
  code = (
    "import sys, importlib.metadata as m; "
    "print(f'Python {sys.version_info[0]}.{sys.version_info[1]}, "
    'TensorFlow {m.version("tensorflow")}\')'
  )
  return subprocess.run(
    [python, "-c", code], capture_output=True, text=True, check=True
  ).stdout.strip()


def _table(headers, rows):
  widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(headers)]
  line = lambda cells: "| " + " | ".join(str(c).rjust(w) for c, w in zip(cells, widths)) + " |"
  return "\n".join(
    [line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [line(r) for r in rows]
  )


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--quick", action="store_true", help="small shapes, few repeats")
  parser.add_argument("--repeats", type=int, default=7)
  parser.add_argument("--worker", choices=["rank", "ndcg", "compare"])
  parser.add_argument("--threads", type=int, default=0)
  parser.add_argument("--loss", help="worker ndcg: loss names, comma-separated")
  parser.add_argument("--n", type=int)
  parser.add_argument("--batch", type=int, default=NDCG_BATCH)
  parser.add_argument("--skip-ndcg", action="store_true", help="skip part 2")
  parser.add_argument("--skip-rank", action="store_true", help="skip part 1")
  parser.add_argument("--baseline", help="part 3: another checkout to time the losses against")
  parser.add_argument(
    "--baseline-python",
    help="part 3: the interpreter (stack) of the baseline, e.g. /other/venv/bin/python",
  )
  parser.add_argument("--rounds", type=int, default=4, help="alternating rounds of part 3")
  parser.add_argument("--root", help=argparse.SUPPRESS)
  parser.add_argument("--peak_memory", action="store_true", help=argparse.SUPPRESS)
  args = parser.parse_args()
  shapes = [(1, 1_000)] if args.quick else SHAPES
  repeats = 1 if args.quick else args.repeats
  if args.worker == "rank":
    print(json.dumps(worker_rank(args.threads, repeats, shapes)))
    return
  if args.worker == "ndcg":
    print(json.dumps(worker_ndcg(args.loss, args.n, repeats, args.batch, args.peak_memory)))
    return
  if args.worker == "compare":
    compare_shapes = COMPARE_SHAPES[:1] if args.quick else COMPARE_SHAPES
    print(json.dumps(worker_compare(args.root, repeats, compare_shapes)))
    return

  OUT.mkdir(parents=True, exist_ok=True)
  cpu_count = os.cpu_count()
  rank_rows = []
  thread_settings = (1,) if args.quick else (1, 0)
  if not args.skip_rank:
    for threads in thread_settings:
      extra = ["--quick"] if args.quick else []
      rank_rows += _run_worker(
        ["--worker", "rank", "--threads", str(threads), "--repeats", str(repeats)] + extra
      )
    by_key = {(tuple(r["shape"]), r["threads"], r["xla"]): r for r in rank_rows}
    table = []
    for shape in shapes:
      for threads in (t or "all" for t in thread_settings):
        plain, xla = by_key[(shape, threads, False)], by_key[(shape, threads, True)]
        paper = PAPER_MS.get(shape)
        table.append(
          [
            f"[{shape[0]}, {shape[1]}]",
            threads if threads == 1 else f"all ({cpu_count})",
            f"{plain['argsort_ms']:.3f}",
            f"{plain['blackbox_ms']:.3f}",
            f"{plain['ratio']:.2f}x",
            f"{plain['ratio_two_sorts']:.2f}x",
            f"{xla['argsort_ms']:.3f}",
            f"{xla['blackbox_ms']:.3f}",
            f"{xla['ratio']:.2f}x",
            f"{plain['blackbox_cpu_ms']:.1f}" if threads == 1 else "-",
            f"{plain['ratio_cpu']:.2f}x" if threads == 1 else "-",
            f"{paper:.0f}" if (paper and threads == 1) else "-",
          ]
        )
    print("blackbox_rank forward+backward vs one tf.argsort of the same tensor, run interleaved.")
    print("Times: fastest wall-clock run (ms). ratio: median over the interleaved pairs of")
    print("blackbox/argsort wall time. 'f+b CPU' / 'CPU ratio': the same from process CPU time")
    print("with one thread, the fair comparison with the paper's single-core figures on a shared")
    print("machine. '2 sorts ratio': two plain argsorts (x and x + g) timed the same way: the")
    print("lower bound as measured under the same load.")
    print(
      _table(
        [
          "shape",
          "threads",
          "argsort",
          "blackbox f+b",
          "ratio",
          "2 sorts ratio",
          "argsort XLA",
          "blackbox f+b XLA",
          "ratio XLA",
          "f+b CPU",
          "CPU ratio",
          "paper f+b (1 core)",
        ],
        table,
      )
    )

  ndcg_rows = []
  if not args.skip_ndcg:
    lengths = NDCG_LENGTHS[:1] if args.quick else NDCG_LENGTHS
    for n in lengths:
      if args.quick:  # both losses in one worker
        loss_arg = "ApproxNDCGLoss,BlackboxNDCGLoss"
        ndcg_rows += _ndcg_rows(
          ["--worker", "ndcg", "--loss", loss_arg, "--n", str(n), "--repeats", "1"]
        )
        continue
      for name in ("ApproxNDCGLoss", "BlackboxNDCGLoss"):
        if name == "ApproxNDCGLoss" and NDCG_BATCH * n * n * 4 > APPROX_MAX_BYTES:
          ndcg_rows.append(
            {
              "loss": name,
              "n": n,
              "batch": NDCG_BATCH,
              "ms": None,
              "peak_mb": None,
              "note": f"not run: one [64, n, n] float32 tensor is "
              f"{NDCG_BATCH * n * n * 4 / 1e9:.1f} GB",
            }
          )
          (row,) = _ndcg_rows(
            ["--worker", "ndcg", "--loss", name, "--n", str(n), "--batch", "1", "--repeats", "2"]
          )
          row["note"] = "batch 1 instead of 64"
          ndcg_rows.append(row)
          continue
        ndcg_rows += _ndcg_rows(
          ["--worker", "ndcg", "--loss", name, "--n", str(n), "--repeats", str(repeats)]
        )
    print()
    print(f"NDCG losses, forward+backward, one thread (median wall ms; {PEAK_MEMORY_DESCRIPTION})")
    print(
      _table(
        ["list length", "batch", "loss", "time ms", "peak MB", "note"],
        [
          [
            r["n"],
            r["batch"],
            r["loss"],
            "-" if r["ms"] is None else f"{r['ms']:.2f}",
            "-" if r["peak_mb"] is None else f"{r['peak_mb']:.0f}",
            r.get("note", ""),
          ]
          for r in ndcg_rows
        ],
      )
    )

  compare_rows = []
  if args.baseline or args.baseline_python:
    baseline = args.baseline or str(ROOT)
    baseline_python = args.baseline_python or sys.executable
    compare_rows = compare(baseline, baseline_python, repeats, args.rounds, args.quick)
    print()
    print(
      f"Losses and rank ops, forward+backward, one thread: this checkout under "
      f"{_stack(sys.executable)} vs base = {baseline} under {_stack(baseline_python)}"
    )
    print(f"(process CPU ms, medians over {args.rounds} alternating rounds; ratio = median over")
    print("the rounds of this / base)")
    print(
      _table(
        ["loss", "mode", "batch", "list length", "base ms", "this ms", "this / base"],
        [
          [
            r["loss"],
            r["mode"],
            r["batch"],
            r["n"],
            f"{r['base_ms']:.2f}",
            f"{r['this_ms']:.2f}",
            f"{r['ratio']:.2f}x",
          ]
          for r in compare_rows
        ],
      )
    )

  (OUT / "rank_ops.json").write_text(
    json.dumps({"rank": rank_rows, "ndcg": ndcg_rows, "compare": compare_rows}, indent=1)
  )
  if not rank_rows:
    return
  try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
  except ImportError:
    print("matplotlib missing: no plot written")
    return
  fig, axes = plt.subplots(1, 2 if ndcg_rows else 1, figsize=(13 if ndcg_rows else 7, 4.5))
  axes = list(axes) if ndcg_rows else [axes]
  ax = axes[0]
  labels = [f"[{s[0]},{s[1]}]" for s in shapes]
  configs = [(t or "all", xla) for t in thread_settings for xla in (False, True)]
  width = 0.2
  for k, (threads, xla) in enumerate(configs):
    ratios = [by_key[(s, threads, xla)]["ratio"] for s in shapes]
    ax.bar(
      [i + (k - (len(configs) - 1) / 2) * width for i in range(len(shapes))],
      ratios,
      width,
      label=f"threads={threads}{', XLA' if xla else ''}",
    )
  ax.axhline(2.0, color="k", lw=0.8, ls=":", label="two sorts")
  ax.axhline(2.2, color="r", lw=0.8, ls="--", label="goal 2.2x")
  ax.set_xticks(range(len(shapes)), labels, rotation=20)
  ax.set_ylabel("blackbox f+b time / one argsort")
  ax.set_title("blackbox_rank forward+backward vs tf.argsort")
  ax.legend(fontsize=7)
  if ndcg_rows:
    ax = axes[1]
    for name, marker in (("ApproxNDCGLoss", "o"), ("BlackboxNDCGLoss", "s")):
      pts = [
        (r["n"], r["ms"])
        for r in ndcg_rows
        if r["loss"] == name and r["ms"] is not None and r["batch"] == NDCG_BATCH
      ]
      ax.loglog(*zip(*pts), marker=marker, label=name)
    ax.set_xlabel("list length n (batch 64)")
    ax.set_ylabel("forward+backward ms")
    ax.set_title("NDCG losses: time vs list length")
    ax.legend()
  fig.tight_layout()
  fig.savefig(OUT / "rank_ops.png", dpi=110)
  print(f"\nwrote {OUT / 'rank_ops.png'} and {OUT / 'rank_ops.json'}")


if __name__ == "__main__":
  main()
