"""What TF-Ranking's loss cores share: ranks by score, sorting by them, random draws, Gumbel lists.

Ranks and sorts are exact and deterministic: an item's rank counts the items before it (valid
items first, then a higher key, then on a tie a lower ``tiebreak`` value, then a lower index), so
no sort op is needed and every backend breaks ties alike. TF-Ranking breaks ties in a random
order; ``list_mle_loss`` and ``coupled_rankdistil_loss``, where ties are the rule (one-hot labels),
pass a uniform draw as ``tiebreak`` and so draw that random order too. The counting costs
``O(n^2)`` memory per list, as the pairwise losses do anyway.

Random draws come from :func:`uniform` (``keras.random.uniform`` with the loss's
``keras.random.SeedGenerator``); the oracle test (``tests/test_tf_ranking_oracle.py``) replaces
it, and TF-Ranking's own draws, by the same numbers.

Example:
  >>> import numpy as np
  >>> from keras import ops
  >>> ops.convert_to_numpy(ranks(np.array([[1.0, 3.5, 2.1, 3.5]]))).tolist()
  [[4, 1, 3, 2]]
"""

import math

from keras import random as keras_random

from tfrank4class.compat import ops

#: ``log(1e-10)``: TF-Ranking's logit for a padded item in its listwise losses.
LOG_EPSILON = math.log(1e-10)


def pairwise(op, tensor):
  """``op(x_i, x_j)`` for every pair of items ``[B, n, n]``."""
  return op(ops.expand_dims(tensor, 2), ops.expand_dims(tensor, 1))


def uniform(shape, seed, dtype):
  """Uniform ``[0, 1)`` numbers of ``shape`` from ``seed`` (a ``keras.random.SeedGenerator``)."""
  return keras_random.uniform(shape, dtype=dtype, seed=seed)


def ranks(keys, valid=None, tiebreak=None):
  """1-based ranks ``[B, n]`` (int32) by ``keys`` descending; see the module docstring."""
  index = ops.arange(ops.shape(keys)[-1])
  before = pairwise(ops.less, keys)  # [b, i, j]: item j's key is higher than item i's
  ties = pairwise(ops.equal, keys)
  earlier = ops.expand_dims(ops.greater(index[:, None], index[None, :]), 0)
  if tiebreak is not None:
    lower = pairwise(ops.greater, tiebreak)
    earlier = ops.logical_or(lower, ops.logical_and(pairwise(ops.equal, tiebreak), earlier))
  before = ops.logical_or(before, ops.logical_and(ties, earlier))
  if valid is not None:
    same = pairwise(ops.equal, valid)
    before = ops.where(same, before, ops.expand_dims(valid, 1))
  return ops.sum(ops.cast(before, "int32"), axis=2) + 1


def sort_by_ranks(item_ranks, *tensors):
  """Each of ``tensors`` ``[B, n]`` in the order of ``item_ranks`` (unique ``1..n`` per list)."""
  order = ops.argsort(item_ranks, axis=-1)
  return [ops.take_along_axis(tensor, order, axis=-1) for tensor in tensors]


def masked_logsumexp(x, mask):
  """``log(sum(exp(x)))`` over the last axis where ``mask`` holds; the diagonal of every row
  ``[..., i, i]`` must be in ``mask`` (masked entries take its value, so nothing overflows)."""
  diagonal = ops.expand_dims(ops.diagonal(x, axis1=-2, axis2=-1), -1)
  x = ops.where(mask, x, diagonal)
  top = ops.stop_gradient(ops.max(x, axis=-1, keepdims=True))
  total = ops.sum(ops.where(mask, ops.exp(x - top), 0.0), axis=-1)
  return ops.squeeze(top, -1) + ops.log(total)


class GumbelSampler:
  """TF-Ranking's ``GumbelSampler``: ``sample_size`` noisy copies of each list.

  Each copy's logits are ``log(softmax((s + g) / temperature) + 1e-20)`` with Gumbel noise ``g``
  (padded items get ``log(1e-20)`` before the softmax); labels and weights are repeated, and
  the copies of a list are consecutive rows ``[B * sample_size, n]``.
  """

  def __init__(self, sample_size, temperature, seed):
    self.sample_size = sample_size
    self.temperature = temperature
    self.seed = seed

  def sample(self, labels, logits, weights=None):
    size = self.sample_size
    batch, items = ops.shape(labels)[0], ops.shape(labels)[1]
    labels = ops.reshape(ops.repeat(ops.expand_dims(labels, 1), size, axis=1), (-1, items))
    u = uniform((batch, size, items), self.seed, logits.dtype)
    gumbel = -ops.log(-ops.log(u + 1e-20) + 1e-20)
    logits = ops.reshape(ops.expand_dims(logits, 1) + gumbel, (-1, items))
    logits = ops.where(labels >= 0, logits / self.temperature, math.log(1e-20))
    logits = ops.log(ops.softmax(logits, axis=-1) + 1e-20)
    if weights is not None:
      weights = ops.reshape(weights, (batch, 1, -1))
      weights = ops.reshape(ops.repeat(weights, size, axis=1), (batch * size, -1))
    return labels, logits, weights
