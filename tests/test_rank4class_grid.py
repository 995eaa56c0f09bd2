"""benchmarks/rank4class_grid.py: a smoke grid (tiny sizes, 2 seeds), its records, resumption,
its report's statistics against scipy, and the paper's numbers it quotes."""

import ast
import json
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
from _statistics_reference import holm_adjusted, paired_interval
from scipy import stats

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "rank4class_grid.py"
PAPER_TEXT = ROOT.parent / "shared" / "papers" / "003_b86680b28be9a065.txt"
KEYS = (
  "dataset",
  "protocol",
  "loss",
  "interaction",
  "seed",
  "top_1",
  "top_5",
  "ndcg_5",
  "mrr",
  "train_seconds",
)


def _run(tmp, datasets_dir):
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "NO_GCE_CHECK": "true", "PYTHONPATH": str(ROOT)}
  out = subprocess.run(
    [
      sys.executable,
      str(SCRIPT),
      "--smoke",
      f"--data_dir={datasets_dir}",
      "--datasets=mind",
      "--e2e_datasets=mind",
      "--losses=softmax_loss,approx_ndcg_loss",
      "--e2e_losses=softmax_loss",
      "--interactions=dot,latent_cross",
      f"--output={tmp / 'grid.json'}",
      f"--work_dir={tmp / 'work'}",
      f"--report_md={tmp / 'grid.md'}",
      f"--report_png={tmp / 'grid.png'}",
    ],
    env=env,
    capture_output=True,
    text=True,
    timeout=600,
  )
  assert out.returncode == 0, out.stderr[-3000:]
  return out.stderr


def _cell(record):
  return tuple(record[k] for k in KEYS[:5])


def _report_row(markdown, section, loss, head):
  """The cells of the results-table row of (loss, head) in ``section`` of the report."""
  body = markdown.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
  for line in body.splitlines():
    cells = [c.strip() for c in line.strip("|").split("|")]
    if cells[:2] == [loss, head] and len(cells) == 7:
      return cells
  raise AssertionError(f"no row {loss} + {head} in {section}")


def _interval(text):
  mean, low, high = map(float, re.findall(r"[+-]?\d+\.\d+", text)[:3])
  return mean, low, high


VERDICTS = ("higher", "no difference", "lower")


def _verdict(interval):
  _, low, high = interval
  return "higher" if low > 0 else "lower" if high < 0 else "no difference"


def test_smoke_grid_records_resumes_and_reports(tmp_path, datasets_dir):
  log = _run(tmp_path, datasets_dir)
  assert "12 runs planned, 0 recorded" in log
  records = json.loads((tmp_path / "grid.json").read_text())
  assert isinstance(records, list) and len(records) == 12
  for r in records:
    assert set(KEYS) <= set(r)
    assert all(0.0 <= r[m] <= 1.0 for m in ("top_1", "top_5", "ndcg_5", "mrr"))
    assert r["train_seconds"] > 0 and r["bound"]["violations"] == 0
  cells = [_cell(r) for r in records]
  assert len(set(cells)) == 12
  frozen = [c for c in cells if c[1] == "frozen"]
  e2e = [c for c in cells if c[1] == "end_to_end"]
  assert len(frozen) == 8 and {c[4] for c in frozen} == {0, 1}
  # End to end: dot and the best other head (only latent_cross ran in this frozen grid).
  assert sorted({c[3] for c in e2e}) == ["dot", "latent_cross"] and len(e2e) == 4

  # A killed grid: drop two finished runs from the file; the rerun trains exactly those two and
  # leaves every other record as it was (same values, same train_seconds).
  dropped = [records[0], records[5]]
  kept = [r for i, r in enumerate(records) if i not in (0, 5)]
  (tmp_path / "grid.json").write_text(json.dumps(kept))
  log = _run(tmp_path, datasets_dir)
  assert "12 runs planned, 10 recorded" in log and "2 to do" in log
  again = json.loads((tmp_path / "grid.json").read_text())
  assert len(again) == 12
  by_cell = {_cell(r): r for r in again}
  for r in kept:
    assert by_cell[_cell(r)] == r
  assert {_cell(r) for r in dropped} == {_cell(r) for r in again} - {_cell(r) for r in kept}
  assert len(re.findall(r"\] \d+/12 runs", log)) == 2  # two progress lines: two runs trained

  # The report's intervals against scipy, computed from the records.
  markdown = (tmp_path / "grid.md").read_text()
  for protocol, section, loss, head in [
    ("frozen", "mind, frozen", "approx_ndcg_loss", "dot"),
    ("end_to_end", "mind, end-to-end", "softmax_loss", "latent_cross"),
  ]:
    values = {
      m: np.array([by_cell[("mind", protocol, loss, head, s)][m] for s in (0, 1)])
      for m in ("top_1", "ndcg_5")
    }
    row = _report_row(markdown, section, loss, head)
    for metric, column in (("top_1", 3), ("ndcg_5", 5)):
      v = values[metric]
      mean, low, high = _interval(row[column])
      if np.std(v) > 0:
        ref_low, ref_high = stats.t.interval(0.95, 1, loc=v.mean(), scale=stats.sem(v))
      else:
        ref_low = ref_high = v.mean()
      assert (mean, low, high) == pytest.approx((v.mean(), ref_low, ref_high), abs=6e-5)
    base = np.array(
      [by_cell[("mind", protocol, "softmax_loss", "dot", s)]["ndcg_5"] for s in (0, 1)]
    )
    paired = [
      line
      for line in markdown.split(f"## {section}\n", 1)[1].split("\n## ")[0].splitlines()
      if line.startswith(f"| {loss} | {head} | 2 | ")
      and "[" in line
      and ("detected" in line or "higher" in line or "lower" in line)
    ]
    mean, low, high = _interval(paired[0].split("|")[5])
    assert (mean, low, high) == pytest.approx(paired_interval(values["ndcg_5"], base), abs=6e-5)
  # The summary's verdict counts and best other cell, recomputed with scipy from the records.
  for protocol in ("frozen", "end_to_end"):
    heads = sorted({c[3] for c in cells if c[1] == protocol})
    losses = sorted({c[2] for c in cells if c[1] == protocol})
    base = np.array(
      [by_cell[("mind", protocol, "softmax_loss", "dot", s)]["ndcg_5"] for s in (0, 1)]
    )
    verdicts, means = [], {}
    for loss in losses:
      for head in heads:
        if (loss, head) == ("softmax_loss", "dot"):
          continue
        v = np.array([by_cell[("mind", protocol, loss, head, s)]["ndcg_5"] for s in (0, 1)])
        verdicts.append(_verdict(paired_interval(v, base)))
        means[f"{loss} + {head}"] = v.mean()
    row = next(
      line.split("|")[1:-1]
      for line in markdown.split("## Summary\n", 1)[1].split("\n## ")[0].splitlines()
      if line.startswith(f"| mind | {protocol} |")
    )
    counts = " / ".join(str(verdicts.count(v)) for v in VERDICTS)
    assert row[4].strip() == counts
    assert row[5].strip() == max(means, key=means.get)
  # The Holm section: scipy's paired t tests over every cell, Holm's adjustment by hand.
  p_values = []
  for dataset, protocol, loss, head in sorted({c[:4] for c in by_cell}):
    if (loss, head) == ("softmax_loss", "dot"):
      continue
    v, b = (
      np.array([by_cell[(dataset, protocol, name, h, s)]["ndcg_5"] for s in (0, 1)])
      for name, h in ((loss, head), ("softmax_loss", "dot"))
    )
    constant = 1.0 if np.all(v == b) else 0.0  # equal differences: no spread to test against
    p_values.append(stats.ttest_rel(v, b).pvalue if np.std(v - b) > 0 else constant)
  unadjusted = sum(p < 0.05 for p in p_values)
  assert (
    f"- ndcg_5: {len(p_values)} comparisons; {unadjusted} significant unadjusted, "
    f"{sum(a < 0.05 for a in holm_adjusted(p_values))} after Holm"
  ) in markdown
  assert "## Bruch et al.'s bound" in markdown and "0 violations checks the computation" in markdown
  assert (tmp_path / "grid.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _paper_literal():
  tree = ast.parse((ROOT / "benchmarks" / "rank4class_paper.py").read_text())
  for node in tree.body:
    if isinstance(node, ast.Assign) and [t.id for t in node.targets] == ["PAPER"]:
      return ast.literal_eval(node.value)
  raise AssertionError("PAPER not found")


@pytest.mark.skipif(not PAPER_TEXT.exists(), reason="the paper's text is not beside the repo")
@pytest.mark.parametrize("dataset", ["goemotions", "mind", "cifar10"])
def test_paper_numbers_are_those_of_the_paper(dataset):
  table, _, grids = _paper_literal()[dataset]
  text = PAPER_TEXT.read_text(encoding="utf-8")
  body = text.split(f"{table}: Results on", 1)[1].split("Table ", 1)[0]
  rows = [list(map(float, re.findall(r"0\.\d{4}", line))) for line in body.splitlines()]
  rows = [r for r in rows if len(r) == 5]
  expected = [
    grids[m][h] for m in ("top_1", "top_5", "ndcg_5") for h in ("dot", "latent_cross", "concat")
  ]
  assert rows == expected


README_NAMES = {
  "GoEmotions": "goemotions",
  "CIFAR-10": "cifar10",
  "MIND sample": "mind",
  "softmax": "softmax_loss",
  "pairwise logistic": "pairwise_logistic_loss",
  "ApproxNDCG": "approx_ndcg_loss",
  "Gumbel-ApproxNDCG": "gumbel_approx_ndcg_loss",
  "mean squared": "mean_squared_loss",
  "blackbox NDCG": "blackbox_ndcg_loss",
  "SoDeep AP": "sorter_ap_loss",
  "dot": "dot",
  "latent cross": "latent_cross",
  "concat": "concat",
}


def test_readme_table_is_the_committed_records_recomputed_with_scipy():
  """The README's short table, recomputed from the committed records (not from the report)."""
  records = json.loads((ROOT / "benchmarks" / "out" / "rank4class_grid.json").read_text())
  section = (ROOT / "README.md").read_text().split("## Which loss and which head?\n", 1)[1]
  # the first edition's table: the rows under its header (the second edition's has another)
  lines = section.split("\n## ", 1)[0].splitlines()
  start = lines.index(next(line for line in lines if line.startswith("| dataset, protocol |")))
  rows = []
  for line in lines[start + 2 :]:
    if not line.startswith("| "):
      break
    rows.append(line)
  assert len(rows) == 5
  for line in rows:
    where, base_text, counts, best = [c.strip() for c in line.strip("|").split("|")]
    name, protocol = where.split(", ")
    dataset = README_NAMES[name]
    protocol = "end_to_end" if protocol == "end to end" else protocol
    by_cell = {}
    for r in records:
      if (r["dataset"], r["protocol"]) == (dataset, protocol):
        by_cell.setdefault((r["loss"], r["interaction"]), {})[r["seed"]] = r
    base = by_cell.pop(("softmax_loss", "dot"))
    seeds = sorted(base)
    assert base_text == " / ".join(
      f"{np.mean([base[s][m] for s in seeds]):.4f}" for m in ("top_1", "ndcg_5")
    )
    verdicts, means, intervals = [], {}, {}
    for cell, runs in by_cell.items():
      assert sorted(runs) == seeds
      v = np.array([runs[s]["ndcg_5"] for s in seeds])
      intervals[cell] = paired_interval(v, np.array([base[s]["ndcg_5"] for s in seeds]))
      verdicts.append(_verdict(intervals[cell]))
      means[cell] = v.mean()
    assert counts == " / ".join(str(verdicts.count(k)) for k in VERDICTS)
    label, numbers = best.split(": ")
    loss, head = label.split(" + ")
    cell = (README_NAMES[loss], README_NAMES[head])
    assert cell == max(means, key=means.get)
    assert _interval(numbers) == pytest.approx(intervals[cell], abs=6e-5)


def test_readme_holm_sentences_are_the_committed_records_recomputed_with_scipy():
  """The README's Holm-corrected counts of the first edition: scipy's paired t test per cell on
  NDCG@5 against softmax + dot, Holm's step-down adjustment by
  :func:`_statistics_reference.holm_adjusted`."""
  records = json.loads((ROOT / "benchmarks" / "out" / "rank4class_grid.json").read_text())
  cells = {}
  for r in records:
    key = (r["dataset"], r["protocol"], r["loss"], r["interaction"])
    cells.setdefault(key, {})[r["seed"]] = r["ndcg_5"]
  rows = []  # (cell, mean difference, p)
  for (dataset, protocol, loss, head), by_seed in cells.items():
    if (loss, head) == ("softmax_loss", "dot"):
      continue
    base = cells[(dataset, protocol, "softmax_loss", "dot")]
    seeds = sorted(by_seed)
    values, reference = np.array([by_seed[s] for s in seeds]), np.array([base[s] for s in seeds])
    p = stats.ttest_rel(values, reference).pvalue
    rows.append(((dataset, protocol, loss, head), (values - reference).mean(), p))
  m = len(rows)
  adjusted = holm_adjusted([p for _, _, p in rows])
  lower = [i for i in range(m) if adjusted[i] < 0.05 and rows[i][1] < 0]
  higher = [i for i in range(m) if adjusted[i] < 0.05 and rows[i][1] > 0]
  (raw_win,) = [i for i in range(m) if rows[i][2] < 0.05 and rows[i][1] > 0]

  readme = " ".join((ROOT / "README.md").read_text().split())
  found = re.search(
    r"with Holm's correction over the (\d+) comparisons, (\d+) cells stay detectably lower "
    r"\((\d+) of them frozen\) and none higher",
    readme,
  )
  assert found, "README.md lost its Holm sentence"
  frozen = sum(rows[i][0][1] == "frozen" for i in lower)
  assert tuple(map(int, found.groups())) == (m, len(lower), frozen) and not higher
  win = re.search(r"p = (0\.\d+) unadjusted; Holm's correction makes it (0\.\d+)", readme)
  assert rows[raw_win][0] == ("cifar10", "end_to_end", "mean_squared_loss", "dot")
  assert (win.group(1), win.group(2)) == (f"{rows[raw_win][2]:.3f}", f"{adjusted[raw_win]:.2f}")
