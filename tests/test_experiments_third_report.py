"""experiments/third/report.py on hand-made records of the smoke design: which runs an endpoint
is read from, the comparison against the reference (difference by hand, Holm family without our
own cell), convergence, collapse, the status table, verdicts only for complete experiments."""

import numpy as np
import pytest

from experiments import true_ranks
from experiments.third import plan, report

SEEDS = plan.SMOKE["evaluation_seeds"]
RATE = plan.SMOKE["rates"][0]


def _test(rank, share=0.5, std=1.0):
  rank = np.asarray(rank)
  checkpoint = {
    "finite": True,
    "rank": true_ranks.encode(rank),
    "ties": true_ranks.encode(np.zeros_like(rank)),
    "top_class_share": share,
    "score_std": std,
    "cross_entropy": 2.0 * std,
  }
  return {e: checkpoint for e in ("top_1", "top_5", "ndcg_5")}


def _record(stage, cell, scale, seed, rank, stopped="patience", top_1=0.5, share=0.5):
  return {
    "edition": 3,
    "experiment": "smoke_clean",
    "stage": stage,
    "cell": cell,
    "head": "dot",
    "learning_rate": RATE,
    "scale": scale,
    "seed": seed,
    "max_epochs": 2,
    "epochs_run": 2,
    "stopped_by": stopped,
    "best_epoch": {"top_1": 1, "top_5": 2},
    "validation": {"top_1": top_1, "top_5": top_1},
    "test": _test(rank, share),
    "flip_rate": 0.0,
    "seconds_per_epoch": 1.0,
    "train_seconds": 2.0,
  }


@pytest.fixture
def records():
  found = [_record("sweep", "softmax", None, 1000, [1, 2])]
  found += [
    _record("sweep", "pairwise_logistic", s, 1000, [1, 2], top_1=0.9 if s == 1.0 else 0.1)
    for s in (0.333333, 1.0, 3.0)
  ]
  found += [_record("seeds", "softmax", None, s, [1, 2, 7, 1], stopped="budget") for s in SEEDS]
  found += [_record("seeds", "pairwise_logistic", 1.0, s, [1, 1, 1, 1], share=1.0) for s in SEEDS]
  return found


def test_comparison_against_the_reference(records):
  rows = report.comparisons(records, "smoke_clean", "top_1", smoke=True, replicates=500)
  assert [(r["cell"], r["config"]) for r in rows] == [
    ("softmax", (RATE, None)),
    ("pairwise_logistic", (RATE, 1.0)),
  ]
  assert rows[0]["mean"] == 0.5 and rows[1]["mean"] == 1.0
  svm = rows[1]
  assert svm["bootstrap"]["difference"] == pytest.approx(0.5)
  assert svm["holm_p"] == svm["bootstrap"]["p_value"]  # a family of one
  assert svm["mde"][0] == svm["mde"][1]
  mrr = report.comparisons(records, "smoke_clean", "mrr", smoke=True, replicates=100)
  assert mrr[0]["mean"] == pytest.approx((1 + 1 / 2 + 1 / 7 + 1) / 4)


def test_convergence_collapse_and_status(records):
  found = report.convergence(records, "smoke_clean")
  assert found[("softmax", "dot", 2)] == (0.0, 2, 2)
  assert found[("pairwise_logistic", "dot", 2)][0] == 1.0
  # a rerun at a longer budget gets its own row; the budget-2 row is unchanged
  rerun = dict(records[-1], max_epochs=4, epochs_run=4, stopped_by="budget")
  found = report.convergence(records + [rerun], "smoke_clean")
  assert found[("pairwise_logistic", "dot", 4)] == (0.0, 1, 1)
  assert found[("pairwise_logistic", "dot", 2)] == (1.0, 2, 2)
  assert report.unscored(records, "smoke_clean") == []
  records[0]["test"] = {"top_1": {"finite": False}}
  assert report.unscored(records, "smoke_clean") == [records[0]]
  assert [r["cell"] for r in report.collapsed(records, "smoke_clean")] == ["pairwise_logistic"] * 2
  # the softmax seeds hit the budget: their rerun is planned, so the experiment is not complete
  lines = report.status_lines(records, smoke=True)
  assert lines[2] == "| smoke_clean | 4 | 4 | 0.0 | in progress |"  # 8 runs of 2 s
  for r, seconds in zip(records, (900, 1800, 2700, 3600, 0, 0, 0, 90)):
    r["train_seconds"] = seconds
  assert report.status_lines(records, smoke=True)[2].endswith("| 2.5 | in progress |")
  assert lines[3] == "| smoke_group40 | 0 | 0 | 0.0 | not started |"


def test_score_scales_are_medians_over_the_top_1_runs(records):
  seeds = [r for r in records if r["stage"] == "seeds" and r["cell"] == "pairwise_logistic"]
  for r, std in zip(seeds, (1.0, 5.0)):
    r["test"] = _test([1, 1, 1, 1], share=1.0, std=std)
  seeds[1]["test"]["top_1"]["top_class_share"] = 0.5
  found = report.score_scales(records, "smoke_clean", smoke=True)
  # two seeds: the median is the mean of the two
  assert found[("pairwise_logistic", "dot")] == (2, 3.0, 6.0, 0.75, 1)
  assert found[("softmax", "dot")] == (2, 1.0, 2.0, 0.5, 0)


def test_no_verdict_from_an_incomplete_experiment(records, tmp_path):
  path = tmp_path / "r.md"
  report.write_report(records, str(path), smoke=True)
  assert "Not complete: no verdict is drawn from it." in path.read_text()
  for r in records:
    r["stopped_by"] = "patience"
  report.write_report(records, str(path), smoke=True)
  text = path.read_text()
  assert "Training labels changed by the noise: 0.0000." in text
  assert (
    text.count("Not complete") == 1
    and "| pairwise_logistic | dot | 0.01, 1.0 | 1.0000 | +0.5000" in text
  )
  assert "| pairwise_logistic | dot | 2 | 1 | 2 | 1.000 | 2 |" in text


def test_verdicts_name_the_cells_holm_separates_and_only_complete_experiments(records, monkeypatch):
  assert report.complete_comparisons(records, smoke=True, replicates=200) == {}
  assert report.verdict_lines(records, {}, smoke=True) == [
    "No experiment is complete yet: no verdict."
  ]
  for r in records:
    r["stopped_by"] = "patience"
    if r["stage"] == "seeds":  # 20 test examples: softmax ranks the true class 2nd in half
      r["test"] = _test([1] * 20 if r["cell"] == "pairwise_logistic" else [1, 2] * 10)
  found = report.complete_comparisons(records, smoke=True, replicates=500)
  assert sorted({name for name, _ in found}) == ["smoke_clean"]
  lines = report.verdict_lines(records, found, smoke=True)
  # +0.5 on Top-1 for pairwise logistic, the only member of its Holm family (a bootstrap draw
  # with no gain takes all 20 examples from the 10 tied ones: p about 2^-20); on Top-5 both
  # rank every true class within the top 5.
  top_1 = next(line for line in lines if "| Top-1 |" in line)
  assert top_1 == (
    "| smoke_clean | smoke, clean labels, dot head | Top-1 | softmax + dot "
    "| pairwise_logistic (+0.5000) | none | none |"
  )
  top_5 = next(line for line in lines if "| Top-5 |" in line)
  assert top_5.endswith("| none | none | none |")
  blocks = report.verdict_blocks(records, found, smoke=True)
  assert blocks == {f"{report.VERDICTS_MODULE}:table": lines}
  # an experiment of several heads names each cell's head (one cell runs on two)
  design = {**plan.SMOKE_EXPERIMENTS["smoke_clean"], "heads": ["dot", "concat"]}
  monkeypatch.setitem(plan.SMOKE_EXPERIMENTS, "smoke_clean", design)
  top_1 = next(
    line for line in report.verdict_lines(records, found, smoke=True) if "| Top-1 |" in line
  )
  assert "dot / concat head | Top-1 | softmax + dot | pairwise_logistic + dot (+0.5000) |" in top_1


def test_noise_within_groups_against_uniform_noise(records, monkeypatch):
  uniform = {**plan.SMOKE_EXPERIMENTS["smoke_group40"], "noise": ("uniform", 0.4)}
  monkeypatch.setitem(plan.SMOKE_EXPERIMENTS, "smoke_uniform40", uniform)
  assert report.noise_contrasts(records, smoke=True, replicates=100) == {}
  for r in records:
    r["stopped_by"] = "patience"
  # 20 test examples; softmax ranks the true class 2nd in half of them in both conditions,
  # pairwise logistic 1st in all of them under group noise and in the first 15 under uniform
  ranks = {"smoke_group40": [1] * 20, "smoke_uniform40": [1] * 15 + [2] * 5}
  for name, rank in ranks.items():
    made = [_record("sweep", "softmax", None, 1000, [1, 2])]
    made.append(_record("sweep", "pairwise_logistic", 1.0, 1000, [1, 2]))
    for s in SEEDS:
      made.append(_record("seeds", "softmax", None, s, [1, 2] * 10))
      made.append(_record("seeds", "pairwise_logistic", 1.0, s, rank))
    records += [dict(r, experiment=name) for r in made]
  found = report.noise_contrasts(records, smoke=True, replicates=500)
  assert list(found) == [
    ("smoke_group40", "smoke_uniform40", e) for e in ("top_1", "top_5", "ndcg_5", "mrr")
  ]
  # Top-1: +0.5 under group noise, +0.25 under uniform; the contrast is 1 on examples 15-19
  # and 0 elsewhere, so its bootstrap interval leaves out 0
  (row,) = found[("smoke_group40", "smoke_uniform40", "top_1")]
  assert (row["cell"], row["group"], row["uniform"]) == ("pairwise_logistic", 0.5, 0.25)
  assert row["bootstrap"]["difference"] == pytest.approx(0.25) and row["bootstrap"]["low"] > 0
  # Top-5: every true class is within the top 5 everywhere
  (row,) = found[("smoke_group40", "smoke_uniform40", "top_5")]
  assert row["group"] == row["uniform"] == row["bootstrap"]["difference"] == 0.0
  lines = report._contrast_lines(found)
  assert "| pairwise_logistic | +0.5000 | +0.2500 | +0.2500 | [" in "\n".join(lines)


def test_choices_at_an_edge_of_the_sweep_are_flagged(records, tmp_path):
  # the pairwise logistic sweep now chooses the largest of its scales (0.333, 1 and 3), where
  # its seeds ran; the smoke design allows no widening
  for r in records:
    r["stopped_by"] = "patience"
    if r["cell"] == "pairwise_logistic":
      if r["stage"] == "sweep":
        r["validation"] = {e: 0.9 if r["scale"] == 3.0 else 0.1 for e in ("top_1", "top_5")}
      else:
        r["scale"] = 3.0
  path = tmp_path / "r.md"
  report.write_report(records, str(path), smoke=True)
  assert (
    "Choices at an edge of what the sweep ran, after its widening: pairwise_logistic + dot, "
    "Top-1: scale 3 (the largest run); pairwise_logistic + dot, Top-5: scale 3 (the largest run)."
  ) in path.read_text()
