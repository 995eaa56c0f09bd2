"""Rank operators: exact ranks, tie statistics, the blackbox ranker, learned sorters and the relaxed
sorting operators (NeuralSort, SoftSort, differentiable sorting networks and their top-k form, soft
rank and soft sort by projection onto the permutahedron)."""

from tfrank4class.ranking.attention_sorter import AttentionSorter
from tfrank4class.ranking.blackbox import (
  BlackboxRanker,
  blackbox_item_rank,
  blackbox_rank,
  blackbox_rank_within,
  margin_shift,
)
from tfrank4class.ranking.conv_sorter import ConvSorter
from tfrank4class.ranking.exact import rank, rank_within
from tfrank4class.ranking.lstm_sorter import LSTMSorter
from tfrank4class.ranking.neuralsort import neuralsort
from tfrank4class.ranking.pairwise_sigmoid_sorter import PairwiseSigmoidSorter
from tfrank4class.ranking.permutahedron import isotonic_regression, soft_rank, soft_sort
from tfrank4class.ranking.precision import (
  average_precision_from_ranks,
  expected_precision,
  harmonic_difference,
)
from tfrank4class.ranking.softsort import softsort
from tfrank4class.ranking.sorter_base import Sorter
from tfrank4class.ranking.sorters import PRETRAINED_SORTERS, SORTERS
from tfrank4class.ranking.sorting_networks import (
  comparator_network,
  sorting_network_sort,
  sorting_network_topk,
  swap_probability,
)
from tfrank4class.ranking.synthetic import synthetic_batch, synthetic_dataset
from tfrank4class.ranking.ties import log_binomial, tie_statistics

__all__ = [
  "AttentionSorter",
  "average_precision_from_ranks",
  "blackbox_item_rank",
  "blackbox_rank",
  "blackbox_rank_within",
  "BlackboxRanker",
  "comparator_network",
  "ConvSorter",
  "expected_precision",
  "harmonic_difference",
  "isotonic_regression",
  "log_binomial",
  "LSTMSorter",
  "margin_shift",
  "neuralsort",
  "PairwiseSigmoidSorter",
  "PRETRAINED_SORTERS",
  "rank",
  "rank_within",
  "soft_rank",
  "soft_sort",
  "softsort",
  "Sorter",
  "SORTERS",
  "sorting_network_sort",
  "sorting_network_topk",
  "swap_probability",
  "synthetic_batch",
  "synthetic_dataset",
  "tie_statistics",
]
