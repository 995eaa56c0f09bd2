"""Rank4Class heads: class encoders and instance-class interactions in place of the final Dense.

s_{b,i} = f(h_b, c_i)      (Rank4Class, ICLR 2022 submission, Sec. 3.2 and 4.2)
"""

from tfrank4class.heads.blocked_top_k import blocked_top_k
from tfrank4class.heads.class_encoder import ClassEncoder
from tfrank4class.heads.interactions import (
  INTERACTIONS,
  ConcatInteraction,
  DotProductInteraction,
  Interaction,
  LatentCrossInteraction,
)
from tfrank4class.heads.interactions import get as get_interaction
from tfrank4class.heads.model import build_model
from tfrank4class.heads.rank4class_head import Rank4ClassHead
from tfrank4class.heads.sampled_classifier import SampledClassifier, SampledDotProduct
from tfrank4class.heads.sampled_rank4class import SampledRank4ClassHead

__all__ = [
  "blocked_top_k",
  "build_model",
  "ClassEncoder",
  "ConcatInteraction",
  "DotProductInteraction",
  "get_interaction",
  "Interaction",
  "INTERACTIONS",
  "LatentCrossInteraction",
  "Rank4ClassHead",
  "SampledClassifier",
  "SampledDotProduct",
  "SampledRank4ClassHead",
]
