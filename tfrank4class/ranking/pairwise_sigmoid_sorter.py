"""The handcrafted sorter of SoDeep (Engilberge et al., CVPR 2019, Eq. 11-12): no training.

Each pairwise comparison ``1[s_j > s_i]`` of the exact rank is replaced by a sigmoid,

    rank_hat(s)_i = 1 + sum_{j != i} sigmoid(c * (s_j - s_i)),       c = steepness,

which tends to ``rank(s)`` (1 = highest) as ``c -> inf`` for lists without ties. The ``[n, n]``
comparison matrix is processed in column blocks (forward and backward), so memory stays
``O(B * n * block_size)`` even for long lists.
"""
import tensorflow as tf

from tfrank4class import _validation, compat
from tfrank4class.ranking import sorter_base


@compat.register_serializable
class PairwiseSigmoidSorter(sorter_base.Sorter):
  """Soft ranks ``1 + sum_{j != i} sigmoid(steepness * (s_j - s_i))`` (SoDeep Eq. 11-12).

  Output: ranks on the scale of :func:`tfrank4class.ranking.rank` (``[1, n]``, 1 = highest).

  Args:
    steepness: the slope ``c > 0`` of the sigmoid, in units of 1 / score.
    standardize_scores: if True, scores are first standardised per list (``(s - mean) / std``),
      which makes ``steepness`` scale-free.
    block_size: columns of the comparison matrix held in memory at once.

  Example:
    >>> sorter = PairwiseSigmoidSorter(steepness=100.0)
    >>> sorter([[0.1, 0.9, 0.5]]).numpy().round(2)
    array([[3., 1., 2.]], dtype=float32)
  """

  def __init__(self, steepness=20.0, standardize_scores=False,
               block_size=sorter_base.DEFAULT_BLOCK_SIZE, **kwargs):
    super().__init__(**kwargs)
    self.steepness = _validation.check_float("steepness", steepness, minimum=0.0, strict=True)
    if not isinstance(standardize_scores, bool):
      raise ValueError(f"`standardize_scores` must be a bool, got {standardize_scores!r}.")
    self.standardize_scores = standardize_scores
    self.block_size = _validation.check_int("block_size", block_size, minimum=1)

  def call(self, scores, training=None):
    scores = sorter_base.check_scores(scores)
    if self.standardize_scores:
      scores = sorter_base.standardize(scores)
    k = tf.fill(tf.shape(scores), tf.cast(self.steepness, scores.dtype))
    return sorter_base.pairwise_sigmoid_sum(scores, k, self.block_size) + 0.5

  def get_config(self):
    config = super().get_config()
    config.update({"steepness": self.steepness, "standardize_scores": self.standardize_scores,
                   "block_size": self.block_size})
    return config
