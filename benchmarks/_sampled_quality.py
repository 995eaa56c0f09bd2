"""The quality comparison of ``benchmarks/sampled.py --compare``: full softmax against sampled
softmax (log-Q on) and a ranking loss on sampled lists, over seeds, on CLINC150 and a synthetic
catalogue.

* CLINC150 (150 intents, the in-scope official split: 15,000 train, 4,500 test): frozen features,
  TF-IDF over word 1-2-grams (scikit-learn, fitted on the training texts) reduced to 256
  dimensions by truncated SVD; the offline stand-in for sentence embeddings (the MiniLM
  checkpoint is optional and absent here).
* A synthetic catalogue of ``C`` classes with Zipf frequencies (class id = frequency rank) and a
  planted structure: an example of class ``y`` has features ``u_y + 0.5 noise``, ``u`` ``[C, 16]``
  Gaussian, the same for every seed (the seed draws the model's initialisation and the negatives).

Every model is ``Dense(width)`` over the features then a dot-product head with bias, trained with
Adam(0.01) for ``epochs`` at batch 256: ``Dense(C)`` with ``softmax_loss`` (full softmax), and
:class:`tfrank4class.heads.SampledClassifier` with ``SampledDotProduct(C, S, "log_uniform")``
(log-Q on; uniform negatives on CLINC150, whose classes are equally frequent) with
``softmax_loss`` (sampled softmax) and with ``pairwise_logistic_loss`` (a ranking
loss on the same sampled lists). Quality on the held-out examples over every class: Top-1, Top-5,
Recall@10 (the true class among the 10 best), reported as the mean over seeds with a 95%
Student-t interval; ``step ms`` is an epoch's wall time over its steps (data feeding included),
the median over the epochs after the first (which traces and compiles).
"""

import os
import pathlib
import statistics
import time

import numpy as np

METHODS = {
  "full softmax": ("full", "softmax_loss"),
  "sampled softmax (log-Q)": ("sampled", "softmax_loss"),
  "sampled pairwise logistic": ("sampled", "pairwise_logistic_loss"),
}


def clinc150_features(data_dir, dim=256, limit=None):
  """``(x_train, y_train, x_test, y_test)``: TF-IDF + SVD features of CLINC150's TSV files."""
  from sklearn.decomposition import TruncatedSVD  # noqa: PLC0415
  from sklearn.feature_extraction.text import TfidfVectorizer  # noqa: PLC0415

  def read(split):
    rows = pathlib.Path(data_dir, "clinc150", f"{split}.tsv").read_text().splitlines()
    texts, labels = zip(*((r.split("\t")[0], int(r.split("\t")[1])) for r in rows))
    return list(texts[:limit]), np.asarray(labels[:limit])

  (train_texts, y_train), (test_texts, y_test) = read("train"), read("test")
  tfidf = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=1)
  svd = TruncatedSVD(min(dim, len(train_texts) - 1), random_state=0)
  x_train = svd.fit_transform(tfidf.fit_transform(train_texts))
  x_test = svd.transform(tfidf.transform(test_texts))
  scale = np.linalg.norm(x_train, axis=1).mean()
  return (x_train / scale).astype("float32"), y_train, (x_test / scale).astype("float32"), y_test


def catalogue(num_classes, train, test, rank=16):
  """The synthetic catalogue's ``(x_train, y_train, x_test, y_test)`` (see the module doc)."""
  rng = np.random.default_rng(1)
  centres = rng.normal(size=(num_classes, rank)).astype("float32")
  weights = 1.0 / np.arange(1, num_classes + 1)
  y = rng.choice(num_classes, size=train + test, p=weights / weights.sum())
  x = (centres[y] + 0.5 * rng.normal(size=(train + test, rank))).astype("float32")
  return x[:train], y[:train], x[train:], y[train:]


def _model(kind, loss, num_classes, num_negatives, distribution, width, features):
  from tfrank4class.compat import keras  # noqa: PLC0415
  from tfrank4class.heads import SampledClassifier, SampledDotProduct  # noqa: PLC0415

  if kind == "full":
    model = keras.Sequential(
      [keras.Input((features,)), keras.layers.Dense(width), keras.layers.Dense(num_classes)]
    )
  else:
    head = SampledDotProduct(num_classes, num_negatives, distribution, use_bias=True, seed=0)
    model = SampledClassifier(keras.layers.Dense(width), head)
  model.compile(optimizer=keras.optimizers.Adam(0.01), loss=loss)
  return model


def _ranks_of_true(model, x, y, batch=512):
  """The number of classes scored above the true one, batch by batch (no ``[N, C]`` matrix)."""
  ranks = []
  for start in range(0, len(y), batch):
    scores = np.asarray(model.predict_on_batch(x[start : start + batch]))
    rows = np.arange(scores.shape[0])
    ranks.append((scores > scores[rows, y[start : start + batch]][:, None]).sum(axis=1))
  return np.concatenate(ranks)


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


def train_and_score(data, num_classes, distribution, method, num_negatives, epochs, seed, width):
  """One run: ``{top1, top5, recall_at_10, step_ms}`` on the held-out examples."""
  from tfrank4class.compat import keras  # noqa: PLC0415

  x_train, y_train, x_test, y_test = data
  batch = 256
  keras.utils.set_random_seed(seed)
  kind, loss = METHODS[method]
  model = _model(kind, loss, num_classes, num_negatives, distribution, width, x_train.shape[1])
  clock = _epoch_clock()
  model.fit(
    x_train, y_train, batch_size=batch, epochs=epochs, verbose=0, shuffle=True, callbacks=[clock]
  )
  step_ms = 1000.0 * clock.median_after_first() / -(-len(y_train) // batch)
  ranks = _ranks_of_true(model, x_test, y_test)
  return {
    "top1": float(np.mean(ranks < 1)),
    "top5": float(np.mean(ranks < 5)),
    "recall_at_10": float(np.mean(ranks < 10)),
    "step_ms": step_ms,
  }


def _interval(values):
  """Mean and the half-width of its 95% Student-t interval over seeds (0 for one seed)."""
  from scipy import stats  # noqa: PLC0415

  mean = statistics.fmean(values)
  if len(values) < 2:
    return mean, 0.0
  half = stats.t.ppf(0.975, len(values) - 1) * statistics.stdev(values) / len(values) ** 0.5
  return mean, half


def compare(datasets, negatives, seeds, epochs, width, ranking_max_negatives):
  """Every (dataset, method, S) over ``seeds``: per-seed values and their mean and interval. The
  pairwise loss runs only for ``S <= ranking_max_negatives``: it holds ``[B, 1 + S, 1 + S]`` pairs
  (8 GB of resident memory at ``B = 256, S = 1000``)."""
  rows = []
  for name, (data, num_classes, distribution) in datasets.items():
    for method in METHODS:
      kind, loss = METHODS[method]
      if kind == "full":
        sizes = [None]
      else:
        sizes = [s for s in negatives if loss == "softmax_loss" or s <= ranking_max_negatives]
      for s in sizes:
        runs = [
          train_and_score(data, num_classes, distribution, method, s or 1, epochs, seed, width)
          for seed in seeds
        ]
        row = {"dataset": name, "C": num_classes, "method": method, "S": s, "runs": runs}
        for key in ("top1", "top5", "recall_at_10", "step_ms"):
          row[key] = _interval([r[key] for r in runs])
        rows.append(row)
        print(name, method, s, {k: row[k] for k in ("top1", "top5", "recall_at_10")}, flush=True)
  return rows


def compare_table(result):
  lines = [
    f"{result['backend']}: {len(result['seeds'])} seeds, {result['epochs']} epochs, B = 256; "
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
  rows = compare(
    datasets, negatives, seeds, args.compare_epochs, args.width, args.ranking_max_negatives
  )
  result = {"backend": backend, "seeds": seeds, "epochs": args.compare_epochs, "rows": rows}
  path = out_dir / f"sampled_compare_{'_'.join(chosen)}_{backend}.json"
  path.write_text(json.dumps(result, indent=1))
  compare_plot(result, path.with_suffix(".png"))
  print(compare_table(result))
  print(f"wrote {path} and the .png beside it")
