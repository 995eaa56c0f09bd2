"""Records of the evidence grid made by hand, for the tests of experiments/ (summary, deviations,
report): a complete synthetic grid under the protocol's settings, and one with known effects."""

import numpy as np

from experiments.second import deviations as deviations_lib
from experiments.second import plan, protocol

#: The registered losses the synthetic grids' settings read: the 7 ranking losses, 1 Top-K loss.
REGISTERED = list(protocol.RANKING_LOSSES) + ["smooth_topk_svm_loss"]
PEAK = 1e-3  # every synthetic cell's validation score peaks at this rate


def run_record(experiment, stage, loss, head, rate, seed, settings, rng, **changes):
  """A record of the grid, its metrics drawn with ``rng``, its validation peaking at ``PEAK``."""
  validation = 0.7 - 0.01 * (np.log10(rate) - np.log10(PEAK)) ** 2
  record = {
    "edition": 2,
    "experiment": experiment,
    "stage": stage,
    "loss": loss,
    "interaction": head,
    "learning_rate": rate,
    "seed": seed,
    "top_1": float(rng.uniform(0.5, 0.6)),
    "top_5": float(rng.uniform(0.8, 0.9)),
    "ndcg_5": float(rng.uniform(0.7, 0.75)),
    "mrr": float(rng.uniform(0.65, 0.7)),
    "best_epoch": 5,
    "epochs_run": 13,
    "validation": {"ndcg_5": validation},
    "settings": settings,
    "dataset": "goemotions",
    "bruch_slack": 1.0,
    "loss_config": {"name": loss},
  }
  record.update(changes)
  return plan.check_record(record)


def synthetic_grid(experiment="clean", **setting_changes):
  """Every run of ``experiment`` under the protocol's settings: the sweep at the 5 rates (seed
  1000, best at 1e-3, so no widening), then the 6 seeds at 1e-3."""
  settings = {**plan.grid_settings(REGISTERED), **setting_changes}
  rng = np.random.default_rng(0)
  records = []
  for loss in settings["losses"]:
    for head in settings["heads"]:
      for rate in settings["learning_rates"]:
        records.append(run_record(experiment, "sweep", loss, head, rate, 1000, settings, rng))
      for seed in settings["evaluation_seeds"]:
        records.append(run_record(experiment, "seeds", loss, head, PEAK, seed, settings, rng))
  return records


def configs(records):
  """The loss configurations the synthetic records carry (``{"name": loss}``)."""
  return {r["loss"]: {"name": r["loss"]} for r in records}


def deviations(records, declared=()):
  """``protocol_deviations`` of ``records`` against the synthetic settings and configurations."""
  return deviations_lib.protocol_deviations(records, REGISTERED, configs(records), declared)


EFFECTS = {  # (loss, head): (true mean difference in NDCG@5, noise SD of a seed)
  ("approx_ndcg_loss", "latent_cross"): (0.02, 0.001),
  ("gumbel_approx_ndcg_loss", "dot"): (0.01, 0.001),
  ("mean_squared_loss", "dot"): (-0.02, 0.001),
  ("pairwise_logistic_loss", "dot"): (0.03, 0.05),
}


def grid_with_effects():
  """:func:`synthetic_grid` with the seeds' NDCG@5 shifted by ``EFFECTS`` plus noise."""
  rng = np.random.default_rng(3)
  records = []
  for r in synthetic_grid():
    if r["stage"] == "seeds":
      cell = (r["loss"], r["interaction"])
      effect, sd = EFFECTS.get(cell, (0.0, 0.002))
      noise = 0.0 if cell == protocol.BASELINE else rng.normal(0.0, sd)
      r = {**r, "ndcg_5": 0.7 + 0.01 * r["seed"] + effect + noise, "train_seconds": 360.0}
    records.append(r)
  return records
