"""Rank operators: exact ranks, tie statistics, the blackbox ranker and learned sorters."""
from tfrank4class.ranking.exact import rank
from tfrank4class.ranking.ties import tie_statistics
