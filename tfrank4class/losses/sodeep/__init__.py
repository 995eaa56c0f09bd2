"""The SoDeep family: rank-based losses through a differentiable rank operator.

Engilberge et al., "SoDeep: a Sorting Deep net to learn ranking loss surrogates" (CVPR 2019).
A rank operator maps scores ``[B, n]`` to ranks ``[B, n]``; the paper's is a learned sorter (an
LSTM or CNN, Sec. 4.1) or the handcrafted pairwise-sigmoid sorter (Sec. 4.1.2, Eq. 11-12,
``lambda = 10``), all in :mod:`tfrank4class.ranking`. Here exact ranks and the RaMBO blackbox
ranker are interchangeable with them. On these ranks the paper builds three losses (Sec. 3.2):

* Spearman's correlation (Sec. 3.2.1): ``||rk_hat(s) - rk(y)||^2`` (Eq. 4), scaled to
  ``1 - rho`` (Eq. 2);
* mean average precision (Sec. 3.2.2): the summed ranks of each class's positives (Eq. 7), and
  the per-list ``1 - AP`` of the ranks (Eq. 5-6);
* recall at K for retrieval (Sec. 3.2.3): a hardest-negative triplet loss on ranks (Eq. 9-10).

Each module holds one part:

* ``base``: the rank operator by name or layer (``resolve_ranker``, ``RANKER_NAMES``), the
  fine-tuning of a learned sorter inside the loss and serialization, in
  :class:`RankOperatorLoss`, the base of the losses; its docstring states these conventions.
  Padded items are kept out of the ranking by ``tfrank4class.ranking.exact.sink``.
* ``spearman``: :class:`SpearmanLoss` (Eq. 2-4).
* ``average_precision``: :class:`SorterMAPLoss` (Eq. 7) and :class:`SorterAPLoss` (Eq. 5-6;
  the AP of ranks is :func:`tfrank4class.ranking.precision.average_precision_from_ranks`, shared
  with the RaMBO AP losses).
* ``rank_triplet``: :class:`RankTripletLoss` (Eq. 9-10).

Notes on the implementation, the shipped sorters and the tests: ``docs/sodeep.md``.
"""

from tfrank4class.losses.sodeep.average_precision import SorterAPLoss, SorterMAPLoss
from tfrank4class.losses.sodeep.base import RankOperatorLoss
from tfrank4class.losses.sodeep.rank_triplet import RankTripletLoss
from tfrank4class.losses.sodeep.spearman import SpearmanLoss

__all__ = ["RankOperatorLoss", "RankTripletLoss", "SorterAPLoss", "SorterMAPLoss", "SpearmanLoss"]
