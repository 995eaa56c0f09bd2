"""A learned, length-agnostic sorter built on pairwise comparisons (our addition to SoDeep).

The exact rank counts pairwise comparisons, ``rank(s)_i = 1 + sum_{j != i} 1[s_j > s_i]``. A
fixed sigmoid (the handcrafted sorter, SoDeep Sec. 4.1.2, Eq. 11-12) is too soft where items
crowd together and needlessly sharp where they are sparse. This sorter attends over the whole
list twice, on the per-list standardised scores ``z = (s - mean) / std``:

1. *neighbourhood attention*: for every item it measures the gap ``g_i`` to its nearest
   neighbour and how many others lie within each of ``m`` bandwidths ``h_b``,
   ``c_{i,b} = |{j != i : |z_j - z_i| <= h_b}|`` (binary searches in the sorted list,
   O(n log n)). A small MLP maps the scale-free features ``log((c_{i,b} + 0.5) g_i / (2 h_b))``
   and ``log n`` to a *sharpness* ``a_i`` in ``[min_sharpness, max_sharpness]``;
2. *comparison attention*: sigmoid attention whose temperature is that sharpness per local gap,

        rank_hat(s)_i = 1 + sum_{j != i} sigmoid(k_i * (z_j - z_i)),     k_i = a_i / g_i.

Bounding ``a_i`` keeps the comparator smooth on the scale of the local spacing (so gradients
reach the neighbours of an item) while making it accurate: at the default upper bound
``a = 5`` the nearest neighbour is compared with error ``sigmoid(-5) ~ 7e-3``. The comparison
pass is block-wise over the list, one block after another
(:func:`~tfrank4class.ranking.sigmoid_comparisons.pairwise_sigmoid_sum`), so memory is
``O(B * n * block)`` (fewer columns per block for long lists) and time ``O(B * n^2)``; the same
weights serve any length ``n >= 2``. The rank of one item alone
(:meth:`AttentionSorter.ranks_at`) takes ``O(B * n)``, without a sort: its neighbour counts
and nearest gap are read from its own row (:func:`neighbour_counts_at`,
:func:`nearest_gap_at`), its comparisons summed with a written-out gradient
(:func:`row_comparison_sum`); that of an item over ``n - 1`` equal others
(:meth:`AttentionSorter.rank_above_ties`) takes ``O(B)``. The temperature is treated as a
constant in the backward pass (``stop_gradient``); the gradient with respect to the scores flows
through step 2 (for 2-item lists see :func:`~tfrank4class.ranking.sorter_base.standardize`).
Output: ranks on the scale of :func:`tfrank4class.ranking.rank` (``[1, n]``, 1 = highest).
"""

import math

from tfrank4class import backend, checks
from tfrank4class.compat import keras, ops
from tfrank4class.ranking import sigmoid_comparisons, sorter_base
from tfrank4class.registry import export

_DEFAULT_BANDWIDTHS = (1e-3, 1e-2, 0.03, 0.1, 0.3, 1.0)


def neighbour_counts(z, bandwidths):
  """``c[b, i, m] = |{j != i : |z_j - z_i| <= h_m}|`` for ``z`` ``[B, n]``, in O(n log n).

  Two binary searches per bandwidth in the sorted list (:func:`tfrank4class.backend.searchsorted`,
  batched); returns float ``[B, n, len(bandwidths)]`` (no gradient: the counts are piecewise
  constant).
  """
  z = ops.stop_gradient(ops.convert_to_tensor(z))
  ascending = ops.sort(z, axis=-1)
  counts = []
  for h in bandwidths:
    hi = backend.searchsorted(ascending, z + h, side="right")
    lo = backend.searchsorted(ascending, z - h, side="left")
    counts.append(ops.cast(hi - lo - 1, z.dtype))
  return ops.stack(counts, axis=-1)


def nearest_gap(z):
  """``g_i = min_{j != i} |z_j - z_i|`` for ``z`` ``[B, n]`` (n >= 2), in O(n log n), no
  gradient."""
  z = ops.stop_gradient(ops.convert_to_tensor(z))
  order = backend.stable_argsort(z, axis=-1)
  ascending = backend.take_along_axis(z, order, axis=-1)
  gaps = ascending[:, 1:] - ascending[:, :-1]
  big = ops.full_like(gaps[:, :1], float("inf"))
  nearest_sorted = ops.minimum(
    ops.concatenate([big, gaps], axis=-1), ops.concatenate([gaps, big], axis=-1)
  )
  inverse = backend.stable_argsort(order, axis=-1)
  return backend.take_along_axis(nearest_sorted, inverse, axis=-1)


def neighbour_counts_at(z, index, bandwidths):
  """:func:`neighbour_counts` ``[B, 1, len(bandwidths)]`` of the one item ``t = index[b]``
  (``index`` int ``[B, 1]``) of each list ``z`` ``[B, n]``, in O(n) with the same comparisons as
  the binary searches (``z_j <= z_t + h`` and ``z_j < z_t - h``): the same counts, as
  ``|{j : z_t - h <= z_j <= z_t + h}| - 1`` (the second set lies inside the first), one
  reduction per bandwidth, each taken in full before the next
  (:func:`~tfrank4class.backend.materialized`: XLA on CPU emits sibling reductions fused together
  about ten times slower than one after another)."""
  z, index = ops.stop_gradient(ops.convert_to_tensor(z)), ops.convert_to_tensor(index)
  zt = backend.take_along_axis(z, index, axis=-1)
  counts = []
  for h in bandwidths:
    count = _WINDOW_COUNT(z, zt, ops.convert_to_tensor(h, z.dtype))
    z, count = backend.materialized([z, count])
    counts.append(ops.cast(count - 1, z.dtype))
  return ops.stack(counts, axis=-1)


def _window_count(z, zt, h):
  """``|{j : zt - h <= z_j <= zt + h}|`` int32 ``[B, 1]`` for ``z`` ``[B, n]``, ``zt`` ``[B, 1]``
  and the scalar ``h``."""
  inside = ops.logical_and(z >= zt - h, z <= zt + h)
  return ops.sum(ops.cast(inside, "int32"), axis=-1, keepdims=True)


# On TensorFlow's graphs each window count is an XLA cluster of its own
# (backend.xla_cluster: one fused pass in place of five [B, n] kernels), one per bandwidth: in
# one cluster for all of them XLA writes every bandwidth's [B, n] mask before it sums any.
_WINDOW_COUNT = backend.xla_cluster(_window_count)


def nearest_gap_at(z, index):
  """:func:`nearest_gap` ``[B, 1]`` of the one item ``t = index[b]`` (``index`` int ``[B, 1]``)
  of each list, ``min_{j != t} |z_j - z_t|``, in O(n): rounded subtraction is monotone, so the
  nearest item gives the gap of the sorted neighbours exactly."""
  z, index = ops.stop_gradient(ops.convert_to_tensor(z)), ops.convert_to_tensor(index)
  zt = backend.take_along_axis(z, index, axis=-1)
  itself = ops.equal(ops.arange(ops.shape(z)[-1], dtype="int32")[None, :], index)
  distance = backend.where(itself, ops.full_like(z, float("inf")), ops.abs(z - zt))
  return ops.min(distance, axis=-1, keepdims=True)


def row_comparison_sum(scores, k, index):
  """``S_t = sum_j sigmoid(k_t (z_j - z_t))`` ``[B]`` of the one item ``t = index[b]`` of each
  standardised list ``z = standardize(scores)`` (``scores`` ``[B, n]``, ``k`` ``[B, 1]``): the
  values of :func:`~tfrank4class.ranking.sigmoid_comparisons.pairwise_sigmoid_row_sum` of the
  scores with steepness ``k * standard_scale(scores)``, and its gradient written out, so that
  the forward keeps no ``[B, n]`` tensor and the backward makes its ``[B, n]`` gradient from
  the scores again, after the forward's sum (:func:`~tfrank4class.backend.materialized`). With
  ``c = k * scale``, ``d_j = s_j - s_t`` and ``sigma'_j`` the slopes of the sigmoids:

      dS/ds_j = c sigma'_j - [j = t] c sum_i sigma'_i - scale^3 k A (s_j - mean) / n,
      dS/dk = scale A,      A = sum_i sigma'_i d_i,

  the last term of ``dS/ds_j`` (through the scale) left out for 2-item lists, whose scale is a
  constant for the gradient (:func:`~tfrank4class.ranking.sorter_base.standardize`)."""

  @backend.custom_gradient
  def _op(scores, k, index):
    n = ops.shape(scores)[-1]
    items = ops.cast(n, scores.dtype)
    total, mean, scale = _COMPARISON_SUM(scores, k, index)

    def gradient(upstream):
      scores_, k_, scale_ = backend.materialized([scores, k, ops.stop_gradient(scale), total])[:3]
      at = ops.cast(index, "int32")[:, None]
      steep, up = k_ * scale_, upstream[:, None]
      sum_slope, along = _SLOPE_SUMS(scores_, steep, at)  # along: A
      # The slopes again for the [B, n] gradient, after both sums, so that XLA need not hold
      # them ([B, n]) across the sums.
      scores_ = backend.materialized([scores_, sum_slope, along])[0]
      spread = ops.cast(ops.not_equal(n, 2), scores_.dtype)  # the scale's gradient, n > 2
      through_scale = -spread * up * k_ * along * ops.power(scale_, 3) / items
      grad = _SCORE_GRADIENT(scores_, steep, up * steep, at, sum_slope, through_scale, mean)
      return grad, up * scale_ * along, None

    return total, gradient

  return _op(
    ops.convert_to_tensor(scores),
    ops.convert_to_tensor(k),
    ops.cast(ops.convert_to_tensor(index), "int32"),
  )


def _comparison_sum(scores, k, index):
  """:func:`row_comparison_sum`'s forward: ``S_t`` ``[B]`` and the lists' means and
  :func:`~tfrank4class.ranking.sorter_base.standard_scale` ``[B, 1]``."""
  mean = ops.sum(scores, axis=-1, keepdims=True) / ops.cast(ops.shape(scores)[-1], scores.dtype)
  scale = sorter_base.standard_scale(scores)
  return sigmoid_comparisons.pairwise_sigmoid_row_sum(scores, k * scale, index), mean, scale


def _differences_and_slopes(scores, steep, at):
  """``d_j = s_j - s_t`` and the slopes ``sigma'_j`` of ``sigmoid(steep d_j)`` ``[B, n]`` of
  :func:`row_comparison_sum` (``at`` int ``[B, 1]``: the item ``t``)."""
  diff = scores - backend.take_along_axis(scores, at, axis=-1)
  sig = ops.sigmoid(steep * diff)
  return diff, sig * (1.0 - sig)


def _slope_sums(scores, steep, at):
  """``sum_i sigma'_i`` and ``A = sum_i sigma'_i d_i`` ``[B, 1]`` of :func:`row_comparison_sum`."""
  diff, slope = _differences_and_slopes(scores, steep, at)
  return ops.sum(slope, axis=-1, keepdims=True), ops.sum(slope * diff, axis=-1, keepdims=True)


def _score_gradient(scores, steep, weight, at, sum_slope, through_scale, mean):
  """``dS/ds_j`` ``[B, n]`` of :func:`row_comparison_sum` times the upstream, which ``weight``
  (``upstream * steep``) and ``through_scale`` carry, its slopes made again from the scores."""
  row = weight * _differences_and_slopes(scores, steep, at)[1] + through_scale * (scores - mean)
  is_item = ops.equal(ops.arange(ops.shape(scores)[-1], dtype="int32")[None, :], at)
  return backend.where(is_item, row - weight * sum_slope, row)


# On TensorFlow's graphs the gap and row_comparison_sum's forward and two backward passes are
# XLA clusters (backend.xla_cluster): each fused passes over [B, n] in place of five to a dozen
# kernels.
_NEAREST_GAP = backend.xla_cluster(nearest_gap_at)
_COMPARISON_SUM = backend.xla_cluster(_comparison_sum)
_SLOPE_SUMS = backend.xla_cluster(_slope_sums)
_SCORE_GRADIENT = backend.xla_cluster(_score_gradient)


@export()
class AttentionSorter(sorter_base.Sorter):
  """Density-adaptive pairwise-attention sorter; one set of weights for every list length.

  Args:
    hidden_units: width of the two hidden layers of the temperature MLP.
    bandwidths: the neighbourhood widths ``h_b`` of the density attention (in standard
      deviations of the list).
    min_sharpness, max_sharpness: bounds of the learned sharpness ``a_i`` (steepness times the
      nearest-neighbour gap); larger is more exact and less smooth.
    block_size: list items processed at once by the block-wise attention.

  Example:
    >>> sorter = AttentionSorter.pretrained()
    >>> ops.convert_to_numpy(sorter(ops.convert_to_tensor([[0.1, 0.9, 0.5]]))).round(1)
    array([[3., 1., 2.]], dtype=float32)
  """

  KIND = "attention"

  def __init__(
    self,
    hidden_units=32,
    bandwidths=_DEFAULT_BANDWIDTHS,
    min_sharpness=1.0,
    max_sharpness=5.0,
    block_size=sigmoid_comparisons.DEFAULT_BLOCK_SIZE,
    **kwargs,
  ):
    super().__init__(**kwargs)
    self.min_sharpness = checks.check_float(
      "min_sharpness", min_sharpness, minimum=0.0, strict=True
    )
    self.max_sharpness = checks.check_float(
      "max_sharpness", max_sharpness, minimum=self.min_sharpness
    )
    self.hidden_units = checks.check_int("hidden_units", hidden_units, minimum=1)
    bandwidths = tuple(
      float(checks.check_float("bandwidths", h, minimum=0.0, strict=True)) for h in bandwidths
    )
    if not bandwidths:
      raise ValueError("`bandwidths` must hold at least one positive number, got ().")
    self.bandwidths = bandwidths
    self.block_size = checks.check_int("block_size", block_size, minimum=1)
    self.hidden1 = keras.layers.Dense(
      hidden_units, activation="tanh", name="hidden1", dtype=self.dtype_policy
    )
    self.hidden2 = keras.layers.Dense(
      hidden_units, activation="tanh", name="hidden2", dtype=self.dtype_policy
    )
    self.out = keras.layers.Dense(1, name="sharpness_logit", dtype=self.dtype_policy)

  def _build_sublayers(self, input_shape):
    batch = input_shape[0]
    sorter_base.build_sublayer(self.hidden1, (batch, None, len(self.bandwidths) + 1))
    sorter_base.build_sublayer(self.hidden2, (batch, None, self.hidden_units))
    sorter_base.build_sublayer(self.out, (batch, None, self.hidden_units))

  def _weighted_layers(self):
    return (self.hidden1, self.hidden2, self.out)

  def steepness(self, z):
    """The per-item steepness ``k_i = a_i / g_i`` ``[B, n]`` for standardised lists ``z``."""
    return self._steepness(neighbour_counts(z, self.bandwidths), nearest_gap(z), ops.shape(z)[-1])

  def steepness_at(self, z, index):
    """``k_t`` ``[B, 1]`` of :meth:`steepness` for the one item ``t = index[b]`` of each list, in
    ``O(B * n)`` without a sort (:func:`neighbour_counts_at`, :func:`nearest_gap_at`)."""
    z = ops.convert_to_tensor(z)
    index = ops.cast(ops.convert_to_tensor(index), "int32")[:, None]
    counts = neighbour_counts_at(z, index, self.bandwidths)
    z, counts = backend.materialized([z, counts])  # the gap's reduction after the counts'
    return self._steepness(counts, _NEAREST_GAP(z, index), ops.shape(z)[-1])

  def _steepness(self, counts, gap, n):
    """``k = a / g`` from the neighbour counts ``[B, m, len(bandwidths)]`` and nearest gaps
    ``[B, m]`` of ``m`` items of lists of ``n`` items (``m = n``, or one item)."""
    gap = ops.maximum(gap, ops.cast(1e-6, gap.dtype))
    log_2h = ops.convert_to_tensor([math.log(2.0 * h) for h in self.bandwidths], gap.dtype)
    # Items per local gap at each bandwidth: scale-free, ~1 in a locally even list.
    feats = ops.log(counts + 0.5) - log_2h + ops.log(gap)[:, :, None]
    n = ops.cast(n, gap.dtype)
    logn = (ops.zeros_like(gap) + ops.log(n))[:, :, None]
    x = ops.concatenate([feats / 5.0, logn / 5.0], axis=-1)
    logit = ops.cast(self.out(self.hidden2(self.hidden1(x)))[..., 0], gap.dtype)
    sharpness = self.min_sharpness + (self.max_sharpness - self.min_sharpness) * ops.sigmoid(logit)
    return ops.minimum(sharpness / gap, ops.cast(1e7, gap.dtype))

  def _normalised_ranks(self, scores, training=None):
    z = sorter_base.standardize(scores)
    k = self.steepness(z)
    soft = sigmoid_comparisons.pairwise_sigmoid_sum(z, k, self.block_size) - 0.5
    n = ops.cast(ops.shape(scores)[-1], scores.dtype)
    return soft / (n - 1.0)

  def ranks_at(self, scores, index):
    """The rank of item ``index[b]`` of each list alone (see
    :meth:`~tfrank4class.ranking.sorter_base.Sorter.ranks_at`): its row of comparisons and its
    own steepness (:meth:`steepness_at`), ``O(B * n)`` time and memory, no sort; the gradient
    is written out (:func:`row_comparison_sum`). On TensorFlow's graphs each ``[B, n]`` pass
    (a window count, the gap, the comparison sum, its two backward passes) is an XLA cluster
    of its own (:func:`~tfrank4class.backend.xla_cluster`)."""
    scores = self._row_inputs(scores)
    k = self.steepness_at(sorter_base.standardize(scores), index)
    soft = row_comparison_sum(scores, k, index) - 0.5
    n = ops.shape(scores)[-1]
    return sorter_base.to_ranks(ops.cast(soft / ops.cast(n - 1, soft.dtype), "float32"), n)

  def rank_above_ties(self, top, rest, n):
    """:meth:`ranks_at` ``[B]`` of an item scored ``top`` ``[B]`` in a list of ``n`` items whose
    ``n - 1`` others all score ``rest`` ``[B]`` (a constant for the gradient): what
    :func:`~tfrank4class.ranking.exact.sink` makes of a list with one kept item. In closed form,
    ``O(B)``: the list's standardisation (:func:`~tfrank4class.ranking.sorter_base.standardize`)
    from its two values, the item's neighbour counts (``0`` or ``n - 1`` at each bandwidth) and
    nearest gap ``|z_rest - z_top|``, and ``n - 1`` equal comparisons."""
    top = ops.cast(ops.convert_to_tensor(top), self.compute_dtype)[:, None]
    rest = ops.stop_gradient(ops.cast(ops.convert_to_tensor(rest), self.compute_dtype))[:, None]
    if not self.built:
      sorter_base.build_sublayer(self, (top.shape[0], n))
    count = ops.cast(n - 1, top.dtype)
    mean = (top + count * rest) / ops.cast(n, top.dtype)
    centred_top, centred_rest = top - mean, rest - mean
    var = (ops.square(centred_top) + count * ops.square(centred_rest)) / ops.cast(n, top.dtype)
    scale = ops.rsqrt(var + ops.cast(1e-12, top.dtype))  # standard_scale's epsilon
    two_items = ops.cast(ops.equal(n, 2), top.dtype)
    scale = two_items * ops.stop_gradient(scale) + (1.0 - two_items) * scale
    z_top, z_rest = ops.stop_gradient(centred_top * scale), ops.stop_gradient(centred_rest * scale)
    within = [
      ops.cast(z_rest <= z_top + h, top.dtype) - ops.cast(z_rest < z_top - h, top.dtype)
      for h in self.bandwidths
    ]
    k = self._steepness(count * ops.stack(within, axis=-1), ops.abs(z_rest - z_top), n)
    soft = 0.5 + count * ops.sigmoid(k * scale * (rest - top)) - 0.5
    return sorter_base.to_ranks(ops.cast(soft / count, "float32"), n)[:, 0]

  def get_config(self):
    config = super().get_config()
    config.update(
      {
        "hidden_units": self.hidden_units,
        "bandwidths": list(self.bandwidths),
        "min_sharpness": self.min_sharpness,
        "max_sharpness": self.max_sharpness,
        "block_size": self.block_size,
      }
    )
    return config
