"""experiments/second/deviations.py: what the records show was run otherwise than the protocol
declares, on synthetic grids (tests/_grid_records.py), and the declared deviations."""

import json
import pathlib
import re

import _grid_records as grid_records
import numpy as np
import pytest

from experiments.second import deviations, protocol


def test_a_complete_grid_on_protocol_has_no_deviation(monkeypatch):
  monkeypatch.setattr(protocol, "DEVIATIONS", ())  # the report's declared ones: none here
  records = grid_records.synthetic_grid()
  cells = 8 * 3  # 7 ranking losses + 1 Top-K loss, 3 heads
  assert len(records) == cells * (5 + 6)
  assert grid_records.deviations(records) == []


def test_a_partial_grid_says_so_with_counts():
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
  found = grid_records.deviations(kept)
  assert found == [
    "clean: runs missing: 2 sweep run(s) and 12 seeds run(s) of the planned ones have no record; "
    "cells with fewer seeds than the 6 declared: softmax_loss + dot (4), softmax_loss + "
    "latent_cross (4), softmax_loss + concat (4)."
  ]


def test_settings_changed_after_the_first_run_are_deviations():
  records = grid_records.synthetic_grid(max_epochs=300, patience=5)
  assert grid_records.deviations(records) == [
    "clean: epoch budget 300 instead of 150 (x2, the convergence rule's 'train longer')",
    "clean: `patience` 5, pre-registered 8",
  ]
  fewer = protocol.EVALUATION_SEEDS[:3]
  records = grid_records.synthetic_grid(evaluation_seeds=list(fewer))
  assert grid_records.deviations(records) == [
    "clean: `evaluation_seeds` [0, 1, 2], pre-registered [0, 1, 2, 3, 4, 5] (without [3, 4, 5])"
  ]


def test_rates_seeds_and_loss_configs_off_the_protocol_are_deviations():
  records = grid_records.synthetic_grid()
  settings, rng = records[0]["settings"], np.random.default_rng(1)
  # 0.316 is three factor-sqrt(10) steps above 1e-2: more than the two widenings allowed
  records.append(
    grid_records.run_record("clean", "sweep", "softmax_loss", "dot", 0.316, 1000, settings, rng)
  )
  records.append(
    grid_records.run_record("clean", "seeds", "softmax_loss", "dot", 0.01, 6, settings, rng)
  )
  records[0] = {**records[0], "loss_config": {"name": "softmax_loss", "temperature": 2.0}}
  assert grid_records.deviations(records) == [
    "clean: sweep of softmax_loss + dot at lr 0.316, outside the pre-registered rates "
    "['9.99e-06', '3.16e-05', '0.0001', '0.000316', '0.001', '0.00316', '0.01', '0.0316', "
    "'0.0999'].",  # a second widening steps from the rounded 3.16e-05 / 0.0316
    "clean: seeds runs with seeds [6], not among the declared [0, 1, 2, 3, 4, 5].",
    "clean: softmax_loss + dot seed 6 ran at lr 0.01; its sweep chose 0.001.",
    "clean: softmax_loss ran with another configuration than the pre-declared one "
    "(temperature: 2.0 instead of None).",
  ]


def test_unmet_convergence_and_declared_deviations():
  records = [
    {**r, "best_epoch": r["epochs_run"]} if r["stage"] == "seeds" and r["seed"] < 2 else r
    for r in grid_records.synthetic_grid()
  ]  # 2 of 6 seeds end at the budget: 67 % < 80 %
  declared = [("2026-11-25", "clean", "patience 8 -> 5", "the budget ran out")]
  assert grid_records.deviations(records, declared) == [
    "clean: the convergence rule is not met on the seeds stage (best epoch before the last in "
    "67% of its runs, rule >= 80%) and the stage has not been rerun with the budget doubled.",
    "clean (2026-11-25, declared): patience 8 -> 5. Why: the budget ran out",
  ]
  with pytest.raises(ValueError, match="date, experiment, what, why"):
    grid_records.deviations(records, [("2026-11-25", "patience")])
  for entry in protocol.DEVIATIONS:  # the declared ones are well formed and dated
    assert len(entry) == 4 and re.fullmatch(r"\d{4}-\d{2}-\d{2}", entry[0])


def test_smoke_records_are_compared_with_the_smoke_settings(smoke_grid):
  _, records = smoke_grid
  found = deviations.protocol_deviations(records.records, grid_records.REGISTERED, declared=())
  assert not [line for line in found if "pre-registered" in line or "missing" in line]


def test_committed_records_deviate_only_as_declared():
  """The committed records: every setting, rate, seed and loss configuration as the protocol
  declares, every experiment complete and converged; what the report lists are the declared
  deviations."""
  path = pathlib.Path(__file__).resolve().parents[1] / "experiments" / "records" / "grid.json"
  found = deviations.protocol_deviations(json.loads(path.read_text()))
  assert len(found) == len(protocol.DEVIATIONS)
  assert all("declared" in line for line in found)
