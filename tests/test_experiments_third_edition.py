"""experiments/third/edition.py on the smoke configuration (Gaussian features, softmax and the
smooth SVM, one rate, 2 seeds, 2 epochs): the records, the rerun at twice the budget, resumption,
a run held by another process, the command line, and the docs' status block against the
committed records."""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from experiments import blocks, true_ranks
from experiments.third import edition, plan, report
from experiments.third import protocol as P

ROOT = pathlib.Path(__file__).resolve().parents[1]
SMOKE = plan.SMOKE


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
  path = tmp_path_factory.mktemp("third") / "third.json"
  records = edition.run_all(str(path), None, None, ["smoke_clean"], smoke=True)
  return path, records


def test_records_schema_and_counts(smoke_run):
  path, records = smoke_run
  loaded = json.loads(path.read_text())
  assert loaded == records.records
  sweep = [r for r in loaded if r["stage"] == "sweep"]
  # softmax: one rate, no scale; the SVM: one rate x 3 scales; no widening in the smoke setting
  assert sorted((r["cell"], r["scale"] or 0.0) for r in sweep) == [
    ("pairwise_logistic", 0.333333),
    ("pairwise_logistic", 1.0),
    ("pairwise_logistic", 3.0),
    ("softmax", 0.0),
  ]
  for r in loaded:
    assert set(plan.RECORD_FIELDS) <= set(r)
    assert r["edition"] == 3 and r["device"] == "cpu" and r["dataset"] == "smoke"
    assert 1 <= r["epochs_run"] <= r["max_epochs"]
    assert set(r["test"]) == set(P.VALIDATION_ENDPOINTS)
    for endpoint, test in r["test"].items():
      rank, ties = true_ranks.decode(test["rank"]), true_ranks.decode(test["ties"])
      assert len(rank) == len(ties) == SMOKE["sizes"]["test"]
      assert test["top_1"] == pytest.approx(np.mean(true_ranks.per_example(rank, ties, "top_1")))
      assert 1 <= r["best_epoch"][endpoint] <= r["epochs_run"]
      assert r["validation"][endpoint] == pytest.approx(
        max(v for v in r["validation_curve"][endpoint] if v is not None), abs=1e-5
      )


def test_seeds_rerun_at_twice_the_budget_when_runs_hit_it(smoke_run):
  """A configuration whose seeds runs mostly hit the 2-epoch budget ran its seeds again at 4."""
  _, records = smoke_run
  seeds = [r for r in records.records if r["stage"] == "seeds"]
  configs = {(r["cell"], r["learning_rate"], r["scale"]) for r in seeds}
  assert {c[0] for c in configs} == set(SMOKE["cells"])
  reruns = 0
  for config in configs:
    runs = [r for r in seeds if (r["cell"], r["learning_rate"], r["scale"]) == config]
    first = [r for r in runs if r["max_epochs"] == SMOKE["max_epochs"]]
    assert sorted(r["seed"] for r in first) == SMOKE["evaluation_seeds"]
    converged = np.mean([r["stopped_by"] == "patience" for r in first])
    rerun = [r for r in runs if r["max_epochs"] == P.RERUN_FACTOR * SMOKE["max_epochs"]]
    if converged < P.CONVERGED_FRACTION:
      assert sorted(r["seed"] for r in rerun) == SMOKE["evaluation_seeds"]
      reruns += 1
    else:
      assert rerun == []
  assert reruns >= 1  # 2 epochs with patience 1 rarely stop by patience
  assert plan.planned_runs(records, ["smoke_clean"], smoke=True) == []


def test_resumption_runs_only_the_missing_runs(smoke_run, tmp_path):
  _, records = smoke_run
  kept = records.records[:-1]
  path = tmp_path / "third.json"
  path.write_text(json.dumps(kept))
  resumed = edition.run_all(str(path), None, None, ["smoke_clean"], smoke=True)
  key = plan.KEY_FIELDS
  assert [tuple(r[k] for k in key) for r in resumed.records] == [
    tuple(r[k] for k in key) for r in records.records
  ]
  again = edition.run_all(str(path), None, None, ["smoke_clean"], smoke=True)
  assert again.records == resumed.records


def test_a_run_held_by_another_process_is_left_to_it(smoke_run, tmp_path):
  _, records = smoke_run
  path = tmp_path / "third.json"
  path.write_text(json.dumps(records.records[:-1]))
  last = records.records[-1]
  held = tuple(last[k] for k in plan.KEY_FIELDS)
  with plan.open_records(str(path)).claim(held) as mine:
    assert mine
    done = edition.run_all(str(path), None, None, ["smoke_clean"], smoke=True, max_runs=1)
  assert len(done.records) == len(records.records) - 1


def test_other_settings_are_refused(smoke_run, tmp_path):
  _, records = smoke_run
  changed = [dict(records.records[0], settings={**records.records[0]["settings"], "patience": 9})]
  path = tmp_path / "third.json"
  path.write_text(json.dumps(changed))
  with pytest.raises(ValueError, match="other settings"):
    edition.run_all(str(path), None, None, ["smoke_clean"], smoke=True)
  with pytest.raises(ValueError, match="unknown 'nope'"):
    edition.run_all(str(path), None, None, ["nope"], smoke=True)


def test_report_from_the_smoke_records(smoke_run, tmp_path):
  _, records = smoke_run
  path = tmp_path / "third.md"
  report.write_report(records.records, str(path), smoke=True)
  text = path.read_text()
  seeds = sum(r["stage"] == "seeds" for r in records.records)
  assert f"| smoke_clean | 4 | {seeds} | 0.0 | complete |" in text  # seconds of tiny runs
  assert "| smoke_group40 | 0 | 0 | 0.0 | not started |" in text
  assert text.count("| pairwise_logistic | dot | 0.01, ") >= 4  # one row per endpoint


def test_command_line_usage_error():
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
  result = subprocess.run(
    [sys.executable, "-m", "experiments.third.edition", "walk"],
    cwd=ROOT,
    capture_output=True,
    text=True,
    env=env,
    check=False,
  )
  assert result.returncode != 0 and "Give one command, run or report" in result.stderr


def test_the_status_block_in_the_docs_is_the_committed_records():
  path = ROOT / "experiments" / "records" / "third.json"
  records = plan.open_records(str(path)).records
  assert blocks.stale(report.BLOCKS_MODULE, report.doc_blocks(records)) == []


@pytest.mark.slow
def test_the_verdict_blocks_are_the_committed_records():
  """The verdict tables of docs/choosing-a-loss.md and docs/evidence-third-edition.md (minutes:
  the bootstrap of every comparison of every complete experiment)."""
  path = ROOT / "experiments" / "records" / "third.json"
  records = plan.open_records(str(path)).records
  found = report.complete_comparisons(records)
  assert blocks.stale(report.VERDICTS_MODULE, report.verdict_blocks(records, found)) == []
