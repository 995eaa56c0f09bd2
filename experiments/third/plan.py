"""What the third edition runs, in which order, and what a record holds.

Each experiment of ``protocol.EXPERIMENTS`` runs in two stages:

1. ``sweep`` (tuning seed 1000): every cell x head at every learning rate x scale of its grid
   (``protocol.RATES`` x ``protocol.scale_grid``; softmax has no scale). The choice
   is made per endpoint (validation Top-1 and Top-5, each at its own best epoch; ties to the
   smaller rate, then to the scale nearer s0). When a choice sits at an edge of its rates (or
   scales), one more point beyond that edge is run with the other parameter at its chosen value,
   at most ``max_widenings`` times per parameter (:func:`choice`); a choice still at an edge of
   what ran is flagged in the report (:func:`edges`). A noise experiment keeps, per
   endpoint, the scale its clean experiment chose and tunes the rate only.
2. ``seeds``: the evaluation seeds at each endpoint's chosen configuration (one set when both
   endpoints chose the same). When fewer than ``CONVERGED_FRACTION`` of a configuration's seeds
   runs stopped by patience, its seeds run again at ``RERUN_FACTOR`` times the budget (once).

A run is identified by :data:`KEY_FIELDS`; :func:`planned_runs` lists the runs still to do, in
order, a run whose configuration is not known yet (its sweep is unfinished) with rate ``None``.
"""

import json
import math

from experiments import store
from experiments.third import protocol
from tfrank4class import checks

P = protocol
KEY_FIELDS = (
  "edition",
  "experiment",
  "stage",
  "cell",
  "head",
  "learning_rate",
  "scale",
  "seed",
  "max_epochs",
)
RECORD_FIELDS = KEY_FIELDS + (
  "dataset",
  "epochs_run",
  "stopped_by",
  "best_epoch",
  "validation",
  "test",
  "settings",
  "device",
)
STAGES = ("sweep", "seeds")
#: The smoke configuration: Gaussian features of 10 classes in 5 groups of 2, 2 cells (softmax
#: and pairwise logistic, the quickest to trace of the tuned losses), 1 rate,
#: no widening, 2 seeds, 2 epochs.
SMOKE = {
  "sizes": {"train": 256, "validation": 96, "test": 96},
  "feature_dim": 16,
  "num_classes": 10,
  "groups": [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]],
  "cells": ["softmax", "pairwise_logistic"],
  "rates": [0.01],
  "max_widenings": 0,
  "evaluation_seeds": [0, 1],
  "max_epochs": 2,
  "patience": 1,
  "batch_size": 64,
}
SMOKE_EXPERIMENTS = {
  "smoke_clean": {**P.EXPERIMENTS["clinc150_clean"], "dataset": "smoke", "cells": SMOKE["cells"]},
  "smoke_group40": {
    **P.EXPERIMENTS["clinc150_domain40"],
    "dataset": "smoke",
    "cells": SMOKE["cells"],
    "scales_from": "smoke_clean",
  },
}


def experiments(smoke=False):
  """The experiments (name -> design) of the protocol or of the smoke configuration."""
  return SMOKE_EXPERIMENTS if smoke else P.EXPERIMENTS


def _round(value):
  return None if value is None else float(f"{value:.6g}")


def settings(experiment, smoke=False, max_epochs=None):
  """The settings every run of ``experiment`` records (checked on resume)."""
  design = experiments(smoke)[experiment]
  found = {
    **design,
    "rates": [_round(r) for r in (SMOKE["rates"] if smoke else P.RATES)],
    "max_widenings": SMOKE["max_widenings"] if smoke else P.MAX_WIDENINGS,
    "tuning_seed": P.TUNING_SEED,
    "evaluation_seeds": list(SMOKE["evaluation_seeds"] if smoke else P.EVALUATION_SEEDS),
    "max_epochs": max_epochs or (SMOKE["max_epochs"] if smoke else P.MAX_EPOCHS),
    "patience": SMOKE["patience"] if smoke else P.PATIENCE,
    "batch_size": SMOKE["batch_size"] if smoke else P.BATCH_SIZE,
    "optimizer": "adam",
    "smoke": smoke,
  }
  return json.loads(json.dumps(found))


def check_record(record):
  """Returns ``record`` if it is a valid third-edition record, else raises ``ValueError``."""
  if not isinstance(record, dict):
    raise ValueError(f"A record must be a JSON object, got {record!r}.")
  missing = [k for k in RECORD_FIELDS if k not in record]
  if missing:
    raise ValueError(f"The record {record.get('experiment')!r} lacks {missing}.")
  checks.check_choice("edition", record["edition"], (P.EDITION,))
  checks.check_choice("stage", record["stage"], STAGES)
  checks.check_choice("cell", record["cell"], tuple(P.CELLS))
  checks.check_choice("head", record["head"], tuple(P.HEADS))
  checks.check_choice("stopped_by", record["stopped_by"], ("patience", "budget"))
  epochs = checks.check_int("epochs_run", record["epochs_run"], minimum=1)
  if epochs > record["max_epochs"]:
    raise ValueError(f"`epochs_run` {epochs} exceeds `max_epochs` {record['max_epochs']}.")
  return record


def open_records(path):
  """The records in ``path`` (an :class:`experiments.store.RecordStore`)."""
  return store.RecordStore(path, KEY_FIELDS, check_record)


def select(records, **fields):
  """The records whose ``fields`` have the given values."""
  return [r for r in records if all(r[k] == v for k, v in fields.items())]


def _sweep_results(records, experiment, cell, head):
  """``{(rate, scale): validation dict}`` of the sweep runs of one cell."""
  found = select(records, experiment=experiment, stage="sweep", cell=cell, head=head)
  return {(r["learning_rate"], r["scale"]): r["validation"] for r in found}


def _beyond(values, chosen, factor):
  """The value one ``factor`` beyond the edge ``chosen`` sits at, or None inside the grid."""
  if chosen == min(values):
    return _round(chosen / factor)
  if chosen == max(values):
    return _round(chosen * factor)
  return None


def choice(done, rates, scales, endpoint, s0, tune_scale, max_widenings):
  """``(chosen (rate, scale) or None, points still to run)`` of one cell and ``endpoint``.

  ``done``: ``{(rate, scale): validation dict}``; ``rates``, ``scales``: the starting grid.
  """
  rates, scales, points = list(rates), list(scales), [(r, s) for r in rates for s in scales]
  widened = {"rate": 0, "scale": 0}

  def order(point):
    value = done[point].get(endpoint, -math.inf)
    nearness = -abs(math.log(point[1] / s0)) if point[1] is not None else 0.0
    return (value, -point[0], nearness)

  while True:
    missing = [p for p in points if p not in done]
    if missing:
      return None, missing
    rate, scale = max(points, key=order)
    new_rate = _beyond(rates, rate, P.RATE_FACTOR)
    if new_rate is not None and widened["rate"] < max_widenings:
      rates.append(new_rate)
      points.append((new_rate, scale))
      widened["rate"] += 1
      continue
    new_scale = _beyond(scales, scale, P.SCALE_FACTOR) if tune_scale else None
    if new_scale is not None and widened["scale"] < max_widenings:
      scales.append(new_scale)
      points.append((rate, new_scale))
      widened["scale"] += 1
      continue
    return (rate, scale), []


def cell_choice(records, experiment, cell, head, endpoint, smoke=False):
  """:func:`choice` of one cell of ``experiment`` from ``records`` (a list)."""
  found = settings(experiment, smoke)
  s0 = P.CELLS[cell][3]
  if found["scales_from"] is None:
    scales, tune = [_round(s) for s in P.scale_grid(cell)], s0 is not None
  else:
    clean, _ = cell_choice(records, found["scales_from"], cell, head, endpoint, smoke)
    if clean is None:
      return None, []
    scales, tune = [clean[1]], False
  done = _sweep_results(records, experiment, cell, head)
  return choice(done, found["rates"], scales, endpoint, s0, tune, found["max_widenings"])


def edges(records, experiment, cell, head, endpoint, smoke=False):
  """``[(parameter, value, "smallest" or "largest")]``: where the configuration ``endpoint``
  chose for a cell sits at an edge of the learning rates (or of the tuned scales) its sweep ran,
  so after the widening :func:`choice` allows; the report flags them."""
  config, _ = cell_choice(records, experiment, cell, head, endpoint, smoke)
  if config is None:
    return []
  done = _sweep_results(records, experiment, cell, head)
  tuned = settings(experiment, smoke)["scales_from"] is None and P.CELLS[cell][3] is not None
  found = []
  for index, parameter in enumerate(("rate", "scale")):
    run = sorted({point[index] for point in done})
    if len(run) < 2 or (parameter == "scale" and not tuned):
      continue
    if config[index] in (run[0], run[-1]):
      found.append((parameter, config[index], "smallest" if config[index] == run[0] else "largest"))
  return found


def _seeds_todo(records, experiment, cell, head, config, found):
  """The seeds runs still to do at ``config``, with the rerun at a longer budget if needed."""
  rate, scale = config
  budget, todo = found["max_epochs"], []
  for _ in range(2):
    runs = select(
      records,
      experiment=experiment,
      stage="seeds",
      cell=cell,
      head=head,
      learning_rate=rate,
      scale=scale,
      max_epochs=budget,
    )
    seeds = {r["seed"] for r in runs}
    todo = [s for s in found["evaluation_seeds"] if s not in seeds]
    if todo:
      return [(experiment, "seeds", cell, head, rate, scale, s, budget) for s in todo]
    converged = sum(r["stopped_by"] == "patience" for r in runs) / len(runs)
    if converged >= P.CONVERGED_FRACTION:
      return []
    budget *= P.RERUN_FACTOR
  return []


def planned_runs(records, names, smoke=False, max_epochs=None):
  """The runs still to do for the experiments ``names``, in order, as key tuples without the
  edition: ``(experiment, stage, cell, head, rate, scale, seed, max_epochs)``."""
  records = records.records if hasattr(records, "records") else records
  todo = []
  for experiment in names:
    found = settings(experiment, smoke, max_epochs)
    cells = [(c, h) for c in found["cells"] for h in found["heads"]]
    for cell, head in cells:
      points = set()
      for endpoint in P.PRIMARY_ENDPOINTS:
        _, missing = cell_choice(records, experiment, cell, head, endpoint, smoke)
        points.update(missing)
      for rate, scale in sorted(points, key=lambda p: (p[0], p[1] or 0.0)):
        todo.append(
          (experiment, "sweep", cell, head, rate, scale, P.TUNING_SEED, found["max_epochs"])
        )
    for cell, head in cells:
      configs = []
      for endpoint in P.PRIMARY_ENDPOINTS:
        config, _ = cell_choice(records, experiment, cell, head, endpoint, smoke)
        if config is None:
          todo.append((experiment, "seeds", cell, head, None, None, None, found["max_epochs"]))
        elif config not in configs:
          configs.append(config)
      for config in configs:
        todo.extend(_seeds_todo(records, experiment, cell, head, config, found))
  return todo
