"""The third edition's report, computed from its records.

Per experiment: whether it is complete (no planned run left, :func:`experiments.third.plan.
planned_runs`), its comparisons per endpoint (:func:`comparisons`: each cell against the
experiment's reference, paired by seed and test example, at each endpoint's chosen configuration
and checkpoint, ``protocol.ENDPOINTS``; Holm within the family of the cells other than the
reference and our own ``OWN_CELLS``, which get unadjusted figures only), its convergence
(:func:`convergence`), the score scale of its test scores per cell and head
(:func:`score_scales`, the diagnostics of the collapse) and its collapsed runs. Verdicts are
drawn only for complete experiments. :func:`noise_contrasts` sets noise within groups against
uniform noise at the same rate (the protocol's second question; unadjusted).
:func:`doc_blocks` gives the generated status and deviation blocks of
docs/evidence-third-edition.md, :func:`verdict_blocks` the verdict table of
docs/choosing-a-loss.md and of that file (a block of its own, :data:`VERDICTS_MODULE`: it takes
the bootstrap of every comparison, minutes, where the others take none).
"""

import os

import numpy as np

from experiments import bootstrap, statistics, true_ranks
from experiments.third import collapse, deviations, plan
from experiments.third import protocol as P

BLOCKS_MODULE = "experiments.third.edition"
VERDICTS_MODULE = "experiments.third.edition.verdicts"
METRIC_NAMES = {"top_1": "Top-1", "top_5": "Top-5", "ndcg_5": "NDCG@5", "mrr": "MRR"}
SCALE_FIELDS = ("score_std", "cross_entropy", "top_class_share")


def is_complete(records, experiment, smoke=False):
  """True when ``experiment`` has records and no planned run left."""
  found = plan.select(records, experiment=experiment)
  return bool(found) and not plan.planned_runs(records, [experiment], smoke)


def seeds_runs(records, experiment, cell, head, endpoint, smoke=False):
  """The seeds runs an ``endpoint`` of a cell is read from: those at the configuration its
  primary endpoint chose, at the longest budget that has every seed (``[]`` if none yet)."""
  config, _ = plan.cell_choice(records, experiment, cell, head, P.ENDPOINTS[endpoint][0], smoke)
  if config is None:
    return []
  runs = plan.select(
    records,
    experiment=experiment,
    stage="seeds",
    cell=cell,
    head=head,
    learning_rate=config[0],
    scale=config[1],
  )
  seeds = plan.settings(experiment, smoke)["evaluation_seeds"]
  for budget in sorted({r["max_epochs"] for r in runs}, reverse=True):
    full = [r for r in runs if r["max_epochs"] == budget]
    if sorted(r["seed"] for r in full) == sorted(seeds):
      return sorted(full, key=lambda r: r["seed"])
  return []


def values(runs, endpoint):
  """``[seeds, examples]`` per-example values of ``endpoint`` at its checkpoint, or None when a
  run has no finite scores there."""
  checkpoint = P.ENDPOINTS[endpoint][1]
  rows = []
  for run in runs:
    test = run["test"].get(checkpoint)
    if not test or not test["finite"]:
      return None
    rank, ties = true_ranks.decode(test["rank"]), true_ranks.decode(test["ties"])
    rows.append(true_ranks.per_example(rank, ties, endpoint))
  return np.stack(rows)


def comparisons(records, experiment, endpoint, smoke=False, replicates=P.BOOTSTRAP_REPLICATES):
  """One row per cell x head of ``experiment`` with its seeds runs (reference first): ``mean``,
  and for the others ``seed`` (paired t), ``bootstrap``, ``holm_p`` (None for our own cells and
  the reference) and ``mde`` (at alpha and at the first Holm step's alpha)."""
  design = plan.settings(experiment, smoke)
  reference = tuple(design["reference"])
  cells = [(c, h) for c in design["cells"] for h in design["heads"]]
  base_runs = seeds_runs(records, experiment, *reference, endpoint, smoke)
  base = values(base_runs, endpoint) if base_runs else None
  rows = []
  for cell, head in sorted(cells, key=lambda c: c != reference):
    runs = seeds_runs(records, experiment, cell, head, endpoint, smoke)
    found = values(runs, endpoint) if runs else None
    if found is None:
      continue
    row = {
      "cell": cell,
      "head": head,
      "mean": float(found.mean()),
      "config": (runs[0]["learning_rate"], runs[0]["scale"]),
    }
    if (cell, head) != reference and base is not None:
      row["seed"] = bootstrap.seed_interval(found, base)
      row["bootstrap"] = bootstrap.two_stage_bootstrap(found, base, replicates, P.BOOTSTRAP_SEED)
    rows.append(row)
  family = [r for r in rows if "bootstrap" in r and r["cell"] not in P.OWN_CELLS]
  adjusted = statistics.holm([r["bootstrap"]["p_value"] for r in family])
  for row, p in zip(family, adjusted):
    row["holm_p"] = p
  for row in rows:
    if "bootstrap" in row:
      se = row["bootstrap"]["se"]
      row["mde"] = (
        bootstrap.minimum_detectable_effect(se, P.ALPHA, P.POWER),
        bootstrap.minimum_detectable_effect(se, P.ALPHA / max(len(family), 1), P.POWER),
      )
  return rows


def complete_comparisons(records, smoke=False, replicates=P.BOOTSTRAP_REPLICATES):
  """``{(experiment, endpoint): comparisons(...)}`` for every complete experiment."""
  return {
    (name, endpoint): comparisons(records, name, endpoint, smoke, replicates)
    for name in plan.experiments(smoke)
    if is_complete(records, name, smoke)
    for endpoint in P.ENDPOINTS
  }


def _differences(records, experiment, cell, endpoint, smoke):
  """``[seeds, examples]`` per-example differences of ``cell`` (on the reference's head) from
  ``experiment``'s reference at ``endpoint``, or None when either has no scored seeds runs."""
  reference = tuple(plan.settings(experiment, smoke)["reference"])
  found = []
  for key in ((cell, reference[1]), reference):
    runs = seeds_runs(records, experiment, *key, endpoint, smoke)
    found.append(values(runs, endpoint) if runs else None)
  return None if any(v is None for v in found) else found[0] - found[1]


def noise_contrasts(records, smoke=False, replicates=P.BOOTSTRAP_REPLICATES):
  """Question 2's contrast: ``{(group, uniform, endpoint): rows}`` for each complete experiment
  of uniform noise and the complete experiment of noise within groups of the same dataset and
  rate. A row per cell other than the reference: ``group`` and ``uniform``, the cell's mean
  difference from its condition's reference, and ``bootstrap``, the two-stage bootstrap of the
  group condition's per-example differences against the uniform one's (the same test examples;
  the seeds drawn by id in both). No protocol family holds it, so it has no Holm adjustment."""
  designs = plan.experiments(smoke)
  done = [name for name in designs if is_complete(records, name, smoke)]
  found = {}
  for uniform in done:
    noise = designs[uniform]["noise"]
    if noise is None or noise[0] != "uniform":
      continue
    for group in done:
      design = designs[group]
      if design["dataset"] != designs[uniform]["dataset"] or design["noise"] is None:
        continue
      if tuple(design["noise"]) != ("group", noise[1]):
        continue
      reference = tuple(design["reference"])
      for endpoint in P.ENDPOINTS:
        rows = []
        for cell in design["cells"]:
          pair = [_differences(records, n, cell, endpoint, smoke) for n in (group, uniform)]
          if cell == reference[0] or any(d is None for d in pair):
            continue
          rows.append(
            {
              "cell": cell,
              "group": float(pair[0].mean()),
              "uniform": float(pair[1].mean()),
              "bootstrap": bootstrap.two_stage_bootstrap(*pair, replicates, P.BOOTSTRAP_SEED),
            }
          )
        found[(group, uniform, endpoint)] = rows
  return found


def _contrast_lines(found):
  """The report's section of :func:`noise_contrasts`' result ``found``."""
  if not found:
    return []
  lines = [
    "## Noise within groups against uniform noise (question 2, unadjusted)",
    "",
    "Each cell's difference from the reference under noise within groups and under uniform noise "
    "at the same rate, and the first minus the second with the two-stage bootstrap (the same "
    "test examples, the seeds drawn by id in both conditions). The protocol names no test for "
    "this contrast, so its p-values are unadjusted and decide no verdict.",
    "",
  ]
  for (group, uniform, endpoint), rows in found.items():
    lines += [
      f"### {group} against {uniform}: {METRIC_NAMES[endpoint]}",
      "",
      f"| cell | difference, {group} | difference, {uniform} | group minus uniform "
      "| bootstrap 95 % CI | p (unadjusted) |",
      "|---|---|---|---|---|---|",
    ]
    for r in rows:
      b = r["bootstrap"]
      lines.append(
        f"| {r['cell']} | {_signed(r['group'])} | {_signed(r['uniform'])} "
        f"| {_signed(b['difference'])} | [{_signed(b['low'])}, {_signed(b['high'])}] "
        f"| {b['p_value']:.4f} |"
      )
    lines.append("")
  return lines


def convergence(records, experiment):
  """``{(cell, head, budget): (converged share, runs with the best epoch within NEAR_STOP_EPOCHS
  of the stop, runs)}`` over the seeds runs of ``experiment``, one row per epoch budget (a cell
  rerun at a longer budget has a row for each: the statistics read only the longest)."""
  found = {}
  for r in plan.select(records, experiment=experiment, stage="seeds"):
    found.setdefault((r["cell"], r["head"], r["max_epochs"]), []).append(r)
  result = {}
  for key, runs in found.items():
    converged = sum(r["stopped_by"] == "patience" for r in runs) / len(runs)
    near = sum(
      r["epochs_run"] - max(r["best_epoch"].values(), default=0) < P.NEAR_STOP_EPOCHS for r in runs
    )
    result[key] = (converged, near, len(runs))
  return result


def _is_collapsed(record):
  """True when ``record``'s Top-1 checkpoint ranks one class first for at least
  ``COLLAPSE_SHARE`` of the test inputs."""
  return record["test"].get("top_1", {}).get("top_class_share", 0.0) >= P.COLLAPSE_SHARE


def collapsed(records, experiment):
  """The runs of ``experiment`` whose Top-1 checkpoint is collapsed (:func:`_is_collapsed`)."""
  return [r for r in plan.select(records, experiment=experiment) if _is_collapsed(r)]


def score_scales(records, experiment, smoke=False):
  """``{(cell, head): (runs, median score_std, median cross_entropy, median top_class_share,
  collapsed runs)}`` of the test scores at the Top-1 checkpoint of the runs each cell's Top-1 is
  read from (:func:`seeds_runs`): the protocol's diagnostics of the collapse, per head."""
  found = {}
  design = plan.settings(experiment, smoke)
  for cell in design["cells"]:
    for head in design["heads"]:
      runs = seeds_runs(records, experiment, cell, head, "top_1", smoke)
      scored = [r for r in runs if r["test"].get("top_1", {}).get("finite")]
      if not scored:
        continue
      found[(cell, head)] = (
        len(scored),
        *(float(np.median([r["test"]["top_1"][k] for r in scored])) for k in SCALE_FIELDS),
        sum(_is_collapsed(r) for r in scored),
      )
  return found


def unscored(records, experiment):
  """The runs of ``experiment`` with a checkpoint missing (no finite validation epoch) or with
  non-finite test scores at one."""
  return [
    r
    for r in plan.select(records, experiment=experiment)
    if any(not r["test"].get(e, {}).get("finite", False) for e in P.VALIDATION_ENDPOINTS)
  ]


def status_lines(records, smoke=False):
  """The status table: per experiment, its runs recorded, their training time (the sum of the
  runs' ``train_seconds``, in hours: the processes ran side by side, so this is not the wall time
  between the first and the last run) and its state."""
  lines = [
    "| experiment | sweep runs | seeds runs | training hours | state |",
    "|---|---|---|---|---|",
  ]
  for name in plan.experiments(smoke):
    found = plan.select(records, experiment=name)
    sweep = sum(r["stage"] == "sweep" for r in found)
    hours = sum(r["train_seconds"] for r in found) / 3600
    state = (
      "complete" if is_complete(records, name, smoke) else "in progress" if found else "not started"
    )
    lines.append(f"| {name} | {sweep} | {len(found) - sweep} | {hours:.1f} | {state} |")
  return lines


def deviation_lines(records):
  """The declared deviations (``protocol.DEVIATIONS``), each with its date, scope, change
  and reason, and how many records were trained with and without XLA (a record made before the
  ``jit_compile`` field existed was trained without)."""
  if not P.DEVIATIONS:
    return ["None declared."]
  lines = ["| date | experiments | what changed | why |", "|---|---|---|---|"]
  lines += [f"| {date} | {scope} | {what} | {why} |" for date, scope, what, why in P.DEVIATIONS]
  with_xla = sum(bool(r.get("jit_compile", False)) for r in records)
  return (
    lines
    + ["", f"Records trained with XLA: {with_xla}; without: {len(records) - with_xla}."]
    + deviations.undeclared_lines(records)
  )


def doc_blocks(records):
  """``{block name: lines}`` of docs/evidence-third-edition.md."""
  return {
    f"{BLOCKS_MODULE}:status": status_lines(records),
    f"{BLOCKS_MODULE}:deviations": deviation_lines(records),
  }


def _regime(records, experiment, smoke):
  """``experiment``'s dataset, class count, labels and heads in words."""
  design = plan.settings(experiment, smoke)
  classes = sorted(
    {r["num_classes"] for r in records if r["experiment"] == experiment and "num_classes" in r}
  )
  noise = design["noise"]
  labels = (
    "clean labels"
    if noise is None
    else f"{round(100 * noise[1])} % of training labels flipped "
    + ("within their group" if noise[0] == "group" else "uniformly")
  )
  heads = " / ".join(design["heads"])
  counted = f", {classes[0]} classes" if len(classes) == 1 else ""
  return f"{design['dataset']}{counted}, {labels}, {heads} head"


def _named(rows, with_head):
  """The cells of ``rows`` with their differences; each with its head when ``with_head``."""
  names = [f"{r['cell']} + {r['head']}" if with_head else r["cell"] for r in rows]
  return (
    ", ".join(f"{n} ({_signed(r['bootstrap']['difference'])})" for n, r in zip(names, rows))
    or "none"
  )


def verdict_lines(records, found, smoke=False):
  """The verdict table: per complete experiment and endpoint, the papers' cells detectably above
  and below its reference (Holm-adjusted bootstrap p < ``ALPHA``) and our own cells below or
  above it (unadjusted). ``found`` is :func:`complete_comparisons`' result."""
  if not found:
    return ["No experiment is complete yet: no verdict."]
  lines = [
    f"| experiment | regime | endpoint | reference | above it (Holm p < {P.ALPHA}) "
    f"| below it (Holm p < {P.ALPHA}) | ours, unadjusted p < {P.ALPHA} |",
    "|---|---|---|---|---|---|---|",
  ]
  for (name, endpoint), rows in found.items():
    tested = [r for r in rows if "bootstrap" in r]
    family = [r for r in tested if "holm_p" in r and r["holm_p"] < P.ALPHA]
    above = [r for r in family if r["bootstrap"]["difference"] > 0]
    below = [r for r in family if r["bootstrap"]["difference"] < 0]
    ours = [r for r in tested if "holm_p" not in r and r["bootstrap"]["p_value"] < P.ALPHA]
    design = plan.settings(name, smoke)
    reference, heads = " + ".join(design["reference"]), len(design["heads"]) > 1
    lines.append(
      f"| {name} | {_regime(records, name, smoke)} | {METRIC_NAMES[endpoint]} | {reference} "
      f"| {_named(above, heads)} | {_named(below, heads)} | {_named(ours, heads)} |"
    )
  return lines


def verdict_blocks(records, found, smoke=False):
  """``{block name: lines}``: the verdict table of docs/choosing-a-loss.md and of
  docs/evidence-third-edition.md."""
  return {f"{VERDICTS_MODULE}:table": verdict_lines(records, found, smoke)}


def _signed(value):
  return f"{value:+.4f}"


def comparison_lines(rows, endpoint):
  """A Markdown table of :func:`comparisons`' rows."""
  lines = [
    f"| cell | head | lr, scale | test {METRIC_NAMES[endpoint]} | difference | seeds 95 % CI "
    "| bootstrap 95 % CI | p | Holm p | MDE (alpha, Holm step 1) |",
    "|---|---|---|---|---|---|---|---|---|---|",
  ]
  for r in rows:
    config = f"{r['config'][0]:.3g}, {r['config'][1]}"
    if "bootstrap" not in r:
      lines.append(
        f"| {r['cell']} | {r['head']} | {config} | {r['mean']:.4f} | reference | | | | | |"
      )
      continue
    b, s = r["bootstrap"], r["seed"]
    holm_p = f"{r['holm_p']:.4f}" if "holm_p" in r else "(ours, unadjusted)"
    lines.append(
      f"| {r['cell']} | {r['head']} | {config} | {r['mean']:.4f} | {_signed(b['difference'])} "
      f"| [{_signed(s.low)}, {_signed(s.high)}] | [{_signed(b['low'])}, {_signed(b['high'])}] "
      f"| {b['p_value']:.4f} | {holm_p} | {r['mde'][0]:.4f}, {r['mde'][1]:.4f} |"
    )
  return lines


def _experiment_lines(records, name, smoke, found):
  lines = [f"## {name}", ""]
  if not is_complete(records, name, smoke):
    return lines + ["Not complete: no verdict is drawn from it.", ""]
  flips = {r["flip_rate"] for r in plan.select(records, experiment=name) if "flip_rate" in r}
  if flips:
    lines += [f"Training labels changed by the noise: {', '.join(f'{f:.4f}' for f in flips)}.", ""]
  for endpoint in P.ENDPOINTS:
    lines += [f"### {METRIC_NAMES[endpoint]}", ""]
    lines += comparison_lines(found[(name, endpoint)], endpoint) + [""]
  lines += [
    "| cell | head | epoch budget | converged | best epoch within 5 of stop | runs |",
    "|---|---|---|---|---|---|",
  ]
  for (cell, head, budget), (share, near, n) in sorted(convergence(records, name).items()):
    lines.append(f"| {cell} | {head} | {budget} | {share:.2f} | {near} | {n} |")
  design = plan.settings(name, smoke)
  flagged = [
    f"{cell} + {head}, {METRIC_NAMES[endpoint]}: {parameter} {value:.3g} (the {end} run)"
    for cell in design["cells"]
    for head in design["heads"]
    for endpoint in P.VALIDATION_ENDPOINTS[:2]  # the primary ones, which choose configurations
    for parameter, value, end in plan.edges(records, name, cell, head, endpoint, smoke)
  ]
  lines += ["", "Choices at an edge of what the sweep ran, after its widening: "]
  lines[-1] += "; ".join(flagged) + "." if flagged else "none."
  lines += [
    "",
    "Score scale at the Top-1 checkpoint (test scores of the runs Top-1 is read from, medians "
    "over seeds): the per-list standard deviation, the softmax cross-entropy of the scores "
    "(nats), the largest share of test inputs for which one class is ranked first (1 when one "
    "class is first for every input).",
    "",
    "| cell | head | runs | score std | softmax CE | top-class share | collapsed |",
    "|---|---|---|---|---|---|---|",
  ]
  for (cell, head), (n, std, ce, share, down) in score_scales(records, name, smoke).items():
    lines.append(f"| {cell} | {head} | {n} | {std:.3g} | {ce:.3g} | {share:.3f} | {down} |")
  lines += [
    "",
    f"Collapsed runs (one class first for >= 99 % of test inputs): "
    f"{len(collapsed(records, name))}. Runs without finite test scores at some checkpoint (left "
    f"out of the comparisons above): {len(unscored(records, name))}.",
    "",
  ]
  return lines


def _collapse_lines(records):
  """The collapse section: the push of each loss on a dominant wrong class per class count."""
  lines = [
    "## The collapse: the push on a dominant wrong class",
    "",
    "`d loss / d s_d` at `s = scale * e_d`, the true class among the others at 0 "
    "(`experiments.third.collapse`); near 0, nothing moves the dominant class down.",
    "",
  ]
  for num_classes in sorted({r["num_classes"] for r in records if "num_classes" in r}):
    lines += collapse.table_lines(num_classes) + [""]
  return lines


def write_report(records, path, smoke=False, found=None):
  """Writes the Markdown report of ``records`` to ``path``; ``found``: their
  :func:`complete_comparisons` where already computed."""
  if found is None:
    found = complete_comparisons(records, smoke)
  lines = [
    "# The evidence, third edition: report",
    "",
    "Generated by `python -m experiments.third.edition report` from the records.",
    "",
  ]
  lines += status_lines(records, smoke) + [""]
  lines += ["## Deviations from the protocol", ""] + deviation_lines(records) + [""]
  seconds = [r["seconds_per_epoch"] for r in records]
  if seconds:
    lines += [
      f"{len(records)} runs; median {np.median(seconds):.2f} s per epoch, median "
      f"{np.median([r['train_seconds'] for r in records]):.0f} s per run.",
      "",
    ]
  for name in plan.experiments(smoke):
    lines += _experiment_lines(records, name, smoke, found)
  lines += _contrast_lines(noise_contrasts(records, smoke))
  lines += _collapse_lines(records)
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")
