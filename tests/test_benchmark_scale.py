"""The extrapolation that decides which cells of ``benchmarks/scale.py`` run, and the merge of
several runs into one table in docs/scale.md (hand-computed).

The script itself runs in its quick mode in ``tests/test_benchmarks.py``; its quick mode skips
one size by prediction, but only with numbers measured on the spot, so the rule is checked here
on fixed series.
"""

import importlib.util
import json
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def scale():
  spec = importlib.util.spec_from_file_location("scale", ROOT / "benchmarks" / "scale.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def ran(ms, mb):
  return {"status": "ok", "ms": ms, "peak_mb": mb}


def test_growth_along_c_follows_the_two_largest_sizes_and_along_b_is_linear(scale):
  series = {(32, 100): ran(1.0, 50.0), (32, 1000): ran(10.0, 5000.0)}  # time x10, memory x100
  ms, mb = scale.prediction(series, 32, 10_000)
  assert ms == pytest.approx(100.0) and mb == pytest.approx(500_000.0)
  ms, mb = scale.prediction(series, 256, 1000)
  assert ms == pytest.approx(80.0) and mb == pytest.approx(40_000.0)
  assert scale.prediction(series, 256, 100_000) is None  # no B = 32 cell at that C


def test_growth_is_taken_as_at_least_linear_at_most_quadratic_and_linear_from_one_size(scale):
  flat = {(32, 100): ran(2.0, 30.0), (32, 1000): ran(2.0, 30.0)}
  assert scale.prediction(flat, 32, 10_000) == pytest.approx((20.0, 300.0))
  steep = {(32, 10): ran(0.01, 1.0), (32, 100): ran(100.0, 1e4)}  # slope 4, taken as 2
  assert scale.prediction(steep, 32, 1000) == pytest.approx((1e4, 1e6))
  assert scale.prediction({(32, 100): ran(3.0, 7.0)}, 32, 1000) == pytest.approx((30.0, 70.0))
  assert scale.prediction({}, 32, 100) is None


def test_a_cell_is_skipped_over_a_cap_or_above_a_failed_cell(scale):
  series = {(32, 100): ran(1.0, 50.0), (32, 1000): ran(10.0, 5000.0)}
  assert scale.decide(series, 32, 10_000, room_mb=1e6, time_cap_s=1.0) is None
  row = scale.decide(series, 32, 10_000, room_mb=8192.0, time_cap_s=1.0)
  assert row["status"] == "skipped" and row["reason"] == "predicted 488.3 GiB > 8.0 GiB free"
  assert row["predicted"] == pytest.approx({"ms": 100.0, "mb": 500_000.0})
  row = scale.decide(series, 32, 10_000, room_mb=1e6, time_cap_s=0.05)
  assert row["reason"] == "predicted 0.1 s a call > 0.05 s"
  series[32, 10_000] = {"status": "killed", "reason": "killed at 8.1 GiB resident"}
  row = scale.decide(series, 32, 100_000, room_mb=1e9, time_cap_s=1e9)
  assert row["reason"] == "a smaller cell was killed"
  assert scale.decide(series, 256, 1000, room_mb=1e9, time_cap_s=1e9) is None  # 10,000 > 1,000


def write_run(path, started, rows, backend="jax", missing=None):
  run = {"backend": backend, "started": started, "rows": rows, "header": ["a run", "scale.py"]}
  path.write_text(json.dumps({**run, "missing": missing or {}}))
  return str(path)


def cell(name, c):
  return {"variant": "ours", "name": name, "family": "rambo", "form": "ids", "B": 32, "C": c}


def test_runs_merge_in_the_order_they_started_and_a_cell_comes_from_the_latest(scale, tmp_path):
  late = write_run(tmp_path / "late.json", 200.0, [{**cell("apc_loss", 100), "ms": 2.0}])
  early_rows = [{**cell("apc_loss", 100), "ms": 1.0}, {**cell("apc_loss", 1000), "ms": 9.0}]
  early = write_run(tmp_path / "early.json", 100.0, early_rows, missing={"rax": "no rax"})
  merged = scale.load_runs([late, early])
  assert merged["backend"] == "jax" and merged["missing"] == {"rax": "no rax"}
  assert [run.split("`")[1] for run in merged["runs"]] == [early, late]
  cells = {r["C"]: (r["ms"], r["run"]) for r in merged["rows"]}
  assert cells == {100: (2.0, 2), 1000: (9.0, 1)}
  other = write_run(tmp_path / "tf.json", 300.0, [], backend="tensorflow")
  with pytest.raises(ValueError, match="several backends"):
    scale.load_runs([early, other])


def test_the_doc_gets_the_tables_between_its_markers_of_the_backend(scale, tmp_path):
  page = tmp_path / "page.md"
  begin, end = "<!-- scale.py tables: jax -->", "<!-- end of scale.py tables: jax -->"
  page.write_text(f"# Top\n\n{begin}\nold table\n{end}\n\nBelow.\n")
  scale.write_doc(page, "jax", "new table")
  assert page.read_text() == f"# Top\n\n{begin}\nnew table\n{end}\n\nBelow.\n"
  with pytest.raises(ValueError, match="tables: tensorflow"):
    scale.write_doc(page, "tensorflow", "new table")


def test_the_memory_goal_is_read_against_softmax_s_own_cell_where_it_ran(scale):
  def row(name, peak_mb, reference_mb):
    cells = {"variant": "ours", "name": name, "family": "tf_ranking", "form": "ids", "B": 32}
    timing = {"status": "ok", "ms": 1.0, "ratios": [1.0], "softmax_peak_mb": reference_mb}
    return {**cells, "C": 100, **timing, "peak_mb": peak_mb}

  # 25 MB against softmax's own 10 MB: over 2x, though the cell's reference read 1 MB (and 30).
  line = scale.goals([row("softmax_loss", 10.0, 10.0), row("apc_loss", 25.0, 1.0)], 100)[0]
  assert "met by 1 of 2; missed: apc_loss" in line and "2.5x memory" in line
  line = scale.goals([row("softmax_loss", 10.0, 10.0), row("apc_loss", 19.0, 1.0)], 100)[0]
  assert line.endswith("met by 2 of 2")
  line = scale.goals([row("apc_loss", 25.0, 30.0)], 100)[0]  # no softmax cell: the reference
  assert line.endswith("met by 1 of 1")
