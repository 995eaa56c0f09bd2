"""Which loss and which head? A grid over losses x heads x seeds on GoEmotions, CIFAR-10 and MIND.

Two protocols (``benchmarks/grid_store.py``):

* ``frozen``: per dataset one encoder is trained once with the softmax loss and a dot head (a
  classical classifier), its instance embeddings are cached under ``--work_dir``, and every
  loss x head x seed trains only a Rank4Class head on them;
* ``end_to_end``: the whole model per run, for every loss with the dot head and the best other
  head (the one with the higher mean frozen NDCG@5 on that dataset), on GoEmotions and CIFAR-10.

One JSON record per finished run goes to ``--output`` (rewritten atomically after each run); a
restarted grid skips the runs recorded there. After the runs (or with ``--report_only``) it
writes the summary ``--report_md`` (means with 95 % t intervals, paired differences against
softmax + dot, seed spread beside the paper's gaps, the paper's numbers beside ours, the
Bruch et al. bound) and the figure ``--report_png``.

Usage (from the repository root):
  nice -n 15 .venv/bin/python benchmarks/rank4class_grid.py            # the full grid
  .venv/bin/python benchmarks/rank4class_grid.py --report_only         # tables from the records
  .venv/bin/python benchmarks/rank4class_grid.py --smoke --output=/tmp/g.json   # tiny, 2 seeds
"""

import datetime
import json
import os
import pathlib
import statistics
import sys
import time

from _common import OUT, ROOT, setup_tensorflow  # noqa: E402  (puts the repository on sys.path)
from absl import app, flags
from grid_protocol import LOSS_KWARGS, RANKING_LOSSES
from rank4class_paper import PAPER, PAPER_LOSSES

#: The seven losses and the arguments they do not take with their defaults, as the second
#: edition's protocol names them (docs/evidence-grid.md).
LOSSES = RANKING_LOSSES
HIDDEN_UNITS = (64, 64)

#: Per dataset: where it is under --data_dir, how validation is made, the encoder and the sizes.
DATASETS = {
  "goemotions": dict(
    folder="goemotions",
    validation="official dev split",
    encoder="auto",
    encoder_kwargs={},
    encoder_epochs=3,
    frozen_epochs=4,
    e2e_epochs=2,
    batch_size=64,
    frozen_batch_size=256,
    learning_rate=1e-3,
    frozen_learning_rate=3e-3,
  ),
  "cifar10": dict(
    folder="cifar10_jpeg",
    validation="10% of each class of train (seed 0)",
    encoder="small_cnn",
    encoder_kwargs={},
    encoder_epochs=8,
    frozen_epochs=4,
    e2e_epochs=4,
    batch_size=64,
    frozen_batch_size=256,
    learning_rate=1e-3,
    frozen_learning_rate=3e-3,
  ),
  "mind": dict(
    folder="mind_sample",
    validation="md5(news id) mod 100 in [60, 80) (library split)",
    encoder="auto",
    encoder_kwargs={},
    encoder_epochs=10,
    frozen_epochs=10,
    e2e_epochs=10,
    batch_size=32,
    frozen_batch_size=64,
    learning_rate=1e-3,
    frozen_learning_rate=3e-3,
  ),
}
#: --smoke: a few examples per split, tiny encoders, one epoch.
SMOKE = dict(
  limits={"train": 160, "validation": 64, "test": 64},
  encoder_epochs=1,
  frozen_epochs=1,
  e2e_epochs=1,
  encoder_kwargs={
    "auto": {
      "embedding_dim": 8,
      "num_heads": 1,
      "ff_dim": 8,
      "sequence_length": 12,
      "max_tokens": 500,
    },
    "small_cnn": {"filters": (4,), "embedding_dim": 8},
  },
)
ORDER = ("mind", "cifar10", "goemotions")  # fastest first, in both protocols

FLAGS = flags.FLAGS
flags.DEFINE_list("datasets", list(ORDER), "Datasets of the frozen protocol.")
flags.DEFINE_list("e2e_datasets", ["cifar10", "goemotions"], "Datasets of the end-to-end protocol.")
flags.DEFINE_list("protocols", ["frozen", "end_to_end"], "Protocols to run, in this order.")
flags.DEFINE_list("losses", list(LOSSES), "Losses (tfrank4class.losses names).")
flags.DEFINE_list("e2e_losses", None, "Losses of the end-to-end protocol (default: --losses).")
flags.DEFINE_list(
  "interactions", ["dot", "latent_cross", "concat"], "Heads of the frozen protocol."
)
flags.DEFINE_integer("frozen_seeds", 5, "Seeds per frozen cell (0..n-1).")
flags.DEFINE_integer("e2e_seeds", 3, "Seeds per end-to-end cell (0..n-1).")
flags.DEFINE_string(
  "e2e_other_head",
  "auto",
  "End-to-end head besides dot: latent_cross, concat, or auto (the one with the "
  "higher mean frozen NDCG@5 on the dataset).",
)
flags.DEFINE_string(
  "data_dir",
  os.environ.get("TFRANK4CLASS_DATA", str(ROOT.parent / "shared" / "datasets")),
  "Folder holding goemotions/, cifar10_jpeg/, mind_sample/.",
)
flags.DEFINE_string(
  "work_dir", str(ROOT / "runs" / "rank4class_grid"), "Feature cache and lock (not committed)."
)
flags.DEFINE_string("output", str(OUT / "rank4class_grid.json"), "The records (JSON list).")
flags.DEFINE_string("report_md", str(OUT / "rank4class_grid.md"), "The summary tables.")
flags.DEFINE_string("report_png", str(OUT / "rank4class_grid.png"), "The figure.")
flags.DEFINE_bool("report_only", False, "Only write the report from the records.")
flags.DEFINE_bool("report", True, "Write the report after the runs.")
flags.DEFINE_bool("smoke", False, "Tiny sizes and 2 seeds, for tests (pass --output too).")
flags.DEFINE_integer("max_runs", None, "Stop after this many new runs (for timing).")
flags.DEFINE_integer("threads", 0, "TensorFlow intra/inter-op threads (0: TensorFlow's default).")

#: What differs between the paper's setting and ours, per dataset (named in the report).
DIFFERENCES = {
  "goemotions": "paper: pretrained BERT fine-tuned 100,000 steps, batch 32, learning rate tuned "
  "per configuration; ours: a 1-layer Transformer (64-d) trained from scratch for "
  "a few epochs, one learning rate for every loss. Same single-label official "
  "splits.",
  "mind": "paper: full MIND (18 categories, 78.8K / 25.7K / 25.9K articles) with BERT; ours: "
  "the 2,000-article sample (15 categories, 1,210 / 380 / 410 by the library's "
  "news-id hash split) with a small Transformer from scratch. Frozen protocol only.",
  "cifar10": "paper: VGG16 trained 50 epochs on the 50K training images, validation = test; "
  "ours: a small CNN (2 conv layers, 128-d embedding) on 18,000 of the 20,000 "
  "JPEG-compressed training images (2,000 held out for validation), a few epochs, "
  "no augmentation; test = the 10,000 test images.",
}
METRIC_NAMES = {"top_1": "Top-1", "top_5": "Top-5", "ndcg_5": "NDCG@5", "mrr": "MRR"}


# ---------------------------------------------------------------------------------------------
# Data and settings.


def settings_for(dataset, protocol, smoke):
  """The sizes of ``dataset`` under ``protocol`` (recorded with every run, checked on resume)."""
  spec = DATASETS[dataset]
  encoder_kwargs = dict(spec["encoder_kwargs"])
  if smoke:
    encoder_kwargs.update(SMOKE["encoder_kwargs"][spec["encoder"]])
  common = {
    "encoder": spec["encoder"],
    "encoder_kwargs": encoder_kwargs,
    "validation": spec["validation"],
    "hidden_units": list(HIDDEN_UNITS),
    "loss_kwargs": LOSS_KWARGS,
    "smoke": smoke,
    "limits": SMOKE["limits"] if smoke else None,
    "monitor": "ndcg_5",
  }
  if protocol == "frozen":
    return {
      **common,
      "encoder_loss": "softmax_loss",
      "encoder_interaction": "dot",
      "encoder_epochs": SMOKE["encoder_epochs"] if smoke else spec["encoder_epochs"],
      "encoder_batch_size": spec["batch_size"],
      "encoder_learning_rate": spec["learning_rate"],
      "epochs": SMOKE["frozen_epochs"] if smoke else spec["frozen_epochs"],
      "batch_size": spec["frozen_batch_size"],
      "learning_rate": spec["frozen_learning_rate"],
    }
  return {
    **common,
    "epochs": SMOKE["e2e_epochs"] if smoke else spec["e2e_epochs"],
    "batch_size": spec["batch_size"],
    "learning_rate": spec["learning_rate"],
  }


_SPLITS = {}


def load_splits(dataset, smoke):
  """``{split: (features, labels)}`` for train / validation / test, and the dataset's info."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import split_arrays as arrays  # pylint: disable=g-import-not-at-top

  from tfrank4class import data  # pylint: disable=g-import-not-at-top

  if (dataset, smoke) in _SPLITS:
    return _SPLITS[(dataset, smoke)]
  path = os.path.join(FLAGS.data_dir, DATASETS[dataset]["folder"])
  info = data.info(dataset, path)
  if dataset == "cifar10":
    x, y = arrays.to_numpy(dataset, "train", path)
    kept, held = arrays.stratified_holdout(y, 0.1, seed=0)
    splits = {
      "train": (x[kept], y[kept]),
      "validation": (x[held], y[held]),
      "test": arrays.to_numpy(dataset, "test", path),
    }
  else:
    splits = {s: arrays.to_numpy(dataset, s, path) for s in ("train", "validation", "test")}
  if smoke:
    rng = np.random.default_rng(0)
    for split, (x, y) in splits.items():
      keep = np.sort(rng.permutation(len(y))[: SMOKE["limits"][split]])
      splits[split] = (x[keep], y[keep])
  _SPLITS[(dataset, smoke)] = (splits, info, path)
  return splits, info, path


def build_model(dataset, path, info, settings, loss, interaction, encoder_kwargs=None):
  """The end-to-end model (encoder + head), compiled, built as the training binary builds it."""
  from tfrank4class.train import experiment  # pylint: disable=g-import-not-at-top

  config = experiment.ExperimentConfig(
    dataset=dataset,
    data_dir=path,
    encoder=settings["encoder"],
    encoder_kwargs=dict(
      encoder_kwargs if encoder_kwargs is not None else settings["encoder_kwargs"]
    ),
    interaction=interaction,
    hidden_units=None if interaction == "dot" else HIDDEN_UNITS,
    loss=loss,
    loss_kwargs=LOSS_KWARGS.get(loss, {}),
    metrics=("ndcg_5",),
    best_metric="ndcg_5",
    learning_rate=settings["learning_rate"],
    verbose=0,
  )
  return experiment.build_model(config.validate(), info)


def frozen_features(dataset, settings):
  """``(arrays, info)``: cached embeddings of the softmax + dot encoder for every split."""
  import feature_cache as features_lib  # pylint: disable=g-import-not-at-top
  import grid_store as grid  # pylint: disable=g-import-not-at-top

  from tfrank4class.compat import keras  # pylint: disable=g-import-not-at-top

  spec = {
    "dataset": dataset,
    "version": 1,
    **{
      k: settings[k]
      for k in (
        "encoder",
        "encoder_kwargs",
        "encoder_loss",
        "encoder_interaction",
        "encoder_epochs",
        "encoder_batch_size",
        "encoder_learning_rate",
        "limits",
        "validation",
        "monitor",
      )
    },
  }

  def build():
    print(
      f"[{dataset}] training the frozen-features encoder ({settings['encoder']}, "
      f"{settings['encoder_loss']} + {settings['encoder_interaction']}, "
      f"{settings['encoder_epochs']} epochs)...",
      file=sys.stderr,
      flush=True,
    )
    splits, info, path = load_splits(dataset, settings["smoke"])
    keras.utils.set_random_seed(0)
    enc_settings = dict(settings, learning_rate=settings["encoder_learning_rate"])
    model = build_model(
      dataset, path, info, enc_settings, settings["encoder_loss"], settings["encoder_interaction"]
    )
    result, _ = grid.fit_and_evaluate(
      model,
      splits["train"],
      splits["validation"],
      splits["test"],
      epochs=settings["encoder_epochs"],
      batch_size=settings["encoder_batch_size"],
      seed=0,
      monitor=settings["monitor"],
    )
    embed = features_lib.embedding_model(model)
    arrays = {}
    for split, (x, y) in splits.items():
      arrays[f"{split}_x"] = features_lib.extract(embed, x)
      arrays[f"{split}_y"] = y
    print(
      f"[{dataset}] encoder: test Top-1 {result['top_1']:.4f}, NDCG@5 {result['ndcg_5']:.4f}"
      f", {result['train_seconds']:.0f}s",
      file=sys.stderr,
      flush=True,
    )
    return arrays, {
      "encoder_test": {m: result[m] for m in grid.METRICS},
      "encoder_best_epoch": result["best_epoch"],
      "encoder_train_seconds": result["train_seconds"],
      "feature_dim": int(arrays["train_x"].shape[1]),
      "num_classes": len(info.class_names),
    }

  arrays, meta = features_lib.FeatureCache(FLAGS.work_dir).get_or_build(spec, build)
  return arrays, {**meta, "feature_key": features_lib.spec_key(spec)}


# ---------------------------------------------------------------------------------------------
# One run.


def run_cell(cell, settings):
  """Trains the run ``cell``; returns its record."""
  import grid_store as grid  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  from tfrank4class.compat import keras  # pylint: disable=g-import-not-at-top

  extra = {}
  if cell.protocol == "frozen":
    arrays, meta = frozen_features(cell.dataset, settings)  # built once, not part of the run
  start = time.perf_counter()
  if cell.protocol == "frozen":
    splits = {s: (arrays[f"{s}_x"], arrays[f"{s}_y"]) for s in ("train", "validation", "test")}
    num_classes = meta["num_classes"]
    keras.utils.set_random_seed(cell.seed)
    model = grid.head_model(
      meta["feature_dim"],
      num_classes,
      cell.interaction,
      () if cell.interaction == "dot" else HIDDEN_UNITS,
    )
    grid.compile_model(model, cell.loss, LOSS_KWARGS.get(cell.loss), settings["learning_rate"])
    extra["encoder"] = {
      "feature_key": meta["feature_key"],
      "test": meta["encoder_test"],
      "best_epoch": meta["encoder_best_epoch"],
      "train_seconds": meta["encoder_train_seconds"],
    }
  else:
    splits, info, path = load_splits(cell.dataset, settings["smoke"])
    keras.utils.set_random_seed(cell.seed)
    model = build_model(cell.dataset, path, info, settings, cell.loss, cell.interaction)
  result, scores = grid.fit_and_evaluate(
    model,
    splits["train"],
    splits["validation"],
    splits["test"],
    epochs=settings["epochs"],
    batch_size=settings["batch_size"],
    seed=cell.seed,
    monitor=settings["monitor"],
  )
  sizes = {f"n_{s}": int(len(splits[s][1])) for s in splits}
  return grid.make_record(
    cell,
    result,
    splits["test"][1],
    scores,
    settings=settings,
    wall_seconds=time.perf_counter() - start,
    tensorflow=tf.__version__,
    **sizes,
    **extra,
  )


# ---------------------------------------------------------------------------------------------
# The grid.


def plan(store):
  """The ordered cells; an end-to-end cell whose head is ``None`` is the best other head, decided
  when the grid reaches it (after the frozen runs of its dataset)."""
  import grid_store as grid  # pylint: disable=g-import-not-at-top

  seeds_f = range(2 if FLAGS.smoke else FLAGS.frozen_seeds)
  seeds_e = range(2 if FLAGS.smoke else FLAGS.e2e_seeds)
  cells = []
  for protocol in FLAGS.protocols:
    if protocol == "frozen":
      order = [d for d in ORDER if d in FLAGS.datasets]
      cells += grid.grid_cells(order, "frozen", FLAGS.losses, FLAGS.interactions, seeds_f)
    elif protocol == "end_to_end":
      for dataset in [d for d in ORDER if d in FLAGS.e2e_datasets]:
        other = other_head(store, dataset, resolve=False)
        losses = FLAGS.e2e_losses or FLAGS.losses
        for cell in grid.grid_cells([dataset], "end_to_end", losses, ["dot"], seeds_e):
          cells += [cell, cell._replace(interaction=other)]
    else:
      raise app.UsageError(
        f"--protocols: unknown protocol {protocol!r}; allowed: frozen, end_to_end."
      )
  return cells


def other_head(store, dataset, resolve=True):
  """The end-to-end head besides dot (``None`` while it cannot be decided yet, unless
  ``resolve``, which then raises)."""
  import grid_store as grid  # pylint: disable=g-import-not-at-top

  if FLAGS.e2e_other_head != "auto":
    return FLAGS.e2e_other_head
  used = {
    r["interaction"]
    for r in store.records
    if r["dataset"] == dataset and r["protocol"] == "end_to_end"
  } - {"dot"}
  if len(used) == 1:
    return used.pop()  # a resumed grid keeps the head it started with
  try:
    head, means = grid.best_other_head(
      store.records, dataset, candidates=[h for h in FLAGS.interactions if h != "dot"]
    )
  except ValueError:
    if resolve:
      raise
    return None
  if resolve:
    print(
      f"[{dataset}] end-to-end head besides dot: {head} (mean frozen NDCG@5 "
      + ", ".join(f"{h} {v:.4f}" for h, v in means.items())
      + ")",
      file=sys.stderr,
      flush=True,
    )
  return head


def run_grid():
  import grid_store as grid  # pylint: disable=g-import-not-at-top

  from tfrank4class.train import run_dir  # pylint: disable=g-import-not-at-top

  os.makedirs(FLAGS.work_dir, exist_ok=True)
  run_dir.lock_model_dir(FLAGS.work_dir)  # one grid per work dir
  store = grid.RecordStore(FLAGS.output)
  cells = plan(store)
  todo = [c for c in cells if c.interaction is None or c not in store]
  done_before = len(cells) - len(todo)
  print(
    f"Grid: {len(cells)} runs planned, {done_before} recorded in {FLAGS.output}, "
    f"{len(todo)} to do.",
    file=sys.stderr,
    flush=True,
  )
  start, ran = time.perf_counter(), 0
  for i, cell in enumerate(todo):
    if FLAGS.max_runs is not None and ran >= FLAGS.max_runs:
      print(f"Stopping after --max_runs={FLAGS.max_runs} runs.", file=sys.stderr, flush=True)
      break
    if cell.interaction is None:
      cell = cell._replace(interaction=other_head(store, cell.dataset))
      if cell in store:
        continue
    settings = settings_for(cell.dataset, cell.protocol, FLAGS.smoke)
    diff = grid.settings_differences(store.records, cell.dataset, cell.protocol, settings)
    if diff:
      raise app.UsageError(
        f"{FLAGS.output} holds {cell.protocol} runs of {cell.dataset} with other settings: "
        + "; ".join(f"{k}: {a!r} there, {b!r} now" for k, (a, b) in diff.items())
        + ". Use another --output, or move that file away to start afresh."
      )
    record = run_cell(cell, settings)
    store.add(record)
    ran += 1
    line = grid.progress_line(
      done_before + ran, len(cells), time.perf_counter() - start, todo[i + 1 :], store.records
    )
    print(
      f"{line}  | {cell.dataset} {cell.protocol} {cell.loss} {cell.interaction} "
      f"seed {cell.seed}: top_1 {record['top_1']:.4f} ndcg_5 {record['ndcg_5']:.4f} "
      f"({record['wall_seconds']:.1f}s)",
      file=sys.stderr,
      flush=True,
    )
  return store


# ---------------------------------------------------------------------------------------------
# The report.


def _fmt(interval):
  return f"{interval.mean:.4f} [{interval.low:.4f}, {interval.high:.4f}]"


def _verdict(interval):
  if not interval.difference_detected:
    return "no difference detected"
  return "higher" if interval.mean > 0 else "lower"


def _diff(interval):
  return f"{interval.mean:+.4f} [{interval.low:+.4f}, {interval.high:+.4f}] {_verdict(interval)}"


def _paper_value(dataset, metric, loss, head):
  if dataset not in PAPER or loss not in PAPER_LOSSES:
    return None
  return PAPER[dataset][2][metric][head][PAPER_LOSSES.index(loss)]


def write_report(records, md_path, png_path, planned=None):
  """Writes the markdown summary and the figure of ``records``."""
  import grid_store as grid  # pylint: disable=g-import-not-at-top

  rows = grid.summarize(records)
  lines = [
    "# Which loss and which head?",
    "",
    f"Generated by `benchmarks/rank4class_grid.py` on "
    f"{datetime.date.today().isoformat()} from {len(records)} run records "
    f"(`{os.path.basename(FLAGS.output)}`)"
    + (f" of {planned} planned" if planned else "")
    + ". Intervals are 95 % t intervals "
    "over seeds; a paired difference is this cell minus softmax + dot over the same seeds; "
    '"no difference detected" means its interval includes 0. All metrics on the test '
    "split, at the epoch with the best validation NDCG@5.",
    "",
  ]
  total = sum(r["train_seconds"] for r in records)
  wall = sum(r.get("wall_seconds", 0.0) for r in records)
  lines += [
    f"Training time in the records: {total / 3600:.2f} h in `fit`, {wall / 3600:.2f} h "
    "per-run wall time (frozen-feature encoders not included).",
    "",
  ]
  lines += _summary_section(rows)
  lines += _setup_section(records)
  for dataset, protocol, cells in _by_setting(rows):
    lines += _result_section(dataset, protocol, cells)
  lines += _spread_section(rows)
  lines += _paper_section(rows)
  lines += _holm_section(rows)
  lines += _bound_section(records)
  pathlib.Path(md_path).parent.mkdir(parents=True, exist_ok=True)
  pathlib.Path(md_path).write_text("\n".join(lines) + "\n", encoding="utf-8")
  _plot(rows, png_path)


def _by_setting(rows):
  """Yields ``(dataset, protocol, cells)`` for every dataset and protocol that has cells."""
  for dataset in _ordered(r["dataset"] for r in rows):
    for protocol in ("frozen", "end_to_end"):
      cells = [r for r in rows if (r["dataset"], r["protocol"]) == (dataset, protocol)]
      if cells:
        yield dataset, protocol, cells


def _baseline(cells):
  """The softmax + dot cell (``grid.BASELINE``) among ``cells``, or None."""
  import grid_store as grid  # pylint: disable=g-import-not-at-top

  return next((c for c in cells if (c["loss"], c["interaction"]) == grid.BASELINE), None)


def _ordered(values):
  seen = []
  for v in values:
    if v not in seen:
      seen.append(v)
  return seen


def _summary_section(rows):
  """One line per dataset and protocol: the baseline, the best other cell, the verdicts."""
  lines = [
    "## Summary",
    "",
    "NDCG@5 of every cell against softmax + dot (paired over seeds): how many cells are "
    "detectably higher, not detectably different, detectably lower; and the cell with the "
    "highest mean NDCG@5 other than softmax + dot.",
    "",
    "| dataset | protocol | softmax + dot Top-1 | softmax + dot NDCG@5 | higher / no difference "
    "/ lower | best other cell | its Δ Top-1 | its Δ NDCG@5 |",
    "|---|---|---|---|---|---|---|---|",
  ]
  for dataset, protocol, cells in _by_setting(rows):
    base = _baseline(cells)
    others = [c for c in cells if c["paired"]]
    if base is None or not others:
      continue
    verdicts = [_verdict(c["paired"]["ndcg_5"]) for c in others]
    best = max(others, key=lambda c: c["intervals"]["ndcg_5"].mean)
    lines.append(
      f"| {dataset} | {protocol} | {_fmt(base['intervals']['top_1'])} | "
      f"{_fmt(base['intervals']['ndcg_5'])} | "
      + " / ".join(str(verdicts.count(v)) for v in ("higher", "no difference detected", "lower"))
      + f" | {best['loss']} + {best['interaction']} | {_diff(best['paired']['top_1'])} | "
      f"{_diff(best['paired']['ndcg_5'])} |"
    )
  lines.append("")
  return lines


def _setup_section(records):
  from tfrank4class.train import config as config_lib  # pylint: disable=g-import-not-at-top

  lines = [
    "## Setup",
    "",
    "| dataset | protocol | train / val / test | encoder | validation split | epochs | "
    "batch | learning rate | frozen encoder (softmax + dot) test Top-1 / NDCG@5 |",
    "|---|---|---|---|---|---|---|---|---|",
  ]
  seen = set()
  for r in records:
    key = (r["dataset"], r["protocol"])
    if key in seen:
      continue
    seen.add(key)
    s = r.get("settings", {})
    enc = r.get("encoder", {}).get("test")
    enc_text = f"{enc['top_1']:.4f} / {enc['ndcg_5']:.4f}" if enc else "-"
    epochs = (
      f"encoder {s.get('encoder_epochs')}, head {s.get('epochs')}"
      if r["protocol"] == "frozen"
      else str(s.get("epochs"))
    )
    lines.append(
      f"| {r['dataset']} | {r['protocol']} | {r.get('n_train')} / "
      f"{r.get('n_validation')} / {r.get('n_test')} | {s.get('encoder')} "
      f"{s.get('encoder_kwargs') or ''} | {s.get('validation')} | {epochs} | "
      f"{s.get('batch_size')} | {s.get('learning_rate')} | {enc_text} |"
    )
  lines += [
    "",
    f"Heads: dot; latent cross and concat with MLP {list(HIDDEN_UNITS)}. Loss "
    f"arguments: {json.dumps(LOSS_KWARGS)}. The frozen features come from an encoder "
    "trained with the softmax loss and a dot head, so they favour that pair: they were "
    "shaped to be linearly separable under softmax, and the heads are trained on "
    "features of the same training examples the encoder saw. Encoder `auto` is the "
    f"training binary's text encoder: `{config_lib.AUTO_ENCODERS['text']}` with "
    f"{json.dumps(config_lib.TEXT_DEFAULTS)}.",
    "",
  ]
  return lines


def _result_section(dataset, protocol, cells):
  lines = [
    f"## {dataset}, {protocol.replace('_', '-')}",
    "",
    "| loss | head | seeds | Top-1 | Top-5 | NDCG@5 | MRR |",
    "|---|---|---|---|---|---|---|",
  ]
  for c in cells:
    iv = c["intervals"]
    lines.append(
      f"| {c['loss']} | {c['interaction']} | {len(c['seeds'])} | "
      + " | ".join(_fmt(iv[m]) for m in ("top_1", "top_5", "ndcg_5", "mrr"))
      + " |"
    )
  lines += [
    "",
    "Paired difference to softmax + dot (same seeds):",
    "",
    "| loss | head | seeds | Δ Top-1 | Δ NDCG@5 | Δ MRR |",
    "|---|---|---|---|---|---|",
  ]
  for c in cells:
    if c["paired"]:
      p = c["paired"]
      lines.append(
        f"| {c['loss']} | {c['interaction']} | {len(c['paired_seeds'])} | "
        f"{_diff(p['top_1'])} | {_diff(p['ndcg_5'])} | {_diff(p['mrr'])} |"
      )
  detected = [c for c in cells if c["paired"] and c["paired"]["ndcg_5"].difference_detected]
  lines += [
    "",
    f"NDCG@5 differs detectably from softmax + dot in {len(detected)} of "
    f"{sum(1 for c in cells if c['paired'])} cells"
    + (
      ": "
      + ", ".join(
        f"{c['loss']} + {c['interaction']} ({c['paired']['ndcg_5'].mean:+.4f})" for c in detected
      )
      if detected
      else ""
    )
    + ".",
    "",
  ]
  return lines


def _spread_section(rows):
  lines = [
    "## Seed spread beside the paper's gaps",
    "",
    "Our spread: the standard deviation over seeds of softmax + dot, and the median over "
    "all cells. The paper's gap: best Rank4Class cell minus softmax + dot in its grid "
    "(single runs), and the range of its 15 cells.",
    "",
    "| dataset | protocol | metric | SD softmax+dot | median SD over cells | paper gap "
    "(best - softmax+dot) | paper range | paper gap / our median SD |",
    "|---|---|---|---|---|---|---|---|",
  ]
  for dataset, protocol, cells in _by_setting(rows):
    base = _baseline(cells)
    for metric in ("top_1", "ndcg_5"):
      base_sd = f"{base['intervals'][metric].sd:.4f}" if base else "-"
      median = statistics.median(c["intervals"][metric].sd for c in cells)
      gap = rng = ratio = "-"
      if dataset in PAPER:
        values = [v for head in PAPER[dataset][2][metric].values() for v in head]
        paper_base = PAPER[dataset][2][metric]["dot"][0]
        gap_v = max(values) - paper_base
        gap, rng = f"{gap_v:+.4f}", f"{max(values) - min(values):.4f}"
        ratio = f"{gap_v / median:.1f}" if median > 0 else "-"
      lines.append(
        f"| {dataset} | {protocol} | {METRIC_NAMES[metric]} | {base_sd} | "
        f"{median:.4f} | {gap} | {rng} | {ratio} |"
      )
  lines.append("")
  return lines


def _paper_section(rows):
  import grid_store as grid  # pylint: disable=g-import-not-at-top

  lines = ["## The paper beside ours (direction of the difference to softmax + dot)", ""]
  contradictions, unconfirmed = [], []
  for dataset in _ordered(r["dataset"] for r in rows):
    if dataset not in PAPER:
      continue
    table, encoder, _ = PAPER[dataset]
    lines += [
      f"### {dataset}: paper {table} ({encoder}) vs ours",
      "",
      f"Differences in setting: {DIFFERENCES[dataset]}",
      "",
      "| loss | head | metric | paper | paper Δ | ours frozen Δ | ours end-to-end Δ |",
      "|---|---|---|---|---|---|---|",
    ]
    for loss in PAPER_LOSSES:
      for head in ("dot", "latent_cross", "concat"):
        if (loss, head) == grid.BASELINE:
          continue
        for metric in ("top_1", "ndcg_5"):
          paper = _paper_value(dataset, metric, loss, head)
          paper_d = paper - _paper_value(dataset, metric, *grid.BASELINE)
          ours = []
          for protocol in ("frozen", "end_to_end"):
            match = [
              r
              for r in rows
              if (r["dataset"], r["protocol"], r["loss"], r["interaction"])
              == (dataset, protocol, loss, head)
            ]
            if match and match[0]["paired"]:
              iv = match[0]["paired"][metric]
              ours.append(_diff(iv))
              if iv.difference_detected and paper_d and (iv.mean > 0) != (paper_d > 0):
                contradictions.append(
                  f"{dataset} {protocol} {loss} + {head} "
                  f"{METRIC_NAMES[metric]}: paper {paper_d:+.4f}, ours "
                  f"{_diff(iv)}"
                )
              elif not iv.difference_detected and paper_d > 0:
                unconfirmed.append(
                  f"{dataset} {protocol} {loss} + {head} "
                  f"{METRIC_NAMES[metric]}: paper {paper_d:+.4f}, ours "
                  f"{_diff(iv)}"
                )
            else:
              ours.append("-")
          lines.append(
            f"| {loss} | {head} | {METRIC_NAMES[metric]} | {paper:.4f} | "
            f"{paper_d:+.4f} | {ours[0]} | {ours[1]} |"
          )
    lines.append("")
  lines += [
    "### Where our numbers contradict the paper",
    "",
    "A paper difference whose sign is opposite to a difference we detect (interval excluding 0):",
    "",
  ]
  lines += [f"- {c}" for c in contradictions] or ["- none"]
  lines += ["", "A gain the paper reports where we detect no difference:", ""]
  lines += [f"- {c}" for c in unconfirmed] or ["- none"]
  lines.append("")
  return lines


def _holm_section(rows, metrics=("ndcg_5", "top_1")):
  """Every cell's two-sided paired t test against softmax + dot of its dataset and protocol
  (``rows`` of ``grid_store.summarize``), with Holm's adjustment over all of them, per metric:
  the correction the verdicts above lack."""
  import grid_statistics as statistics_lib  # pylint: disable=g-import-not-at-top

  paired = [r for r in rows if r["paired"]]
  lines = [
    "## Multiple comparisons (Holm)",
    "",
    "The verdicts above are unadjusted 95 % intervals. Here every cell's two-sided paired t test "
    "against softmax + dot of its dataset and protocol, Holm-adjusted over all the cells at "
    "once (alpha 0.05):",
    "",
  ]
  for metric in metrics:
    tests = [
      (
        f"{r['dataset']} {r['protocol']} {r['loss']} + {r['interaction']}",
        r["paired"][metric].mean,
        statistics_lib.t_test_p_value(r["paired"][metric]),
      )
      for r in paired
    ]
    adjusted = statistics_lib.holm([p for _, _, p in tests])
    kept = [(t, a) for t, a in zip(tests, adjusted) if a < 0.05]
    lost = [(t, a) for t, a in zip(tests, adjusted) if t[2] < 0.05 <= a]
    lines.append(
      f"- {metric}: {len(tests)} comparisons; {sum(t[2] < 0.05 for t in tests)} significant "
      f"unadjusted, {len(kept)} after Holm ({sum(t[1] > 0 for t, _ in kept)} higher, "
      f"{sum(t[1] < 0 for t, _ in kept)} lower)."
    )
    lines += [f"  - {t[0]}: {t[1]:+.4f}, p {t[2]:.2g}, Holm p {a:.2g}" for t, a in kept]
    lines += [
      f"  - not surviving, higher: {t[0]}: {t[1]:+.4f}, p {t[2]:.2g}, Holm p {a:.2g}"
      for t, a in lost
      if t[1] > 0
    ]
  return lines + [""]


def _bound_section(records):
  lines = [
    "## Bruch et al.'s bound on the softmax-trained models",
    "",
    "For every softmax-trained run, on its test predictions: how many examples break "
    "`p_y <= 1 / rank_y` (rank with ties counted against the true class), the smallest "
    "and mean slack `1 / rank_y - p_y`, and `CE - (-log MRR)` (>= 0 by the bound; MRR "
    "with ties counted against the true class). Means over seeds. Both inequalities hold for "
    "any scores (a softmax gives the true class at most 1 / rank of the mass, since every "
    "class ranked above it gets at least as much; Jensen's inequality turns that into the "
    "cross-entropy bound), so 0 violations checks the computation, not the models.",
    "",
    "| dataset | protocol | head | runs | examples checked | violations | min slack | "
    "mean slack | mean CE | mean -log MRR | CE - (-log MRR) |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
  ]
  groups = {}
  for r in records:
    if r["loss"] == "softmax_loss" and "bound" in r:
      groups.setdefault((r["dataset"], r["protocol"], r["interaction"]), []).append(r)
  for (dataset, protocol, head), rs in groups.items():
    b = [r["bound"] for r in rs]
    mean = lambda k, b=b: sum(x[k] for x in b) / len(b)  # noqa: E731
    lines.append(
      f"| {dataset} | {protocol} | {head} | {len(rs)} | "
      f"{sum(r.get('n_test', 0) for r in rs)} | {sum(x['violations'] for x in b)} | "
      f"{min(x['min_slack'] for x in b):.3g} | {mean('mean_slack'):.4f} | "
      f"{mean('cross_entropy'):.4f} | {mean('neg_log_mrr'):.4f} | "
      f"{mean('ce_gap'):.4f} |"
    )
  lines.append("")
  return lines


def _plot(rows, png_path):
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  datasets = _ordered(r["dataset"] for r in rows)
  protocols = [p for p in ("frozen", "end_to_end") if any(r["protocol"] == p for r in rows)]
  if not datasets:
    return
  fig, axes = plt.subplots(
    len(protocols),
    len(datasets),
    squeeze=False,
    figsize=(max(8.0, 5.2 * len(datasets)), 4.4 * len(protocols) + 1.0),
  )
  colors = dict(zip(LOSSES, plt.get_cmap("tab10").colors))
  markers = {"dot": "o", "latent_cross": "s", "concat": "^"}
  for i, protocol in enumerate(protocols):
    for j, dataset in enumerate(datasets):
      ax = axes[i][j]
      cells = [r for r in rows if (r["dataset"], r["protocol"]) == (dataset, protocol)]
      for c in cells:
        x, y = c["intervals"]["top_1"], c["intervals"]["ndcg_5"]
        ax.errorbar(
          x.mean,
          y.mean,
          xerr=x.half_width,
          yerr=y.half_width,
          marker=markers[c["interaction"]],
          color=colors.get(c["loss"], "k"),
          ms=6,
          capsize=2,
          lw=0.8,
          label=f"{c['loss']} + {c['interaction']}",
        )
      ax.set_title(f"{dataset}, {protocol.replace('_', '-')}")
      if not cells:
        ax.set_axis_off()
        ax.text(0.5, 0.5, "no runs in this protocol", ha="center", va="center", color="0.4")
        continue
      ax.set_xlabel("Top-1 accuracy (test)")
      ax.set_ylabel("NDCG@5 (test)")
      ax.grid(alpha=0.3)
  handles = [
    plt.Line2D([], [], color=colors[loss], marker="o", ls="", label=loss) for loss in LOSSES
  ]
  handles += [plt.Line2D([], [], color="k", marker=m, ls="", label=h) for h, m in markers.items()]
  fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=8, frameon=False)
  fig.suptitle(
    "NDCG@5 against Top-1 (test) per configuration: mean over seeds, 95 % t interval", fontsize=10
  )
  fig.tight_layout(rect=(0, 0.1, 1, 0.96))
  pathlib.Path(png_path).parent.mkdir(parents=True, exist_ok=True)
  fig.savefig(png_path, dpi=110)
  plt.close(fig)


# ---------------------------------------------------------------------------------------------


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  if FLAGS.smoke and not FLAGS["output"].present and not FLAGS.report_only:
    raise app.UsageError(
      "--smoke needs an explicit --output (it must not overwrite the real grid's records)."
    )
  for name in FLAGS.losses + (FLAGS.e2e_losses or []):
    if name not in LOSSES:
      raise app.UsageError(f"--losses / --e2e_losses: {name!r} is not one of {list(LOSSES)}.")
  if FLAGS.e2e_other_head not in ("auto", "latent_cross", "concat"):
    raise app.UsageError(
      f"--e2e_other_head must be auto, latent_cross or concat, got {FLAGS.e2e_other_head!r}."
    )
  tf = setup_tensorflow(FLAGS.threads)
  import grid_store as grid  # pylint: disable=g-import-not-at-top

  from tfrank4class.train import experiment  # pylint: disable=g-import-not-at-top

  experiment.quiet_tensorflow_logs()
  tf.get_logger().setLevel("ERROR")  # retracing notices: every run builds a new model
  tf.config.experimental.enable_op_determinism()
  if FLAGS.report_only:
    store = grid.RecordStore(FLAGS.output)
    planned = len(plan(store))
  else:
    store = run_grid()
    planned = len(plan(store))
    if not FLAGS.report:
      return
  write_report(store.records, FLAGS.report_md, FLAGS.report_png, planned)
  print(
    f"Wrote {FLAGS.report_md} and {FLAGS.report_png} from {len(store)} records.",
    file=sys.stderr,
    flush=True,
  )


if __name__ == "__main__":
  app.run(main)
