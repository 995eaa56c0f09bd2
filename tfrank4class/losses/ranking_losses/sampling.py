"""What TF-Ranking's loss cores share: ranks by score, sorting by them, random draws, Gumbel lists.

Ranks and sorts are exact and deterministic: :func:`order` puts the valid items first (padded
items tie among themselves, whatever their keys, as in TF-Ranking), then a higher key first, on a
tie a lower ``tiebreak`` value first, then a lower index (one sort, ``O(n log n)``), and every
backend breaks ties alike. TF-Ranking breaks ties in a random order; ``list_mle_loss`` and
``coupled_rankdistil_loss``, where ties are the rule (one-hot labels), pass a uniform draw as
``tiebreak`` and so draw that random order too. Where only one item's place in that order counts
(the true class of a one-hot row under a Yeti weight), :func:`true_class_neighbours` finds it and
its two neighbours without a sort, ``O(n)``.

Random draws come from :func:`uniform` (``keras.random.uniform``'s numbers, from the loss's
``keras.random.SeedGenerator``); the oracle test (``tests/test_tf_ranking_oracle.py``) replaces
it, and TF-Ranking's own draws, by the same numbers.

Example:
  >>> import numpy as np
  >>> from keras import ops
  >>> ops.convert_to_numpy(ranks(np.array([[1.0, 3.5, 2.1, 3.5]]))).tolist()
  [[4, 1, 3, 2]]
"""

import math
import warnings
import weakref

from tfrank4class import backend
from tfrank4class.backend import (
  argsort_pairs,
  dtype_name,
  invert_permutation,
  is_concrete,
  stable_argsort,
  state_is_carried,
  take_along_axis,
)
from tfrank4class.backend import uniform as backend_uniform
from tfrank4class.compat import ops

#: ``log(1e-10)``: TF-Ranking's logit for a padded item in its listwise losses.
LOG_EPSILON = math.log(1e-10)


def pairwise(op, tensor, first=None):
  """``op(x_i, x_j)`` for every pair of items ``[B, n, n]``; with ``first`` (the index ``[B]`` of
  one item per list, int32) for the pairs of that item ``i`` with each item ``j``, ``[B, n]``:
  the one row of the pairs that class ids need (only the true class's pairs carry weight); with
  ``first`` ``[B, r]`` (``r`` items per list) those ``r`` rows ``[B, r, n]``: the rows that dense
  relevance with ``r`` relevant items needs."""
  if first is None:
    return op(ops.expand_dims(tensor, 2), ops.expand_dims(tensor, 1))
  if len(first.shape) == 2:
    return op(
      ops.expand_dims(take_along_axis(tensor, first, axis=-1), 2), ops.expand_dims(tensor, 1)
    )
  return op(take_along_axis(tensor, ops.expand_dims(first, 1), axis=-1), tensor)


#: The seed generators :func:`uniform` has warned about.
_WARNED = weakref.WeakSet()


def uniform(shape, seed, like):
  """Uniform ``[0, 1)`` numbers of ``shape`` in the dtype of ``like`` (the scores they perturb or
  order) from ``seed`` (a ``keras.random.SeedGenerator``).

  On JAX a traced call whose scope does not carry the generator's state (a user's ``jax.jit``
  outside :meth:`tfrank4class.losses.Loss.stateless_call`, or Keras's JAX ``fit`` when the
  loss's generators are not assigned to the model) draws from the generator's state without
  advancing it (an assignment would leave a tracer in the variable), so every call draws the
  same numbers: a ``UserWarning`` says so once per generator, with the lines that fix it.
  """
  if is_concrete(like) or state_is_carried(seed.state) is not False:
    return backend_uniform(shape, seed, like.dtype)
  if seed not in _WARNED:
    _WARNED.add(seed)
    warnings.warn(
      "A tfrank4class loss draws random numbers inside a traced step whose state does not carry "
      "its seed generator, so every step draws the same numbers. Under Keras's JAX `fit`, assign "
      "them to the model before `fit`: `model.loss_seed_generators = loss.seed_generators`; "
      "under your own `jax.jit`, call `loss.stateless_call(seed_states, y_true, y_pred)` and "
      "carry the seed states it returns (docs/backends.md, 'Random losses under jax.jit').",
      UserWarning,
      stacklevel=2,
    )
  return backend_uniform(shape, seed.state.value, like.dtype)


def _refine(permutation, key, descending):
  """``permutation`` stably re-sorted by ``key`` (given in the items' original order)."""
  if permutation is None:
    return stable_argsort(key, descending=descending)
  step = stable_argsort(take_along_axis(key, permutation, axis=-1), descending=descending)
  return take_along_axis(permutation, step, axis=-1)


#: Dtypes whose order an int32 ordinal keeps exactly, short of the largest int32 once complemented.
_NARROW_INTS = ("bool", "int8", "int16", "uint8", "uint16")
_FLOAT32_EXACT = ("float16", "bfloat16", "float32")


def _ordinal(x):
  """An int32 in the order of ``x`` (a dtype of ``_NARROW_INTS`` or ``_FLOAT32_EXACT``):
  equal values alike, ``-0.0`` as ``0.0``; a float's bits with the negatives' magnitude bits
  flipped."""
  if dtype_name(x) in _NARROW_INTS:
    return ops.cast(x, "int32")
  x = ops.cast(x, "float32")
  bits = ops.view(backend.where(x == 0, 0.0, x), "int32")
  return backend.where(bits < 0, ops.bitwise_xor(bits, 2**31 - 1), bits)


def order(keys, valid=None, tiebreak=None):
  """The items' indices ``[B, n]`` (int32) from first to last; see the module docstring.

  One sort (:func:`tfrank4class.backend.argsort_pairs`) on ``(validity and key, tiebreak)`` as
  int32 ordinals where both fit 32 bits; for wider dtypes (float64, int32, int64) successive
  stable sorts, from the last key to the first.
  """
  packable = _NARROW_INTS + _FLOAT32_EXACT
  if dtype_name(keys) in packable and (tiebreak is None or dtype_name(tiebreak) in packable):
    # Descending key: the bitwise complement reverses an int32's order without overflow; a
    # padded item gets the largest int32, which no complemented ordinal reaches (NaN aside).
    primary = ops.bitwise_not(_ordinal(keys))
    if valid is not None:
      primary = backend.where(valid, primary, 2**31 - 1)
    if tiebreak is None:
      return stable_argsort(primary)
    return argsort_pairs(primary, _ordinal(tiebreak))
  if valid is not None:
    keys = backend.where(valid, keys, ops.zeros_like(keys))  # padded items tie among themselves
  permutation = None if tiebreak is None else _refine(None, tiebreak, descending=False)
  permutation = _refine(permutation, keys, descending=True)
  if valid is not None:
    permutation = _refine(permutation, ops.cast(valid, "int32"), descending=True)
  return permutation


def first_then_drawn(first, draws):
  """The items' indices ``[B, n]`` (int32): the item where ``first`` ``[B, n]`` (bool) is true,
  then the others by ascending ``draws`` (uniform ``[0, 1)``, :func:`uniform`), then by index:
  :func:`order` for a one-hot key, as one single-key sort. Draws that fit 32 bits are sorted as
  their int32 bits (a non-negative float's bits are in the order of its value; the same indices,
  and an int32 sort costs less than a float sort or :func:`order`'s two keys, JAX's the most).

  Example:
    >>> import numpy as np
    >>> first = np.array([[False, True, False, False]])
    >>> draws = np.array([[0.5, 0.9, 0.1, 0.5]], "float32")
    >>> ops.convert_to_numpy(first_then_drawn(first, draws)).tolist()
    [[1, 2, 0, 3]]
  """
  if dtype_name(draws) in _FLOAT32_EXACT:
    return stable_argsort(backend.where(first, -1, _ordinal(draws)))
  return stable_argsort(backend.where(first, -1.0, draws))


def ranks(keys, valid=None, tiebreak=None):
  """1-based ranks ``[B, n]`` (int32) in :func:`order`: the inverse of that permutation."""
  return invert_permutation(order(keys, valid, tiebreak)) + 1


def true_class_neighbours(keys, ids):
  """Where the true class ``ids`` ``[B]`` (int32) stands in :func:`order` of ``keys`` ``[B, n]``
  (no padding, no tiebreak) without a sort, ``O(n)``: ``(rank, before, after)``, each ``[B, 1]``
  int32: its 1-based rank, and the indices of the items just before and just after it (``-1``
  where it is first or last). Before it: a higher key, or an equal key and a lower index; the
  item just before is the lowest key there (of those, the highest index), the item just after the
  highest key among the rest (of those, the lowest index)."""
  keys = ops.stop_gradient(ops.convert_to_tensor(keys))
  size = ops.shape(keys)[1]
  index = ops.arange(size)[None, :]
  true_index = ids[:, None]
  true_key = take_along_axis(keys, true_index, axis=-1)
  ahead = ops.logical_or(keys > true_key, ops.logical_and(keys == true_key, index < true_index))
  behind = ops.logical_or(keys < true_key, ops.logical_and(keys == true_key, index > true_index))
  rank = ops.sum(ops.cast(ahead, "int32"), axis=1, keepdims=True) + 1
  nearest = ops.min(backend.where(ahead, keys, float("inf")), axis=1, keepdims=True)
  before = ops.max(
    backend.where(ops.logical_and(ahead, keys == nearest), index, -1), axis=1, keepdims=True
  )
  nearest = ops.max(backend.where(behind, keys, float("-inf")), axis=1, keepdims=True)
  after = ops.min(
    backend.where(ops.logical_and(behind, keys == nearest), index, size), axis=1, keepdims=True
  )
  return rank, before, backend.where(after == size, -1, after)


def gather(permutation, *tensors):
  """Each of ``tensors`` ``[B, n]`` in the order of ``permutation`` (indices ``[B, n]``)."""
  return [take_along_axis(tensor, permutation, axis=-1) for tensor in tensors]


class GumbelSampler:
  """TF-Ranking's ``GumbelSampler``: ``sample_size`` noisy copies of each list.

  Each copy's logits are ``log(softmax((s + g) / temperature) + 1e-20)`` with Gumbel noise ``g``
  (padded items get ``log(1e-20)`` before the softmax); labels and weights are repeated, and
  the copies of a list are consecutive rows ``[B * sample_size, n]``. Labels may be relevance
  ``[B, n]`` or class ids ``[B]`` (no padded item): the copies of a one-hot row are one-hot.
  """

  def __init__(self, sample_size, temperature, seed):
    self.sample_size = sample_size
    self.temperature = temperature
    self.seed = seed

  def sample(self, labels, logits, weights=None):
    size = self.sample_size
    batch, items = ops.shape(logits)[0], ops.shape(logits)[1]
    labels = ops.repeat(labels, size, axis=0)
    u = uniform((batch, size, items), self.seed, logits)
    gumbel = -ops.log(-ops.log(u + 1e-20) + 1e-20)
    logits = ops.reshape(ops.expand_dims(logits, 1) + gumbel, (-1, items)) / self.temperature
    if len(labels.shape) == 2:
      logits = backend.where(labels >= 0, logits, math.log(1e-20))
    logits = ops.log(ops.softmax(logits, axis=-1) + 1e-20)
    if weights is not None:
      weights = ops.repeat(weights, size, axis=0)
    return labels, logits, weights
