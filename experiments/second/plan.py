"""What the evidence grid runs and what it records: settings, the record schema, the schedule.

The grid (:mod:`experiments.second.grid`) runs the pre-registered protocol of
:mod:`experiments.second.protocol`
on frozen all-MiniLM-L6-v2 sentence embeddings of GoEmotions (experiments ``clean``,
``noise20``, ``noise40``) and end to end on CIFAR-10 images with augmentation (``cifar10_e2e``:
``protocol.CIFAR``, the image encoder and head trained per run), each in two stages:

1. ``sweep``: every loss x head at every learning rate of the sweep (tuning seeds), with early
   stopping on validation NDCG@5; a cell whose best rate sits at an edge of the grid gets one
   more rate beyond it (at most ``max_widenings`` times, :func:`sweep_choice`);
2. ``seeds``: every loss x head at its chosen rate with every evaluation seed.

:func:`grid_settings` gives the settings every run of an experiment records (checked on resume);
every finished run is one JSON record (:func:`check_record`; :data:`KEY_FIELDS` identify it);
:func:`planned_runs` lists the runs still to do, in order.
"""

import json
import math

from experiments import store, training
from experiments.second import protocol
from tfrank4class import checks

KEY_FIELDS = ("edition", "experiment", "stage", "loss", "interaction", "learning_rate", "seed")
RECORD_FIELDS = (
  KEY_FIELDS + training.METRICS + ("best_epoch", "epochs_run", "validation", "settings")
)
STAGES = ("sweep", "seeds")
#: Experiment name -> fraction of noisy training labels (``protocol.LABEL_NOISE``); the
#: experiments of ``IMAGE_EXPERIMENTS`` train the whole image model (``protocol.CIFAR``).
EXPERIMENTS = {
  "clean": 0.0,
  **{f"noise{round(100 * p)}": p for p in protocol.LABEL_NOISE},
  "cifar10_e2e": 0.0,
}
IMAGE_EXPERIMENTS = ("cifar10_e2e",)
#: The smoke configuration (``--smoke``): random features, 2 losses, 1 head, 2 seeds, 2 learning
#: rates, 2 epochs.
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
#: The smoke configuration of ``cifar10_e2e``: a few real images per class (or random ones without
#: a data folder), a one-layer ``small_cnn`` in place of the VGG16 (building and tracing a 13-layer
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
  """Returns ``record`` if it is a valid record of the grid, else raises ``ValueError``
  naming the key, the value and what is allowed."""
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
  for k in training.METRICS:
    value = checks.check_float(k, record[k])
    if not 0.0 <= value <= 1.0:
      raise ValueError(f"Record key `{k}` must be a test-split metric in [0, 1], got {value!r}.")
  return record


def open_records(path):
  """The grid's records in ``path`` (a :class:`experiments.store.RecordStore` keyed by
  ``KEY_FIELDS``, each record checked by :func:`check_record`)."""
  return store.RecordStore(path, KEY_FIELDS, check_record)


def select(records, **fields):
  """The records whose ``fields`` have the given values."""
  return [r for r in records if all(r[k] == v for k, v in fields.items())]


def baseline_seeds(records, experiment):
  """The seeds runs of ``experiment``'s baseline cell (``protocol.BASELINE``, softmax + dot)."""
  loss, head = protocol.BASELINE
  return select(records, experiment=experiment, stage="seeds", loss=loss, interaction=head)


def experiment_settings(records, experiment):
  """The settings of the first record of ``experiment`` (a grid file holds one per experiment)."""
  return next(r["settings"] for r in records if r["experiment"] == experiment)


def sweep_choice(records, experiment, loss, head, settings):
  """``(chosen rate or None, rates to run)`` of one cell from its sweep ``records`` so far (a
  list of records).

  The rates start at ``settings["learning_rates"]``; while the best (highest mean validation
  monitor over the tuning seeds, the smaller rate on a tie) sits at an edge and fewer than
  ``max_widenings`` rates were added, the grid is :func:`experiments.second.protocol.widened`.
  ``None`` while some rate of the current grid has no record for every tuning seed.
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
