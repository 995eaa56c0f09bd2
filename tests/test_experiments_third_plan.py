"""experiments/third/plan.py: the sweep's choice and widening per endpoint, the choices left at
an edge, the scales a noise condition keeps, the seeds stage and its rerun, the record check; on
hand-made records."""

import pytest

from experiments.third import plan
from experiments.third import protocol as P

R = [0.000316228, 0.001, 0.00316228]  # the protocol's rates, as the plan rounds them


def _done(values):
  """``{(rate, scale): validation}`` with Top-1 ``values[(rate, scale)]`` and Top-5 0.5."""
  return {k: {"top_1": v, "top_5": 0.5} for k, v in values.items()}


def test_the_plan_rounds_the_protocols_rates():
  assert plan.settings("clinc150_clean")["rates"] == R


def test_choice_inside_the_grid_needs_no_widening():
  done = _done({(r, s): 0.1 for r in R for s in (1 / 3, 1.0, 3.0)})
  done[(R[1], 1.0)]["top_1"] = 0.9
  assert plan.choice(done, R, [1 / 3, 1.0, 3.0], "top_1", 1.0, True, 2) == ((R[1], 1.0), [])


def test_missing_grid_points_are_asked_for_first():
  done = _done({(R[0], 1.0): 0.5})
  chosen, missing = plan.choice(done, R, [1.0], "top_1", 1.0, False, 2)
  assert chosen is None and missing == [(R[1], 1.0), (R[2], 1.0)]


def test_a_choice_at_the_top_rate_widens_it_at_the_chosen_scale_at_most_twice():
  scales = [1 / 3, 1.0, 3.0]
  done = _done({(r, s): r for r in R for s in scales})  # the highest rate always wins
  for s in scales:
    done[(R[2], s)]["top_1"] = 0.1 if s != 1.0 else 0.2
  chosen, missing = plan.choice(done, R, scales, "top_1", 1.0, True, 2)
  assert chosen is None and missing == [(0.01, 1.0)]  # 10 ** -2.5 * sqrt(10), scale kept
  done[(0.01, 1.0)] = {"top_1": 0.3}
  _, missing = plan.choice(done, R, scales, "top_1", 1.0, True, 2)
  assert missing == [(0.0316228, 1.0)]
  done[(0.0316228, 1.0)] = {"top_1": 0.4}
  # two rates added: the rate is kept at the edge; the scale (inside its grid) is not widened
  assert plan.choice(done, R, scales, "top_1", 1.0, True, 2) == ((0.0316228, 1.0), [])


def test_a_choice_at_the_lowest_scale_widens_the_scale_at_the_chosen_rate():
  scales = [1 / 3, 1.0, 3.0]
  done = _done({(r, s): 0.1 for r in R for s in scales})
  done[(R[1], 1 / 3)]["top_1"] = 0.5
  _, missing = plan.choice(done, R, scales, "top_1", 1.0, True, 2)
  assert missing == [(R[1], 0.111111)]
  done[(R[1], 0.111111)] = {"top_1": 0.4}  # worse: the choice stays, now inside
  assert plan.choice(done, R, scales, "top_1", 1.0, True, 2) == ((R[1], 1 / 3), [])


def test_ties_go_to_the_smaller_rate_then_the_scale_nearer_s0():
  scales = [1 / 3, 1.0, 3.0]
  done = _done({(r, s): 0.1 for r in R for s in scales})
  for key in ((R[1], 3.0), (R[2], 1.0), (R[1], 1.0)):
    done[key]["top_1"] = 0.5
  assert plan.choice(done, R, scales, "top_1", 1.0, True, 0) == ((R[1], 1.0), [])
  done[(R[1], 1.0)]["top_1"] = 0.1
  assert plan.choice(done, R, scales, "top_1", 1.0, True, 0) == ((R[1], 3.0), [])


def _record(
  experiment,
  stage,
  cell,
  rate,
  scale,
  seed,
  top_1=0.5,
  top_5=0.5,
  stopped="patience",
  budget=P.MAX_EPOCHS,
):
  return {
    "edition": 3,
    "experiment": experiment,
    "stage": stage,
    "cell": cell,
    "head": "dot",
    "learning_rate": rate,
    "scale": scale,
    "seed": seed,
    "max_epochs": budget,
    "validation": {"top_1": top_1, "top_5": top_5},
    "stopped_by": stopped,
  }


def _clean_sweep(cell, best_top1, best_top5):
  """A full sweep of ``cell`` on clinc150_clean whose Top-1 and Top-5 choices are given."""
  found = []
  for r in R:
    for s in P.scale_grid(cell):
      s = plan._round(s)
      found.append(
        _record(
          "clinc150_clean",
          "sweep",
          cell,
          r,
          s,
          P.TUNING_SEED,
          top_1=0.9 if (r, s) == best_top1 else 0.1,
          top_5=0.9 if (r, s) == best_top5 else 0.1,
        )
      )
  return found


def test_a_noise_condition_keeps_the_clean_scale_of_each_endpoint():
  records = _clean_sweep("svm_k5", (R[1], 1.0), (R[1], 3.0))
  records.append(_record("clinc150_clean", "sweep", "svm_k5", R[1], 9.0, P.TUNING_SEED, 0.1, 0.2))
  for endpoint, scale in (("top_1", 1.0), ("top_5", 3.0)):
    chosen, missing = plan.cell_choice(records, "clinc150_domain40", "svm_k5", "dot", endpoint)
    assert chosen is None and missing == [(r, scale) for r in R]
  assert plan.cell_choice([], "clinc150_domain40", "svm_k5", "dot", "top_1") == (None, [])


def test_edges_name_a_choice_at_the_end_of_what_the_sweep_ran():
  records = _clean_sweep("svm_k5", (R[2], 1.0), (R[1], 3.0))
  # Top-5 chose the top scale, whose widening (9) was run and was worse: inside what ran
  records.append(_record("clinc150_clean", "sweep", "svm_k5", R[1], 9.0, P.TUNING_SEED, 0.1, 0.2))
  assert plan.edges(records, "clinc150_clean", "svm_k5", "dot", "top_5") == []
  # Top-1 chose the top rate; both widenings were run and the last is still the best
  for rate, top_1 in ((0.01, 0.95), (0.0316228, 0.99)):
    records.append(_record("clinc150_clean", "sweep", "svm_k5", rate, 1.0, P.TUNING_SEED, top_1))
  assert plan.cell_choice(records, "clinc150_clean", "svm_k5", "dot", "top_1") == (
    (0.0316228, 1.0),
    [],
  )
  assert plan.edges(records, "clinc150_clean", "svm_k5", "dot", "top_1") == [
    ("rate", 0.0316228, "largest")
  ]
  # a cell whose sweep has not run has nothing to flag
  assert plan.edges(records, "clinc150_clean", "softmax", "dot", "top_1") == []


def test_planned_runs_sweep_then_seeds_once_per_configuration():
  records = _clean_sweep("svm_k5", (R[1], 1.0), (R[1], 1.0))
  todo = plan.planned_runs(records, ["clinc150_clean"])
  svm_seeds = [t for t in todo if t[1] == "seeds" and t[2] == "svm_k5"]
  assert svm_seeds == [
    ("clinc150_clean", "seeds", "svm_k5", "dot", R[1], 1.0, s, P.MAX_EPOCHS)
    for s in P.EVALUATION_SEEDS
  ]  # both endpoints chose the same configuration: one set of seeds
  assert not [t for t in todo if t[1] == "sweep" and t[2] == "svm_k5"]
  first_seeds = next(i for i, t in enumerate(todo) if t[1] == "seeds")
  assert all(t[1] == "sweep" for t in todo[:first_seeds])
  assert ("clinc150_clean", "seeds", "softmax", "dot", None, None, None, P.MAX_EPOCHS) in todo


def test_seeds_rerun_at_twice_the_budget_below_the_converged_share():
  records = _clean_sweep("svm_k5", (R[1], 1.0), (R[1], 1.0))
  seeds = [
    _record(
      "clinc150_clean", "seeds", "svm_k5", R[1], 1.0, s, stopped="budget" if s == 0 else "patience"
    )
    for s in P.EVALUATION_SEEDS
  ]
  todo = plan.planned_runs(records + seeds, ["clinc150_clean"])
  rerun = [t for t in todo if t[1] == "seeds" and t[2] == "svm_k5"]
  assert [t[-1] for t in rerun] == [2 * P.MAX_EPOCHS] * len(P.EVALUATION_SEEDS)  # 5 / 6 < 0.9
  for s in seeds:
    s["stopped_by"] = "patience"
  todo = plan.planned_runs(records + seeds, ["clinc150_clean"])
  assert not [t for t in todo if t[1] == "seeds" and t[2] == "svm_k5"]


def test_check_record_names_what_is_wrong():
  with pytest.raises(ValueError, match="lacks"):
    plan.check_record({"edition": 3})
  good = {k: None for k in plan.RECORD_FIELDS}
  good.update(
    edition=3,
    stage="seeds",
    cell="softmax",
    head="dot",
    stopped_by="budget",
    epochs_run=5,
    max_epochs=4,
  )
  with pytest.raises(ValueError, match="exceeds"):
    plan.check_record(good)
  with pytest.raises(ValueError, match="cell"):
    plan.check_record({**good, "cell": "nope"})
