"""experiments/second/grid.py on the smoke configuration (random features, 2 losses, 1 head, 2
learning rates, 2 seeds, 2 epochs; CIFAR-10: a few real images, a tiny CNN): records, the
sweep's choice, resumption, processes sharing a records file, the command line."""

import contextlib
import json
import os
import pathlib
import re
import subprocess
import sys
import time

import numpy as np
import pytest

from experiments import training
from experiments.second import grid, plan, protocol, report

SMOKE = plan.SMOKE
CIFAR_SMOKE = plan.CIFAR_SMOKE
ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_records_schema_and_counts(smoke_grid):
  output, records = smoke_grid
  loaded = json.loads(output.read_text())
  assert loaded == records.records
  sweep = [r for r in loaded if r["stage"] == "sweep"]
  seeds = [r for r in loaded if r["stage"] == "seeds"]
  cells = len(SMOKE["losses"]) * len(SMOKE["heads"])
  assert len(sweep) == cells * len(SMOKE["learning_rates"]) * len(SMOKE["tuning_seeds"])
  assert len(seeds) == cells * len(SMOKE["evaluation_seeds"])
  for r in loaded:
    assert set(plan.RECORD_FIELDS) <= set(r)
    assert r["edition"] == protocol.EDITION == 2
    assert r["learning_rate"] in SMOKE["learning_rates"]
    assert 1 <= r["best_epoch"] <= r["epochs_run"] <= SMOKE["max_epochs"]
    assert len(r["validation_curve"]) == r["epochs_run"]
    assert r["validation"]["ndcg_5"] == max(r["validation_curve"]) or np.isclose(
      r["validation"]["ndcg_5"], max(r["validation_curve"]), atol=1e-6
    )
    assert all(0.0 <= r[m] <= 1.0 for m in training.METRICS)
    assert r["test_scores_finite"]
    assert r["settings"]["smoke"] is True
  tuning = {r["seed"] for r in sweep}
  assert tuning == set(SMOKE["tuning_seeds"]) and not tuning & {r["seed"] for r in seeds}


def test_seeds_stage_uses_the_sweeps_best_rate(smoke_grid):
  _, records = smoke_grid
  for loss in SMOKE["losses"]:
    sweep = {
      r["learning_rate"]: r["validation"]["ndcg_5"]
      for r in records.records
      if r["stage"] == "sweep" and r["loss"] == loss
    }
    best = max(sorted(sweep), key=lambda rate: sweep[rate])  # first (smaller) rate on a tie
    used = {
      r["learning_rate"] for r in records.records if r["stage"] == "seeds" and r["loss"] == loss
    }
    assert used == {best}


def test_resumption_reruns_only_the_dropped_runs(smoke_grid, tmp_path):
  output, records = smoke_grid
  kept = [r for r in records.records if not (r["stage"] == "seeds" and r["seed"] == 1)]
  dropped = {plan.record_key(r) for r in records.records} - {plan.record_key(r) for r in kept}
  assert len(dropped) == len(SMOKE["losses"])
  path = tmp_path / "grid.json"
  path.write_text(json.dumps(kept))
  resumed = grid.run_grid(str(path), str(tmp_path / "work"), None, smoke=True)
  assert len(resumed.records) == len(records.records)
  assert resumed.records[: len(kept)] == kept  # untouched, in order
  assert {plan.record_key(r) for r in resumed.records[len(kept) :]} == dropped
  # a finished grid reruns nothing
  again = grid.run_grid(str(path), str(tmp_path / "work"), None, smoke=True)
  assert again.records == resumed.records


#: The smoke grid's first sweep run, which the tests below hold as another process would.
HELD = (
  "clean",
  "sweep",
  SMOKE["losses"][0],
  "dot",
  SMOKE["learning_rates"][0],
  SMOKE["tuning_seeds"][0],
)


def _held(path, run):
  """A claim on the planned ``run`` of the records at ``path``, as another process holds it."""
  return plan.open_records(str(path)).claim((protocol.EDITION,) + tuple(run))


def test_a_run_held_by_another_process_is_left_to_it(smoke_grid, tmp_path):
  """While another process holds one sweep run, this process runs every other run it can (the
  other cell's sweep and seeds) and leaves the held run and the seeds that wait on its cell's
  sweep; once the hold ends, a later start runs just those."""
  _, records = smoke_grid
  path, work = tmp_path / "grid.json", str(tmp_path / "work")
  loss, other = SMOKE["losses"]
  held = HELD
  with _held(path, held) as mine:
    assert mine
    first = grid.run_grid(str(path), work, None, smoke=True)
  ran = {plan.record_key(r) for r in first.records}
  everything = {plan.record_key(r) for r in records.records}
  left = {k for k in everything if k[3] == loss and (k[2] == "seeds" or k[5] == held[4])}
  assert ran == everything - left and len(left) == 1 + len(SMOKE["evaluation_seeds"])
  assert {k[3] for k in ran if k[2] == "seeds"} == {other}
  second = grid.run_grid(str(path), work, None, smoke=True)
  assert {plan.record_key(r) for r in second.records[len(ran) :]} == left


def test_a_waiting_process_goes_on_once_the_held_run_is_released(smoke_grid, tmp_path, monkeypatch):
  """With ``wait_hours``, a process whose remaining runs are held elsewhere or wait on them
  sleeps in naps of ``WAIT_POLL_SECONDS`` (counted against ``wait_hours``); when the other
  process lets go of the run without recording it (it died), this one runs it and finishes."""
  _, records = smoke_grid
  path, work = tmp_path / "grid.json", str(tmp_path / "work")
  held = HELD
  naps = []
  with contextlib.ExitStack() as other_process:
    assert other_process.enter_context(_held(path, held))

    def nap_then_release(seconds):
      naps.append(seconds)
      if len(naps) == 2:
        other_process.close()

    monkeypatch.setattr(grid.time, "sleep", nap_then_release)
    done = grid.run_grid(str(path), work, None, smoke=True, wait_hours=1)
  assert naps == [grid.WAIT_POLL_SECONDS] * 2
  everything = {plan.record_key(r) for r in records.records}
  assert {plan.record_key(r) for r in done.records} == everything
  assert plan.record_key(done.records[-1 - len(SMOKE["evaluation_seeds"])])[5] == held[4]
  assert len(json.loads(path.read_text())) == len(everything)


def test_a_waiting_process_stops_when_its_wait_is_spent(smoke_grid, tmp_path, monkeypatch):
  """With the held run never released, the process waits ``wait_hours`` in naps of
  ``WAIT_POLL_SECONDS`` and stops with the rest done; ``wait_hours=0`` stops at once."""
  _, records = smoke_grid
  path, work = tmp_path / "grid.json", str(tmp_path / "work")
  held = HELD
  naps = []
  monkeypatch.setattr(grid.time, "sleep", naps.append)
  with _held(path, held) as mine:
    assert mine
    alone = grid.run_grid(str(path), work, None, smoke=True, wait_hours=0.05)
    assert naps == [60, 60, 60]  # 0.05 h = 180 s
    assert 0 < len(alone) < len(records.records)
    naps.clear()
    again = grid.run_grid(str(path), work, None, smoke=True)
    assert naps == [] and len(again) == len(alone)


_GRID_PROCESS = """
import os, time
from experiments import training
from experiments.second import grid
train_run = training.train_run
def slow_train_run(*args, **kwargs):  # long enough for the other process to claim runs too
  time.sleep(0.5)
  return train_run(*args, **kwargs)
training.train_run = slow_train_run
open({path!r} + ".ready{n}", "w").close()
while not os.path.exists({path!r} + ".go"):
  time.sleep(0.01)
grid.run_grid({path!r}, {work!r}, None, smoke=True, wait_hours=1)
"""


# Slow (two grid processes, about 90 s): the default suite checks claiming with a held run, a
# released hold and a spent wait here, and the lock itself in tests/test_experiments_store.py.
@pytest.mark.slow
def test_two_processes_on_one_file_share_the_runs(smoke_grid, tmp_path):
  """Two grid processes started together on one records file: every planned run is recorded
  once (a duplicate would be refused by ``RecordStore.add`` and fail the process), and each
  process trained some of them."""

  _, records = smoke_grid
  path, work = str(tmp_path / "grid.json"), str(tmp_path / "work")
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(ROOT)}
  code = [_GRID_PROCESS.format(path=path, work=work, n=n) for n in (0, 1)]
  processes = [
    subprocess.Popen([sys.executable, "-c", c], env=env, stderr=subprocess.PIPE, text=True)
    for c in code
  ]
  deadline = time.monotonic() + 300
  while not all(os.path.exists(f"{path}.ready{n}") for n in (0, 1)):
    assert time.monotonic() < deadline and all(p.poll() is None for p in processes)
    time.sleep(0.05)
  open(f"{path}.go", "w").close()
  logs = [p.communicate(timeout=600)[1] for p in processes]
  assert [p.returncode for p in processes] == [0, 0], [log[-2000:] for log in logs]
  found = [plan.record_key(r) for r in json.loads(pathlib.Path(path).read_text())]
  assert sorted(found) == sorted(plan.record_key(r) for r in records.records)
  assert all(re.search(r"^\[1 new, ", log, re.M) for log in logs), logs


@pytest.mark.parametrize(
  "options, message",
  [
    ({"wait_hours": -1.0}, "`wait_hours` must be a finite number >= 0, got -1.0"),
    ({"wait_hours": "1"}, "`wait_hours` must be a finite number >= 0, got '1'"),
    ({"experiments": ["clean", "noise"]}, "`experiments`: unknown 'noise'; allowed: "),
  ],
)
def test_bad_scheduling_is_refused(tmp_path, options, message):
  with pytest.raises(ValueError, match=message):
    grid.run_grid(str(tmp_path / "g.json"), str(tmp_path / "w"), None, smoke=True, **options)


def _command_line(*args, cwd):
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(ROOT)}
  return subprocess.run(
    [sys.executable, "-m", "experiments.second.grid", *args],
    capture_output=True,
    text=True,
    env=env,
    cwd=cwd,
    check=False,
  )


def test_the_command_line_reports_a_bad_wait_on_one_line(tmp_path):
  done = _command_line(
    "run",
    "--smoke",
    f"--output={tmp_path / 'g.json'}",
    f"--work_dir={tmp_path / 'w'}",
    "--wait_hours=-1",
    cwd=tmp_path,
  )
  assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
  assert done.stderr.strip().splitlines()[-1] == (
    "experiments.second.grid: error: `wait_hours` must be a finite number >= 0, got -1.0."
  )
  assert not (tmp_path / "g.json").exists()


@pytest.mark.parametrize("args", [(), ("train",), ("run", "report")])
def test_the_command_line_takes_one_command(args, tmp_path):
  done = _command_line(*args, cwd=tmp_path)
  assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
  assert done.stderr.strip().splitlines()[-1] == (
    f"experiments.second.grid: error: Give one command, run or report; got {list(args)}"
  )


def test_report_writes_the_report_of_the_records_it_is_given(smoke_grid, tmp_path):
  """``report`` on records other than the committed ones writes their report and leaves the
  docs' generated blocks alone."""
  output, _ = smoke_grid
  md, png = tmp_path / "r.md", tmp_path / "r.png"
  readme = (ROOT / "README.md").read_bytes()
  done = _command_line(
    "report", f"--output={output}", f"--report_md={md}", f"--report_png={png}", cwd=tmp_path
  )
  assert done.returncode == 0, done.stderr[-2000:]
  assert md.read_text().startswith("# Which loss and which head?") and png.stat().st_size > 1000
  assert "rewrote" not in done.stdout and (ROOT / "README.md").read_bytes() == readme


def test_resuming_with_other_settings_is_refused(smoke_grid, tmp_path):
  output, _ = smoke_grid
  path = tmp_path / "grid.json"
  path.write_text(output.read_text())
  with pytest.raises(ValueError, match="other settings"):
    grid.run_grid(str(path), str(tmp_path / "work"), None, smoke=True, max_epochs=3)


def test_cifar_records_and_report(cifar_grid, tmp_path):
  _, records = cifar_grid
  runs = records.records
  cells = len(CIFAR_SMOKE["losses"]) * len(CIFAR_SMOKE["heads"])
  per_cell = len(CIFAR_SMOKE["learning_rates"]) + len(CIFAR_SMOKE["evaluation_seeds"])
  assert len(runs) == cells * per_cell
  train, test = CIFAR_SMOKE["per_class"]["train"], CIFAR_SMOKE["per_class"]["test"]
  for r in runs:
    assert r["experiment"] == "cifar10_e2e" and r["dataset"] == "smoke"
    assert r["settings"]["model"]["encoder"] == "small_cnn"
    assert r["settings"]["model"]["validation_fraction"] == 0.1
    # round(0.1 * 10) = 1 image of each of the 10 classes is held out for validation
    assert (r["n_train"], r["n_validation"], r["n_test"]) == (10 * (train - 1), 10, 10 * test)
    assert 1 <= r["best_epoch"] <= r["epochs_run"] <= CIFAR_SMOKE["max_epochs"]
    assert r["test_scores_finite"]
  for loss in CIFAR_SMOKE["losses"]:
    sweep = {
      r["learning_rate"]: r["validation"]["ndcg_5"]
      for r in runs
      if r["stage"] == "sweep" and r["loss"] == loss
    }
    best = max(sorted(sweep), key=lambda rate: sweep[rate])
    assert {r["learning_rate"] for r in runs if r["stage"] == "seeds" and r["loss"] == loss} == {
      best
    }
  md = tmp_path / "r.md"
  report.write_report(runs, str(md), str(tmp_path / "r.png"))
  text = md.read_text()
  assert "## cifar10_e2e" in text and "Holm family: 1 cells" in text
  assert f"**Complete**: all {len(runs)} planned runs of cifar10_e2e are recorded." in text
  assert "clean: the primary experiment has no record" in text
  assert "`" not in text.split("## Deviations from the protocol")[1].split("## cifar10_e2e")[0]


def test_one_file_holds_every_experiment(smoke_grid, cifar_grid, tmp_path):
  path = tmp_path / "grid.json"
  both = json.loads(smoke_grid[0].read_text()) + json.loads(cifar_grid[0].read_text())
  path.write_text(json.dumps(both))
  resumed = grid.run_grid(
    str(path), str(tmp_path / "work"), None, experiments=("clean", "cifar10_e2e"), smoke=True
  )
  assert resumed.records == both  # nothing to rerun, and no settings clash between experiments
