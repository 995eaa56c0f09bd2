"""How every registered loss and metric scales with the number of classes C: loss + gradient
(a metric: its update) time as a ratio to ``softmax_loss`` and peak memory, beside the peers.

Cells: every name of ``tfrank4class.losses.names()`` and ``tfrank4class.metrics.names()`` (the
``_K`` families at K = 5; the embedding losses, which take [B, d] embeddings rather than [B, C]
scores, are left out) at B = 32 lists of C in ``SIZES`` classes and at B = 256, C = 1,000 (an
ImageNet step), on three label forms (``FORMS``): class ids ``[B]``, and dense ``[B, C]``
relevance with r = 1 and r = 5 relevant classes (the id's class among them). Losses are built
with their defaults (``losses.get(name)``: the Top-K losses' k = 5 needs C > 5, which every size
here has) and compiled with their gradient: ``tf.function`` on TensorFlow,
``jax.jit(jax.value_and_grad(...))`` on JAX, eager ``backward`` on PyTorch
(``benchmarks/backends.py``'s calls); a metric's ``update_state`` under ``tf.function`` /
``stateless_update_state`` under ``jax.jit``. One thread.

Peers (``--peers``), in the same worker, where importable (else listed as not importable):
``tf-ranking`` (TensorFlow: TF-Ranking 0.5.5's own Keras loss of each key, through
``tests/_tf_ranking_reference.py``; class ids go in as one-hot rows, the only labels it takes),
``rax`` (JAX: its losses and metrics of the same maths, ``RAX``), ``keras`` (Keras's own top-k
accuracy beside ``top_5``).

Per cell, in a worker process started with ``_common.PEAK_MEMORY_ENV``: the cell's call and
``softmax_loss``'s on the same labels are built and called once (tracing and compiling), then
``MIN_CALLS`` times (the fastest sets how many calls a timing takes); each one's peak memory is
``_common.peak_rss_mb`` of one call (the resident set's high-water mark, reset before the call,
above the resident set before it); then ``--rounds`` rounds time both, in alternating order,
each timing the fastest of up to ``--repeats`` calls (``CALL_BUDGET_MS`` of calls, at least
``MIN_CALLS``). The ratio is taken within each round; the table gives its median and range over
the rounds. The same allocator settings slow both alike (every buffer above 64 KiB is mapped
afresh): read the ratios, not the milliseconds.

A fresh worker per loss (``--fresh loss``, the default: its cells run in ascending C, each peak
measured from the resident set before that call), per cell (``--fresh cell``: slower by an
interpreter start per cell) or one for the whole run (``--fresh none``). Before a cell runs its
time and memory are extrapolated from the same series' cells already run (``prediction``): a
cell predicted over ``--memory_cap_mb`` (above the worker's resident set) or over
``--time_cap_s`` a call is not run; nor is a cell above one that failed. A watchdog kills a
worker whose resident set passes the cap or whose cell takes over ``--cell_timeout_s``; the
cell reads "killed". docs/scale.md has the tables, the commands and the reading.

Runs merge (``--from_json``): a cell measured in several runs is taken from the one that started
last, so a few names rerun after a change replace their rows; ``--doc`` writes the merged tables
between a page's markers (``write_doc``) and the plots beside the page.

Usage (one backend per run, the interpreter's own; writes benchmarks/out/scale_<backend>.json or
``--json``'s file, and benchmarks/out/scale_<backend>.md and one .png per family):
  KERAS_BACKEND=tensorflow nice -n 10 .venv/bin/python benchmarks/scale.py
  KERAS_BACKEND=jax nice -n 10 ../venv-jax/bin/python benchmarks/scale.py   # rax if installed
  python benchmarks/scale.py --quick        # C = 8 (and 10^6, skipped), 2 rounds, 3 names
  python benchmarks/scale.py --names softmax_loss,top_5 --sizes 100,1000 --forms ids --rounds 3
  python benchmarks/scale.py --from_json benchmarks/scale-after/scale_jax.*.json --doc docs/scale.md
"""

import argparse
import gc
import importlib.util
import json
import math
import os
import pathlib
import platform
import statistics
import sys
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _common  # noqa: E402
import backends  # noqa: E402  (the compiled calls, the thread settings, rax's import)

B, SIZES, BIG_BATCH = 32, (100, 1000, 10_000, 100_000), (256, 1000)
FORMS = {"ids": 0, "r1": 1, "r5": 5}  # label form -> relevant classes per list (0: class ids)
K = 5  # the K of the metric families (top_K, ndcg_K...)
REPLY = "@scale-worker "
CALL_BUDGET_MS, MIN_CALLS = 50.0, 3  # a single call is as slow as a preemption makes it
WORKER = {"tensorflow": "tf", "jax": "jax", "torch": "torch"}  # backends.py's worker kinds
QUICK = ("pairwise_logistic_loss", "recall_loss", "top_5")
#: Losses whose method compares all pairs or runs a sorting network, outside the linear goal.
NOT_LINEAR = {
  "spearman_loss": "the sorter compares all pairs",
  "rank_triplet_loss": "the sorter compares all pairs",
  "sorter_map_loss": "the sorter compares all pairs",
  "topk_cross_entropy_loss": "a sorting network: O(C log^2 C) comparators",
}
FAMILIES = {
  "tf_ranking": "TF-Ranking keys",
  "rambo": "RaMBO",
  "sodeep": "SoDeep",
  "topk": "Top-K",
  "metric_learning": "metric learning",
  "metrics": "metrics",
}
#: rax's function of our name's maths, given rax, on dense relevance (the peer on JAX).
RAX = {
  "softmax_loss": lambda rax: rax.softmax_loss,
  "unique_softmax_loss": lambda rax: rax.unique_softmax_loss,
  "pairwise_hinge_loss": lambda rax: rax.pairwise_hinge_loss,
  "pairwise_logistic_loss": lambda rax: rax.pairwise_logistic_loss,
  "pairwise_mse_loss": lambda rax: rax.pairwise_mse_loss,
  "pairwise_soft_zero_one_loss": lambda rax: rax.pairwise_soft_zero_one_loss,
  "sigmoid_cross_entropy_loss": lambda rax: rax.pointwise_sigmoid_loss,
  "mean_squared_loss": lambda rax: rax.pointwise_mse_loss,
  "list_mle_loss": lambda rax: _rax_list_mle(rax),
  "approx_ndcg_loss": lambda rax: rax.approx_t12n(rax.ndcg_metric, temperature=0.1),
  "approx_mrr_loss": lambda rax: rax.approx_t12n(rax.mrr_metric, temperature=0.1),
  "map": lambda rax: rax.ap_metric,
  "mrr": lambda rax: rax.mrr_metric,
  "ndcg": lambda rax: rax.ndcg_metric,
  f"ndcg_{K}": lambda rax: lambda s, y: rax.ndcg_metric(s, y, topn=K),
  f"mrr_{K}": lambda rax: lambda s, y: rax.mrr_metric(s, y, topn=K),
  f"precision_{K}": lambda rax: lambda s, y: rax.precision_metric(s, y, topn=K),
  f"recall_{K}": lambda rax: lambda s, y: rax.recall_metric(s, y, topn=K),
}


def _rax_list_mle(rax):
  import jax  # pylint: disable=g-import-not-at-top

  # tied labels in a random order, as TF-Ranking's ListMLE and ours (benchmarks/backends.py)
  return lambda s, y: rax.listmle_loss(s, y, key=jax.random.PRNGKey(37))


# ----------------------------------------------------------------------------- the worker


def inputs(form, b, c):
  """Scores ``[b, c]`` and labels of ``form`` (numpy, the same in every process)."""
  import numpy as np  # pylint: disable=g-import-not-at-top

  rng = np.random.default_rng([b, c])
  scores = rng.normal(size=(b, c)).astype(np.float32)
  ids = rng.integers(0, c, size=b)
  if not FORMS[form]:
    return scores, ids
  order = rng.random((b, c))
  order[np.arange(b), ids] = 2.0  # the id's class first among the relevant ones
  relevant = np.argpartition(-order, FORMS[form] - 1, axis=1)[:, : FORMS[form]]
  dense = np.zeros((b, c), np.float32)
  dense[np.arange(b)[:, None], relevant] = 1.0
  return scores, dense


def catalogue(peers):
  """``({name: family}, {peer: why it is missing})`` of this worker's package and peers."""
  from tfrank4class import losses, metrics  # pylint: disable=g-import-not-at-top

  names = {}
  for name in losses.names():
    loss = losses.get(name)
    if not isinstance(loss, losses.EmbeddingLoss):  # [B, d] embeddings, not [B, C] scores
      names[name] = type(loss).__module__.split(".")[2]
  for pattern in metrics.names():
    names[pattern.replace("_K", f"_{K}")] = "metrics"
  missing = {}
  for peer in peers:
    try:
      peer_module(peer)
    except Exception as e:  # pylint: disable=broad-except  (any failure: the peer is left out)
      missing[peer] = f"{type(e).__name__}: {str(e)[:200]}"
  return names, missing


def peer_module(peer):
  """The module a peer needs, imported (raises when it is not importable on this backend)."""
  from tfrank4class import compat  # pylint: disable=g-import-not-at-top

  needs = {"tf-ranking": "tensorflow", "rax": "jax", "keras": compat.BACKEND}[peer]
  if compat.BACKEND != needs:
    raise ImportError(f"{peer} runs on the {needs} backend, this worker's is {compat.BACKEND}")
  if peer == "tf-ranking":
    sys.path.insert(0, str(_common.ROOT / "tests"))
    import _tf_ranking_reference  # pylint: disable=g-import-not-at-top

    return _tf_ranking_reference
  if peer == "rax":
    backends.rax_function("softmax")  # stands in for jax.util where rax needs it
    import rax  # pylint: disable=g-import-not-at-top

    return rax
  return compat.keras


def has_peer(peer, name, family):
  if peer == "tf-ranking":
    return family == "tf_ranking"
  return name in RAX if peer == "rax" else name == f"top_{K}"


def dense(labels, c):
  """One-hot rows for class ids (the peers take dense relevance only); dense labels as given."""
  from tfrank4class.compat import ops  # pylint: disable=g-import-not-at-top

  return ops.one_hot(labels, c) if len(labels.shape) == 1 else labels


def loss_function(variant, name, c):
  """``f(scores, labels)`` -> scalar loss of the variant."""
  if variant == "ours":
    from tfrank4class import losses  # pylint: disable=g-import-not-at-top

    loss = losses.get(name)
    return lambda s, y: loss(y, s)
  if variant == "tf-ranking":
    theirs = peer_module(variant).loss(name)
    return lambda s, y: theirs(dense(y, c), s)
  theirs = RAX[name](peer_module("rax"))
  return lambda s, y: theirs(s, dense(y, c))


def metric_call(variant, name, scores, labels):
  """The compiled update of the metric (or rax's metric), called on the inputs."""
  from tfrank4class import compat, metrics  # pylint: disable=g-import-not-at-top

  if variant == "rax":
    import jax  # pylint: disable=g-import-not-at-top

    theirs, c = RAX[name](peer_module("rax")), scores.shape[-1]
    fn = jax.jit(lambda s, y: theirs(s, dense(y, c)))
    s, y = jax.numpy.asarray(scores), jax.numpy.asarray(labels)
    return lambda: jax.block_until_ready(fn(s, y))
  if variant == "keras":
    if labels.ndim == 2 and labels.sum(axis=-1).max() > 1:
      raise ValueError("Keras's top-k accuracy takes one relevant class per list")
    keras = compat.keras
    metric = (
      keras.metrics.SparseTopKCategoricalAccuracy(K)
      if labels.ndim == 1
      else keras.metrics.TopKCategoricalAccuracy(K)
    )
  else:
    metric = metrics.get(name)
  if compat.BACKEND == "tensorflow":
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    fn = tf.function(lambda s, y: metric.update_state(y, s), autograph=False)
    s, y = tf.constant(scores), tf.constant(labels)
    return lambda: fn(s, y)
  if compat.BACKEND == "jax":
    import jax  # pylint: disable=g-import-not-at-top

    fn = jax.jit(lambda v, s, y: metric.stateless_update_state(v, y, s))
    v = [x.value for x in metric.variables]
    s, y = jax.numpy.asarray(scores), jax.numpy.asarray(labels)
    return lambda: jax.block_until_ready(fn(v, s, y))
  s, y = compat.ops.convert_to_tensor(scores), compat.ops.convert_to_tensor(labels)
  return lambda: metric.update_state(y, s)


def build_call(variant, name, family, form, b, c):
  """The call that times one cell: loss + gradient, compiled as ``benchmarks/backends.py``
  compiles them (eager on PyTorch), or a metric's update."""
  from tfrank4class import compat  # pylint: disable=g-import-not-at-top

  scores, labels = inputs(form, b, c)
  if family == "metrics":
    return metric_call(variant, name, scores, labels)
  f = loss_function(variant, name, c)
  if compat.BACKEND == "tensorflow":
    return backends.tf_call(f, "tf", scores, labels)
  if compat.BACKEND == "jax":
    return backends.jax_call(f, scores, labels)
  return backends.torch_call(f, scores, labels)


def measure_cell(cell, rounds, repeats):
  """One cell and ``softmax_loss`` on the same labels: built, called ``1 + MIN_CALLS`` times,
  the peak memory of one call each, then ``rounds`` interleaved timings (module docstring)."""
  variant, name, family, form, b, c = cell
  calls = {
    "softmax": build_call("ours", "softmax_loss", "tf_ranking", form, b, c),
    "cell": build_call(*cell),
  }
  reply = {}
  for key, call in calls.items():
    call()
    reply[f"{key}_warm_ms"] = backends.fastest(call, MIN_CALLS)
  for key, call in calls.items():
    reply[f"{key}_peak_mb"] = max(_common.peak_rss_mb(call), 0.0)
  counts = {
    key: max(MIN_CALLS, min(repeats, int(CALL_BUDGET_MS / max(reply[f"{key}_warm_ms"], 1e-3))))
    for key in calls
  }
  timings = {key: [] for key in calls}
  for r in range(rounds):
    for key in list(calls)[:: 1 if r % 2 else -1]:
      timings[key].append(backends.fastest(calls[key], counts[key]))
  reply.update({f"{key}_rounds": timings[key] for key in calls})
  return reply


def resident_mb(pid="self"):
  """The resident set of a process in MiB (``VmRSS``), None when it has ended."""
  try:
    with open(f"/proc/{pid}/status") as f:
      return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS:"))
  except (OSError, StopIteration):
    return None


def free_compiled():
  """Drops what the last cell compiled, so that the next one starts from a smaller process."""
  from tfrank4class import compat  # pylint: disable=g-import-not-at-top

  if compat.BACKEND == "jax":
    import jax  # pylint: disable=g-import-not-at-top

    jax.clear_caches()
  gc.collect()


def serve(peers):
  """A worker: one JSON request a stdin line, one ``REPLY``-prefixed JSON line an answer.

  ``{"hello": true}``: the resident MB; ``{"catalogue": true}``: :func:`catalogue`'s names and
  missing peers; ``{"cell": [variant, name,
  family, form, B, C], "rounds": n, "repeats": m}``: :func:`measure_cell`'s reply and the
  resident MB after it, or ``{"error": ...}`` where the cell cannot be built or run (a loss that
  refuses a label form, a peer without that key, a tensor too large for the framework).
  """
  backends.setup_worker(WORKER[os.environ.get("KERAS_BACKEND", "tensorflow")], str(_common.ROOT))
  for line in sys.stdin:
    request = json.loads(line)
    try:
      if "hello" in request:
        reply = {}
      elif "catalogue" in request:
        names, missing = catalogue(peers)
        reply = {"names": names, "missing": missing}
      else:
        reply = measure_cell(tuple(request["cell"]), request["rounds"], request["repeats"])
    except Exception as e:  # pylint: disable=broad-except  (see the docstring)
      reply = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"}
    free_compiled()
    print(REPLY + json.dumps({**reply, "rss_mb": resident_mb()}), flush=True)


# ----------------------------------------------------------------------------- the parent


class Worker(_common.WorkerProcess):
  """A ``serve`` process on this interpreter's backend, with ``_common.PEAK_MEMORY_ENV`` and
  ``backends.WORKER_ENV``'s one-thread settings."""

  def __init__(self, backend, peers):
    env = {**os.environ, **_common.PEAK_MEMORY_ENV, **backends.WORKER_ENV[WORKER[backend]]}
    env["KERAS_BACKEND"] = backend
    command = [sys.executable, __file__, "--worker", "--peers", ",".join(peers)]
    super().__init__(command, env, REPLY)
    self.rss_mb = self.ask({"hello": True})["rss_mb"]

  def ask_watched(self, request, cap_mb, timeout_s):
    """``(reply, None)``, or ``(None, why)`` when the worker ended: the watchdog kills it once
    its resident set passes ``cap_mb`` or the answer takes over ``timeout_s``."""
    done, why = threading.Event(), []

    def watch():
      start = time.monotonic()
      while not done.wait(0.02):
        rss = resident_mb(self.process.pid) or 0.0
        if rss > cap_mb:
          why.append(f"killed at {rss / 1024:.1f} GiB resident (cap {cap_mb / 1024:.1f} GiB)")
        elif time.monotonic() - start > timeout_s:
          why.append(f"killed after {timeout_s:.0f} s (--cell_timeout_s)")
        if why:
          self.process.kill()
          return

    watchdog = threading.Thread(target=watch, daemon=True)
    watchdog.start()
    try:
      reply = self.ask(request)
    except RuntimeError as e:
      reply = None
      why.append(str(e))
    finally:
      done.set()
      watchdog.join()
    return (reply, None) if reply is not None else (None, why[0])


def prediction(series, b, c):
  """``(ms, MB)`` a call of cell ``(b, c)`` is expected to take, from the cells of its series
  (``{(B, C): row}``) that ran: along C at ``B`` from the largest C below by the log-log slope of
  the two largest (clamped to 1..2: no method here is above quadratic, and on a shared
  machine a steeper slope is noise; linear from a single one: the watchdog catches faster
  growth), along B linearly from the same C. None when no such cell ran."""
  if b != B:
    row = series.get((B, c), {})
    return (row["ms"] * b / B, row["peak_mb"] * b / B) if "ms" in row else None
  points = [
    (cc, r["ms"], r["peak_mb"])
    for (bb, cc), r in sorted(series.items())
    if bb == B and cc < c and "ms" in r
  ]
  if not points:
    return None
  (c1, *v1), (c2, *v2) = points[-min(2, len(points))], points[-1]
  predicted = []
  for a, z, floor in zip(v1, v2, (0.01, 1.0)):  # ms, MB; floors keep the logarithms finite
    a, z = max(a, floor), max(z, floor)
    slope = min(2.0, max(1.0, math.log(z / a) / math.log(c2 / c1))) if c2 > c1 else 1.0
    predicted.append(z * (c / c2) ** slope)
  return tuple(predicted)


def decide(series, b, c, room_mb, time_cap_s):
  """None to run cell ``(b, c)``, else the row of a skipped cell (its reason, its prediction)."""
  failed = [
    r for (bb, cc), r in series.items() if "ms" not in r and bb <= b and cc <= c and cc * bb < c * b
  ]
  guess = prediction(series, b, c)
  row = {"status": "skipped"}
  if guess:
    row["predicted"] = {"ms": guess[0], "mb": guess[1]}
  if failed:
    return {**row, "reason": f"a smaller cell was {failed[-1]['status']}"}
  if guess and guess[1] > room_mb:
    return {**row, "reason": f"predicted {guess[1] / 1024:.1f} GiB > {room_mb / 1024:.1f} GiB free"}
  if guess and guess[0] > time_cap_s * 1e3:
    return {**row, "reason": f"predicted {guess[0] / 1e3:.1f} s a call > {time_cap_s} s"}
  return None


def cell_row(reply, why):
  """The row of a cell from the worker's reply (or the reason it has none)."""
  if reply is None:
    return {"status": "killed", "reason": why}
  if "error" in reply:
    return {"status": "error", "reason": reply["error"]}
  ratios = [x / y for x, y in zip(reply["cell_rounds"], reply["softmax_rounds"])]
  return {
    "status": "ok",
    "ms": min(reply["cell_rounds"]),
    "softmax_ms": min(reply["softmax_rounds"]),
    "ratios": ratios,
    "peak_mb": reply["cell_peak_mb"],
    "softmax_peak_mb": reply["softmax_peak_mb"],
    "rounds": reply["cell_rounds"],
    "softmax_rounds": reply["softmax_rounds"],
  }


def restart(worker, backend, peers):
  """A fresh worker, the old one (if any) closed."""
  if worker is not None:
    worker.close()
  return Worker(backend, peers)


def run(args, names, peers, save):
  """Every series' cells (of this ``--shard``), C ascending then B = 256, each form in turn;
  calls ``save(rows)`` after each name and variant, and returns the rows."""
  entities = [("ours", name, family) for name, family in names.items()]
  entities += [(p, n, f) for p in peers for n, f in names.items() if has_peer(p, n, f)]
  entities = [e for e in entities if args.variants is None or e[0] in args.variants]
  entities = entities[args.shard[0] - 1 :: args.shard[1]]
  cells = [(B, c) for c in args.sizes] + ([tuple(args.big_batch)] if args.big_batch else [])
  rows, worker = [], None
  for variant, name, family in entities:
    if worker is None or args.fresh == "loss":
      worker = restart(worker, args.backend, peers)
    series = {form: {} for form in args.forms}
    for (b, c), form in ((cell, form) for cell in cells for form in args.forms):
      if args.fresh == "cell":
        worker = restart(worker, args.backend, peers)
      row = decide(series[form], b, c, args.memory_cap_mb - worker.rss_mb, args.time_cap_s)
      if row is None:
        request = {"cell": [variant, name, family, form, b, c]}
        request.update(rounds=args.rounds, repeats=args.repeats)
        reply, why = worker.ask_watched(request, args.memory_cap_mb, args.cell_timeout_s)
        row = cell_row(reply, why)
        if reply is None:
          worker = Worker(args.backend, peers)
        else:
          worker.rss_mb = reply["rss_mb"]
      series[form][b, c] = row
      rows.append({"variant": variant, "name": name, "family": family, "form": form, "B": b})
      rows[-1].update(C=c, **row)
      print(f"{variant} {name} {form} B={b} C={c}: {cell_text(row)}", file=sys.stderr, flush=True)
    save(rows)
  worker.close()
  return rows


def ratio_text(values):
  """``median (min-max)`` of the per-round ratios, three significant digits."""
  lo, mid, hi = min(values), statistics.median(values), max(values)
  return f"{mid:.3g}x ({lo:.3g}-{hi:.3g})"


def mb_text(mb):
  return f"{mb / 1024:.1f} GiB" if mb >= 1024 else f"{mb:.3g} MB"


def cell_text(row):
  if row["status"] == "ok":
    return f"{ratio_text(row['ratios'])}, {mb_text(row['peak_mb'])}"
  guess = row.get("predicted")
  extra = f" (predicted {guess['ms'] / 1e3:.3g} s, {mb_text(guess['mb'])})" if guess else ""
  return f"{row['status']}: {row['reason']}" + (extra if row["status"] == "skipped" else "")


def growth_text(cells):
  """How a series' own time and memory grow: their log-log slopes in C between its two largest
  sizes from 1,000 up (memory from 1 MB up), and their factor from B = 32 to the larger B."""
  ran = {(r["B"], r["C"]): r for r in cells if r["status"] == "ok"}
  sizes = sorted(c for b, c in ran if b == B and c >= 1000)
  parts = []
  if len(sizes) > 1:
    one, two = ran[B, sizes[-2]], ran[B, sizes[-1]]
    span = math.log(sizes[-1] / sizes[-2])
    time_slope = math.log(two["ms"] / one["ms"]) / span
    memory_slope = math.log(max(two["peak_mb"], 1.0) / max(one["peak_mb"], 1.0)) / span
    parts.append(f"C^{time_slope:.1f} time, C^{memory_slope:.1f} memory")
  for (b, c), big in ran.items():
    if b != B and (B, c) in ran:
      base = ran[B, c]
      memory = max(big["peak_mb"], 1.0) / max(base["peak_mb"], 1.0)
      parts.append(f"B x{b // B}: time x{big['ms'] / base['ms']:.2g}, memory x{memory:.2g}")
  return "; ".join(parts)


def family_table(rows):
  """A markdown table of one family's rows: a row per (name, variant, form), a column per size,
  how the series grows (``growth_text``) and the runs its cells come from (``load_runs``)."""
  columns = sorted({(r["B"], r["C"]) for r in rows}, key=lambda bc: (bc[0] != B, bc))
  header = [f"C = {c:,}" if b == B else f"B = {b}, C = {c:,}" for b, c in columns]
  lines = [
    "| name | variant | labels | " + " | ".join(header) + " | growth | run |",
    "|---|---|---|" + "---|" * (len(header) + 2),
  ]
  index = {(r["name"], r["variant"], r["form"], r["B"], r["C"]): r for r in rows}
  keys = sorted({(r["name"], r["variant"], r["form"]) for r in rows})
  for key in keys:
    cells = [index[key + bc] for bc in columns if key + bc in index]
    texts = [cell_text(index[key + bc]) if key + bc in index else "" for bc in columns]
    runs = ", ".join(str(n) for n in sorted({r["run"] for r in cells}))
    cells_text = " | ".join([*texts, growth_text(cells), runs])
    lines.append(f"| `{key[0]}` | {key[1]} | {key[2]} | {cells_text} |")
  return lines


def goals(rows, c):
  """The issue's goals with class ids at B = 32, C = ``c`` (docs/scale.md), one line each. The
  memory goal is read against ``softmax_loss``'s own cell where it ran (the reference's peak
  inside another cell can read low on JAX), else against each cell's reference."""
  cells = [
    r
    for r in rows
    if (r["variant"], r["form"], r["B"], r["C"]) == ("ours", "ids", B, c)
    and r["family"] != "metrics"
  ]
  softmax_mb = [r["peak_mb"] for r in cells if r["name"] == "softmax_loss" and r["status"] == "ok"]

  def memory(r):
    return r["peak_mb"] / max(softmax_mb[0] if softmax_mb else r["softmax_peak_mb"], 1.0)

  linear = [r for r in cells if r["name"] not in NOT_LINEAR]
  missed = [
    f"{r['name']} ({cell_text(r)}; {memory(r):.2g}x memory)"
    if r["status"] == "ok"
    else f"{r['name']} ({r['status']})"
    for r in linear
    if r["status"] != "ok" or statistics.median(r["ratios"]) > 3.0 or memory(r) > 2.0
  ]
  unrun = [r for r in cells if r["status"] != "ok"]
  over = [r["name"] for r in unrun if r.get("predicted", {}).get("mb", math.inf) > 24 * 1024]
  return [
    f"- Linear methods within 3x softmax's time and 2x its peak memory at C = {c:,}: met by "
    f"{len(linear) - len(missed)} of {len(linear)}"
    + (f"; missed: {', '.join(missed)}" * bool(missed)),
    f"- Every loss within 24 GiB at C = {c:,}: ran (under the cap) {len(cells) - len(unrun)}"
    f" of {len(cells)}; not run and not predicted within 24 GiB: {', '.join(over) or 'none'}",
    "- Not linear by their method ("
    + "; ".join(f"{n}: {why}" for n, why in NOT_LINEAR.items())
    + "): "
    + ", ".join(f"{r['name']} {cell_text(r)}" for r in cells if r["name"] in NOT_LINEAR),
  ]


def softmax_line(rows):
  """The reference: softmax_loss's fastest ms and peak MB per (form, B, C), medians over cells."""
  by_cell = {}
  for r in (r for r in rows if r["status"] == "ok"):
    by_cell.setdefault((r["form"], r["B"], r["C"]), []).append(r)
  return "; ".join(
    f"{form} B={b} C={c:,}: {statistics.median(r['softmax_ms'] for r in cells):.3g} ms, "
    f"{mb_text(statistics.median(r['softmax_peak_mb'] for r in cells))}"
    for (form, b, c), cells in sorted(by_cell.items())
  )


def report(merged):
  """The markdown of runs merged by ``load_runs``: the runs (numbered, the tables' ``run``
  column), the softmax reference, a table per family, the goals."""
  rows = merged["rows"]
  lines = ["Runs (a cell measured in several: the latest run's):", ""]
  lines += [f"{n}. {run}" for n, run in enumerate(merged["runs"], 1)]
  lines += [
    "",
    f"Time: ratio to softmax_loss's on the same labels; {_common.PEAK_MEMORY_DESCRIPTION}.",
  ]
  lines += ["", f"softmax_loss (the reference): {softmax_line(rows)}", ""]
  lines += [f"- peer {peer} not run: {why}" for peer, why in merged["missing"].items()]
  for family, title in FAMILIES.items():
    part = [r for r in rows if r["family"] == family]
    if part:
      lines += ["", f"#### {title}", "", *family_table(part)]
  largest = max((r["C"] for r in rows if r["B"] == B), default=None)
  if largest:
    lines += ["", f"#### Goals (class ids, B = {B}, C = {largest:,})", "", *goals(rows, largest)]
  return "\n".join(lines)


def load_runs(paths):
  """The runs' JSONs merged: ``{"backend", "rows", "runs", "missing"}``, the runs in the order
  they started (``runs``: each one's header line and file, numbered from 1 in the rows'
  ``run``), a cell measured in several runs taken from the latest."""
  parts = []
  for path in paths:
    with open(path) as f:
      parts.append({**json.load(f), "file": path})
  parts.sort(key=lambda part: part["started"])
  if len({part["backend"] for part in parts}) > 1:
    raise ValueError(f"runs of several backends: {sorted({p['backend'] for p in parts})}")
  cells, missing = {}, {}
  for n, part in enumerate(parts, 1):
    for row in part["rows"]:
      cells[row["variant"], row["name"], row["form"], row["B"], row["C"]] = {**row, "run": n}
    missing.update(part["missing"])
  return {
    "backend": parts[0]["backend"],
    "rows": list(cells.values()),
    "runs": [f"`{p['file']}`: {p['header'][0]}; command: `{p['header'][1]}`" for p in parts],
    "missing": missing,
  }


def write_doc(path, backend, text):
  """Puts ``text`` in place of what stands between ``path``'s markers of ``backend``'s tables."""
  begin, end = f"<!-- scale.py tables: {backend} -->", f"<!-- end of scale.py tables: {backend} -->"
  doc = pathlib.Path(path).read_text()
  if doc.count(begin) != 1 or doc.count(end) != 1:
    raise ValueError(f"{path} needs the lines {begin!r} and {end!r} once each")
  head, rest = doc.split(begin)
  pathlib.Path(path).write_text(f"{head}{begin}\n{text}\n{end}{rest.split(end)[1]}")


def plot(rows, backend, family, path):
  """Time ratio and peak MB against C (log-log) of one family at B = 32: a colour per name and
  variant (dots ours, crosses a peer's), solid for class ids, dashed for r = 5, dotted for r = 1."""
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
  styles = {"ids": "-", "r1": ":", "r5": "--"}
  keys = dict.fromkeys((r["name"], r["variant"]) for r in rows if r["family"] == family)
  for i, (name, variant) in enumerate(keys):
    colour = plt.cm.tab20(i % 20)
    for form, style in styles.items():
      points = sorted(
        (r["C"], statistics.median(r["ratios"]), max(r["peak_mb"], 0.1))
        for r in rows
        if (r["name"], r["variant"], r["form"], r["B"]) == (name, variant, form, B)
        and r["status"] == "ok"
      )
      if not points:
        continue
      label = (name if variant == "ours" else f"{name} ({variant})") if form == "ids" else None
      c, ratio, mb = zip(*points)
      marker = "o" if variant == "ours" else "x"
      axes[0].plot(c, ratio, style, marker=marker, color=colour, label=label, ms=4)
      axes[1].plot(c, mb, style, marker=marker, color=colour, ms=4)
  for ax, what in zip(axes, ("time / softmax_loss's, loss + gradient", "peak MB above baseline")):
    ax.set(xscale="log", yscale="log", xlabel="classes C", ylabel=what)
    ax.grid(True, which="both", alpha=0.3)
  fig.legend(loc="center right", fontsize=7)
  fig.suptitle(
    f"{FAMILIES[family]} on {backend}, B = {B}: class ids solid, r = 1 dotted, r = 5 dashed"
  )
  fig.tight_layout(rect=(0, 0, 0.78, 1))
  fig.savefig(path, dpi=100)
  plt.close(fig)


def arguments(argv):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument(
    "--quick", action="store_true", help="C = 8 and 10^6 (skipped), 3 names, 2 rounds"
  )
  parser.add_argument("--backend", default=os.environ.get("KERAS_BACKEND", "tensorflow"))
  parser.add_argument("--names", help="comma-separated losses and metrics (default: all)")
  parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="the C values at B = 32")
  parser.add_argument("--big_batch", default="256,1000", help="'B,C' of the batch cell, '' none")
  parser.add_argument("--forms", default=",".join(FORMS), help="label forms (ids,r1,r5)")
  parser.add_argument("--peers", default="tf-ranking,rax,keras", help="peers to run if importable")
  parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
  parser.add_argument("--repeats", type=int, default=20, help="most calls per timing (20)")
  parser.add_argument("--memory_cap_mb", type=float, default=8192.0, help="resident cap (8 GiB)")
  parser.add_argument("--time_cap_s", type=float, default=5.0, help="most predicted s a call")
  parser.add_argument("--cell_timeout_s", type=float, default=300.0, help="watchdog per cell")
  parser.add_argument("--fresh", choices=("loss", "cell", "none"), default="loss")
  parser.add_argument("--shard", default="1/1", help="'i/n': the i-th of n parts of the names")
  parser.add_argument("--variants", help="run only these of ours and the peers (e.g. rax,keras)")
  parser.add_argument(
    "--from_json", nargs="+", help="only the tables and plots, from runs' JSON files (a,b c ...)"
  )
  parser.add_argument("--json", help="this run's JSON file (default: in benchmarks/out)")
  parser.add_argument(
    "--doc", help="also write the tables into this page (its markers) and the plots beside it"
  )
  parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.quick:
    args.names, args.sizes, args.big_batch = ",".join(QUICK), "8,1000000", "64,8"
    args.rounds, args.repeats, args.fresh = 2, 3, "none"
  args.sizes = [int(c) for c in args.sizes.split(",")]
  args.big_batch = [int(x) for x in args.big_batch.split(",")] if args.big_batch else None
  args.forms = args.forms.split(",")
  args.shard = [int(x) for x in args.shard.split("/")]
  args.variants = args.variants.split(",") if args.variants else None
  args.from_json = [p for paths in args.from_json or () for p in paths.split(",") if p]
  args.peers = [p for p in args.peers.split(",") if p and p != "none"]
  unknown = sorted(set(args.forms) - set(FORMS)) + [b for b in [args.backend] if b not in WORKER]
  if unknown:
    parser.error(f"unknown label forms or backend {unknown}; forms: {list(FORMS)}")
  return parser, args


def main(argv):
  parser, args = arguments(argv)
  if args.worker:
    serve(args.peers)
    return
  merged = load_runs(args.from_json or [measure(parser, args, argv)])
  text = report(merged)
  print(text)
  backend = merged["backend"]
  stem = _common.OUT / f"scale_{backend}"
  _common.OUT.mkdir(parents=True, exist_ok=True)
  stem.with_suffix(".md").write_text(text + "\n")
  plots = pathlib.Path(args.doc).parent if args.doc else _common.OUT
  if args.doc:
    write_doc(args.doc, backend, text)
  if importlib.util.find_spec("matplotlib") is None:  # the PyTorch venv has none
    print(f"wrote {stem}.md; no plots: matplotlib is not installed", file=sys.stderr)
    return
  for family in dict.fromkeys(r["family"] for r in merged["rows"]):
    plot(merged["rows"], backend, family, plots / f"scale_{backend}_{family}.png")
  print(f"wrote {stem}.md and a plot per family in {plots}", file=sys.stderr)


def measure(parser, args, argv):
  """Runs the cells; writes the run's JSON (its backend, start, rows, header and missing peers)
  after each name, and returns its path."""
  start, load = time.time(), os.getloadavg()
  first = Worker(args.backend, args.peers)
  listing = first.ask({"catalogue": True})
  first.close()
  names, missing = listing["names"], listing["missing"]
  if args.names:
    unknown = sorted(set(args.names.split(",")) - set(names))
    if unknown:
      parser.error(f"unknown names {unknown}; known: {', '.join(names)}")
    names = {n: f for n, f in names.items() if n in args.names.split(",")}
  shard = "" if args.shard == [1, 1] else f".shard{args.shard[0]}of{args.shard[1]}"
  shard = f".{'+'.join(args.variants)}{shard}" if args.variants else shard
  path = pathlib.Path(args.json or _common.OUT / f"scale_{args.backend}{shard}.json")
  path.parent.mkdir(parents=True, exist_ok=True)

  def save(rows, ended=False):
    end = f"{time.time() - start:.0f} s" if ended else "unfinished"
    header = [
      f"backend {args.backend}{shard}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(start))}"
      f", {end}; {os.cpu_count()} cores ({platform.processor() or 'cpu'}), load average "
      f"{load[0]:.1f} at the start and {os.getloadavg()[0]:.1f} at the end; one thread; "
      f"ratios: median (min-max) over {args.rounds} interleaved rounds",
      " ".join([pathlib.Path(sys.argv[0]).name, *argv]),
    ]
    saved = {"backend": args.backend, "started": start, "rows": rows, "header": header}
    with open(path, "w") as f:
      json.dump({**saved, "missing": missing}, f)

  save(run(args, names, [p for p in args.peers if p not in missing], save), ended=True)
  return path


if __name__ == "__main__":
  main(sys.argv[1:])
