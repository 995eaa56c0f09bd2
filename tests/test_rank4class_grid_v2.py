"""benchmarks/rank4class_grid_v2.py: the smoke grid (random features, 2 losses, 1 head, 2 learning
rates, 2 seeds, 2 epochs): record schema, the sweep's choice, resumption, the report's statistics
against scipy, label noise."""

import doctest
import json

import grid_protocol
import numpy as np
import pytest
import rank4class_grid_v2 as grid_v2
from scipy import stats

SMOKE = grid_v2.SMOKE


@pytest.fixture(scope="module")
def smoke_grid(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("grid_v2")
  output = tmp / "grid.json"
  records = grid_v2.run_grid(str(output), str(tmp / "work"), None, smoke=True)
  return output, records


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
    assert set(grid_v2.RECORD_FIELDS) <= set(r)
    assert r["edition"] == grid_protocol.EDITION == 2
    assert r["learning_rate"] in SMOKE["learning_rates"]
    assert 1 <= r["best_epoch"] <= r["epochs_run"] <= SMOKE["max_epochs"]
    assert len(r["validation_curve"]) == r["epochs_run"]
    assert r["validation"]["ndcg_5"] == max(r["validation_curve"]) or np.isclose(
      r["validation"]["ndcg_5"], max(r["validation_curve"]), atol=1e-6
    )
    assert all(0.0 <= r[m] <= 1.0 for m in grid_v2.METRICS)
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
  dropped = {grid_v2.record_key(r) for r in records.records} - {grid_v2.record_key(r) for r in kept}
  assert len(dropped) == len(SMOKE["losses"])
  path = tmp_path / "grid.json"
  path.write_text(json.dumps(kept))
  resumed = grid_v2.run_grid(str(path), str(tmp_path / "work"), None, smoke=True)
  assert len(resumed.records) == len(records.records)
  assert resumed.records[: len(kept)] == kept  # untouched, in order
  assert {grid_v2.record_key(r) for r in resumed.records[len(kept) :]} == dropped
  # a finished grid reruns nothing
  again = grid_v2.run_grid(str(path), str(tmp_path / "work"), None, smoke=True)
  assert again.records == resumed.records


def test_resuming_with_other_settings_is_refused(smoke_grid, tmp_path):
  output, _ = smoke_grid
  path = tmp_path / "grid.json"
  path.write_text(output.read_text())
  with pytest.raises(ValueError, match="other settings"):
    grid_v2.run_grid(str(path), str(tmp_path / "work"), None, smoke=True, max_epochs=3)


def test_report_statistics_against_scipy(smoke_grid, tmp_path):
  _, records = smoke_grid
  rows, family = grid_v2.summarize(records.records, "clean")
  assert family == len(SMOKE["losses"]) * len(SMOKE["heads"]) - 1 == len(rows)
  base = {
    r["seed"]: r
    for r in records.records
    if r["stage"] == "seeds" and (r["loss"], r["interaction"]) == grid_protocol.BASELINE
  }
  for row in rows:
    cell = {
      r["seed"]: r
      for r in records.records
      if r["stage"] == "seeds"
      and (r["loss"], r["interaction"]) == (row["loss"], row["interaction"])
    }
    for metric, entry in row["metrics"].items():
      a = [cell[s][metric] for s in row["seeds"]]
      b = [base[s][metric] for s in row["seeds"]]
      d = np.subtract(a, b)
      np.testing.assert_allclose(entry["interval"].mean, d.mean(), atol=1e-12)
      if np.std(d) > 0:
        np.testing.assert_allclose(entry["p"], stats.ttest_rel(a, b).pvalue, rtol=1e-8)
      assert entry["holm_p"] == pytest.approx(min(1.0, entry["p"] * family))  # one comparison
      assert entry["paper"] is None  # the paper's GoEmotions gaps are not shown for smoke data
  md, png = tmp_path / "r.md", tmp_path / "r.png"
  grid_v2.write_report(records.records, str(md), str(png))
  text = md.read_text()
  assert "Holm family: 1 cells" in text and "slack" in text
  assert "Convergence, seeds" in text and "Convergence, sweep at the chosen rates" in text
  for loss in SMOKE["losses"]:
    rate = next(
      r["learning_rate"] for r in records.records if r["stage"] == "seeds" and r["loss"] == loss
    )
    assert f"- {loss} + dot: " in text and f"chosen {rate:g}" in text
  assert png.stat().st_size > 1000


def test_check_record_names_the_bad_key(smoke_grid):
  _, records = smoke_grid
  record = records.records[0]
  assert grid_v2.check_record(record) is record
  for change, match in [
    ({"stage": "final"}, "`stage` must be one of"),
    ({"learning_rate": 0.0}, "`learning_rate`"),
    ({"best_epoch": record["epochs_run"] + 1}, "`best_epoch`"),
    ({"ndcg_5": 1.5}, "`ndcg_5` must be a test-split metric"),
    ({"edition": 1}, "`edition` must be one of"),
  ]:
    with pytest.raises(ValueError, match=match):
      grid_v2.check_record({**record, **change})
  with pytest.raises(ValueError, match="lacks"):
    grid_v2.check_record({k: v for k, v in record.items() if k != "epochs_run"})


def test_noisy_labels():
  y = np.arange(1000) % 28
  noisy = grid_v2.noisy_labels(y, 0.4, 28)
  assert (noisy != y).sum() == 400  # exactly 40 % wrong, never the same class drawn again
  assert noisy.min() >= 0 and noisy.max() < 28
  np.testing.assert_array_equal(noisy, grid_v2.noisy_labels(y, 0.4, 28))
  with pytest.raises(ValueError, match="fraction"):
    grid_v2.noisy_labels(y, 1.0, 28)


def test_examples():  # benchmarks/ is outside the suite's doctest collection
  assert doctest.testmod(grid_v2).failed == 0
