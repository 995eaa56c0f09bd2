"""experiments/third/protocol.py: the constants say what docs/evidence-third-edition.md says
(hand-copied from its tables), every cell's loss builds, the scale arguments are checked."""

import pytest

from experiments import training
from experiments.third import protocol as P


def test_the_cells_follow_the_protocols_losses_table():
  loss, kwargs = P.loss_arguments("topk_ce_cifar", 0.5)
  assert loss == "topk_cross_entropy_loss" and kwargs == {
    "method": "bitonic",
    "distribution": "logistic_phi",
    "art_lambda": 0.5,
    "p_k": [0.2] * 5,
    "m": None,
    "top1_mode": "smce",
    "inverse_temperature": 0.5,
  }
  _, kwargs = P.loss_arguments("topk_ce_frozen", 1.0)
  assert (kwargs["m"], kwargs["top1_mode"], kwargs["inverse_temperature"]) == (16, "sm", 1.0)
  assert P.loss_arguments("svm_k1", 1.0) == (
    "smooth_topk_svm_loss",
    {"k": 1, "alpha": 1.0, "tau": 1.0},
  )
  assert P.CELLS["approx_ndcg"][2:] == ("temperature", 0.1)
  assert P.CELLS["soft_rank_topk"][2:] == ("regularization_strength", 1.0)
  assert P.OWN_CELLS == ("soft_rank_topk",)


def test_order_conditions_and_budget():
  assert list(P.EXPERIMENTS) == [
    "clinc150_clean",
    "clinc150_domain40",
    "clinc150_domain80",
    "clinc150_domain20",
    "clinc150_domain60",
    "banking77_clean",
    "goemotions_clean",
    "goemotions_head_scale",
    "clinc150_uniform40",
    "goemotions_ekman40",
    "goemotions_ekman80",
  ]
  assert P.EXPERIMENTS["clinc150_uniform40"]["noise"] == ("uniform", 0.4)
  assert P.EXPERIMENTS["goemotions_head_scale"]["heads"] == ["concat", "concat_scaled"]
  assert (P.PATIENCE, P.MAX_EPOCHS, P.BATCH_SIZE, P.TUNING_SEED) == (20, 300, 256, 1000)
  assert P.scale_grid("softmax") == [None]
  assert P.scale_grid("svm_k5") == pytest.approx([1 / 3, 1.0, 3.0])


@pytest.mark.parametrize("cell", list(P.CELLS))
def test_every_cell_builds_its_loss(cell):
  loss, kwargs = P.loss_arguments(cell, None if P.CELLS[cell][2] is None else P.CELLS[cell][3])
  config = training.build_loss(loss, kwargs).get_config()
  for key, value in kwargs.items():
    assert config[key] == (list(value) if isinstance(value, list) else value), key


def test_scale_arguments_are_checked():
  with pytest.raises(ValueError, match="must be a number"):
    P.loss_arguments("svm_k5", None)
  with pytest.raises(ValueError, match="has no scale argument"):
    P.loss_arguments("softmax", 1.0)
