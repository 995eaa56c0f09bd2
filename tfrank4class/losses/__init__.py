"""Losses: the registry (every TF-Ranking loss plus ours) and label-to-relevance adapters."""
from tfrank4class.losses.registry import RankingLoss, get, names, register
from tfrank4class.losses.relevance import to_relevance
