"""What the third edition's records show was run otherwise than declared, where no deviation
said so before the runs (``protocol.DEVIATIONS`` holds the declared ones): the commits the
runs ran at, and the sweep runs the epoch budget stopped. Found in review on 2026-12-05 (issue
59); the report's deviations block prints them (:func:`undeclared_lines`).

Example:
  >>> runs = [{"stage": "sweep", "stopped_by": stop, "learning_rate": 1e-4,
  ...          "software": {"commit": c}}
  ...         for c, stop in (("aaa", "budget"), ("bbb", "patience"), ("bbb+modified", "patience"))]
  >>> commit_spans(runs)
  [(1, 1, 'aaa', 0), (2, 3, 'bbb', 1)]
  >>> for line in undeclared_lines(runs)[3:]:
  ...   print(line[:72])
  - The runs ran at 2 commits: runs 1-1 at aaa; runs 2-3 at bbb (1 of them
  - 1 of the 3 sweep runs (33 %) stopped at their epoch budget, not by pat
"""

#: What changed in the package between two consecutive commits the runs ran at, by their short
#: ids (from ``git log``; the records hold only the commits).
BETWEEN_COMMITS = {
  ("03c4145", "14bdd26"): "Between 03c4145 and 14bdd26 the package's core (its losses, metrics "
  "and rank operators, the runs' included) was ported from TensorFlow to `keras.ops` (`git log "
  "03c4145..14bdd26`, 135 commits).",
}


def commit_spans(records):
  """``[(first run, last run, commit, runs with modified files)]``: the records in order, one
  entry per stretch of runs at one commit (1-based run numbers; ``+modified`` counted, not split
  on)."""
  spans = []
  for number, r in enumerate(records, 1):
    commit = (r.get("software") or {}).get("commit") or "unknown"
    base, modified = commit.removesuffix("+modified"), commit.endswith("+modified")
    if spans and spans[-1][2] == base:
      first, _, _, count = spans[-1]
      spans[-1] = (first, number, base, count + modified)
    else:
      spans.append((number, number, base, int(modified)))
  return spans


def undeclared_lines(records):
  """Two facts of the records that no deviation declared before the runs (found in review,
  2026-12-05): the commits the runs ran at, and the sweep runs the epoch budget stopped."""
  if not records:
    return []
  spans = commit_spans(records)
  sweep = [r for r in records if r["stage"] == "sweep"]
  budget = [r for r in sweep if r["stopped_by"] == "budget"]
  at = "; ".join(
    f"runs {first:,}-{last:,} at {commit[:7]}"
    + (f" ({changed} of them with tracked files besides the records modified)" if changed else "")
    for first, last, commit, changed in spans
  )
  between = [
    BETWEEN_COMMITS[pair]
    for pair in zip([s[2][:7] for s in spans], [s[2][:7] for s in spans[1:]])
    if pair in BETWEEN_COMMITS
  ]
  lines = [
    "",
    "Not declared before the runs (found in review, 2026-12-05; counted from the records):",
    "",
    f"- The runs ran at {len(spans)} commit{'s' if len(spans) > 1 else ''}: {at}."
    + "".join(f" {note}" for note in between),
  ]
  if sweep:
    low = sum(r["learning_rate"] < 10**-3.25 for r in budget)
    lines.append(
      f"- {len(budget)} of the {len(sweep)} sweep runs ({100 * len(budget) / len(sweep):.0f} %) "
      f"stopped at their epoch budget, not by patience ({low} of them at a learning rate of "
      "10^-3.5 or below): the validation figure that chose a configuration may be that of an "
      "unfinished run. The seeds runs' convergence is in each experiment's table."
    )
  return lines
