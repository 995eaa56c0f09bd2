"""experiments/third/deviations.py on hand-made records: the stretches of runs per commit and the
sweep runs the epoch budget stopped, counted by hand."""

from experiments.third import deviations


def _run(commit, stage="sweep", stopped="patience", rate=1e-3):
  return {
    "stage": stage,
    "stopped_by": stopped,
    "learning_rate": rate,
    "software": {"commit": commit},
  }


def test_commit_spans_and_budget_stopped_sweep_runs():
  first, second = "03c4145" + "0" * 33, "14bdd26" + "1" * 33
  runs = [_run(first, stopped="budget", rate=1e-4)] * 2 + [_run(second)]
  runs += [_run(second + "+modified", stopped="budget", rate=1e-3), _run(second, stage="seeds")]
  assert deviations.commit_spans(runs) == [(1, 2, first, 0), (3, 5, second, 1)]
  lines = deviations.undeclared_lines(runs)
  assert lines[3].startswith("- The runs ran at 2 commits: runs 1-2 at 03c4145; runs 3-5 at ")
  assert "ported from TensorFlow to `keras.ops`" in lines[3]  # the note for that pair
  # 3 of the 4 sweep runs at the budget, 2 of them below 10^-3.25
  assert lines[4].startswith("- 3 of the 4 sweep runs (75 %) stopped at their epoch budget")
  assert "(2 of them at a learning rate of 10^-3.5 or below)" in lines[4]


def test_one_commit_gets_no_note_and_no_records_no_lines():
  lines = deviations.undeclared_lines([_run("abcdef0123")])
  assert lines[3] == "- The runs ran at 1 commit: runs 1-1 at abcdef0."
  assert deviations.undeclared_lines([]) == []
