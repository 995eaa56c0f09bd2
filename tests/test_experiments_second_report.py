"""experiments/second/report.py: the markdown report and forest plot on smoke and synthetic
records, and the docs' generated blocks of the grid against the committed records."""

import json
import pathlib

import _grid_records as grid_records
import numpy as np

from experiments import blocks
from experiments.second import plan, protocol, report, summary

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_report_of_the_smoke_grid(smoke_grid, tmp_path):
  _, records = smoke_grid
  md, png = tmp_path / "r.md", tmp_path / "r.png"
  report.write_report(records.records, str(md), str(png))
  text = md.read_text()
  assert "Holm family: 1 cells" in text and "slack" in text
  assert "Convergence, seeds" in text and "Convergence, sweep at the chosen rates" in text
  for loss in plan.SMOKE["losses"]:
    rate = next(
      r["learning_rate"] for r in records.records if r["stage"] == "seeds" and r["loss"] == loss
    )
    assert f"- {loss} + dot: " in text and f"chosen {rate:g}" in text
  assert png.stat().st_size > 1000
  # an experiment with no seeds-stage run yet gets no (empty) panels: 2 panels of 5 in at 110 dpi
  sweep_only = [{**r, "experiment": "noise20"} for r in records.records if r["stage"] == "sweep"]
  report.write_report(records.records + sweep_only, str(md), str(png))
  assert int.from_bytes(png.read_bytes()[16:20], "big") == 2 * 5 * 110  # the PNG header's width


def test_report_counts_the_runs_of_each_software_stack_and_commit(smoke_grid, tmp_path):
  _, records = smoke_grid
  found = records.records[0]["software"]
  # the report counts runs per stack and per commit, and the runs that carry no versions
  older = [{k: v for k, v in r.items() if k != "software"} for r in records.records[:3]]
  md = tmp_path / "r.md"
  report.write_report(older + records.records[3:], str(md), str(tmp_path / "r.png"))
  text = md.read_text()
  stack = f"Python {found['python']}, TensorFlow {found['tensorflow']}, {found['keras']}"
  assert f"Software: {len(records.records) - 3} run(s) on {stack}, NumPy {found['numpy']}." in text
  assert f"Code: {len(records.records) - 3} run(s) at commit {found['commit']}." in text
  assert "3 run(s) carry no software versions" in text


def test_report_of_a_complete_grid(tmp_path, monkeypatch):
  monkeypatch.setattr(protocol, "DEVIATIONS", ())  # the report's declared ones: none here
  records = grid_records.synthetic_grid()
  cells = 8 * 3  # 7 ranking losses + 1 Top-K loss, 3 heads
  assert len(records) == cells * (5 + 6)
  md = tmp_path / "r.md"
  report.write_report(
    records,
    str(md),
    str(tmp_path / "r.png"),
    grid_records.REGISTERED,
    grid_records.configs(records),
  )
  text = md.read_text()
  assert "## Deviations from the protocol\n\nNone." in text
  assert f"**Complete**: all {cells * 11} planned runs of clean are recorded." in text
  assert f"| clean | sweep | {cells * 5} | {cells * 5} |" in text
  assert f"| clean | seeds | {cells * 6} | {cells * 6} |" in text
  assert "Experiments of the protocol with no record: noise20, noise40" in text
  assert "INCOMPLETE" not in text


def test_report_of_a_partial_grid_says_so_with_counts(tmp_path):
  records = grid_records.synthetic_grid()
  # drop seeds 4 and 5 of softmax (3 cells); the last loss's dot cell loses its two largest
  # rates (its sweep is unfinished) and all its seeds
  last = protocol.losses(grid_records.REGISTERED)[-1]
  kept = [
    r
    for r in records
    if not (r["stage"] == "seeds" and r["loss"] == "softmax_loss" and r["seed"] >= 4)
    and not (
      r["stage"] == "sweep"
      and r["loss"] == last
      and r["interaction"] == "dot"
      and r["learning_rate"] > grid_records.PEAK
    )
    and not (r["stage"] == "seeds" and r["loss"] == last and r["interaction"] == "dot")
  ]
  assert len(records) - len(kept) == 3 * 2 + 2 + 6
  md = tmp_path / "r.md"
  report.write_report(
    kept, str(md), str(tmp_path / "r.png"), grid_records.REGISTERED, grid_records.configs(kept), ()
  )
  text = md.read_text()
  assert f"**INCOMPLETE: {len(kept)} of at least {len(records)} planned runs recorded" in text
  assert f"| clean | sweep | {24 * 5 - 2} | >= {24 * 5} |" in text
  assert f"| clean | seeds | {24 * 6 - 12} | {24 * 6} |" in text
  assert f"| {last} | dot | 3 / >= 5 | - | 0 / 6 |" in text
  assert "| softmax_loss | dot | 5 / 5 | 0.001 | 4 / 6 |" in text
  # the open sweep has its best so far at 0.001, but no rate is chosen: neither in the sweep
  # section nor among the runs the convergence rule checks (one per finished cell: 23)
  (line,) = [x for x in text.splitlines() if x.startswith(f"- {last} + dot: ")]
  assert line.endswith("; sweep still open, no rate chosen"), line
  assert "- Convergence, sweep at the chosen rates: best epoch before the last in" in text
  assert " of 23 runs (rule" in text


def test_a_rate_chosen_at_the_capped_edge_is_flagged(tmp_path):
  records = grid_records.synthetic_grid()
  settings, rng = records[0]["settings"], np.random.default_rng(2)
  # softmax + latent_cross: validation rising with the rate, so the sweep widens upwards twice
  # (0.0316, then 0.0999) and still ends at its largest rate
  cell = ("softmax_loss", "latent_cross")
  records = [r for r in records if (r["loss"], r["interaction"]) != cell or r["stage"] != "sweep"]
  for rate in [*settings["learning_rates"], 0.0316, 0.0999]:
    records.append(
      grid_records.run_record(
        "clean", "sweep", *cell, rate, 1000, settings, rng, validation={"ndcg_5": rate}
      )
    )
  md = tmp_path / "r.md"
  report.write_report(
    records,
    str(md),
    str(tmp_path / "r.png"),
    grid_records.REGISTERED,
    grid_records.configs(records),
  )
  text = md.read_text()
  (line,) = [x for x in text.splitlines() if x.startswith("- softmax_loss + latent_cross: ")]
  assert line.endswith("; chosen 0.0999, the largest rate swept (after 2 widenings, the cap)")
  (other,) = [x for x in text.splitlines() if x.startswith("- softmax_loss + dot: ")]
  assert other.endswith("; chosen 0.001"), other  # inside the grid: no flag
  assert "Chosen at an edge of the swept rates: softmax_loss + latent_cross. " in text


def _committed_records():
  return json.loads((ROOT / "experiments" / "records" / "grid.json").read_text())


def test_cell_table_rows_are_the_summarized_cells():
  records = grid_records.grid_with_effects()
  rows, _ = summary.summarize(records, "clean")
  lines = report.cell_table(rows, "ndcg_5")
  assert len(lines) == 2 + len(rows) == 2 + 23
  row = next(r for r in rows if (r["loss"], r["interaction"]) == ("mean_squared_loss", "dot"))
  line = next(x for x in lines if x.startswith("| mean_squared_loss | dot | 0.001 | 6 | "))
  i = row["metrics"]["ndcg_5"]["interval"]
  assert f"| {i.mean:+.4f} [{i.low:+.4f}, {i.high:+.4f}] |" in line and "| lower |" in line


def test_grid_blocks_in_the_docs_are_the_committed_records():
  """Each generated block of the grid in README.md and docs/ equals what the committed records
  give (``python -m experiments.second.grid report`` rewrites them), each block is shown somewhere,
  and no file holds a block the records do not give."""
  generated = report.grid_blocks(_committed_records())
  assert set(generated) == {"experiments.second.grid:summary"} | {
    f"experiments.second.grid:cells-{e}" for e in plan.EXPERIMENTS
  }
  assert blocks.stale(report.BLOCKS_MODULE, generated) == []
