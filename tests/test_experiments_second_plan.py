"""experiments/second/plan.py: the settings each experiment records, the record schema, the sweep's
choice of a learning rate and the runs still to do."""

import numpy as np
import pytest
from _grid_records import PEAK, REGISTERED, run_record, synthetic_grid

from experiments.second import plan, protocol


def test_check_record_names_the_bad_key():
  record = synthetic_grid()[0]
  assert plan.check_record(record) is record
  for change, match in [
    ({"stage": "final"}, "`stage` must be one of"),
    ({"learning_rate": 0.0}, "`learning_rate`"),
    ({"best_epoch": record["epochs_run"] + 1}, "`best_epoch`"),
    ({"ndcg_5": 1.5}, "`ndcg_5` must be a test-split metric"),
    ({"edition": 1}, "`edition` must be one of"),
    ({"experiment": "noise10"}, "`experiment` must be one of"),
  ]:
    with pytest.raises(ValueError, match=match):
      plan.check_record({**record, **change})
  with pytest.raises(ValueError, match="lacks"):
    plan.check_record({k: v for k, v in record.items() if k != "epochs_run"})


def test_cifar_protocol_settings():
  settings = plan.grid_settings(REGISTERED, experiment="cifar10_e2e")
  assert settings["heads"] == ["dot"]
  assert settings["evaluation_seeds"] == [0, 1, 2]
  # 10 ** -3.5, 10 ** -3, 10 ** -2.5, rounded to 3 significant digits as the primary's rates
  assert settings["learning_rates"] == [0.000316, 0.001, 0.00316]
  assert set(settings["learning_rates"]) < set(protocol.learning_rate_grid())
  assert (settings["patience"], settings["max_epochs"], settings["max_widenings"]) == (8, 150, 2)
  topk = [name for name in REGISTERED if "topk" in name]
  assert settings["losses"] == ["softmax_loss", "approx_ndcg_loss"] + sorted(topk)
  assert settings["model"]["encoder"] == "vgg16_cifar"
  assert settings["model"]["encoder_kwargs"] == {"width_multiplier": 0.125, "embedding_dim": 128}
  # the primary experiment's settings are unchanged by the CIFAR experiment
  assert plan.grid_settings(REGISTERED) == plan.grid_settings(REGISTERED, experiment="clean")
  assert "model" not in plan.grid_settings(REGISTERED, experiment="noise20")


def test_label_noise_protocol_settings():
  clean = plan.grid_settings(REGISTERED)
  topk = sorted(name for name in REGISTERED if "topk" in name)
  for experiment in ("noise20", "noise40"):
    settings = plan.grid_settings(REGISTERED, experiment=experiment)
    assert settings["losses"] == ["softmax_loss"] + topk
    assert settings["heads"] == ["dot"]
    # everything else is the primary experiment's
    rest = {k: v for k, v in settings.items() if k not in ("losses", "heads")}
    assert rest == {k: v for k, v in clean.items() if k not in ("losses", "heads")}
  assert len(clean["losses"]) == 7 + len(topk)
  assert clean["heads"] == ["dot", "latent_cross", "concat"]


def test_sweep_choice_widens_at_an_edge_up_to_the_cap():
  """A cell whose validation keeps rising with the rate: the grid of 5 rates widens upwards once
  per finished grid, twice at most, then chooses its largest rate."""
  records = [r for r in synthetic_grid() if r["stage"] == "sweep"]
  settings, rng = records[0]["settings"], np.random.default_rng(0)
  cell = ("softmax_loss", "dot")
  records = [r for r in records if (r["loss"], r["interaction"]) != cell]

  def rising(rate):
    return run_record(
      "clean", "sweep", *cell, rate, 1000, settings, rng, validation={"ndcg_5": rate}
    )

  found = [rising(rate) for rate in settings["learning_rates"]]
  assert plan.sweep_choice(found, "clean", *cell, settings) == (
    None,
    settings["learning_rates"] + [0.0316],
  )
  found.append(rising(0.0316))
  assert plan.sweep_choice(found, "clean", *cell, settings)[0] is None
  found.append(rising(0.0999))
  assert plan.sweep_choice(found, "clean", *cell, settings) == (
    0.0999,
    settings["learning_rates"] + [0.0316, 0.0999],
  )
  # inside the grid: the best (the smaller rate on a tie) is chosen at once
  peaked = [r for r in synthetic_grid() if r["stage"] == "sweep" and r["loss"] == "softmax_loss"]
  assert plan.sweep_choice(peaked, "clean", *cell, settings)[0] == PEAK


def test_planned_runs_wait_for_the_sweep(tmp_path):
  settings = plan.grid_settings(REGISTERED, smoke=True)
  records = plan.open_records(tmp_path / "g.json")
  todo = plan.planned_runs(records, ["clean"], plan.STAGES, settings)
  sweep = [t for t in todo if t[1] == "sweep"]
  seeds = [t for t in todo if t[1] == "seeds"]
  assert len(sweep) == 2 * len(settings["learning_rates"]) and {t[4] for t in seeds} == {None}
  assert len(seeds) == 2 * len(settings["evaluation_seeds"])
