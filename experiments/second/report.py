"""The evidence grid's report: the markdown report and forest plot, and the docs' generated blocks.

:func:`write_report` writes ``experiments/records/grid.md`` and ``grid.png`` from the records:
how complete the grid is, its deviations from the protocol (:mod:`experiments.second.deviations`),
the summary table (:func:`experiments.second.summary.summary_table`), then per experiment the paired
differences against softmax + dot with Holm over that experiment's family, the minimum
detectable effect, the convergence check, the chosen learning rates and the Bruch et al. slack.
:func:`grid_blocks` gives the tables docs/evidence-grid.md shows, kept there as generated
blocks (:mod:`experiments.blocks`).
"""

import collections
import os

from experiments import statistics, training
from experiments.second import deviations, plan, protocol, summary

METRIC_NAMES = {"top_1": "Top-1", "top_5": "Top-5", "ndcg_5": "NDCG@5", "mrr": "MRR"}
#: The commit whose tree still holds the first edition of the grid (its code, records and
#: report), retired since.
FIRST_EDITION_COMMIT = "9582b47"
#: The module name of the grid's generated blocks (``experiments.second.grid:<table>``).
BLOCKS_MODULE = "experiments.second.grid"


def _completeness_section(records, experiments):
  lines, done, planned, final = [], 0, 0, True
  table = ["| experiment | stage | runs done | runs planned |", "|---|---|---|---|"]
  cells = []
  for experiment in experiments:
    rows = summary.completeness(records, experiment, plan.experiment_settings(records, experiment))
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
  not_run = [e for e in plan.EXPERIMENTS if e not in experiments]
  lines += ["## Completeness", "", status, ""] + table + [""]
  if not_run:
    lines += [f"Experiments of the protocol with no record: {', '.join(not_run)}.", ""]
  return lines + _software_lines(records) + cells


def _software_lines(records):
  """How many runs each software stack (:func:`experiments.store.software_versions`) and each
  commit ran."""
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


def _deviations_section(records, registered_losses=None, loss_configs=None, declared=None):
  found = deviations.protocol_deviations(records, registered_losses, loss_configs, declared)
  lines = ["## Deviations from the protocol", ""]
  if not found:
    return lines + ["None.", ""]
  return lines + [f"- {line}" for line in found] + [""]


def _signed(value):
  return "-" if value is None else f"{value:+.4f}"


def cell_table(rows, metric):
  """Markdown lines: every cell of :func:`experiments.second.summary.summarize`'s ``rows`` against
  softmax + dot on ``metric``: rate, seeds, mean, paired difference with its 95 % interval, p,
  Holm p, verdict, minimum detectable effect (at the first Holm step in brackets), paper's gap."""
  lines = [
    "| loss | head | lr | seeds | mean | Δ [95 % CI] | p | Holm p | verdict | MDE | paper Δ |",
    "|---|---|---|---|---|---|---|---|---|---|---|",
  ]
  for row in rows:
    e = row["metrics"][metric]
    i = e["interval"]
    lines.append(
      f"| {row['loss']} | {row['interaction']} | {row['learning_rate']:g} | "
      f"{len(row['seeds'])} | {e['mean']:.4f} | {i.mean:+.4f} [{i.low:+.4f}, {i.high:+.4f}] "
      f"| {e['p']:.3g} | {e['holm_p']:.3g} | {summary.verdict(e)} | {e['mde']:.4f} "
      f"({e['mde_first_step']:.4f}) | {_signed(e['paper'])} |"
    )
  return lines


def grid_blocks(records):
  """``{name: lines}``: the docs' generated blocks of the grid, from ``records``: ``summary``
  (:func:`experiments.second.summary.summary_table`) and ``cells-<experiment>`` (:func:`cell_table`
  on NDCG@5) for each experiment with seeds-stage comparisons."""
  blocks = {f"{BLOCKS_MODULE}:summary": summary.summary_table(records)}
  for experiment in plan.EXPERIMENTS:
    rows, _ = summary.summarize(records, experiment)
    if rows:
      blocks[f"{BLOCKS_MODULE}:cells-{experiment}"] = cell_table(rows, protocol.PRIMARY_ENDPOINT)
  return blocks


def _convergence_lines(records, experiment):
  """The convergence rule on the seeds runs and on the sweep's runs at the chosen rates, and the
  sweep runs stopped by the epoch budget."""
  chosen = summary.chosen_rates(records, experiment)
  runs = [r for r in records if r["experiment"] == experiment]
  checked = {
    "seeds": [r for r in runs if r["stage"] == "seeds"],
    "sweep at the chosen rates": [
      r for r in runs if r["stage"] == "sweep" and summary.is_chosen(r, chosen)
    ],
  }
  lines = []
  for name, stage_runs in checked.items():
    if stage_runs:
      fraction = statistics.converged_fraction(stage_runs)
      ok = "met" if fraction >= protocol.CONVERGED_FRACTION else "NOT met: train longer"
      lines.append(
        f"- Convergence, {name}: best epoch before the last in {fraction:.0%} of "
        f"{len(stage_runs)} runs (rule: >= {protocol.CONVERGED_FRACTION:.0%}, {ok})."
      )
  at_budget = [r for r in runs if r["stage"] == "sweep" and r["best_epoch"] == r["epochs_run"]]
  lines.append(
    f"- Sweep runs stopped by the epoch budget while still improving (their rate may be "
    f"under-rated): {len(at_budget)}"
    + "".join(f"; {r['loss']} + {r['interaction']} at {r['learning_rate']:g}" for r in at_budget)
    + "."
  )
  return lines


def _experiment_section(records, experiment, rows, family):
  """The report's section of ``experiment`` (``rows``, ``family``: its :func:`summarize`)."""
  lines = [f"## {experiment}", ""] + _convergence_lines(records, experiment)
  base = plan.baseline_seeds(records, experiment)
  if base:
    means = ", ".join(
      f"{METRIC_NAMES[m]} {sum(r[m] for r in base) / len(base):.4f}" for m in training.METRICS
    )
    lines += ["", f"softmax + dot (lr {base[0]['learning_rate']:g}, {len(base)} seeds): {means}."]
  lines += ["", f"Holm family: {family} cells per endpoint.", ""]
  for metric in (protocol.PRIMARY_ENDPOINT,) + protocol.SECONDARY_ENDPOINTS:
    lines += [f"### Δ {METRIC_NAMES[metric]} against softmax + dot", ""]
    lines += cell_table(rows, metric) + [""]
  return lines + _sweep_section(records, experiment) + _slack_section(records, experiment)


def write_report(
  records, md_path, png_path, registered_losses=None, loss_configs=None, declared=None
):
  """Writes the markdown report and the forest plot of ``records`` (a list of dicts).

  The report opens with how complete the grid is and with its deviations from the protocol
  (:func:`experiments.second.deviations.protocol_deviations`, which takes ``registered_losses``,
  ``loss_configs`` and ``declared``), then one section per experiment.
  """
  experiments = [e for e in plan.EXPERIMENTS if any(r["experiment"] == e for r in records)]
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
  summaries = {experiment: summary.summarize(records, experiment) for experiment in experiments}
  lines += ["## Summary (docs/evidence-grid.md's table, recomputed from these records)", ""]
  lines += summary.summary_table(records, {e: rows for e, (rows, _) in summaries.items()}) + [""]
  for experiment in experiments:
    lines += _experiment_section(records, experiment, *summaries[experiment])
  lines += [
    "## Appendix: first edition",
    "",
    "The first edition's cells (frozen features of a softmax-trained encoder on GoEmotions, "
    "CIFAR-10 and MIND; end to end on GoEmotions and CIFAR-10), its code and records are retired; "
    f"commit {FIRST_EDITION_COMMIT} holds them (`benchmarks/out/rank4class_grid.md` there), "
    "with their known limits in docs/evidence-grid.md.",
    "",
  ]
  os.makedirs(os.path.dirname(os.path.abspath(md_path)), exist_ok=True)
  with open(md_path, "w", encoding="utf-8") as f:
    f.write("\n".join(lines))
  _forest_plot([(e, summaries[e][0]) for e in experiments], png_path)


def _sweep_section(records, experiment):
  """The sweep's means per cell and the rate chosen; a choice at an edge of the swept rates (the
  widenings ran out: ``plan.sweep_choice`` widens a grid whose best sits at an edge) is flagged,
  since a rate beyond it, untried, might have done better."""
  chosen = summary.chosen_rates(records, experiment)
  widenings = plan.experiment_settings(records, experiment)["max_widenings"]
  lines = ["### Learning-rate sweep (mean validation NDCG@5 over the tuning seeds)", ""]
  at_edge = []
  for (loss, head), means in summary.sweep_means(records, experiment).items():
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
  """The mean Bruch et al. slack of each cell's seeds runs."""
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
  """Draws each experiment's paired differences on NDCG@5 and Top-1 (``plots``: ``[(experiment,
  rows of summarize)]``) to ``png_path``."""
  import matplotlib  # pylint: disable=g-import-not-at-top  (optional: the bench extra)

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
