"""Dense relevance under XLA, before and after the blocks of relevant rows: loss + gradient of a
pairwise and an approximate-rank key at B = 32 lists of C classes with r relevant classes each,
under ``jax.jit`` (JAX) or ``tf.function(jit_compile=True)`` (TensorFlow), one thread.

"before" is every pair ``[B, C, C]`` (the path XLA took before: forced here by blocks of C rows,
``ROWS_PER_BLOCK = C``, which ``relevant_row_values`` hands to ``relevant_rows``, every pair under
XLA); "after" the loop over blocks of ``ROWS_PER_BLOCK`` (8) relevant rows. Both are built in one
child process per cell (started with ``_common.PEAK_MEMORY_ENV``), called once to compile, checked
equal (values and gradients, 1e-5), then: peak memory of one call each (``_common.peak_rss_mb``;
on JAX also XLA's own temporary buffers, ``memory_analysis().temp_size_in_bytes``, which needs no
run), and ``--rounds`` rounds timing each (the fastest of ``--calls`` calls), in alternating order.
``softmax`` (Keras's categorical cross-entropy on the same scores) is timed in the same rounds for
scale. A "before" cell over ``--max_pairs_gb`` of one [B, C, C] float32 tensor is compiled (JAX:
for its memory analysis) but not run.

Usage (the interpreter's own backend; each cell's JSON on a line of stdout):
  KERAS_BACKEND=jax python benchmarks/scale-after/dense_xla.py > jax.jsonl
  python benchmarks/scale-after/dense_xla.py > tf.jsonl          # TensorFlow
  python benchmarks/scale-after/dense_xla.py --table jax.jsonl tf.jsonl
"""

import argparse
import json
import os
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import _common  # noqa: E402

KEYS = ("pairwise_logistic_loss", "approx_ndcg_loss")
SIZES = (1000, 10000)
RELEVANT = (1, 5)
BATCH = 32


def _cell(key, classes, relevant, rounds, calls, max_pairs_gb):
  """One cell in this process: the JSON of its memory and timings."""
  backend = os.environ.get("KERAS_BACKEND", "tensorflow")
  if backend == "tensorflow":
    tf = _common.setup_tensorflow(1)
  else:
    os.environ["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
  import keras  # noqa: PLC0415
  import numpy as np  # noqa: PLC0415

  from tfrank4class.losses import tf_ranking  # noqa: PLC0415
  from tfrank4class.losses.ranking_losses import base  # noqa: PLC0415

  rng = np.random.default_rng(0)
  labels = np.zeros((BATCH, classes), "float32")
  for row in labels:
    row[rng.choice(classes, relevant, replace=False)] = 1.0
  scores = rng.normal(size=(BATCH, classes)).astype("float32")
  loss = tf_ranking.RankingLoss(key)

  def build(rows_per_block):
    base.ROWS_PER_BLOCK = rows_per_block  # read when the step is traced
    if backend == "jax":
      import jax  # noqa: PLC0415

      step = jax.jit(jax.value_and_grad(lambda s, y: loss(y, s)))
      compiled = step.lower(scores, labels).compile()
      memory = compiled.memory_analysis()
      return compiled, None if memory is None else memory.temp_size_in_bytes / 2**20

    @tf.function(jit_compile=True)
    def step(s, y):
      with tf.GradientTape() as tape:
        tape.watch(s)
        value = loss(y, s)
      return value, tape.gradient(value, s)

    spec = tf.TensorSpec(scores.shape, "float32")
    step.get_concrete_function(spec, spec)
    return step, None

  def softmax(s, y):
    return keras.losses.categorical_crossentropy(y, s, from_logits=True)

  if backend == "jax":
    import jax  # noqa: PLC0415

    soft = jax.jit(jax.value_and_grad(lambda s, y: softmax(s, y).sum()))
  else:

    @tf.function(jit_compile=True)
    def soft(s, y):
      with tf.GradientTape() as tape:
        tape.watch(s)
        value = tf.reduce_sum(softmax(s, y))
      return value, tape.gradient(value, s)

  x = scores if backend == "jax" else tf.constant(scores)
  y = labels if backend == "jax" else tf.constant(labels)
  steps, result = {}, {"key": key, "C": classes, "r": relevant, "backend": backend}
  pairs_gb = BATCH * classes * classes * 4 / 1e9
  for name, rows in (("after", base.ROWS_PER_BLOCK), ("before", classes)):
    steps[name], result[f"{name}_xla_temp_mb"] = build(rows)
    if name == "before" and pairs_gb > max_pairs_gb:
      del steps[name]
  steps["softmax"] = soft

  def run(fn):
    value, grad = fn(x, y)
    return np.asarray(value), np.asarray(grad)

  outputs = {name: run(fn) for name, fn in steps.items()}
  if "before" in outputs:
    for got, want in zip(outputs["after"], outputs["before"]):
      np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
  for name, fn in steps.items():
    result[f"{name}_peak_mb"] = _common.peak_rss_mb(lambda fn=fn: run(fn))
  times = {name: [] for name in steps}
  for index in range(rounds):
    for name in list(steps)[:: 1 if index % 2 == 0 else -1]:
      best = float("inf")
      for _ in range(calls):
        start = time.perf_counter()
        run(steps[name])
        best = min(best, time.perf_counter() - start)
      times[name].append(best * 1e3)
  result["ms"] = times
  result["load"] = os.getloadavg()
  return result


def _spread(values):
  """``median (min-max)`` of ``values``."""
  values = sorted(values)
  median = values[len(values) // 2]
  return f"{median:.3g} ({values[0]:.3g}-{values[-1]:.3g})"


def table(cells):
  """The markdown table of the cells (JSON dicts, as the children print them)."""
  lines = [
    "| backend | key | C | r | before ms | after ms | before / after | after / softmax "
    "| peak MB before / after | XLA temp MB before / after | load (1 min) |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
  ]
  for cell in cells:
    ms = cell["ms"]
    ratio = "not run"
    before = "not run"
    if "before" in ms:
      before = _spread(ms["before"])
      ratio = _spread([b / a for b, a in zip(ms["before"], ms["after"])])
    soft = _spread([a / s for a, s in zip(ms["after"], ms["softmax"])])
    peak = f"{cell.get('before_peak_mb', 'not run')} / {cell['after_peak_mb']:.3g}"
    if "before_peak_mb" in cell:
      peak = f"{cell['before_peak_mb']:.3g} / {cell['after_peak_mb']:.3g}"
    temp = "-"
    if cell.get("after_xla_temp_mb") is not None:
      temp = f"{cell['before_xla_temp_mb']:.4g} / {cell['after_xla_temp_mb']:.3g}"
    lines.append(
      f"| {cell['backend']} | {cell['key']} | {cell['C']:,} | {cell['r']} | {before} "
      f"| {_spread(ms['after'])} | {ratio} | {soft} | {peak} | {temp} | {cell['load'][0]:.0f} |"
    )
  return "\n".join(lines)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--rounds", type=int, default=5)
  parser.add_argument("--calls", type=int, default=3)
  parser.add_argument("--max_pairs_gb", type=float, default=2.0)
  parser.add_argument("--cell", nargs=3, help="key C r: run one cell here (the child's form)")
  parser.add_argument("--table", nargs="+", help="files of the cells' JSON lines: print a table")
  args = parser.parse_args()
  if args.table:
    cells = []
    for name in args.table:
      text = pathlib.Path(name).read_text().splitlines()
      cells += [json.loads(line) for line in text if line.startswith("{")]
    print(table(cells))
    return
  if args.cell:
    key, classes, relevant = args.cell[0], int(args.cell[1]), int(args.cell[2])
    cell = _cell(key, classes, relevant, args.rounds, args.calls, args.max_pairs_gb)
    print(json.dumps(cell))
    return
  for classes in SIZES:
    for relevant in RELEVANT:
      for key in KEYS:
        extra = ["--rounds", str(args.rounds), "--calls", str(args.calls)]
        extra += ["--max_pairs_gb", str(args.max_pairs_gb)]
        cell = _common.run_peak_memory_child(
          __file__, ["--cell", key, str(classes), str(relevant), *extra]
        )
        print(json.dumps(cell), flush=True)


if __name__ == "__main__":
  main()
