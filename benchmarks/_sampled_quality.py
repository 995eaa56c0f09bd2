"""The quality comparisons of ``benchmarks/sampled.py --compare`` and ``--sweep``: full softmax
against sampled softmax (log-Q on) and a ranking loss on sampled lists, over seeds, on CLINC150
and a synthetic catalogue.

* CLINC150 (150 intents, the in-scope official split: 15,000 train, 4,500 test): frozen features,
  TF-IDF over word 1-2-grams (scikit-learn, fitted on the training texts) reduced to 256
  dimensions by truncated SVD; the offline stand-in for sentence embeddings (the MiniLM
  checkpoint is optional and absent here).
* A synthetic catalogue of ``C`` classes with Zipf frequencies (class id = frequency rank) and a
  planted structure: an example of class ``y`` has features ``u_y + 0.5 noise``, ``u`` ``[C, 16]``
  Gaussian, the same for every seed (the seed draws the model's initialisation and the negatives).

Every model is ``Dense(width)`` over the features then a dot-product head with bias, trained with
``--compare_optimizer`` (Adam by default) at ``--lr`` for ``epochs`` at batch 256: ``Dense(C)``
with ``softmax_loss`` (full softmax), and :class:`tfrank4class.heads.SampledClassifier` with
``SampledDotProduct(C, S, "log_uniform")`` (log-Q on; uniform negatives on CLINC150, whose
classes are equally frequent) with ``softmax_loss`` (sampled softmax) and with
``pairwise_logistic_loss`` (a ranking loss on the same sampled lists). Quality on the held-out
examples over every class (``top_k_ids``: the class table in blocks, no ``[N, C]`` matrix):
Top-1, Top-5, Recall@10 (the true class among the 10 best), reported by ``--compare`` as the mean
over seeds with a 95% Student-t interval; ``step ms`` is an epoch's wall time over its steps
(data feeding included), the median over the epochs after the first (which traces and compiles).
``--sweep`` runs the catalogue at each ``C`` of ``--sweep_classes``, one child process per
(C, method, S, seed), with its peak resident set and the ceiling (the held-out share of examples
whose class occurs in training).
"""

import importlib.util
import os
import pathlib
import statistics
import time

import numpy as np

#: The optimizers of ``--optimizer`` and ``--compare_optimizer``: Keras class names.
OPTIMIZERS = {"sgd": "SGD", "adagrad": "Adagrad", "adam": "Adam"}

METHODS = {
  "full softmax": ("full", "softmax_loss"),
  "sampled softmax (log-Q)": ("sampled", "softmax_loss"),
  "sampled pairwise logistic": ("sampled", "pairwise_logistic_loss"),
}


def tfidf_svd_features(train_texts, test_texts, dim):
  """``(x_train, x_test)``: TF-IDF over word 1-2-grams fitted on ``train_texts``, reduced to
  ``dim`` by truncated SVD, scaled to a mean row norm of 1 on the training rows."""
  from sklearn.decomposition import TruncatedSVD  # noqa: PLC0415
  from sklearn.feature_extraction.text import TfidfVectorizer  # noqa: PLC0415

  tfidf = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=1)
  svd = TruncatedSVD(min(dim, len(train_texts) - 1), random_state=0)
  x_train = svd.fit_transform(tfidf.fit_transform(train_texts))
  x_test = svd.transform(tfidf.transform(test_texts))
  scale = np.linalg.norm(x_train, axis=1).mean()
  return (x_train / scale).astype("float32"), (x_test / scale).astype("float32")


def clinc150_features(data_dir, dim=256, limit=None):
  """``(x_train, y_train, x_test, y_test)``: TF-IDF + SVD features of CLINC150's TSV files."""

  def read(split):
    rows = pathlib.Path(data_dir, "clinc150", f"{split}.tsv").read_text().splitlines()
    texts, labels = zip(*((r.split("\t")[0], int(r.split("\t")[1])) for r in rows))
    return list(texts[:limit]), np.asarray(labels[:limit])

  (train_texts, y_train), (test_texts, y_test) = read("train"), read("test")
  x_train, x_test = tfidf_svd_features(train_texts, test_texts, dim)
  return x_train, y_train, x_test, y_test


def catalogue(num_classes, train, test, rank=16):
  """The synthetic catalogue's ``(x_train, y_train, x_test, y_test)`` (see the module doc)."""
  rng = np.random.default_rng(1)
  centres = rng.normal(size=(num_classes, rank)).astype("float32")
  weights = 1.0 / np.arange(1, num_classes + 1)
  y = rng.choice(num_classes, size=train + test, p=weights / weights.sum())
  x = (centres[y] + 0.5 * rng.normal(size=(train + test, rank))).astype("float32")
  return x[:train], y[:train], x[train:], y[train:]


def _model(kind, loss, num_classes, num_negatives, distribution, width, features, optimizer):
  from tfrank4class.compat import keras  # noqa: PLC0415
  from tfrank4class.heads import SampledClassifier, SampledDotProduct  # noqa: PLC0415

  if kind == "full":
    model = keras.Sequential(
      [keras.Input((features,)), keras.layers.Dense(width), keras.layers.Dense(num_classes)]
    )
  else:
    head = SampledDotProduct(num_classes, num_negatives, distribution, use_bias=True, seed=0)
    model = SampledClassifier(keras.layers.Dense(width), head)
  name, learning_rate = optimizer
  model.compile(optimizer=getattr(keras.optimizers, name)(learning_rate), loss=loss)
  return model


def top_k_ids(model, x, k=10, batch=1024, block_size=65_536):
  """The ``k`` best class ids ``[N, k]`` of each row of ``x`` over every class, best first: the
  encoder's output against the class table in blocks (``heads.blocked_top_k``), so no ``[N, C]``
  matrix; the bias rides as one more column of the table (``h . e_c + b_c``)."""
  from tfrank4class.compat import ops  # noqa: PLC0415
  from tfrank4class.heads import blocked_top_k  # noqa: PLC0415

  if hasattr(model, "head"):  # SampledClassifier
    encoder, table, bias = model.encoder, model.head.class_embeddings, model.head.bias
  else:  # Sequential: Dense(width), Dense(C)
    encoder, output = model.layers
    table, bias = ops.transpose(output.kernel), output.bias
  table = ops.concatenate([ops.convert_to_tensor(table), ops.reshape(bias, (-1, 1))], axis=1)

  def dot(queries, classes):
    return ops.matmul(queries, ops.transpose(classes))

  ids = []
  for start in range(0, len(x), batch):
    h = encoder(x[start : start + batch])
    queries = ops.concatenate([h, ops.ones_like(h[:, :1])], axis=1)
    ids.append(ops.convert_to_numpy(blocked_top_k(dot, queries, table, k, block_size)[1]))
  return np.concatenate(ids)


def held_out_quality(ids, y):
  """Top-1, Top-5 and Recall@10 (the true class among the 10 best) from ``top_k_ids``."""
  hits = ids == np.asarray(y)[:, None]
  return {
    "top1": float(hits[:, 0].mean()),
    "top5": float(hits[:, :5].any(axis=1).mean()),
    "recall_at_10": float(hits[:, :10].any(axis=1).mean()),
  }


def _epoch_clock():
  """A Keras callback keeping each epoch's wall time; ``median_after_first()`` leaves out the
  first epoch (tracing and compiling) when there is more than one."""
  from tfrank4class.compat import keras  # noqa: PLC0415

  class EpochClock(keras.callbacks.Callback):
    def __init__(self):
      super().__init__()
      self.seconds = []

    def on_epoch_begin(self, epoch, logs=None):
      self.start = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
      self.seconds.append(time.perf_counter() - self.start)

    def median_after_first(self):
      return statistics.median(self.seconds[1:] or self.seconds)

  return EpochClock()


def train_and_score(data, num_classes, distribution, method, num_negatives, run):
  """One run: ``{top1, top5, recall_at_10, step_ms, fit_s}`` on the held-out examples; ``run``
  holds ``epochs``, ``seed``, ``width`` and ``optimizer`` (name, learning rate)."""
  from tfrank4class.compat import keras  # noqa: PLC0415

  x_train, y_train, x_test, y_test = data
  batch = 256
  keras.utils.set_random_seed(run["seed"])
  kind, loss = METHODS[method]
  features = x_train.shape[1]
  model = _model(
    kind, loss, num_classes, num_negatives, distribution, run["width"], features, run["optimizer"]
  )
  clock = _epoch_clock()
  start = time.perf_counter()
  model.fit(
    x_train,
    y_train,
    batch_size=batch,
    epochs=run["epochs"],
    verbose=0,
    shuffle=True,
    callbacks=[clock],
  )
  fit_s = time.perf_counter() - start
  step_ms = 1000.0 * clock.median_after_first() / -(-len(y_train) // batch)
  quality = held_out_quality(top_k_ids(model, x_test), y_test)
  return {**quality, "step_ms": step_ms, "fit_s": fit_s}


def interval(values):
  """Mean and the half-width of its 95% Student-t interval over seeds (0 for one seed)."""
  from scipy import stats  # noqa: PLC0415

  mean = statistics.fmean(values)
  if len(values) < 2:
    return mean, 0.0
  half = stats.t.ppf(0.975, len(values) - 1) * statistics.stdev(values) / len(values) ** 0.5
  return mean, half


def compare(datasets, methods, negatives, seeds, run, ranking_max_negatives):
  """Every (dataset, method, S) over ``seeds``: per-seed values and their mean and interval. The
  pairwise loss runs only for ``S <= ranking_max_negatives``: it holds ``[B, 1 + S, 1 + S]`` pairs
  (8 GB of resident memory at ``B = 256, S = 1000``)."""
  rows = []
  for name, (data, num_classes, distribution) in datasets.items():
    for method in methods:
      kind, loss = METHODS[method]
      if kind == "full":
        sizes = [None]
      else:
        sizes = [s for s in negatives if loss == "softmax_loss" or s <= ranking_max_negatives]
      for s in sizes:
        runs = [
          train_and_score(data, num_classes, distribution, method, s or 1, {**run, "seed": seed})
          for seed in seeds
        ]
        row = {"dataset": name, "C": num_classes, "method": method, "S": s, "runs": runs}
        for key in ("top1", "top5", "recall_at_10", "step_ms"):
          row[key] = interval([r[key] for r in runs])
        rows.append(row)
        print(name, method, s, {k: row[k] for k in ("top1", "top5", "recall_at_10")}, flush=True)
  return rows


def compare_table(result):
  lines = [
    f"{result['backend']}: {len(result['seeds'])} seeds, {result['epochs']} epochs, B = 256, "
    f"{result['optimizer'][0]}({result['optimizer'][1]}); "
    "mean and 95% t-interval half-width over seeds",
    "| data | C | method | S | Top-1 | Top-5 | Recall@10 | step ms |",
    "|---|---:|---|---:|---:|---:|---:|---:|",
  ]
  for r in result["rows"]:
    cells = " | ".join(f"{r[k][0]:.3f} ± {r[k][1]:.3f}" for k in ("top1", "top5", "recall_at_10"))
    lines.append(
      f"| {r['dataset']} | {r['C']:,} | {r['method']} | {r['S'] or '-'} | {cells} | "
      f"{r['step_ms'][0]:.1f} |"
    )
  return "\n".join(lines)


def compare_plot(result, path):
  """Top-1 against the number of sampled negatives, one panel per dataset, full softmax as a
  band (its mean and interval)."""
  import matplotlib  # noqa: PLC0415

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # noqa: PLC0415

  names = list(dict.fromkeys(r["dataset"] for r in result["rows"]))
  fig, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 3.6), squeeze=False)
  for ax, name in zip(axes[0], names):
    rows = [r for r in result["rows"] if r["dataset"] == name]
    for method in METHODS:
      mine = [r for r in rows if r["method"] == method]
      if mine and mine[0]["S"] is None:
        mean, half = mine[0]["top1"]
        ax.axhspan(mean - half, mean + half, color="grey", alpha=0.3)
        ax.axhline(mean, color="black", label=method)
      elif mine:
        xs = [r["S"] for r in mine]
        ax.errorbar(
          xs,
          [r["top1"][0] for r in mine],
          [r["top1"][1] for r in mine],
          marker="o",
          capsize=3,
          label=method,
        )
    ax.set_xscale("log")
    ticks = sorted({r["S"] for r in rows if r["S"] is not None})
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("sampled negatives S")
    ax.set_ylabel("Top-1 (held out)")
    ax.set_title(f"{name}, C = {rows[0]['C']:,}")
  axes[0][0].legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def optimizer(args):
  """``(Keras optimizer class name, learning rate)`` of ``--compare_optimizer`` and ``--lr``."""
  return OPTIMIZERS[args.compare_optimizer], args.lr


def run_compare(args, out_dir, backend):
  """The ``--compare`` run of ``benchmarks/sampled.py``: the table, the JSON and the plot."""
  import json  # noqa: PLC0415

  data_dir = os.environ.get("TFRANK4CLASS_DATA") or args.data_dir
  chosen = args.compare_data.split(",")
  datasets = {}
  if "clinc150" in chosen:
    limit = 1500 if args.quick else None
    clinc = clinc150_features(data_dir, dim=32 if args.quick else 256, limit=limit)
    datasets["CLINC150"] = (clinc, 150, "uniform")
  if "catalogue" in chosen:
    train = 1000 if args.quick else args.catalogue_examples
    synthetic = catalogue(args.catalogue_classes, train, train // 5)
    datasets["synthetic Zipf"] = (synthetic, args.catalogue_classes, "log_uniform")
  seeds = list(range(args.seeds))
  negatives = [int(s) for s in args.compare_negatives.split(",")]
  run = {"epochs": args.compare_epochs, "width": args.width, "optimizer": optimizer(args)}
  methods = [m for m in METHODS if m in args.methods.split(",")]
  rows = compare(datasets, methods, negatives, seeds, run, args.ranking_max_negatives)
  result = {"backend": backend, "seeds": seeds, **run, "rows": rows}
  path = out_dir / f"sampled_compare_{'_'.join(chosen)}_{backend}.json"
  path.write_text(json.dumps(result, indent=1))
  if importlib.util.find_spec("matplotlib"):
    compare_plot(result, path.with_suffix(".png"))
  print(compare_table(result))
  print(f"wrote {path} and the .png beside it")


def _sweep_regime(args, backend):
  return {
    "backend": backend,
    "examples": args.catalogue_examples,
    "test": args.catalogue_test,
    "epochs": args.compare_epochs,
    "B": 256,
    "width": args.width,
    "optimizer": list(optimizer(args)),
  }


def sweep_cell(args, backend):
  """One cell (``--sweep_cell C,method index,S,seed``) of the sweep over ``C``, in its own process:
  prints its JSON (the peak resident set is this process's, ``ru_maxrss``: data, model, training
  and the evaluation)."""
  import json  # noqa: PLC0415
  import resource  # noqa: PLC0415

  num_classes, method, num_negatives, seed = (int(v) for v in args.sweep_cell.split(","))
  method = list(METHODS)[method]
  data = catalogue(num_classes, args.catalogue_examples, args.catalogue_test)
  regime = _sweep_regime(args, backend)
  run = {"epochs": regime["epochs"], "width": regime["width"], "seed": seed}
  run["optimizer"] = optimizer(args)
  load = os.getloadavg()[0]
  cell = train_and_score(data, num_classes, "log_uniform", method, num_negatives, run)
  cell.update(
    C=num_classes,
    method=method,
    S=num_negatives if METHODS[method][0] == "sampled" else None,
    seed=seed,
    seen_share=float(np.isin(data[3], data[1]).mean()),
    peak_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    load=[load, os.getloadavg()[0]],
  )
  print(json.dumps(cell))


def _sweep_cells(args):
  """The ``(C, method, S or None, seed)`` of ``--sweep``, C by C."""
  negatives = [int(s) for s in args.compare_negatives.split(",")]
  methods = [m for m in METHODS if m in args.methods.split(",")]
  for c in (int(c) for c in args.sweep_classes.split(",")):
    for method in methods:
      kind, loss = METHODS[method]
      if kind == "full":
        sizes = [None] if c <= args.full_max_c else []
      else:
        sizes = [s for s in negatives if loss == "softmax_loss" or s <= args.ranking_max_negatives]
      for s in sizes:
        for seed in range(args.seeds):
          yield c, method, s, seed


def run_sweep(args, out_dir, backend, script):
  """``--sweep``: every (C, method, S, seed) cell not yet in ``sampled_sweep_<backend>.json`` (a
  rerun resumes), each in a child process; then the table and the plot of quality against C.
  Full softmax runs up to ``--full_max_c``, the pairwise loss up to ``--ranking_max_negatives``."""
  import json  # noqa: PLC0415
  import subprocess  # noqa: PLC0415

  import _common  # noqa: PLC0415

  path = out_dir / f"sampled_sweep_{backend}.json"
  result = {"regime": _sweep_regime(args, backend), "cells": []}
  if path.exists():
    result = json.loads(path.read_text())
    if result["regime"] != _sweep_regime(args, backend):
      raise ValueError(f"{path} holds another regime ({result['regime']}); move it away first.")
  done = {(c["C"], c["method"], c["S"], c["seed"]) for c in result["cells"]}
  flags = ["--catalogue_examples", str(args.catalogue_examples), "--lr", str(args.lr)]
  flags += ["--catalogue_test", str(args.catalogue_test), "--width", str(args.width)]
  flags += ["--compare_epochs", str(args.compare_epochs)]
  flags += ["--compare_optimizer", args.compare_optimizer]
  for c, method, s, seed in _sweep_cells(args):
    if (c, method, s, seed) in done:
      continue
    cell_flags = [*flags, "--sweep_cell", f"{c},{list(METHODS).index(method)},{s or 0},{seed}"]
    try:
      cell = _common.run_peak_memory_child(script, cell_flags)
    except subprocess.CalledProcessError as error:
      cell = {"C": c, "method": method, "S": s, "seed": seed}
      cell["failed"] = f"exit {error.returncode}"
    result["cells"].append(cell)
    path.write_text(json.dumps(result, indent=1))
    print(json.dumps(cell), flush=True)
  if importlib.util.find_spec("matplotlib"):
    sweep_plot(result, path.with_suffix(".png"))
  print(sweep_table(result))
  print(f"wrote {path} and the .png beside it")


def sweep_rows(result):
  """Per (C, method, S), over its seeds (one or two: a t-interval over two is too wide to read):
  each metric's ``(mean, min, max)``, the median step ms, the largest peak MB, the ceiling (the
  held-out share of examples whose class is seen in training)."""
  rows = []
  cells = [c for c in result["cells"] if "failed" not in c]
  keys = sorted({(c["C"], list(METHODS).index(c["method"]), c["S"] or 0) for c in cells})
  for c, index, s in keys:
    method = list(METHODS)[index]
    runs = [r for r in cells if (r["C"], r["method"], r["S"] or 0) == (c, method, s)]
    row = {"C": c, "method": method, "S": s or None, "seeds": len(runs)}
    row["ceiling"] = runs[0]["seen_share"]
    for key in ("top1", "top5", "recall_at_10"):
      values = [r[key] for r in runs]
      row[key] = (statistics.fmean(values), min(values), max(values))
    row["step_ms"] = statistics.median(r["step_ms"] for r in runs)
    row["peak_mb"] = max(r["peak_mb"] for r in runs)
    rows.append(row)
  return rows


def sweep_table(result):
  regime = result["regime"]
  lines = [
    f"{regime['backend']}: {regime['examples']:,} training and {regime['test']:,} held-out "
    f"examples, {regime['epochs']} epochs, B = {regime['B']}, log-uniform negatives, "
    f"{regime['optimizer'][0]}({regime['optimizer'][1]}), width {regime['width']}",
    "mean over seeds (min-max where two)",
    "| C | method | S | seeds | Top-1 | Top-5 | Recall@10 | ceiling | step ms | peak MB |",
    "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
  ]
  for r in sweep_rows(result):
    cells = " | ".join(
      f"{r[k][0]:.3f}" + (f" ({r[k][1]:.3f}-{r[k][2]:.3f})" if r["seeds"] > 1 else "")
      for k in ("top1", "top5", "recall_at_10")
    )
    lines.append(
      f"| {r['C']:,} | {r['method']} | {r['S'] or '-'} | {r['seeds']} | {cells} | "
      f"{r['ceiling']:.3f} | "
      f"{r['step_ms']:.1f} | {r['peak_mb']:,.0f} |"
    )
  lines += [f"failed: {c}" for c in result["cells"] if "failed" in c]
  return "\n".join(lines)


def sweep_plot(result, path):
  """Top-1, Top-5 and Recall@10 against C, one line per (method, S) (mean and min-max over seeds),
  and the ceiling (held-out share of a class seen in training) dashed."""
  import matplotlib  # noqa: PLC0415

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # noqa: PLC0415

  rows = sweep_rows(result)
  names = {"top1": "Top-1", "top5": "Top-5", "recall_at_10": "Recall@10"}
  fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
  for ax, (key, name) in zip(axes, names.items()):
    for method, s in dict.fromkeys((r["method"], r["S"]) for r in rows):
      mine = [r for r in rows if (r["method"], r["S"]) == (method, s)]
      xs, ys, lows, highs = (np.array(v) for v in zip(*((r["C"], *r[key]) for r in mine)))
      label = method if s is None else f"{method}, S = {s}"
      ax.errorbar(xs, ys, [ys - lows, highs - ys], marker="o", capsize=3, label=label)
    ceiling = sorted({(r["C"], r["ceiling"]) for r in rows})
    ax.plot(*zip(*ceiling), "k--", lw=1, label="ceiling (class seen in training)")
    ax.set_xscale("log")
    ax.set_xlabel("classes C")
    ax.set_ylabel(f"{name} (held out)")
  axes[0].legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)
