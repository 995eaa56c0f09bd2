"""The multi-label comparison of ``benchmarks/sampled.py --goemotions``: full softmax against
sampled softmax and a ranking loss on sampled lists on GoEmotions, where an example's other
positives are masked as accidental hits.

GoEmotions (official split: 43,410 training, 5,427 test comments, 28 labels, 1 to 5 per
comment): frozen TF-IDF + SVD features as CLINC150's (``_sampled_quality.tfidf_svd_features``).
Training expands each comment into one row per positive label ``p`` (``(x, p)``, 51,103 rows):
full softmax scores the 28 labels with ``p`` relevant and the comment's other positives as
padding (relevance ``-1``), so they are neither positive nor negative in the row; the sampled
runs score ``p`` and ``S`` uniform negatives (log-Q on), a negative equal to ``p`` or to another
positive of the comment masked as padding (``heads.sampled.sampled_lists(positives=...)``; a
:class:`~tfrank4class.heads.SampledClassifier` takes class ids alone, so the benchmark's
subclass below hands the multi-hot row on). Every model is ``Dense(width)`` then a dot-product
head without bias, Adam(lr) at batch 256. Held out, over every label: P@1 (the best label is a
positive), R@3 and R@5 (the share of the comment's positives among the 3 or 5 best, averaged
over comments).
"""

import os
import pathlib

import _sampled_quality
import numpy as np

NUM_LABELS = 28


def goemotions(data_dir, dim):
  """``(x_train, positives_train [N, 28], x_test, positives_test)`` of the official split."""

  def read(split):
    rows = pathlib.Path(data_dir, "goemotions", f"{split}.tsv").read_text().splitlines()
    texts = [r.split("\t")[0] for r in rows]
    positives = np.zeros((len(rows), NUM_LABELS), "float32")
    for i, r in enumerate(rows):
      positives[i, [int(label) for label in r.split("\t")[1].split(",")]] = 1.0
    return texts, positives

  (train_texts, train_positives), (test_texts, test_positives) = read("train"), read("test")
  x_train, x_test = _sampled_quality.tfidf_svd_features(train_texts, test_texts, dim)
  return x_train, train_positives, x_test, test_positives


def expanded(x, positives):
  """One row per (comment, positive label): ``(x [M, f], label [M], positives [M, 28])``."""
  rows, labels = np.nonzero(positives)
  return x[rows], labels, positives[rows]


def _multi_label_classifier():
  from tfrank4class.compat import keras  # noqa: PLC0415
  from tfrank4class.heads import SampledClassifier, sampled  # noqa: PLC0415

  class MultiLabelSampledClassifier(SampledClassifier):
    """``y`` ``[B, 1 + C]``: the row's positive label, then the comment's multi-hot positives,
    which the sampled list masks as accidental hits."""

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
      if not isinstance(y_pred, dict):
        return super().compute_loss(x, y, y_pred, sample_weight, training)
      negatives, log_q = self.head.draw_negatives()
      y_pred, y = sampled.sampled_lists(
        y_pred["queries"],
        self.head.class_embeddings,
        keras.ops.cast(y[:, 0], "int32"),
        negatives,
        log_q,
        positives=y[:, 1:],
      )
      return keras.Model.compute_loss(self, x, y, y_pred, sample_weight, training)

  return MultiLabelSampledClassifier


def _fit(method, num_negatives, data, run):
  from tfrank4class.compat import keras  # noqa: PLC0415
  from tfrank4class.heads import SampledDotProduct  # noqa: PLC0415

  x, labels, positives = data
  kind, loss = _sampled_quality.METHODS[method]
  keras.utils.set_random_seed(run["seed"])
  encoder = keras.layers.Dense(run["width"])
  if kind == "full":
    model = keras.Sequential(
      [keras.Input((x.shape[1],)), encoder, keras.layers.Dense(NUM_LABELS, use_bias=False)]
    )
    y = positives * -1.0  # the other positives are padding ...
    y[np.arange(len(labels)), labels] = 1.0  # ... and the row's own is relevant
  else:
    head = SampledDotProduct(NUM_LABELS, num_negatives, "uniform", seed=0)
    model = _multi_label_classifier()(encoder, head)
    y = np.concatenate([labels[:, None].astype("float32"), positives], axis=1)
  name, learning_rate = run["optimizer"]
  model.compile(optimizer=getattr(keras.optimizers, name)(learning_rate), loss=loss)
  model.fit(x, y, batch_size=256, epochs=run["epochs"], verbose=0, shuffle=True)
  return model


def multi_label_quality(scores, positives):
  """P@1, R@3 and R@5 of ``scores`` ``[N, 28]`` against the multi-hot ``positives``."""
  order = np.argsort(-scores, axis=1, kind="stable")
  hits = np.take_along_axis(positives, order, axis=1)
  counts = positives.sum(axis=1)
  return {
    "p_at_1": float(hits[:, 0].mean()),
    "r_at_3": float((hits[:, :3].sum(axis=1) / counts).mean()),
    "r_at_5": float((hits[:, :5].sum(axis=1) / counts).mean()),
  }


def run_goemotions(args, out_dir, backend):
  """``--goemotions``: every method (sampled at each ``--compare_negatives``) over the seeds;
  the JSON and the table."""
  import json  # noqa: PLC0415

  data_dir = os.environ.get("TFRANK4CLASS_DATA") or args.data_dir
  x_train, train_positives, x_test, test_positives = goemotions(data_dir, dim=256)
  data = expanded(x_train, train_positives)
  run = {"epochs": args.compare_epochs, "width": args.width}
  run["optimizer"] = _sampled_quality.optimizer(args)
  rows = []
  for method in _sampled_quality.METHODS:
    if method not in args.methods.split(","):
      continue
    full = _sampled_quality.METHODS[method][0] == "full"
    for s in [None] if full else [int(s) for s in args.compare_negatives.split(",")]:
      runs = []
      for seed in range(args.seeds):
        model = _fit(method, s, data, {**run, "seed": seed})
        runs.append(
          multi_label_quality(np.asarray(model.predict(x_test, verbose=0)), test_positives)
        )
      row = {"method": method, "S": s, "runs": runs}
      for key in ("p_at_1", "r_at_3", "r_at_5"):
        row[key] = _sampled_quality.interval([r[key] for r in runs])
      rows.append(row)
      print(method, s, {k: row[k] for k in ("p_at_1", "r_at_3", "r_at_5")}, flush=True)
  result = {"backend": backend, "seeds": args.seeds, **run, "rows": rows}
  path = out_dir / f"sampled_goemotions_{backend}.json"
  path.write_text(json.dumps(result, indent=1))
  print(goemotions_table(result))
  print(f"wrote {path}")


def goemotions_table(result):
  lines = [
    f"{result['backend']}: {result['seeds']} seeds, {result['epochs']} epochs, B = 256, "
    f"{result['optimizer'][0]}({result['optimizer'][1]}); mean and 95% t-interval half-width",
    "| method | S | P@1 | R@3 | R@5 |",
    "|---|---:|---:|---:|---:|",
  ]
  for r in result["rows"]:
    cells = " | ".join(f"{r[k][0]:.3f} ± {r[k][1]:.3f}" for k in ("p_at_1", "r_at_3", "r_at_5"))
    lines.append(f"| {r['method']} | {r['S'] or '-'} | {cells} |")
  return "\n".join(lines)
