"""Tests of benchmarks/grid_patience.py: the parts that pick, compare and tabulate runs, checked on
hand-made records, and its command line's one-line errors. Its quick mode (a baseline and a
rerun on the grid's smoke images) runs in tests/test_benchmarks.py."""

import json
import os
import pathlib
import subprocess
import sys

import grid_patience
import pytest
from absl import app

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _committed(name):
  """A committed JSON file of ``benchmarks/out``."""
  return json.loads((ROOT / "benchmarks" / "out" / name).read_text())


def _record(loss="topk_cross_entropy_loss", seed=0, curve=(0.5, 0.7, 0.6), patience=1, **extra):
  """A seeds record of ``cifar10_e2e`` as the grid writes it, with only the fields used here."""
  best = max(range(len(curve)), key=curve.__getitem__)
  return {
    "experiment": "cifar10_e2e",
    "stage": "seeds",
    "loss": loss,
    "interaction": "dot",
    "seed": seed,
    "learning_rate": 1e-3,
    "settings": {"patience": patience},
    "validation_curve": list(curve),
    "best_epoch": best + 1,
    "epochs_run": len(curve),
    "ndcg_5": 0.75,
    "top_1": 0.5,
    **extra,
  }


def test_parse_runs_reads_loss_and_seed():
  assert grid_patience.parse_runs(["topk_cross_entropy_loss:0", "softmax_loss:12"]) == [
    ("topk_cross_entropy_loss", 0),
    ("softmax_loss", 12),
  ]


@pytest.mark.parametrize("run", ["softmax_loss", "softmax_loss:", ":0", "softmax_loss:x"])
def test_parse_runs_names_a_malformed_entry(run):
  with pytest.raises(app.UsageError, match=f"--runs: '{run}' is not loss:seed"):
    grid_patience.parse_runs([run])


def test_grid_record_finds_the_cifar_seeds_run_and_nothing_else():
  wanted = _record(seed=2)
  records = [
    _record(seed=0),
    dict(_record(seed=2), stage="sweep"),
    dict(_record(seed=2), experiment="clean"),
    dict(_record(seed=2), interaction="concat"),
    wanted,
  ]
  assert grid_patience.grid_record(records, "topk_cross_entropy_loss", 2) is wanted


def test_grid_record_says_which_runs_the_records_hold():
  records = [_record(seed=0), _record(loss="softmax_loss", seed=1), dict(_record(), stage="sweep")]
  with pytest.raises(app.UsageError) as error:
    grid_patience.grid_record(records, "softmax_loss", 5)
  assert str(error.value) == (
    "--runs: no cifar10_e2e seeds record of softmax_loss:5 (dot); the records hold "
    "softmax_loss:1, topk_cross_entropy_loss:0"
  )


def test_check_rerun_names_the_missing_fields():
  rerun = {**_record(), "patience": 24}
  assert grid_patience.check_rerun(rerun) is rerun
  del rerun["validation_curve"], rerun["patience"]
  with pytest.raises(ValueError, match="A rerun record lacks patience, validation_curve: "):
    grid_patience.check_rerun(rerun)


@pytest.mark.parametrize(
  "curve, other, expected",
  [
    ([0.1, 0.2, 0.3], [0.1, 0.2, 0.4], 2),  # they part at the third epoch
    ([0.1, 0.2], [0.1, 0.2, 0.3, 0.4], 2),  # the shorter run ends
    ([0.1, 0.2], [0.2, 0.2], 0),  # they differ from the start
    ([0.1, 0.2], [0.1 + 5e-7, 0.2 - 5e-7], 2),  # within the tolerance (1e-6): rounding
    ([], [0.1], 0),
  ],
)
def test_agreeing_epochs_counts_the_leading_epochs_that_agree(curve, other, expected):
  assert grid_patience.agreeing_epochs(curve, other) == expected


def test_table_puts_each_rerun_beside_its_record_and_cuts_it_at_the_records_patience():
  record = dict(_record(curve=(0.5, 0.7, 0.6)), patience=1)
  again = dict(_record(curve=(0.5, 0.6, 0.55, 0.8, 0.7), ndcg_5=0.8125, top_1=0.625), patience=2)
  lines = grid_patience.table([(record, again)])
  run = "| topk_cross_entropy_loss | 0 |"
  assert lines[2:] == [
    f"{run} grid | 1 | 2 | 3 | 0.7000 | 0.7500 | 0.5000 | 1 of 3 epochs |",
    f"{run} rerun | 2 | 4 | 5 | 0.8000 | 0.8125 | 0.6250 | 1 of 3 epochs |",
    f"{run} rerun, cut | 1 | 2 | 3 | 0.6000 | - | - | |",
  ]


@pytest.mark.parametrize(
  "curve, patience, expected",
  [
    ([0.5, 0.7, 0.6, 0.65, 0.8], 2, (2, 4, 0.7)),  # two epochs without a new best: stop at 4
    ([0.5, 0.7, 0.6, 0.65, 0.8], 3, (5, 5, 0.8)),  # the curve ends first
    ([0.5, 0.5, 0.5], 1, (1, 2, 0.5)),  # a tie is not an improvement
    ([0.3], 8, (1, 1, 0.3)),
  ],
)
def test_early_stop_on_hand_made_curves(curve, patience, expected):
  assert grid_patience.early_stop(curve, patience) == expected


def test_early_stop_agrees_with_every_run_the_grid_stopped_early():
  """The grid's records were stopped by a Keras callback (``train_run``); reading their curves
  with their patience must give the best epoch and the epochs each recorded."""
  records = _committed("rank4class_grid_v2.json")
  stopped = [r for r in records if r["epochs_run"] < r["settings"]["max_epochs"]]
  assert len(stopped) > 400
  for r in stopped:
    best, epochs_run, value = grid_patience.early_stop(
      r["validation_curve"], r["settings"]["patience"]
    )
    assert (best, epochs_run) == (r["best_epoch"], r["epochs_run"]), r["loss"]
    assert value == pytest.approx(r["validation"]["ndcg_5"], abs=1e-6)


@pytest.mark.parametrize(
  "argument, message",
  [
    ("--runs=softmax_loss", "--runs: 'softmax_loss' is not loss:seed"),
    ("--patience=0", "--patience: 0 is not a positive number of epochs"),
    ("--grid_records=missing.json", "--grid_records: 'missing.json' is not a file"),
    ("--runs=softmax_loss:9", "--runs: no cifar10_e2e seeds record of softmax_loss:9 (dot)"),
  ],
)
def test_bad_arguments_give_one_line_errors(argument, message, tmp_path):
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "NO_GCE_CHECK": "true"}
  result = subprocess.run(
    [sys.executable, str(ROOT / "benchmarks" / "grid_patience.py"), argument],
    env=env,
    capture_output=True,
    text=True,
    cwd=tmp_path,
  )
  assert result.returncode != 0
  assert "Traceback" not in result.stderr, result.stderr[-2000:]
  assert f"grid_patience.py: error: {message}" in result.stderr, result.stderr[-2000:]


def test_docs_patience_check_is_the_committed_reruns():
  """docs/evidence-grid.md's account of the patience check: for every committed rerun
  (``benchmarks/out/grid_patience.json``), its best epoch, epochs run and test NDCG@5 beside its
  grid record's, and where its own curve would have stopped at the grid's patience."""
  reruns = _committed("grid_patience.json")
  records = _committed("rank4class_grid_v2.json")
  doc = " ".join((ROOT / "docs" / "evidence-grid.md").read_text().split())
  names = {"softmax_loss": "softmax", "topk_cross_entropy_loss": "the top-k cross-entropy"}
  assert reruns and {r["patience"] for r in reruns} == {24}
  for again in reruns:
    record = grid_patience.grid_record(records, again["loss"], again["seed"])
    best, stopped, value = grid_patience.early_stop(
      again["validation_curve"], record["settings"]["patience"]
    )
    agree = grid_patience.agreeing_epochs(record["validation_curve"], again["validation_curve"])
    assert agree == 0  # not bit-reproducible: the docs say a rerun is a new sample of its seed
    sentence = (
      f"{names[again['loss']]}, seed {again['seed']}: best epoch {again['best_epoch']} of "
      f"{again['epochs_run']}, test NDCG@5 {again['ndcg_5']:.4f} (recorded: "
      f"{record['ndcg_5']:.4f}, best epoch {record['best_epoch']}); at a patience of 8 it would "
      f"have stopped at epoch {stopped} (best epoch {best}, validation NDCG@5 {value:.4f} "
      f"against the record's {record['validation']['ndcg_5']:.4f})"
    )
    assert sentence in doc, sentence
    assert f"{max(again['validation_curve']) - value:.2f}" == "0.03"  # "added about 0.03"
  readme = " ".join((ROOT / "README.md").read_text().split())
  seed_0 = next(r for r in reruns if (r["loss"], r["seed"]) == ("topk_cross_entropy_loss", 0))
  record = grid_patience.grid_record(records, "topk_cross_entropy_loss", 0)
  softmax = grid_patience.grid_record(records, "softmax_loss", 0)
  assert (
    f"Rerun outside the protocol with a patience of 24, seed 0 reached test NDCG@5 "
    f"{seed_0['ndcg_5']:.4f} instead of {record['ndcg_5']:.4f} (softmax + dot's seed 0: "
    f"{softmax['ndcg_5']:.4f}; docs/evidence-grid.md): part of its gap is early stopping" in readme
  )
  assert f"Softmax + dot's seed 0 (test NDCG@5 {softmax['ndcg_5']:.4f}) was not rerun" in doc
