"""The grid's verdicts, recomputed from its records: per-cell comparisons, completeness, summary.

:func:`summarize` compares every cell of an experiment's seeds stage with softmax + dot over the
seeds both have (paired t interval and p-value, Holm over the experiment's cells, minimum
detectable effect: :mod:`experiments.statistics`); :func:`completeness` says what is done per
cell; :func:`recommendation` condenses one experiment, and :func:`summary_table` the whole grid,
into the table docs/evidence-grid.md shows (a generated block, :mod:`experiments.second.report`).
"""

import math

from experiments import statistics
from experiments.second import plan, protocol


def summarize(records, experiment):
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
      interval, p = statistics.paired_t_test(
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
    adjusted = statistics.holm([row["metrics"][metric]["p"] for row in rows])
    for row, p in zip(rows, adjusted):
      entry = row["metrics"][metric]
      entry["holm_p"] = p
      n = entry["interval"].n
      entry["mde"] = statistics.minimum_detectable_effect(
        entry["interval"].sd, n, protocol.ALPHA, protocol.POWER
      )
      entry["mde_first_step"] = statistics.minimum_detectable_effect(
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
      chosen, rates = plan.sweep_choice(records, experiment, loss, head, settings)
      cell = plan.select(records, experiment=experiment, loss=loss, interaction=head)
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


def verdict(entry):
  """ "higher", "lower" or "no difference detected": ``entry``'s Holm verdict (alpha
  ``protocol.ALPHA``) and the sign of its mean difference."""
  if entry["holm_p"] >= protocol.ALPHA:
    return "no difference detected"
  return "higher" if entry["interval"].mean > 0 else "lower"


SUMMARY_HEADER = (
  "| experiment | runs | softmax + dot: Top-1 / NDCG@5 | other cells on NDCG@5 (Holm): higher "
  "/ no difference / lower | best other cell: Δ NDCG@5 [95 % CI], Holm p | use |",
  "|---|---|---|---|---|---|",
)


def recommendation(records, experiment, rows=None):
  """The summary table's row of ``experiment``, recomputed from its records, or ``None`` before its
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
  base = plan.baseline_seeds(records, experiment)
  if not base or not rows:
    return None
  verdicts = [verdict(row["metrics"][protocol.PRIMARY_ENDPOINT]) for row in rows]
  best = max(rows, key=lambda row: row["metrics"][protocol.PRIMARY_ENDPOINT]["mean"])
  higher = [row for row, v in zip(rows, verdicts) if v == "higher"]
  use = protocol.BASELINE
  if higher:
    top = max(higher, key=lambda row: row["metrics"][protocol.PRIMARY_ENDPOINT]["interval"].mean)
    use = (top["loss"], top["interaction"])
  cells = completeness(records, experiment, plan.experiment_settings(records, experiment))
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


def summary_table(records, summaries=None):
  """The summary table of docs/evidence-grid.md ("The answer"; ``SUMMARY_HEADER`` and one row per
  experiment with a :func:`recommendation`), as lines of markdown. ``summaries``: ``{experiment:
  rows of summarize}`` already computed."""
  lines = list(SUMMARY_HEADER)
  for experiment in plan.EXPERIMENTS:
    found = recommendation(records, experiment, (summaries or {}).get(experiment))
    if found is None:
      continue
    i = found["best"]["interval"]
    status = "complete" if found["complete"] else "INCOMPLETE"
    lines.append(
      f"| {experiment} | {found['done']} of {found['planned']} ({status}), "
      f"{found['train_hours']:.1f} h of training | {found['baseline']['top_1']:.4f} / "
      f"{found['baseline']['ndcg_5']:.4f} | "
      + " / ".join(str(n) for n in found["counts"].values())
      + f" | {' + '.join(found['best']['cell'])}: {i.mean:+.4f} [{i.low:+.4f}, {i.high:+.4f}]"
      f", Holm p {found['best']['holm_p']:.3g} | {' + '.join(found['use'])} |"
    )
  return lines


def sweep_means(records, experiment):
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


def chosen_rates(records, experiment):
  """``{(loss, head): the rate its sweep chose (:func:`sweep_choice`), or None while a rate of
  its sweep has no record}``."""
  settings = plan.experiment_settings(records, experiment)
  return {
    (loss, head): plan.sweep_choice(records, experiment, loss, head, settings)[0]
    for loss in settings["losses"]
    for head in settings["heads"]
  }


def is_chosen(record, chosen):
  """Whether ``record`` ran at the rate its cell's sweep chose (``chosen``: ``{(loss, head):
  rate or None}``)."""
  rate = chosen.get((record["loss"], record["interaction"]))
  return rate is not None and math.isclose(record["learning_rate"], rate, rel_tol=1e-9)
