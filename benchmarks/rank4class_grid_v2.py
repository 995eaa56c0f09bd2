"""Which loss and which head? The evidence grid's second edition (docs/evidence-grid.md).

Runs the pre-registered protocol of ``benchmarks/grid_protocol.py``: on frozen all-MiniLM-L6-v2
sentence embeddings of GoEmotions (experiments ``clean``, ``noise20``, ``noise40``) and end to end
on CIFAR-10 images with augmentation (``cifar10_e2e``: ``grid_protocol.CIFAR``, the image encoder
and head trained per run), each in two stages:

1. ``sweep``: every loss x head at every learning rate of the sweep (tuning seeds), with early
   stopping on validation NDCG@5; a cell whose best rate sits at an edge of the grid gets one
   more rate beyond it (at most ``MAX_WIDENINGS`` times);
2. ``seeds``: every loss x head at its chosen rate with every evaluation seed.

Every finished run is one JSON record (:data:`KEY_FIELDS` identify it) in ``--output``, rewritten
atomically (temporary file, ``fsync``, ``os.replace``) after each run; a restarted grid skips the
runs it finds there and refuses to continue with other settings. The embeddings are computed
once, batch-wise, and cached under ``--work_dir`` keyed by the SHA-1 of their spec. The report
(``--report_md``, ``--report_png``) opens with how complete the grid is (:func:`completeness`),
its deviations from the protocol (:func:`protocol_deviations`) and the README's summary
(:func:`readme_table`), then per experiment the paired differences against softmax + dot with
Holm over that experiment's family, the minimum detectable effect, the convergence check, the
chosen learning rates and the Bruch et al. slack.

Usage (from the repository root; the full grid is long, see docs/evidence-grid.md):
  nice -n 15 .venv/bin/python benchmarks/rank4class_grid_v2.py --experiments=clean
  nice -n 15 .venv/bin/python benchmarks/rank4class_grid_v2.py --experiments=clean,cifar10_e2e
  .venv/bin/python benchmarks/rank4class_grid_v2.py --report_only
  .venv/bin/python benchmarks/rank4class_grid_v2.py --smoke --output=/tmp/g.json --work_dir=/tmp/w
"""

import collections
import json
import math
import os
import sys
import time

import _common  # first: puts the repository on sys.path before anything imports the package
import grid_protocol as protocol
import grid_statistics as statistics_lib
from absl import app, flags

KEY_FIELDS = ("edition", "experiment", "stage", "loss", "interaction", "learning_rate", "seed")
METRICS = ("top_1", "top_5", "ndcg_5", "mrr")
RECORD_FIELDS = KEY_FIELDS + METRICS + ("best_epoch", "epochs_run", "validation", "settings")
STAGES = ("sweep", "seeds")
#: How often a process waiting on other shares' runs reads the records again (``wait_hours``).
WAIT_POLL_SECONDS = 60
#: Experiment name -> fraction of noisy training labels (``grid_protocol.LABEL_NOISE``); the
#: experiments of ``IMAGE_EXPERIMENTS`` train the whole image model (``grid_protocol.CIFAR``).
EXPERIMENTS = {
  "clean": 0.0,
  **{f"noise{round(100 * p)}": p for p in protocol.LABEL_NOISE},
  "cifar10_e2e": 0.0,
}
IMAGE_EXPERIMENTS = ("cifar10_e2e",)
METRIC_NAMES = {"top_1": "Top-1", "top_5": "Top-5", "ndcg_5": "NDCG@5", "mrr": "MRR"}
#: --smoke: random features, 2 losses, 1 head, 2 seeds, 2 learning rates, 2 epochs.
SMOKE = dict(
  sizes={"train": 256, "validation": 96, "test": 96},
  feature_dim=16,
  num_classes=10,
  losses=("softmax_loss", "approx_ndcg_loss"),
  heads=("dot",),
  learning_rates=(1e-3, 1e-2),
  max_widenings=0,
  tuning_seeds=(1000,),
  evaluation_seeds=(0, 1),
  max_epochs=2,
  patience=1,
  batch_size=64,
)
#: --smoke of ``cifar10_e2e``: a few real images per class (or random ones without a data
#: folder), a one-layer ``small_cnn`` in place of the VGG16 (building and tracing a 13-layer
#: model costs seconds per run), 2 losses, 1 head, 2 seeds, 2 learning rates, 2 epochs.
CIFAR_SMOKE = dict(
  per_class={"train": 10, "test": 4},
  losses=("softmax_loss", "approx_ndcg_loss"),
  heads=("dot",),
  learning_rates=(1e-3, 1e-2),
  max_widenings=0,
  tuning_seeds=(1000,),
  evaluation_seeds=(0, 1),
  max_epochs=2,
  patience=1,
  batch_size=32,
  model={
    **protocol.CIFAR,
    "encoder": "small_cnn",
    "encoder_kwargs": {"filters": (4,), "embedding_dim": 8},
  },
)

FLAGS = flags.FLAGS


def define_flags():
  """The command line's flags, defined only when the grid runs as a program: the tests import this
  module beside the training binaries, whose flags share some of these names."""
  flags.DEFINE_list("experiments", ["clean"], f"Experiments, in order: {list(EXPERIMENTS)}.")
  flags.DEFINE_list("stages", list(STAGES), "Stages to run (the seeds stage needs the sweep).")
  flags.DEFINE_string(
    "data_dir",
    os.environ.get("TFRANK4CLASS_DATA", str(_common.ROOT.parent / "shared" / "datasets")),
    "Folder holding goemotions/ and cifar10_jpeg/.",
  )
  flags.DEFINE_string(
    "work_dir", str(_common.ROOT / "runs" / "rank4class_grid_v2"), "Feature cache (not committed)."
  )
  flags.DEFINE_string(
    "output", str(_common.OUT / "rank4class_grid_v2.json"), "The records (JSON list)."
  )
  flags.DEFINE_string("report_md", str(_common.OUT / "rank4class_grid_v2.md"), "The report.")
  flags.DEFINE_string("report_png", str(_common.OUT / "rank4class_grid_v2.png"), "The forest plot.")
  flags.DEFINE_bool("report_only", False, "Only write the report from the records.")
  flags.DEFINE_bool("smoke", False, "Random features and tiny sizes, for tests.")
  flags.DEFINE_integer("max_epochs", None, "Epoch budget (default: the protocol's).")
  flags.DEFINE_integer("max_runs", None, "Stop after this many new runs (for timing).")
  flags.DEFINE_integer("threads", 0, "TensorFlow intra/inter-op threads (0: TensorFlow's default).")
  flags.DEFINE_float(
    "wait_hours",
    0.0,
    "When this process has nothing it can run yet but runs are still planned (held by other grid "
    "processes on the same --output, or seeds waiting on a sweep), read the records again every "
    "minute, for at most this many hours in all (0: stop at once).",
  )


# ---------------------------------------------------------------------------------------------
# Settings and records.


def grid_settings(registered_losses, smoke=False, max_epochs=None, experiment="clean"):
  """The settings every run of ``experiment`` records (checked on resume): the protocol's (the
  label-noise experiments with its ``NOISE_RANKING_LOSSES`` and ``NOISE_HEADS``, CIFAR-10 with
  its ``CIFAR_*`` design), or ``SMOKE``'s (``CIFAR_SMOKE``'s for ``cifar10_e2e``)."""
  if experiment in IMAGE_EXPERIMENTS:
    settings = _cifar_settings(registered_losses, smoke)
  elif smoke:
    settings = {k: (list(v) if isinstance(v, tuple) else v) for k, v in SMOKE.items()}
  else:
    noisy = EXPERIMENTS[experiment] > 0.0
    settings = {
      "losses": protocol.losses(
        registered_losses, protocol.NOISE_RANKING_LOSSES if noisy else protocol.RANKING_LOSSES
      ),
      "heads": list(protocol.NOISE_HEADS if noisy else protocol.HEADS),
      "learning_rates": protocol.learning_rate_grid(),
      "max_widenings": protocol.MAX_WIDENINGS,
      "tuning_seeds": list(protocol.TUNING_SEEDS),
      "evaluation_seeds": list(protocol.EVALUATION_SEEDS),
      "max_epochs": protocol.MAX_EPOCHS,
      "patience": protocol.PATIENCE,
      "batch_size": protocol.BATCH_SIZE,
      "encoder": protocol.ENCODER,
    }
  settings.update(
    smoke=smoke,
    hidden_units=list(protocol.HIDDEN_UNITS),
    loss_kwargs=protocol.LOSS_KWARGS,
    monitor=protocol.MONITOR,
    optimizer=protocol.OPTIMIZER,
  )
  if max_epochs is not None:
    settings["max_epochs"] = max_epochs
  return json.loads(json.dumps(settings))


def _cifar_settings(registered_losses, smoke):
  if smoke:
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in CIFAR_SMOKE.items()}
  return {
    "losses": protocol.losses(registered_losses, protocol.CIFAR_RANKING_LOSSES),
    "heads": list(protocol.CIFAR_HEADS),
    "learning_rates": protocol.learning_rate_grid(
      protocol.CIFAR_LR_LOW_EXPONENT, protocol.CIFAR_LR_HIGH_EXPONENT
    ),
    "max_widenings": protocol.MAX_WIDENINGS,
    "tuning_seeds": list(protocol.TUNING_SEEDS),
    "evaluation_seeds": list(protocol.CIFAR_EVALUATION_SEEDS),
    "max_epochs": protocol.MAX_EPOCHS,
    "patience": protocol.PATIENCE,
    "batch_size": protocol.CIFAR_BATCH_SIZE,
    "model": protocol.CIFAR,
  }


def record_key(record):
  """The tuple of ``KEY_FIELDS`` of a record."""
  return tuple(record[k] for k in KEY_FIELDS)


def check_record(record):
  """Returns ``record`` if it is a valid second-edition record, else raises ``ValueError``
  naming the key, the value and what is allowed."""
  from tfrank4class import checks  # pylint: disable=g-import-not-at-top

  if not isinstance(record, dict):
    raise ValueError(f"A grid record must be a JSON object (dict), got {record!r}.")
  missing = [k for k in RECORD_FIELDS if k not in record]
  if missing:
    raise ValueError(f"The grid record {record!r} lacks {missing}; every record needs them.")
  checks.check_choice("edition", record["edition"], (protocol.EDITION,))
  checks.check_choice("experiment", record["experiment"], tuple(EXPERIMENTS))
  checks.check_choice("stage", record["stage"], STAGES)
  checks.check_float("learning_rate", record["learning_rate"], minimum=0.0, strict=True)
  checks.check_int("seed", record["seed"], minimum=0)
  epochs = checks.check_int("epochs_run", record["epochs_run"], minimum=1)
  best = checks.check_int("best_epoch", record["best_epoch"], minimum=1)
  if best > epochs:
    raise ValueError(f"Record key `best_epoch` ({best}) must be at most `epochs_run` ({epochs}).")
  for k in METRICS:
    value = checks.check_float(k, record[k])
    if not 0.0 <= value <= 1.0:
      raise ValueError(f"Record key `{k}` must be a test-split metric in [0, 1], got {value!r}.")
  return record


def open_records(path):
  """The second edition's records in ``path`` (a ``grid_store.RecordStore`` keyed by
  ``KEY_FIELDS``, each record checked by :func:`check_record`)."""
  import grid_store  # pylint: disable=g-import-not-at-top

  return grid_store.RecordStore(path, KEY_FIELDS, check_record)


def select(records, **fields):
  """The records whose ``fields`` have the given values."""
  return [r for r in records if all(r[k] == v for k, v in fields.items())]


# ---------------------------------------------------------------------------------------------
# Features.


def minilm_features(work_dir, data_dir):
  """``(arrays, info)``: all-MiniLM-L6-v2 embeddings of every GoEmotions split, cached."""
  import feature_cache as features_lib  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  import split_arrays as arrays_lib  # pylint: disable=g-import-not-at-top

  from tfrank4class import data  # pylint: disable=g-import-not-at-top
  from tfrank4class.encoders import huggingface_bert as bert  # pylint: disable=g-import-not-at-top
  from tfrank4class.encoders import huggingface_checkpoint  # pylint: disable=g-import-not-at-top

  spec = {"dataset": protocol.DATASET, "encoder": protocol.ENCODER, "version": 1}

  def build():
    path = os.path.join(data_dir, protocol.DATASET)
    encoder = bert.bert_checkpoint(
      huggingface_checkpoint.installed_minilm_path(),
      max_length=protocol.ENCODER["max_length"],
      output_mode=protocol.ENCODER["output_mode"],
      normalize=protocol.ENCODER["normalize"],
    )
    arrays, seconds = {}, {}
    for split in protocol.SPLITS:
      texts, labels = arrays_lib.to_numpy(protocol.DATASET, protocol.SPLITS[split], path)
      start = time.perf_counter()
      arrays[f"{split}_x"] = features_lib.extract(
        encoder, texts.reshape(-1, 1), batch_size=protocol.EMBED_BATCH_SIZE
      )
      seconds[split] = time.perf_counter() - start
      arrays[f"{split}_y"] = np.asarray(labels, np.int64)
      print(f"[features] {split}: {len(labels)} texts, {seconds[split]:.0f}s", file=sys.stderr)
    info = data.info(protocol.DATASET, path)
    return arrays, {"embed_seconds": seconds, "num_classes": len(info.class_names)}

  arrays, info = features_lib.FeatureCache(work_dir).get_or_build(spec, build)
  return arrays, {**info, "feature_key": features_lib.spec_key(spec)}


def smoke_features():
  """``(arrays, info)``: Gaussian features around one random mean per class (``SMOKE`` sizes)."""
  import numpy as np  # pylint: disable=g-import-not-at-top

  rng = np.random.default_rng(0)
  means = rng.normal(size=(SMOKE["num_classes"], SMOKE["feature_dim"]))
  arrays = {}
  for split, n in SMOKE["sizes"].items():
    y = rng.integers(0, SMOKE["num_classes"], size=n)
    arrays[f"{split}_x"] = (means[y] + rng.normal(size=(n, SMOKE["feature_dim"]))).astype("float32")
    arrays[f"{split}_y"] = y
  return arrays, {"num_classes": SMOKE["num_classes"], "feature_key": "smoke"}


def cifar_splits(data_dir, per_class=None, smoke=False):
  """``(splits, info)`` of the CIFAR-10 end-to-end experiment (``grid_protocol.CIFAR``).

  ``splits["train"]`` holds uint8 images ``[N, 32, 32, 3]`` (augmented per epoch by
  :func:`train_input`); ``validation`` (10 % of each class of the training folder,
  ``split_arrays.stratified_holdout`` with seed 0) and ``test`` hold float32 images with the
  evaluation preprocessing (``tfrank4class.data.cifar.normalize``). ``per_class``: ``{"train": n,
  "test": n}`` keeps the first ``n`` files of each class (the smoke configuration). With
  ``smoke`` and no ``data_dir``: random images of ``CIFAR_SMOKE``'s sizes.
  """
  import numpy as np  # pylint: disable=g-import-not-at-top
  import split_arrays as arrays_lib  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  from tfrank4class.data import cifar, image_folder  # pylint: disable=g-import-not-at-top

  settings = CIFAR_SMOKE if smoke else {"model": protocol.CIFAR}
  model = settings["model"]
  raw = {}
  if data_dir is None:
    if not smoke:
      raise ValueError("`data_dir` must hold cifar10_jpeg/ for the cifar10_e2e experiment.")
    rng = np.random.default_rng(0)
    for split, n in CIFAR_SMOKE["per_class"].items():
      raw[split] = (
        rng.integers(0, 256, (10 * n, 32, 32, 3), dtype=np.uint8),
        np.repeat(np.arange(10), n),
      )
    names, path = [f"class{i}" for i in range(10)], None
  else:
    path = os.path.join(data_dir, model["folder"])
    for split in ("train", "test"):
      paths, labels, names = image_folder.list_split(path, split)
      if per_class:
        seen = collections.Counter()
        keep = []
        for i, y in enumerate(labels):
          seen[y] += 1
          if seen[y] <= per_class[split]:
            keep.append(i)
        paths, labels = [paths[i] for i in keep], [labels[i] for i in keep]
      decode = image_folder.read_decoder("error")
      files = tf.data.Dataset.from_tensor_slices((paths, tf.constant(labels, tf.int64)))
      images = [x.numpy() for x, _ in files.map(decode).batch(1024)]
      raw[split] = (np.concatenate(images), np.asarray(labels, np.int64))
  kept, held = arrays_lib.stratified_holdout(
    raw["train"][1], model["validation_fraction"], seed=model["holdout_seed"]
  )

  def evaluation(images):
    return np.concatenate(
      [
        cifar.normalize(images[i : i + 1024], model["dataset"]).numpy()
        for i in range(0, len(images), 1024)
      ]
    )

  x, y = raw["train"]
  splits = {
    "train": (x[kept], y[kept]),
    "validation": (evaluation(x[held]), y[held]),
    "test": (evaluation(raw["test"][0]), raw["test"][1]),
  }
  data_key = (
    "random"
    if path is None
    else f"{model['folder']}" + (f" first {per_class} per class" if per_class else "")
  )
  return splits, {"num_classes": len(names), "feature_key": data_key}


def train_input(images, labels, batch_size, seed, dataset="cifar10"):
  """The augmented training input of ``cifar10_e2e``: uint8 ``images`` in memory, shuffled and
  augmented with ``seed`` (reshuffled, and newly augmented, every epoch) through
  ``tfrank4class.data.options.build_pipeline`` and ``cifar.preprocess_for_train``."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  from tfrank4class.data import cifar  # pylint: disable=g-import-not-at-top
  from tfrank4class.data import options as options_lib  # pylint: disable=g-import-not-at-top

  options = options_lib.InputOptions(
    batch_size=batch_size, shuffle_buffer=len(labels), shuffle_seed=seed, deterministic=True
  )
  records = tf.data.Dataset.from_tensor_slices((images, tf.constant(labels, tf.int64)))
  return options_lib.build_pipeline(
    records,
    None,
    lambda image, label, s: (cifar.preprocess_for_train(image, s, dataset), label),
    options,
    training=True,
  )


def noisy_labels(labels, fraction, num_classes, seed=protocol.NOISE_SEED):
  """``labels`` with ``round(fraction * N)`` rows (drawn with ``seed``) moved to another class,
  drawn uniformly from the other ``num_classes - 1``; the same rows and classes on every call.

  Example:
    >>> import numpy as np
    >>> y = np.zeros(10, np.int64)
    >>> int((noisy_labels(y, 0.2, 5) != y).sum())
    2
  """
  import numpy as np  # pylint: disable=g-import-not-at-top

  labels = np.asarray(labels)
  if not 0.0 <= fraction < 1.0:
    raise ValueError(f"`fraction` must be in [0, 1), got {fraction!r}.")
  rng = np.random.default_rng(seed)
  rows = rng.choice(len(labels), size=int(round(fraction * len(labels))), replace=False)
  noisy = labels.copy()
  noisy[rows] = (labels[rows] + rng.integers(1, num_classes, size=len(rows))) % num_classes
  return noisy


# ---------------------------------------------------------------------------------------------
# One run.


def train_run(splits, num_classes, loss, head, learning_rate, seed, settings):
  """Trains one head with early stopping; returns the run's result fields (test metrics, best
  epoch, epochs run, validation curve, the loss's config, the Bruch et al. slack)."""
  import grid_store as grid  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  import softmax_bounds as bounds  # pylint: disable=g-import-not-at-top

  from tfrank4class.compat import keras  # pylint: disable=g-import-not-at-top

  class KeepBestWithPatience(grid.KeepBest):
    """``KeepBest`` that also stops ``patience`` epochs after the best one."""

    def on_epoch_end(self, epoch, logs=None):
      super().on_epoch_end(epoch, logs)
      if epoch - self.best_epoch >= settings["patience"]:
        self.model.stop_training = True

  keras.utils.set_random_seed(seed)
  x, y = splits["train"]
  hidden = () if head == "dot" else settings["hidden_units"]
  if "model" in settings:  # end to end: the image encoder + head, augmented input
    from tfrank4class import encoders, heads  # pylint: disable=g-import-not-at-top

    spec = settings["model"]
    encoder = encoders.get(spec["encoder"], **spec["encoder_kwargs"])
    model = heads.build_model(encoder, num_classes, interaction=head, hidden_units=hidden)
    inputs = train_input(x, y, settings["batch_size"], seed, spec["dataset"])
  else:
    model = grid.head_model(x.shape[1], num_classes, head, hidden)
    inputs = grid.arrays_dataset(x, y, settings["batch_size"], shuffle_seed=seed)
  kwargs = settings["loss_kwargs"].get(loss, {})
  grid.compile_model(model, loss, kwargs, learning_rate)
  keep = KeepBestWithPatience(*splits["validation"], monitor=settings["monitor"])
  start = time.perf_counter()
  model.fit(
    inputs,
    epochs=settings["max_epochs"],
    callbacks=[keep],
    verbose=0,
  )
  train_seconds = time.perf_counter() - start
  scores = grid.predict(model, splits["test"][0])
  result = grid.evaluate_scores(splits["test"][1], scores, METRICS)
  slack = bounds.softmax_rank_bound(splits["test"][1], scores).summary()
  result.update(
    best_epoch=keep.best_epoch + 1,
    epochs_run=len(keep.curve),
    validation={settings["monitor"]: keep.best},
    validation_curve=[round(v, 6) for v in keep.curve],
    train_seconds=train_seconds,
    loss_config=grid.recorded_loss_config(loss, kwargs),
    bruch_slack=slack["ce_gap"],
    cross_entropy=slack["cross_entropy"],
    test_scores_finite=bool(np.isfinite(scores).all()),
  )
  return result


# ---------------------------------------------------------------------------------------------
# The stages.


def sweep_choice(records, experiment, loss, head, settings):
  """``(chosen rate or None, rates to run)`` of one cell from its sweep ``records`` so far (a
  list of records).

  The rates start at ``settings["learning_rates"]``; while the best (highest mean validation
  monitor over the tuning seeds, the smaller rate on a tie) sits at an edge and fewer than
  ``max_widenings`` rates were added, the grid is :func:`grid_protocol.widened`. ``None`` while
  some rate of the current grid has no record for every tuning seed.
  """
  rates = sorted(settings["learning_rates"])
  monitor = settings["monitor"]
  cell = select(records, experiment=experiment, stage="sweep", loss=loss, interaction=head)
  widenings = 0
  while True:
    means = []
    for rate in rates:
      found = [
        r["validation"][monitor]
        for r in cell
        if math.isclose(r["learning_rate"], rate, rel_tol=1e-9)
        and r["seed"] in settings["tuning_seeds"]
      ]
      if len(found) < len(settings["tuning_seeds"]):
        return None, rates
      means.append(sum(found) / len(found))
    best = max(range(len(rates)), key=lambda i: (means[i], -i))
    wider = protocol.widened(rates, best)
    if wider == rates or widenings == settings["max_widenings"]:
      return rates[best], rates
    rates, widenings = wider, widenings + 1


def planned_runs(records, experiments, stages, settings):
  """The runs still to do, in order, as ``(experiment, stage, loss, head, rate, seed)``; the
  seeds stage of a cell waits for its sweep (its rate is ``None`` until then)."""
  todo = []
  for experiment in experiments:
    if "sweep" in stages:
      for loss in settings["losses"]:
        for head in settings["heads"]:
          _, rates = sweep_choice(records.records, experiment, loss, head, settings)
          for rate in rates:
            for seed in settings["tuning_seeds"]:
              key = (protocol.EDITION, experiment, "sweep", loss, head, rate, seed)
              if key not in records:
                todo.append(key[1:])
    if "seeds" in stages:
      for seed in settings["evaluation_seeds"]:
        for loss in settings["losses"]:
          for head in settings["heads"]:
            rate, _ = sweep_choice(records.records, experiment, loss, head, settings)
            key = (protocol.EDITION, experiment, "seeds", loss, head, rate, seed)
            if rate is None or key not in records:
              todo.append(key[1:])
  return todo


def _scheduling(experiments, options):
  """The waiting budget in seconds (``wait_hours`` of :func:`run_grid`'s ``options``), with
  ``experiments`` checked; a bad value raises ``tfrank4class.errors.InvalidConfigError`` (a
  ``ValueError``) that names it, which the command line prints on one line."""
  from tfrank4class import checks, errors  # pylint: disable=g-import-not-at-top

  try:
    for experiment in experiments:
      if experiment not in EXPERIMENTS:
        raise ValueError(f"`experiments`: unknown {experiment!r}; allowed: {list(EXPERIMENTS)}.")
    wait_hours = checks.check_float("wait_hours", options.get("wait_hours", 0.0), minimum=0)
  except ValueError as e:
    raise errors.InvalidConfigError(str(e)) from None
  return 3600.0 * wait_hours


def run_grid(
  output, work_dir, data_dir, experiments=("clean",), stages=STAGES, smoke=False, **options
):
  """Runs every missing run (see the module doc) and returns the records (:func:`open_records`).

  ``options``: ``max_epochs`` (overrides the protocol's budget), ``max_runs`` (stop after that
  many new runs), ``registered_losses`` (default ``tfrank4class.losses.names()``),
  ``wait_hours`` (default 0).

  Several processes may run the same experiments on one ``output``: each claims a run before
  training it (``RecordStore.claim``) and takes the first planned run no other process holds, so
  no run is trained twice and no process idles while another has runs queued. When nothing is
  left that this process can run now (the remaining runs are held by other processes, or are
  seeds waiting for a sweep) but runs are still planned, it reads the records again every
  ``WAIT_POLL_SECONDS`` until it can go on, for at most ``wait_hours`` in all; then, or at once
  with ``wait_hours=0``, it stops, and a later start runs the rest.
  """
  from tfrank4class import errors  # pylint: disable=g-import-not-at-top
  from tfrank4class import losses as losses_lib  # pylint: disable=g-import-not-at-top

  wait_left = _scheduling(experiments, options)
  registered = options.get("registered_losses") or losses_lib.names()
  settings = {
    e: grid_settings(registered, smoke, options.get("max_epochs"), e) for e in EXPERIMENTS
  }
  records = open_records(output)
  for record in records.records:
    if record["settings"] != settings[record["experiment"]]:
      raise errors.InvalidConfigError(
        f"{output} holds runs of {record['experiment']} with other settings "
        f"({record['settings']!r}) than now ({settings[record['experiment']]!r}); use another "
        "--output or move that file away."
      )
  data = {}

  def experiment_data(experiment):
    """``(splits, info)`` of ``experiment``, loaded once."""
    kind = "image" if experiment in IMAGE_EXPERIMENTS else "features"
    if kind not in data:
      if kind == "image":
        per_class = CIFAR_SMOKE["per_class"] if smoke else None
        data[kind] = cifar_splits(data_dir, per_class, smoke)
      else:
        arrays, info = smoke_features() if smoke else minilm_features(work_dir, data_dir)
        splits = {s: (arrays[f"{s}_x"], arrays[f"{s}_y"]) for s in ("train", "validation", "test")}
        data[kind] = splits, info
    return data[kind]

  software = _common.software_versions()

  def train_and_record(run):
    """Trains the planned ``run`` and adds its record; returns the record."""
    experiment, stage, loss, head, rate, seed = run
    splits, info = experiment_data(experiment)
    x, y = splits["train"]
    if EXPERIMENTS[experiment]:
      y = noisy_labels(y, EXPERIMENTS[experiment], info["num_classes"])
    run_splits = {**splits, "train": (x, y)}
    result = train_run(
      run_splits, info["num_classes"], loss, head, rate, seed, settings[experiment]
    )
    if experiment in IMAGE_EXPERIMENTS:
      dataset = protocol.CIFAR["dataset"] if not smoke else "smoke"
    else:
      dataset = protocol.DATASET if not smoke else "smoke"
    record = {
      "edition": protocol.EDITION,
      "experiment": experiment,
      "stage": stage,
      "loss": loss,
      "interaction": head,
      "learning_rate": rate,
      "seed": seed,
      "dataset": dataset,
      "feature_key": info["feature_key"],
      "settings": settings[experiment],
      "software": software,
      **result,
    }
    if experiment in IMAGE_EXPERIMENTS:
      record.update({f"n_{s}": int(len(splits[s][1])) for s in splits})
    records.add(record)
    return record

  ran, start = 0, time.perf_counter()
  max_runs = options.get("max_runs")
  waiting = False
  while max_runs is None or ran < max_runs:
    planned = []
    for experiment in experiments:
      planned += planned_runs(records, [experiment], stages, settings[experiment])
    runnable = [t for t in planned if t[4] is not None]
    record = None
    for run in runnable:
      with records.claim((protocol.EDITION,) + run) as mine:
        if mine:
          record = train_and_record(run)
          break
    if record is None:
      if not planned or wait_left <= 0:
        break
      if not waiting:
        print(
          f"[waiting] {len(planned)} runs planned, none this process can run yet (held by other "
          f"processes, or seeds waiting for a sweep); reading the records every "
          f"{WAIT_POLL_SECONDS} s for at most {wait_left / 3600:.2f} h",
          file=sys.stderr,
          flush=True,
        )
      waiting = True
      nap = min(WAIT_POLL_SECONDS, wait_left)
      time.sleep(nap)
      wait_left -= nap
      records.refresh()
      continue
    waiting = False
    ran += 1
    print(
      f"[{ran} new, {len(runnable) - 1} known to do, {time.perf_counter() - start:.0f}s] "
      f"{record['experiment']} {record['stage']} {record['loss']} {record['interaction']} lr "
      f"{record['learning_rate']:g} seed {record['seed']}: ndcg_5 {record['ndcg_5']:.4f}, best "
      f"epoch {record['best_epoch']}/{record['epochs_run']}",
      file=sys.stderr,
      flush=True,
    )
  return records


# ---------------------------------------------------------------------------------------------
# The report.


def summarize(records, experiment, settings=None):
  """Per cell of the seeds stage of ``experiment``: the paired comparison with softmax + dot on
  the primary and secondary endpoints, with Holm over the cells and the minimum detectable
  effect. Returns ``(rows, family_size)``."""
  seeds = [r for r in records if r["experiment"] == experiment and r["stage"] == "seeds"]
  cells = {}
  for r in seeds:
    cells.setdefault((r["loss"], r["interaction"]), {})[r["seed"]] = r
  base = cells.get(protocol.BASELINE, {})
  rows = []
  for (loss, head), by_seed in cells.items():
    if (loss, head) == protocol.BASELINE:
      continue
    shared = sorted(set(by_seed) & set(base))
    if len(shared) < 2:
      continue
    row = {"loss": loss, "interaction": head, "seeds": shared, "metrics": {}}
    row["learning_rate"] = by_seed[shared[0]]["learning_rate"]
    for metric in (protocol.PRIMARY_ENDPOINT,) + protocol.SECONDARY_ENDPOINTS:
      interval, p = statistics_lib.paired_t_test(
        [by_seed[s][metric] for s in shared], [base[s][metric] for s in shared]
      )
      row["metrics"][metric] = {
        "interval": interval,
        "p": p,
        "paper": (
          protocol.paper_difference(metric, loss, head)
          if by_seed[shared[0]]["dataset"] == protocol.DATASET
          else None
        ),
        "mean": sum(by_seed[s][metric] for s in shared) / len(shared),
      }
    rows.append(row)
  family = len(rows)
  for metric in (protocol.PRIMARY_ENDPOINT,) + protocol.SECONDARY_ENDPOINTS:
    adjusted = statistics_lib.holm([row["metrics"][metric]["p"] for row in rows])
    for row, p in zip(rows, adjusted):
      entry = row["metrics"][metric]
      entry["holm_p"] = p
      n = entry["interval"].n
      entry["mde"] = statistics_lib.minimum_detectable_effect(
        entry["interval"].sd, n, protocol.ALPHA, protocol.POWER
      )
      entry["mde_first_step"] = statistics_lib.minimum_detectable_effect(
        entry["interval"].sd, n, protocol.ALPHA / max(family, 1), protocol.POWER
      )
  return rows, family


def completeness(records, experiment, settings):
  """Per cell of ``experiment`` (``settings``: the one its runs follow), what is done: a list of
  dicts with ``loss``, ``interaction``, ``sweep_done`` and ``sweep_planned`` (runs at the rates
  of the sweep's grid so far, times the tuning seeds), ``sweep_final`` (``False`` while a rate is
  missing, so a widening may still add rates), ``chosen`` (the sweep's rate or ``None``),
  ``seeds_done`` and ``seeds_planned`` (the evaluation seeds)."""
  rows = []
  for loss in settings["losses"]:
    for head in settings["heads"]:
      chosen, rates = sweep_choice(records, experiment, loss, head, settings)
      cell = select(records, experiment=experiment, loss=loss, interaction=head)
      sweep_done = sum(
        r["stage"] == "sweep"
        and r["seed"] in settings["tuning_seeds"]
        and any(math.isclose(r["learning_rate"], rate, rel_tol=1e-9) for rate in rates)
        for r in cell
      )
      seeds_done = len(
        {
          r["seed"]
          for r in cell
          if r["stage"] == "seeds" and r["seed"] in settings["evaluation_seeds"]
        }
      )
      rows.append(
        {
          "loss": loss,
          "interaction": head,
          "sweep_done": sweep_done,
          "sweep_planned": len(rates) * len(settings["tuning_seeds"]),
          "sweep_final": chosen is not None,
          "chosen": chosen,
          "seeds_done": seeds_done,
          "seeds_planned": len(settings["evaluation_seeds"]),
        }
      )
  return rows


def _experiment_settings(records, experiment):
  """The settings of the first record of ``experiment`` (a grid file holds one per experiment)."""
  return next(r["settings"] for r in records if r["experiment"] == experiment)


def _completeness_section(records, experiments):
  lines, done, planned, final = [], 0, 0, True
  table = ["| experiment | stage | runs done | runs planned |", "|---|---|---|---|"]
  cells = []
  for experiment in experiments:
    rows = completeness(records, experiment, _experiment_settings(records, experiment))
    sweep = (sum(r["sweep_done"] for r in rows), sum(r["sweep_planned"] for r in rows))
    seeds = (sum(r["seeds_done"] for r in rows), sum(r["seeds_planned"] for r in rows))
    open_sweep = not all(r["sweep_final"] for r in rows)
    final = final and not open_sweep
    table.append(f"| {experiment} | sweep | {sweep[0]} | {'>= ' if open_sweep else ''}{sweep[1]} |")
    table.append(f"| {experiment} | seeds | {seeds[0]} | {seeds[1]} |")
    done, planned = done + sweep[0] + seeds[0], planned + sweep[1] + seeds[1]
    cells += [f"#### {experiment}, per cell", ""]
    cells += ["| loss | head | sweep runs | chosen lr | seeds |", "|---|---|---|---|---|"]
    for r in rows:
      rate = "-" if r["chosen"] is None else f"{r['chosen']:g}"
      cells.append(
        f"| {r['loss']} | {r['interaction']} | {r['sweep_done']} / "
        f"{'' if r['sweep_final'] else '>= '}{r['sweep_planned']} | {rate} | "
        f"{r['seeds_done']} / {r['seeds_planned']} |"
      )
    cells.append("")
  if done >= planned and final:
    status = f"**Complete**: all {planned} planned runs of {', '.join(experiments)} are recorded."
  else:
    status = (
      f"**INCOMPLETE: {done} of {'at least ' if not final else ''}{planned} planned runs "
      f"recorded ({done / max(planned, 1):.0%}). Every figure below is provisional: cells with "
      "fewer seeds than planned, or with no seeds yet, are not the protocol's comparisons.**"
    )
  not_run = [e for e in EXPERIMENTS if e not in experiments]
  lines += ["## Completeness", "", status, ""] + table + [""]
  if not_run:
    lines += [f"Experiments of the protocol with no record: {', '.join(not_run)}.", ""]
  return lines + _software_lines(records) + cells


def _software_lines(records):
  """How many runs each software stack (``_common.software_versions``) and each commit ran."""
  stacks = collections.Counter(
    "Python {python}, TensorFlow {tensorflow}, {keras}, NumPy {numpy}".format(**r["software"])
    for r in records
    if "software" in r
  )
  commits = collections.Counter(r["software"]["commit"] for r in records if "software" in r)
  lines = [f"Software: {n} run(s) on {stack}." for stack, n in sorted(stacks.items())]
  lines += [
    f"Code: {n} run(s) at commit {commit}." for commit, n in sorted(commits.items(), key=str)
  ]
  missing = sum("software" not in r for r in records)
  if missing:
    lines.append(
      f"{missing} run(s) carry no software versions (recorded before the grid recorded them)."
    )
  return lines + [""]


def expected_loss_configs(losses):
  """``{loss: get_config()}`` (JSON-normalised, as runs record it) of every loss of ``losses``,
  built with the protocol's ``LOSS_KWARGS``: the pre-declared configurations."""
  import grid_store as grid  # pylint: disable=g-import-not-at-top

  return {loss: grid.recorded_loss_config(loss, protocol.LOSS_KWARGS.get(loss)) for loss in losses}


def reachable_rates(settings):
  """The rates a sweep following ``settings`` can run: its grid and up to ``max_widenings``
  rates beyond each edge (:func:`grid_protocol.widened`)."""
  rates = set(settings["learning_rates"])
  for edge in ("low", "high"):
    grid = sorted(settings["learning_rates"])
    for _ in range(settings["max_widenings"]):
      grid = protocol.widened(grid, 0 if edge == "low" else len(grid) - 1)
      rates.update(grid)
  return sorted(rates)


def _describe_setting(field, declared, recorded):
  if field == "max_epochs" and recorded > declared and recorded % declared == 0:
    return (
      f"epoch budget {recorded} instead of {declared} (x{recorded // declared}, the convergence "
      "rule's 'train longer')"
    )
  if isinstance(declared, list) and isinstance(recorded, list):
    missing = [v for v in declared if v not in recorded]
    added = [v for v in recorded if v not in declared]
    parts = ([f"without {missing}"] if missing else []) + ([f"with {added} added"] if added else [])
    return f"`{field}` {recorded}, pre-registered {declared}" + (
      f" ({'; '.join(parts)})" if parts else " (other order)"
    )
  return f"`{field}` {recorded!r}, pre-registered {declared!r}"


def protocol_deviations(records, registered_losses=None, loss_configs=None, declared=None):
  """The report's "Deviations from the protocol", as lines of text (empty: none).

  Found in the records, per experiment: settings that differ from what the protocol declares
  (:func:`grid_settings`; smoke records are compared with ``SMOKE``), sweep rates outside
  :func:`reachable_rates`, seeds-stage runs at another rate than the sweep chose, seeds outside
  the declared ones, loss configurations other than ``loss_configs`` (default
  :func:`expected_loss_configs`), the convergence rule unmet on a finished stage, and planned
  runs without a record; then the hand-declared ``declared`` (default
  ``grid_protocol.DEVIATIONS``), each ``(date, experiment, what, why)``.

  Args:
    records: the records (a list of dicts).
    registered_losses: loss names the protocol's Top-K rule reads (default
      ``tfrank4class.losses.names()``).
    loss_configs: ``{loss: config}`` the runs should have recorded.
    declared: the hand-declared deviations.
  """
  if registered_losses is None:
    from tfrank4class import losses as losses_lib  # pylint: disable=g-import-not-at-top

    registered_losses = losses_lib.names()
  declared = protocol.DEVIATIONS if declared is None else declared
  lines = []
  experiments = [e for e in EXPERIMENTS if any(r["experiment"] == e for r in records)]
  if "clean" not in experiments and records:
    lines.append("clean: the primary experiment has no record in these records.")
  for experiment in experiments:
    runs = [r for r in records if r["experiment"] == experiment]
    variants = {json.dumps(r["settings"], sort_keys=True) for r in runs}
    if len(variants) > 1:
      lines.append(f"{experiment}: the runs follow {len(variants)} different settings.")
    settings = runs[0]["settings"]
    expected = grid_settings(
      registered_losses, smoke=bool(settings.get("smoke")), experiment=experiment
    )
    for field in sorted(set(expected) | set(settings)):
      if settings.get(field) != expected.get(field):
        lines.append(
          f"{experiment}: " + _describe_setting(field, expected.get(field), settings.get(field))
        )
    allowed = reachable_rates(expected)
    outside = sorted(
      {
        (r["loss"], r["interaction"], r["learning_rate"])
        for r in runs
        if r["stage"] == "sweep"
        and not any(math.isclose(r["learning_rate"], a, rel_tol=1e-9) for a in allowed)
      }
    )
    for loss, head, rate in outside:
      lines.append(
        f"{experiment}: sweep of {loss} + {head} at lr {rate:g}, outside the pre-registered "
        f"rates {[f'{a:g}' for a in allowed]}."
      )
    for stage, seeds in (("sweep", "tuning_seeds"), ("seeds", "evaluation_seeds")):
      extra = sorted({r["seed"] for r in runs if r["stage"] == stage} - set(expected[seeds]))
      if extra:
        lines.append(
          f"{experiment}: {stage} runs with seeds {extra}, not among the declared "
          f"{expected[seeds]}."
        )
    rows = completeness(records, experiment, settings)
    chosen = {(r["loss"], r["interaction"]): r["chosen"] for r in rows}
    for r in runs:
      rate = chosen.get((r["loss"], r["interaction"]))
      if (
        r["stage"] == "seeds"
        and rate is not None
        and not math.isclose(r["learning_rate"], rate, rel_tol=1e-9)
      ):
        lines.append(
          f"{experiment}: {r['loss']} + {r['interaction']} seed {r['seed']} ran at lr "
          f"{r['learning_rate']:g}; its sweep chose {rate:g}."
        )
    configs = (
      loss_configs
      if loss_configs is not None
      else expected_loss_configs(sorted({r["loss"] for r in runs}))
    )
    seen = set()
    for r in runs:
      recorded = r.get("loss_config")
      if r["loss"] in configs and recorded is not None and r["loss"] not in seen:
        if recorded != configs[r["loss"]]:
          seen.add(r["loss"])
          changed = sorted(
            k
            for k in set(recorded) | set(configs[r["loss"]])
            if recorded.get(k) != configs[r["loss"]].get(k)
          )
          lines.append(
            f"{experiment}: {r['loss']} ran with another configuration than the pre-declared "
            "one ("
            + ", ".join(
              f"{k}: {recorded.get(k)!r} instead of {configs[r['loss']].get(k)!r}" for k in changed
            )
            + ")."
          )
    for stage in STAGES:
      stage_done = all(
        (r["sweep_final"] and r["sweep_done"] >= r["sweep_planned"])
        if stage == "sweep"
        else r["seeds_done"] >= r["seeds_planned"]
        for r in rows
      )
      stage_runs = [r for r in runs if r["stage"] == stage]
      if stage == "sweep":
        stage_runs = [r for r in stage_runs if _is_chosen(r, chosen)]
      if stage_done and stage_runs:
        fraction = statistics_lib.converged_fraction(stage_runs)
        if fraction < protocol.CONVERGED_FRACTION:
          lines.append(
            f"{experiment}: the convergence rule is not met on the {stage} stage (best epoch "
            f"before the last in {fraction:.0%} of its runs, rule >= "
            f"{protocol.CONVERGED_FRACTION:.0%}) and the stage has not been rerun with the "
            "budget doubled."
          )
    missing_sweep = sum(max(0, r["sweep_planned"] - r["sweep_done"]) for r in rows)
    missing_seeds = sum(r["seeds_planned"] - r["seeds_done"] for r in rows)
    short = [r for r in rows if 0 < r["seeds_done"] < r["seeds_planned"]]
    if missing_sweep or missing_seeds:
      lines.append(
        f"{experiment}: runs missing: {missing_sweep} sweep run(s) and {missing_seeds} seeds "
        f"run(s) of the planned ones have no record"
        + (
          "; cells with fewer seeds than the "
          f"{rows[0]['seeds_planned']} declared: "
          + ", ".join(f"{r['loss']} + {r['interaction']} ({r['seeds_done']})" for r in short)
          if short
          else ""
        )
        + "."
      )
  for entry in declared:
    if len(entry) != 4:
      raise ValueError(
        f"A declared deviation must be (date, experiment, what, why), got {entry!r}."
      )
    date, experiment, what, why = entry
    lines.append(f"{experiment} ({date}, declared): {what}. Why: {why}")
  return lines


def _deviations_section(records, registered_losses=None, loss_configs=None, declared=None):
  found = protocol_deviations(records, registered_losses, loss_configs, declared)
  lines = ["## Deviations from the protocol", ""]
  if not found:
    return lines + ["None.", ""]
  return lines + [f"- {line}" for line in found] + [""]


def _verdict(entry):
  if entry["holm_p"] >= protocol.ALPHA:
    return "no difference detected"
  return "higher" if entry["interval"].mean > 0 else "lower"


README_HEADER = (
  "| experiment | runs | softmax + dot: Top-1 / NDCG@5 | other cells on NDCG@5 (Holm): higher "
  "/ no difference / lower | best other cell: Δ NDCG@5 [95 % CI], Holm p | use |",
  "|---|---|---|---|---|---|",
)


def recommendation(records, experiment, rows=None):
  """The README's summary of ``experiment``, recomputed from its records, or ``None`` before its
  baseline has seeds.

  Returns a dict: ``baseline`` (mean Top-1 and NDCG@5 of softmax + dot over its seeds),
  ``counts`` (cells other than the baseline by their Holm verdict on NDCG@5: ``higher``,
  ``no difference detected``, ``lower``), ``best`` (the cell with the highest mean NDCG@5, with
  its paired interval and Holm p), ``use`` (softmax + dot unless some cell is detectably higher
  on NDCG@5 after Holm; then the one of those with the largest mean difference), ``done`` and
  ``planned`` runs (:func:`completeness`) and ``train_hours`` (the records' ``train_seconds``).
  ``rows``: :func:`summarize`'s rows of ``experiment`` when the caller has them already.
  """
  if rows is None:
    rows, _ = summarize(records, experiment)
  base = select(
    records,
    experiment=experiment,
    stage="seeds",
    loss=protocol.BASELINE[0],
    interaction=protocol.BASELINE[1],
  )
  if not base or not rows:
    return None
  verdicts = [_verdict(row["metrics"][protocol.PRIMARY_ENDPOINT]) for row in rows]
  best = max(rows, key=lambda row: row["metrics"][protocol.PRIMARY_ENDPOINT]["mean"])
  higher = [row for row, v in zip(rows, verdicts) if v == "higher"]
  use = protocol.BASELINE
  if higher:
    top = max(higher, key=lambda row: row["metrics"][protocol.PRIMARY_ENDPOINT]["interval"].mean)
    use = (top["loss"], top["interaction"])
  cells = completeness(records, experiment, _experiment_settings(records, experiment))
  runs = [r for r in records if r["experiment"] == experiment]
  return {
    "experiment": experiment,
    "baseline": {m: sum(r[m] for r in base) / len(base) for m in ("top_1", "ndcg_5")},
    "counts": {v: verdicts.count(v) for v in ("higher", "no difference detected", "lower")},
    "best": {
      "cell": (best["loss"], best["interaction"]),
      "interval": best["metrics"][protocol.PRIMARY_ENDPOINT]["interval"],
      "holm_p": best["metrics"][protocol.PRIMARY_ENDPOINT]["holm_p"],
    },
    "use": use,
    "done": len(runs),
    "planned": sum(c["sweep_planned"] + c["seeds_planned"] for c in cells),
    "complete": all(
      c["sweep_final"]
      and c["sweep_done"] >= c["sweep_planned"]
      and c["seeds_done"] >= c["seeds_planned"]
      for c in cells
    ),
    "train_hours": sum(r.get("train_seconds", 0.0) for r in runs) / 3600.0,
  }


def readme_table(records, summaries=None):
  """The README's table of the second edition (``README_HEADER`` and one row per experiment with
  a :func:`recommendation`), as lines of markdown. ``summaries``: ``{experiment: rows of
  summarize}`` already computed."""
  lines = list(README_HEADER)
  for experiment in EXPERIMENTS:
    summary = recommendation(records, experiment, (summaries or {}).get(experiment))
    if summary is None:
      continue
    i = summary["best"]["interval"]
    status = "complete" if summary["complete"] else "INCOMPLETE"
    lines.append(
      f"| {experiment} | {summary['done']} of {summary['planned']} ({status}), "
      f"{summary['train_hours']:.1f} h of training | {summary['baseline']['top_1']:.4f} / "
      f"{summary['baseline']['ndcg_5']:.4f} | "
      + " / ".join(str(n) for n in summary["counts"].values())
      + f" | {' + '.join(summary['best']['cell'])}: {i.mean:+.4f} [{i.low:+.4f}, {i.high:+.4f}]"
      f", Holm p {summary['best']['holm_p']:.3g} | {' + '.join(summary['use'])} |"
    )
  return lines


def _signed(value):
  return "-" if value is None else f"{value:+.4f}"


def write_report(
  records, md_path, png_path, registered_losses=None, loss_configs=None, declared=None
):
  """Writes the markdown report and the forest plot of ``records`` (a list of dicts).

  The report opens with how complete the grid is and with its deviations from the protocol
  (:func:`protocol_deviations`, which takes ``registered_losses``, ``loss_configs`` and
  ``declared``), then one section per experiment.
  """
  experiments = [e for e in EXPERIMENTS if any(r["experiment"] == e for r in records)]
  lines = [
    "# Which loss and which head? Evidence grid, second edition",
    "",
    'Protocol: docs/evidence-grid.md, "Second edition: protocol" (pre-registered). Records: '
    f"{len(records)} runs. Every cell is compared with softmax + dot over the same evaluation "
    "seeds (paired 95 % t interval); verdicts use Holm-adjusted p-values over the cells of each "
    "experiment and endpoint (alpha 0.05). MDE: the difference detectable with power 0.8 at "
    "that cell's seed count and SD of paired differences (alpha 0.05; in brackets at the "
    "first Holm step, alpha / family size). Paper: Rank4Class Table 7 (BERT, single runs).",
    "",
  ]
  lines += _completeness_section(records, experiments)
  lines += _deviations_section(records, registered_losses, loss_configs, declared)
  summaries = {experiment: summarize(records, experiment) for experiment in experiments}
  lines += ["## Summary (the README's table, recomputed from these records)", ""]
  lines += readme_table(records, {e: rows for e, (rows, _) in summaries.items()}) + [""]
  plots = []
  for experiment in experiments:
    rows, family = summaries[experiment]
    lines += [f"## {experiment}", ""]
    chosen = _chosen_rates(records, experiment)
    checked = {
      "seeds": [r for r in records if r["experiment"] == experiment and r["stage"] == "seeds"],
      "sweep at the chosen rates": [
        r
        for r in records
        if r["experiment"] == experiment and r["stage"] == "sweep" and _is_chosen(r, chosen)
      ],
    }
    for name, runs in checked.items():
      if runs:
        fraction = statistics_lib.converged_fraction(runs)
        ok = "met" if fraction >= protocol.CONVERGED_FRACTION else "NOT met: train longer"
        lines.append(
          f"- Convergence, {name}: best epoch before the last in {fraction:.0%} of "
          f"{len(runs)} runs (rule: >= {protocol.CONVERGED_FRACTION:.0%}, {ok})."
        )
    at_budget = [
      r
      for r in records
      if r["experiment"] == experiment
      and r["stage"] == "sweep"
      and r["best_epoch"] == r["epochs_run"]
    ]
    lines.append(
      f"- Sweep runs stopped by the epoch budget while still improving (their rate may be "
      f"under-rated): {len(at_budget)}"
      + "".join(f"; {r['loss']} + {r['interaction']} at {r['learning_rate']:g}" for r in at_budget)
      + "."
    )
    base = [
      r
      for r in records
      if r["experiment"] == experiment
      and r["stage"] == "seeds"
      and (r["loss"], r["interaction"]) == protocol.BASELINE
    ]
    if base:
      means = ", ".join(
        f"{METRIC_NAMES[m]} {sum(r[m] for r in base) / len(base):.4f}" for m in METRICS
      )
      lines += ["", f"softmax + dot (lr {base[0]['learning_rate']:g}, {len(base)} seeds): {means}."]
    lines += ["", f"Holm family: {family} cells per endpoint.", ""]
    for metric in (protocol.PRIMARY_ENDPOINT,) + protocol.SECONDARY_ENDPOINTS:
      lines += [
        f"### Δ {METRIC_NAMES[metric]} against softmax + dot",
        "",
        "| loss | head | lr | seeds | mean | Δ [95 % CI] | p | Holm p | verdict | MDE | paper Δ |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
      ]
      for row in rows:
        e = row["metrics"][metric]
        i = e["interval"]
        lines.append(
          f"| {row['loss']} | {row['interaction']} | {row['learning_rate']:g} | "
          f"{len(row['seeds'])} | {e['mean']:.4f} | {i.mean:+.4f} [{i.low:+.4f}, {i.high:+.4f}] "
          f"| {e['p']:.3g} | {e['holm_p']:.3g} | {_verdict(e)} | {e['mde']:.4f} "
          f"({e['mde_first_step']:.4f}) | {_signed(e['paper'])} |"
        )
      lines.append("")
    lines += _sweep_section(records, experiment) + _slack_section(records, experiment)
    plots.append((experiment, rows))
  lines += [
    "## Appendix: first edition",
    "",
    "The first edition's cells (frozen features of a softmax-trained encoder on GoEmotions, "
    "CIFAR-10 and MIND; end to end on GoEmotions and CIFAR-10) are in "
    "`benchmarks/out/rank4class_grid.md`, with their known limits in docs/evidence-grid.md.",
    "",
  ]
  os.makedirs(os.path.dirname(os.path.abspath(md_path)), exist_ok=True)
  with open(md_path, "w", encoding="utf-8") as f:
    f.write("\n".join(lines))
  _forest_plot(plots, png_path)


def _sweep_means(records, experiment):
  """``{(loss, head): {rate: mean validation monitor over the tuning seeds}}``."""
  cells = {}
  for r in records:
    if r["experiment"] == experiment and r["stage"] == "sweep":
      by_rate = cells.setdefault((r["loss"], r["interaction"]), {})
      by_rate.setdefault(r["learning_rate"], []).append(r["validation"][protocol.MONITOR])
  return {
    cell: {rate: sum(v) / len(v) for rate, v in sorted(by_rate.items())}
    for cell, by_rate in cells.items()
  }


def _chosen_rates(records, experiment):
  """``{(loss, head): the rate its sweep chose (:func:`sweep_choice`), or None while a rate of
  its sweep has no record}``."""
  settings = _experiment_settings(records, experiment)
  return {
    (loss, head): sweep_choice(records, experiment, loss, head, settings)[0]
    for loss in settings["losses"]
    for head in settings["heads"]
  }


def _is_chosen(record, chosen):
  """Whether ``record`` ran at the rate its cell's sweep chose (``chosen``: ``{(loss, head):
  rate or None}``)."""
  rate = chosen.get((record["loss"], record["interaction"]))
  return rate is not None and math.isclose(record["learning_rate"], rate, rel_tol=1e-9)


def _sweep_section(records, experiment):
  """The sweep's means per cell and the rate chosen; a choice at an edge of the swept rates (the
  widenings ran out: ``sweep_choice`` widens a grid whose best sits at an edge) is flagged, since
  a rate beyond it, untried, might have done better."""
  chosen = _chosen_rates(records, experiment)
  widenings = _experiment_settings(records, experiment)["max_widenings"]
  lines = ["### Learning-rate sweep (mean validation NDCG@5 over the tuning seeds)", ""]
  at_edge = []
  for (loss, head), means in _sweep_means(records, experiment).items():
    text = ", ".join(f"{rate:g}: {m:.4f}" for rate, m in means.items())
    rate = chosen.get((loss, head))
    outcome = "sweep still open, no rate chosen" if rate is None else f"chosen {rate:g}"
    if rate is not None and rate in (min(means), max(means)):
      side = "largest" if rate == max(means) else "smallest"
      outcome += f", the {side} rate swept (after {widenings} widenings, the cap)"
      at_edge.append(f"{loss} + {head}")
    lines.append(f"- {loss} + {head}: {text}; {outcome}")
  if at_edge:
    lines += [
      "",
      f"Chosen at an edge of the swept rates: {', '.join(at_edge)}. The protocol widens a grid "
      f"at most {widenings} times, so a rate beyond the edge was not tried and these cells may "
      "be tuned short of their best.",
    ]
  return lines + [""]


def _slack_section(records, experiment):
  runs = [r for r in records if r["experiment"] == experiment and r["stage"] == "seeds"]
  cells = {}
  for r in runs:
    cells.setdefault((r["loss"], r["interaction"]), []).append(r["bruch_slack"])
  lines = [
    "### Bruch et al.: the slack CE - (-log MRR) of the test scores",
    "",
    "`p_y <= 1/rank_y` and `CE >= -log MRR` hold for any scores, so they are not evidence; the "
    "slack says how far a loss's scores, read as a softmax, are from the tightest "
    "cross-entropy its ranking allows (mean over seeds).",
    "",
    "| loss | head | slack |",
    "|---|---|---|",
  ]
  for (loss, head), values in cells.items():
    lines.append(f"| {loss} | {head} | {sum(values) / len(values):.3f} |")
  return lines + [""]


def _forest_plot(plots, png_path):
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  # experiments without a seeds-stage comparison yet have nothing to draw
  panels = [(e, rows, m) for e, rows in plots if rows for m in ("ndcg_5", "top_1")]
  if not panels:
    return
  height = max(3.0, 0.3 * max(len(rows) for _, rows, _ in panels) + 1.5)
  fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), height), squeeze=False)
  for ax, (experiment, rows, metric) in zip(axes[0], panels):
    for y, row in enumerate(rows):
      e = row["metrics"][metric]
      i = e["interval"]
      color = (
        "tab:gray" if e["holm_p"] >= protocol.ALPHA else ("tab:blue" if i.mean > 0 else "tab:red")
      )
      ax.errorbar(i.mean, y, xerr=[[i.mean - i.low], [i.high - i.mean]], fmt="o", color=color)
      if e["paper"] is not None:
        ax.plot(e["paper"], y, "x", color="black")
    ax.axvline(0.0, color="black", linewidth=0.8)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{r['loss']} + {r['interaction']}" for r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(f"Δ {METRIC_NAMES[metric]} vs softmax + dot (95 % CI; x: paper)")
    ax.set_title(experiment)
  fig.tight_layout()
  os.makedirs(os.path.dirname(os.path.abspath(png_path)), exist_ok=True)
  fig.savefig(png_path, dpi=110)
  plt.close(fig)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  _common.setup_tensorflow(FLAGS.threads)
  if not FLAGS.report_only:
    run_grid(
      FLAGS.output,
      FLAGS.work_dir,
      FLAGS.data_dir,
      experiments=FLAGS.experiments,
      stages=FLAGS.stages,
      smoke=FLAGS.smoke,
      max_epochs=FLAGS.max_epochs,
      max_runs=FLAGS.max_runs,
      wait_hours=FLAGS.wait_hours,
    )
  write_report(open_records(FLAGS.output).records, FLAGS.report_md, FLAGS.report_png)


if __name__ == "__main__":
  from tfrank4class.train import cli  # pylint: disable=g-import-not-at-top

  define_flags()
  cli.run(main, "rank4class_grid_v2.py")
