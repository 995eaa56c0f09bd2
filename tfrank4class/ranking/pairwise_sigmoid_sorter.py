"""The handcrafted sorter of SoDeep (Engilberge et al., CVPR 2019, Sec. 4.1.2, Eq. 11-12).

No training. Eq. 11 compares two scores with a sigmoid, ``sigma_comp(a, b) = 1 / (1 +
exp(-lambda (b - a)))``, and Eq. 12 adds the comparisons of item ``i`` with every other item,

    rank_hat(s)_i = 1 + sum_{j != i} sigmoid(lambda * (s_j - s_i)),       lambda = steepness,

which tends to ``rank(s)`` (1 = highest) as ``lambda -> inf`` for lists without ties. Eq. 12
has no ``1 +`` (it counts the items ahead of ``i``, from 0); we add it so that the output has
the scale of :func:`tfrank4class.ranking.rank`. The default ``lambda = 10`` is the paper's
(the value of its experiments), applied to raw scores as in the paper. The ``[n, n]``
comparison matrix is processed in column blocks, one after another (forward and backward), so
memory stays ``O(B * n * block_size)`` even for long lists (fewer columns per block there, see
:func:`~tfrank4class.ranking.sigmoid_comparisons.pairwise_sigmoid_sum`); time is
``O(B * n^2)``, and ``O(B * n)`` for the rank of one item alone
(:meth:`PairwiseSigmoidSorter.ranks_at`).
"""

from tfrank4class import checks
from tfrank4class.compat import ops
from tfrank4class.ranking import sigmoid_comparisons, sorter_base
from tfrank4class.registry import export


@export()
class PairwiseSigmoidSorter(sorter_base.Sorter):
  """Soft ranks ``1 + sum_{j != i} sigmoid(steepness * (s_j - s_i))`` (SoDeep Sec. 4.1.2,
  Eq. 11-12).

  Output: ranks on the scale of :func:`tfrank4class.ranking.rank` (``[1, n]``, 1 = highest).

  Args:
    steepness: the paper's ``lambda > 0``, the slope of the sigmoid in units of 1 / score
      (default 10, the paper's value; larger is closer to the exact ranks and passes gradient
      between fewer pairs).
    standardize_scores: if True, scores are first standardised per list (``(s - mean) / std``),
      which makes ``steepness`` scale-free (not in the paper).
    block_size: columns of the comparison matrix held in memory at once.

  Example:
    >>> sorter = PairwiseSigmoidSorter(steepness=100.0)
    >>> ops.convert_to_numpy(sorter(ops.convert_to_tensor([[0.1, 0.9, 0.5]]))).round(2)
    array([[3., 1., 2.]], dtype=float32)
  """

  def __init__(
    self,
    steepness=10.0,
    standardize_scores=False,
    block_size=sigmoid_comparisons.DEFAULT_BLOCK_SIZE,
    **kwargs,
  ):
    super().__init__(**kwargs)
    self.steepness = checks.check_float("steepness", steepness, minimum=0.0, strict=True)
    if not isinstance(standardize_scores, bool):
      raise ValueError(f"`standardize_scores` must be a bool, got {standardize_scores!r}.")
    self.standardize_scores = standardize_scores
    self.block_size = checks.check_int("block_size", block_size, minimum=1)

  def call(self, scores, training=None):
    scores = sorter_base.check_scores(scores)
    if self.standardize_scores:
      scores = sorter_base.standardize(scores)
    k = ops.ones_like(scores) * ops.cast(self.steepness, scores.dtype)
    return sigmoid_comparisons.pairwise_sigmoid_sum(scores, k, self.block_size) + 0.5

  def ranks_at(self, scores, index):
    """The rank of item ``index[b]`` of each list alone (see
    :meth:`~tfrank4class.ranking.sorter_base.Sorter.ranks_at`), in ``O(B * n)``."""
    scores = self._row_inputs(scores)
    k = ops.ones_like(scores[:, :1]) * ops.cast(self.steepness, scores.dtype)
    if self.standardize_scores:
      k = k * sorter_base.standard_scale(scores)
    return sigmoid_comparisons.pairwise_sigmoid_row_sum(scores, k, index) + 0.5

  def get_config(self):
    config = super().get_config()
    config.update(
      {
        "steepness": self.steepness,
        "standardize_scores": self.standardize_scores,
        "block_size": self.block_size,
      }
    )
    return config
