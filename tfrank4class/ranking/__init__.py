"""Rank operators: exact ranks, tie statistics, the blackbox ranker and learned sorters."""
from tfrank4class.ranking.exact import rank
from tfrank4class.ranking.exact import rank_within
from tfrank4class.ranking.blackbox import (BlackboxRanker, blackbox_rank, blackbox_rank_within,
                                           margin_shift)
from tfrank4class.ranking.ties import log_binomial, tie_statistics
from tfrank4class.ranking.precision import (average_precision_from_ranks, expected_precision,
                                            harmonic_difference)
from tfrank4class.ranking.sorter_base import Sorter
from tfrank4class.ranking.pairwise_sigmoid_sorter import PairwiseSigmoidSorter
from tfrank4class.ranking.lstm_sorter import LSTMSorter
from tfrank4class.ranking.conv_sorter import ConvSorter
from tfrank4class.ranking.attention_sorter import AttentionSorter
from tfrank4class.ranking.synthetic import synthetic_batch, synthetic_dataset
from tfrank4class.ranking.sorters import PRETRAINED_SORTERS, SORTERS
