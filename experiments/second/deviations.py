"""The report's "Deviations from the protocol": what the records show was run otherwise than
declared, and the deviations declared by hand (``protocol.DEVIATIONS``)."""

import json
import math

from experiments import statistics, training
from experiments.second import plan, protocol, summary
from tfrank4class import losses as losses_lib


def expected_loss_configs(losses):
  """``{loss: config}`` (:func:`experiments.training.loss_config`, as runs record it) of every
  loss of ``losses``, built with the protocol's ``LOSS_KWARGS``: the pre-declared
  configurations."""
  return {loss: training.loss_config(loss, protocol.LOSS_KWARGS.get(loss, {})) for loss in losses}


def reachable_rates(settings):
  """The rates a sweep following ``settings`` can run: its grid and up to ``max_widenings``
  rates beyond each edge (:func:`experiments.second.protocol.widened`)."""
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
  (:func:`experiments.second.plan.grid_settings`; smoke records are compared with ``plan.SMOKE``),
  sweep rates outside :func:`reachable_rates`, seeds-stage runs at another rate than the sweep
  chose, seeds outside the declared ones, loss configurations other than ``loss_configs`` (default
  :func:`expected_loss_configs`), the convergence rule unmet on a finished stage, and planned
  runs without a record; then the hand-declared ``declared`` (default
  ``protocol.DEVIATIONS``), each ``(date, experiment, what, why)``.

  Args:
    records: the records (a list of dicts).
    registered_losses: loss names the protocol's Top-K rule reads (default
      ``tfrank4class.losses.names()``).
    loss_configs: ``{loss: config}`` the runs should have recorded.
    declared: the hand-declared deviations.
  """
  if registered_losses is None:
    registered_losses = losses_lib.names()
  declared = protocol.DEVIATIONS if declared is None else declared
  lines = []
  experiments = [e for e in plan.EXPERIMENTS if any(r["experiment"] == e for r in records)]
  if "clean" not in experiments and records:
    lines.append("clean: the primary experiment has no record in these records.")
  for experiment in experiments:
    runs = [r for r in records if r["experiment"] == experiment]
    settings = runs[0]["settings"]
    expected = plan.grid_settings(
      registered_losses, smoke=bool(settings.get("smoke")), experiment=experiment
    )
    rows = summary.completeness(records, experiment, settings)
    found = (
      _settings_deviations(runs, expected)
      + _rate_and_seed_deviations(runs, expected, rows)
      + _loss_config_deviations(runs, loss_configs)
      + _convergence_deviations(runs, rows)
      + _missing_runs(rows)
    )
    lines += [f"{experiment}: {line}" for line in found]
  for entry in declared:
    if len(entry) != 4:
      raise ValueError(
        f"A declared deviation must be (date, experiment, what, why), got {entry!r}."
      )
    date, experiment, what, why = entry
    lines.append(f"{experiment} ({date}, declared): {what}. Why: {why}")
  return lines


def _settings_deviations(runs, expected):
  """Settings of ``runs`` (one experiment's) that differ from the ``expected`` ones."""
  lines = []
  variants = {json.dumps(r["settings"], sort_keys=True) for r in runs}
  if len(variants) > 1:
    lines.append(f"the runs follow {len(variants)} different settings.")
  settings = runs[0]["settings"]
  for field in sorted(set(expected) | set(settings)):
    if settings.get(field) != expected.get(field):
      lines.append(_describe_setting(field, expected.get(field), settings.get(field)))
  return lines


def _rate_and_seed_deviations(runs, expected, rows):
  """Sweep rates outside :func:`reachable_rates`, undeclared seeds, and seeds-stage runs at
  another rate than their sweep chose (``rows``:
  :func:`experiments.second.summary.completeness`)."""
  lines = []
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
      f"sweep of {loss} + {head} at lr {rate:g}, outside the pre-registered "
      f"rates {[f'{a:g}' for a in allowed]}."
    )
  for stage, seeds in (("sweep", "tuning_seeds"), ("seeds", "evaluation_seeds")):
    extra = sorted({r["seed"] for r in runs if r["stage"] == stage} - set(expected[seeds]))
    if extra:
      lines.append(f"{stage} runs with seeds {extra}, not among the declared {expected[seeds]}.")
  chosen = {(r["loss"], r["interaction"]): r["chosen"] for r in rows}
  for r in runs:
    rate = chosen.get((r["loss"], r["interaction"]))
    if (
      r["stage"] == "seeds"
      and rate is not None
      and not math.isclose(r["learning_rate"], rate, rel_tol=1e-9)
    ):
      lines.append(
        f"{r['loss']} + {r['interaction']} seed {r['seed']} ran at lr "
        f"{r['learning_rate']:g}; its sweep chose {rate:g}."
      )
  return lines


def _loss_config_deviations(runs, loss_configs):
  """Losses of ``runs`` recorded with another configuration than ``loss_configs`` (default
  :func:`expected_loss_configs`), once per loss."""
  configs = (
    loss_configs
    if loss_configs is not None
    else expected_loss_configs(sorted({r["loss"] for r in runs}))
  )
  lines, seen = [], set()
  for r in runs:
    recorded = r.get("loss_config")
    if r["loss"] not in configs or recorded is None or r["loss"] in seen:
      continue
    if recorded != configs[r["loss"]]:
      seen.add(r["loss"])
      changed = sorted(
        k
        for k in set(recorded) | set(configs[r["loss"]])
        if recorded.get(k) != configs[r["loss"]].get(k)
      )
      lines.append(
        f"{r['loss']} ran with another configuration than the pre-declared one ("
        + ", ".join(
          f"{k}: {recorded.get(k)!r} instead of {configs[r['loss']].get(k)!r}" for k in changed
        )
        + ")."
      )
  return lines


def _convergence_deviations(runs, rows):
  """The convergence rule unmet on a finished stage (the sweep's runs at the chosen rates)."""
  lines = []
  chosen = {(r["loss"], r["interaction"]): r["chosen"] for r in rows}
  for stage in plan.STAGES:
    stage_done = all(
      (r["sweep_final"] and r["sweep_done"] >= r["sweep_planned"])
      if stage == "sweep"
      else r["seeds_done"] >= r["seeds_planned"]
      for r in rows
    )
    stage_runs = [r for r in runs if r["stage"] == stage]
    if stage == "sweep":
      stage_runs = [r for r in stage_runs if summary.is_chosen(r, chosen)]
    if stage_done and stage_runs:
      fraction = statistics.converged_fraction(stage_runs)
      if fraction < protocol.CONVERGED_FRACTION:
        lines.append(
          f"the convergence rule is not met on the {stage} stage (best epoch "
          f"before the last in {fraction:.0%} of its runs, rule >= "
          f"{protocol.CONVERGED_FRACTION:.0%}) and the stage has not been rerun with the "
          "budget doubled."
        )
  return lines


def _missing_runs(rows):
  """Planned runs without a record, and the cells with fewer seeds than declared."""
  missing_sweep = sum(max(0, r["sweep_planned"] - r["sweep_done"]) for r in rows)
  missing_seeds = sum(r["seeds_planned"] - r["seeds_done"] for r in rows)
  if not (missing_sweep or missing_seeds):
    return []
  short = [r for r in rows if 0 < r["seeds_done"] < r["seeds_planned"]]
  return [
    f"runs missing: {missing_sweep} sweep run(s) and {missing_seeds} seeds "
    f"run(s) of the planned ones have no record"
    + (
      f"; cells with fewer seeds than the {rows[0]['seeds_planned']} declared: "
      + ", ".join(f"{r['loss']} + {r['interaction']} ({r['seeds_done']})" for r in short)
      if short
      else ""
    )
    + "."
  ]
