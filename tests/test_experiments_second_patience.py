"""experiments/second/patience.py: the parts that pick, compare and tabulate runs, checked on
hand-made
records; its command line (one-line errors, the smoke configuration); and the docs' generated
block of the committed reruns."""

import json
import os
import pathlib
import subprocess
import sys

import pytest
from absl import app

from experiments import blocks
from experiments.second import patience

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _committed(name):
  """A committed JSON file of ``experiments/records``."""
  return json.loads((ROOT / "experiments" / "records" / name).read_text())


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
  assert patience.parse_runs(["topk_cross_entropy_loss:0", "softmax_loss:12"]) == [
    ("topk_cross_entropy_loss", 0),
    ("softmax_loss", 12),
  ]


@pytest.mark.parametrize("run", ["softmax_loss", "softmax_loss:", ":0", "softmax_loss:x"])
def test_parse_runs_names_a_malformed_entry(run):
  with pytest.raises(app.UsageError, match=f"--runs: '{run}' is not loss:seed"):
    patience.parse_runs([run])


def test_grid_record_finds_the_cifar_seeds_run_and_nothing_else():
  wanted = _record(seed=2)
  records = [
    _record(seed=0),
    dict(_record(seed=2), stage="sweep"),
    dict(_record(seed=2), experiment="clean"),
    dict(_record(seed=2), interaction="concat"),
    wanted,
  ]
  assert patience.grid_record(records, "topk_cross_entropy_loss", 2) is wanted


def test_grid_record_says_which_runs_the_records_hold():
  records = [_record(seed=0), _record(loss="softmax_loss", seed=1), dict(_record(), stage="sweep")]
  with pytest.raises(app.UsageError) as error:
    patience.grid_record(records, "softmax_loss", 5)
  assert str(error.value) == (
    "--runs: no cifar10_e2e seeds record of softmax_loss:5 (dot); the records hold "
    "softmax_loss:1, topk_cross_entropy_loss:0"
  )


def test_check_rerun_names_the_missing_fields():
  rerun = {**_record(), "patience": 24}
  assert patience.check_rerun(rerun) is rerun
  del rerun["validation_curve"], rerun["patience"]
  with pytest.raises(ValueError, match="A rerun record lacks patience, validation_curve: "):
    patience.check_rerun(rerun)


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
  assert patience.agreeing_epochs(curve, other) == expected


def test_table_puts_each_rerun_beside_its_record_and_cuts_it_at_the_records_patience():
  record = dict(_record(curve=(0.5, 0.7, 0.6)), patience=1)
  again = dict(_record(curve=(0.5, 0.6, 0.55, 0.8, 0.7), ndcg_5=0.8125, top_1=0.625), patience=2)
  lines = patience.table([(record, again)])
  run = "| topk_cross_entropy_loss | 0 |"
  assert lines[2:] == [
    f"{run} grid | 1 | 2 | 3 | 0.7000 | 0.7500 | 0.5000 | 1 of 3 epochs |",
    f"{run} rerun | 2 | 4 | 5 | 0.8000 | 0.8125 | 0.6250 | 1 of 3 epochs |",
    f"{run} rerun, cut | 1 | 2 | 3 | 0.6000 | - | - | |",
  ]


@pytest.mark.parametrize(
  "curve, wait, expected",
  [
    ([0.5, 0.7, 0.6, 0.65, 0.8], 2, (2, 4, 0.7)),  # two epochs without a new best: stop at 4
    ([0.5, 0.7, 0.6, 0.65, 0.8], 3, (5, 5, 0.8)),  # the curve ends first
    ([0.5, 0.5, 0.5], 1, (1, 2, 0.5)),  # a tie is not an improvement
    ([0.3], 8, (1, 1, 0.3)),
  ],
)
def test_early_stop_on_hand_made_curves(curve, wait, expected):
  assert patience.early_stop(curve, wait) == expected


def test_early_stop_agrees_with_every_run_the_grid_stopped_early():
  """The grid's records were stopped by a Keras callback (``train_run``); reading their curves
  with their patience must give the best epoch and the epochs each recorded."""
  records = _committed("grid.json")
  stopped = [r for r in records if r["epochs_run"] < r["settings"]["max_epochs"]]
  assert len(stopped) > 400
  for r in stopped:
    best, epochs_run, value = patience.early_stop(r["validation_curve"], r["settings"]["patience"])
    assert (best, epochs_run) == (r["best_epoch"], r["epochs_run"]), r["loss"]
    assert value == pytest.approx(r["validation"]["ndcg_5"], abs=1e-6)


def _command_line(*args, cwd):
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "NO_GCE_CHECK": "true", "PYTHONPATH": str(ROOT)}
  return subprocess.run(
    [sys.executable, "-m", "experiments.second.patience", *args],
    env=env,
    capture_output=True,
    text=True,
    cwd=cwd,
  )


@pytest.mark.parametrize(
  "arguments, message",
  [
    (["run", "--runs=softmax_loss"], "--runs: 'softmax_loss' is not loss:seed"),
    (["run", "--patience=0"], "--patience: 0 is not a positive number of epochs"),
    (["report", "--grid_records=missing.json"], "--grid_records: 'missing.json' is not a file"),
    (["run", "--runs=softmax_loss:9"], "--runs: no cifar10_e2e seeds record of softmax_loss:9"),
    (["run", "--smoke"], "--smoke: give an --output other than the committed reruns"),
  ],
)
def test_bad_arguments_give_one_line_errors(arguments, message, tmp_path):
  result = _command_line(*arguments, cwd=tmp_path)
  assert result.returncode != 0
  assert "Traceback" not in result.stderr, result.stderr[-2000:]
  assert f"experiments.second.patience: error: {message}" in result.stderr, result.stderr[-2000:]


def test_smoke_run_trains_a_baseline_and_its_rerun(tmp_path, datasets_dir):
  """The grid's CIFAR smoke images and CNN: a baseline at patience 1, rerun at patience 2."""
  output, md = tmp_path / "p.json", tmp_path / "p.md"
  readme = (ROOT / "README.md").read_bytes()
  result = _command_line(
    "run",
    "--smoke",
    f"--output={output}",
    f"--report_md={md}",
    f"--data_dir={datasets_dir}",
    cwd=tmp_path,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  (rerun,) = json.loads(output.read_text())
  assert (rerun["loss"], rerun["seed"], rerun["patience"]) == ("softmax_loss", 0, 2)
  lines = md.read_text().splitlines()
  assert len(lines) == 5 and lines[2].startswith("| softmax_loss | 0 | grid | 1 |")
  assert lines[4].startswith("| softmax_loss | 0 | rerun, cut | 1 |")
  assert (ROOT / "README.md").read_bytes() == readme  # the docs' blocks are the committed reruns'


def test_patience_block_in_the_docs_is_the_committed_reruns():
  """The generated block of docs/evidence-grid.md equals the table of the committed reruns
  beside the grid's records (``python -m experiments.second.patience report`` rewrites it)."""
  reruns, records = _committed("patience.json"), _committed("grid.json")
  assert reruns and {r["patience"] for r in reruns} == {24}
  generated = patience.patience_blocks(records, reruns)
  assert blocks.stale(patience.BLOCKS_MODULE, generated) == []
  for again in reruns:  # not bit-reproducible: the docs say a rerun is a new sample of its seed
    record = patience.grid_record(records, again["loss"], again["seed"])
    assert patience.agreeing_epochs(record["validation_curve"], again["validation_curve"]) == 0
