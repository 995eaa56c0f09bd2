"""experiments/second/protocol.py: the learning-rate sweep, the loss list and the paper's gaps."""

import doctest
import pathlib
import re

import numpy as np

from experiments.second import protocol

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAPER_TEXT = ROOT.parent / "shared" / "papers" / "003_b86680b28be9a065.txt"


def test_learning_rate_grid_is_a_factor_sqrt10_grid_from_1e_4_to_1e_2():
  rates = protocol.learning_rate_grid()
  np.testing.assert_allclose(rates, [1e-4, 3.16e-4, 1e-3, 3.16e-3, 1e-2])
  np.testing.assert_allclose(np.diff(np.log10(rates)), 0.5, atol=2e-3)


def test_widened_adds_one_rate_beyond_the_edge_only():
  rates = protocol.learning_rate_grid()
  np.testing.assert_allclose(protocol.widened(rates, 4)[-1], 3.16e-2)
  np.testing.assert_allclose(protocol.widened(rates, 0)[0], 3.16e-5)
  assert protocol.widened(rates, 2) == rates


def test_losses_and_the_holm_family():
  names = ["softmax_loss", "topk_cross_entropy_loss", "smooth_topk_svm_loss", "triplet_loss"]
  losses = protocol.losses(names)
  assert losses[:7] == list(protocol.RANKING_LOSSES)
  assert losses[7:] == ["smooth_topk_svm_loss", "topk_cross_entropy_loss"]
  assert protocol.comparisons(len(losses)) == 9 * 3 - 1
  assert protocol.BASELINE[0] in losses


def test_paper_numbers_are_table_7_of_the_paper():
  text = PAPER_TEXT.read_text(encoding="utf-8")
  table = text.split("Table 7: Results on GoEmotions with BERT", 1)[1].split("Table 8:", 1)[0]
  rows = [
    [float(v) for v in re.findall(r"\d\.\d{4}", line)]
    for line in table.splitlines()
    if len(re.findall(r"\d\.\d{4}", line)) == 5
  ]
  expected = [
    protocol.PAPER[metric][head]
    for metric in ("top_1", "top_5", "ndcg_5")
    for head in ("dot", "latent_cross", "concat")
  ]
  assert rows == expected


def test_paper_difference():
  assert protocol.paper_difference("ndcg_5", "softmax_loss", "dot") == 0.0
  np.testing.assert_allclose(
    protocol.paper_difference("top_1", "mean_squared_loss", "concat"), 0.5837 - 0.5900
  )
  assert protocol.paper_difference("ndcg_5", "topk_cross_entropy_loss", "dot") is None


def test_examples():  # experiments/ is outside the suite's doctest collection
  assert doctest.testmod(protocol).failed == 0
