"""Differentiable sorting networks (Petersen et al., ICML 2021; ICLR 2022) and their top-k form
(Petersen et al., ICML 2022).

A sorting network is a fixed sequence of layers of comparators ("conditional swaps"). A
comparator on the wires ``a`` and ``b`` with values ``x_a``, ``x_b`` writes ``min`` to one output
wire and ``max`` to the other. Differentiable sorting networks relax the swap with a sigmoid
``f`` of the difference (ICML 2021, Sec. 3):

    alpha = f(beta * (x_b - x_a))
    min'  = alpha * x_a + (1 - alpha) * x_b
    max'  = (1 - alpha) * x_a + alpha * x_b

``beta`` is the inverse temperature (``steepness``). Chaining the layers gives relaxed sorted
values and, by applying the same convex combinations to the columns of the identity, a relaxed
permutation matrix ``P`` (Sec. 3): ``P[b, i, j]`` is the weight with which input ``i``
arrives at sorted position ``j``, so that ``sorted_values = einsum("bi,bij->bj", x, P)``. Sorting
is ascending, as in diffsort: position ``n - 1`` holds the largest value, so the top-``k`` are the
last ``k`` columns. Every layer is a doubly stochastic matrix, so ``P`` is doubly stochastic.

The sigmoids ``f`` (argument ``distribution``, the names diffsort uses), with ``v = beta * d``
and ``d = x_b - x_a``:

* ``"logistic"``: ``sigma(v) = 1 / (1 + exp(-v))`` (ICML 2021, Sec. 3);
* ``"logistic_phi"``: the logistic sigmoid with activation replacement trick (ART, ICML 2021,
  Sec. 3): ``sigma(v / (|d| + 1e-10) ** art_lambda)``;
* ``"gaussian"``: the standard normal CDF ``Phi(v)`` (ICLR 2022, Sec. 4), computed as
  ``erfc(-v / sqrt 2) / 2`` (accurate in the lower tail, where ``(1 + erf(v / sqrt 2)) / 2``
  cancels);
* ``"reciprocal"``: ``(v / (2 + |v|) + 1) / 2`` (ICLR 2022, Sec. 4);
* ``"cauchy"``: ``arctan(v) / pi + 1/2`` (ICLR 2022, Sec. 4);
* ``"optimal"``: the optimal monotonic sigmoid of ICLR 2022 (Sec. 4), ``1/2 + v`` for
  ``|v| <= 1/4`` and ``1 - 1/(16 v)`` (``-1/(16 v)`` for ``v < 0``) outside.

The reciprocal, Cauchy and optimal sigmoids make the network monotonic (ICLR 2022, Sec. 4:
their derivatives decay no faster than ``1 / v^2``): every sorted value is non-decreasing in
every input. The logistic and Gaussian sigmoids decay faster and are not monotonic.

Networks (:func:`comparator_network`):

* ``"odd_even"``: odd-even transposition sort, ``n`` layers alternately comparing the pairs
  ``(0, 1), (2, 3), ...`` and ``(1, 2), (3, 4), ...`` (ICML 2021, Sec. 3); any ``n``;
* ``"bitonic"``: Batcher's bitonic sorter, ``log2(N) (log2(N) + 1) / 2`` layers for
  ``N = 2^ceil(log2 n)`` (ICML 2021, Sec. 3). For ``n`` not a power of two we do what diffsort
  does: the network is built for ``N`` wires, the first ``N - n`` wires are dropped, and a
  comparator touching a dropped wire leaves its other wire unchanged;
* ``"splitter_selection"``: a *selection* network for the top ``k`` only (Petersen et al.,
  ICML 2022; the splitter-based selection networks of Borgelt): cascades of "splitters"
  are applied to the groups of wires that share the same lower bound on their rank, until that
  bound proves each of the last ``k`` wires to hold its rank. It has far fewer comparators than
  a full sorting network for small ``k``, but only the last ``k`` positions are sorted, so it is
  available for :func:`sorting_network_topk` only. The layers are those of difftopk's
  ``sparse_splitter_selection_network``.

A wire that no comparator of a layer touches keeps its value; diffsort writes it as a
"comparator" of the wire with itself, which is the identity for values and gradients alike.

Cost. No ``n x n`` layer matrix (diffsort multiplies by dense split and combine matrices): the
wires are the leading axis (values ``[n, B]``), and each layer permutes them once so that the
first inputs of its comparators, then the second ones, then the untouched wires are contiguous
blocks, combines the first two blocks elementwise and concatenates; ``O(n)`` per layer for the
values. The permutation's gradient is the inverse permutation (a custom gradient,
:func:`tfrank4class.backend.custom_gradient`: one gather, where the gather's own would be a
segment sum or a scatter-add), so that the gradient graph stays a few small ops
per layer: in a graph without XLA the time of the many small ops, not the arithmetic, is what a
step costs at tens of classes (``benchmarks/topk.py``). The full permutation
(:func:`sorting_network_sort`) carries an ``[n, n]`` matrix per example through the layers,
``O(n^2)`` per layer; the top-``k`` form (:func:`sorting_network_topk`, Petersen et al. ICML 2022,
Sec. 3) goes backwards from the last ``k`` wires only and carries ``[n, k]``, ``O(n k)`` per
layer, which is what makes ``n = 1,000`` classes affordable (difftopk's "sparse" execution; its
dense execution computes the same numbers).

Written on ``keras.ops``: TensorFlow (eager, ``tf.function``, ``jit_compile=True``), JAX (eager,
``jax.jit``) and PyTorch backends.
"""

import functools
import math
import typing

import numpy as np

from tfrank4class import backend, checks
from tfrank4class.compat import ops

NETWORKS = ("odd_even", "bitonic", "splitter_selection")
#: The networks that sort every position (the others select the top ``k`` only).
SORTING_NETWORKS = ("odd_even", "bitonic")
DISTRIBUTIONS = ("logistic", "logistic_phi", "gaussian", "reciprocal", "cauchy", "optimal")


class ComparatorLayer(typing.NamedTuple):
  """One layer of a sorting network: comparator ``c`` reads wires ``a[c]`` and ``b[c]`` and
  writes the relaxed minimum to wire ``lo[c]`` and the maximum to wire ``hi[c]``
  (``{lo[c], hi[c]} == {a[c], b[c]}``); other wires keep their values."""

  a: np.ndarray
  b: np.ndarray
  lo: np.ndarray
  hi: np.ndarray


def _layer(pairs):
  a, b, lo, hi = (np.array([p[i] for p in pairs], np.int32) for i in range(4))
  return ComparatorLayer(a, b, lo, hi)


def _odd_even(n):
  layers = []
  for layer in range(n):
    pairs = [(i, i + 1, i, i + 1) for i in range(layer % 2, n - 1, 2)]
    if pairs:
      layers.append(_layer(pairs))
  return layers


def _bitonic(n):
  blocks = math.ceil(math.log2(n)) if n > 1 else 0
  size = 2**blocks
  dropped = size - n
  layers = []
  for block in range(blocks):
    for step in range(block + 1):
      half = 2 ** (block - step)
      pairs = []
      for start in range(0, size, 2 * half):
        for offset in range(half):
          a = start + offset
          b = a + half
          if a < dropped or b < dropped:
            continue  # a comparator on a dropped wire leaves the other wire as it is
          descending = (a // 2 ** (block + 1)) % 2 == 1
          lo, hi = (b, a) if descending else (a, b)
          pairs.append((a - dropped, b - dropped, lo - dropped, hi - dropped))
      if pairs:
        layers.append(_layer(pairs))
  return layers


def _splitter(lanes):
  """The layers of one splitter cascade on ``lanes`` (ascending wire indices): level ``l`` of
  ``ceil(log2 m)`` compares each wire with the one ``2^(depth - l - 1)`` places further inside
  its section of twice that size."""
  size = len(lanes)
  depth = math.ceil(math.log2(size))
  cascade = []
  for level in range(depth):
    span = 2 ** (depth - level - 1)
    cascade.append(
      [
        (lanes[j], lanes[j + span])
        for start in range(0, size, 2 * span)
        for j in range(start, min(start + span, size - span))
      ]
    )
  return cascade


def _splitter_selection(n, k):
  # After a splitter on m wires, the wire at place j of the group has at least 2^popcount(j) - 1
  # wires on its side of the split: its lower bound on the rank grows by that much.
  gain = [2 ** bin(j).count("1") - 1 for j in range(n)]
  bound = [0] * n  # lower bound on each wire's rank (0 = first place)
  free = [0] * n  # the first layer each wire may join again
  layers = []
  settled = -1
  grew = True
  while grew:
    grew = False
    for rank in range(k - 1, settled, -1):
      lanes = [w for w in range(n) if bound[w] == rank]
      if len(lanes) < 2:
        continue
      cascade = _splitter(lanes)
      start = max(free[w] for w in lanes)
      layers.extend([] for _ in range(start + len(cascade) - len(layers)))
      for offset, pairs in enumerate(cascade):
        layers[start + offset].extend(pairs)
      for j, w in enumerate(lanes):
        bound[w] += gain[j]
        free[w] = start + len(cascade)
      grew = True
    settled += 1
  # The construction moves the selected items to the first wires; mirror the wires so that they
  # end on the last ones (ascending, as the sorting networks), minimum on the lower wire.
  return [
    _layer([(n - 1 - b, n - 1 - a, n - 1 - b, n - 1 - a) for a, b in pairs])
    for pairs in layers
    if pairs
  ]


@functools.lru_cache(maxsize=64)
def comparator_network(network, n, k=None):
  """The comparator layers of the sorting (or selection) network ``network`` for ``n`` wires.

  Args:
    network: ``"odd_even"``, ``"bitonic"`` or ``"splitter_selection"`` (see the module
      docstring).
    n: the number of wires, an integer ``>= 1``.
    k: for ``"splitter_selection"`` only (required there): how many top wires it selects,
      ``1 <= k <= n``.

  Returns:
    A tuple of :class:`ComparatorLayer` (layers without a comparator are left out).

  Example:
    >>> [layer.a.tolist() for layer in comparator_network("odd_even", 4)]
    [[0, 2], [1], [0, 2], [1]]
    >>> len(comparator_network("bitonic", 8))
    6
  """
  checks.check_choice("network", network, NETWORKS)
  checks.check_int("n", n, minimum=1)
  if network == "splitter_selection":
    _check_k(k, n)
    return tuple(_splitter_selection(n, k))
  if k is not None:
    raise ValueError(f"`k` is for network='splitter_selection' only, got k={k!r} for {network!r}.")
  return tuple(_odd_even(n) if network == "odd_even" else _bitonic(n))


def _check_k(k, n):
  if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= n:
    raise ValueError(f"`k` must be an integer in [1, n={n}], got {k!r}.")
  return k


def swap_probability(difference, distribution="cauchy", steepness=10.0, art_lambda=0.25):
  """The relaxed swap weight ``alpha = f(steepness * difference)`` of the module docstring.

  ``difference`` is ``x_b - x_a``; ``alpha`` is the weight of ``x_a`` in the minimum. All the
  sigmoids give ``1/2`` at 0 and tend to 1 (0) as ``difference -> +inf`` (``-inf``).

  Example:
    >>> alpha = swap_probability(ops.convert_to_tensor([0.0, 0.1]), "logistic", steepness=10.0)
    >>> ops.convert_to_numpy(alpha)
    array([0.5      , 0.7310586], dtype=float32)
  """
  d = ops.convert_to_tensor(difference)
  if distribution == "logistic":
    return ops.sigmoid(steepness * d)
  if distribution == "logistic_phi":
    return ops.sigmoid(steepness * d / ops.power(ops.abs(d) + 1e-10, art_lambda))
  v = steepness * d
  if distribution == "gaussian":
    # Phi(v) = erfc(-v / sqrt 2) / 2: accurate in float32 in the lower tail, where
    # 1/2 + erf(v / sqrt 2) / 2 cancels (erf -> -1) and loses every digit below ~1e-7.
    return 0.5 * ops.erfc(-v / math.sqrt(2.0))
  if distribution == "reciprocal":
    return 0.5 * (v / (2.0 + ops.abs(v)) + 1.0)
  if distribution == "cauchy":
    return backend.arctan(v) / math.pi + 0.5
  if distribution == "optimal":
    outside = ops.cast(v > 0.25, backend.dtype_name(v)) - ops.cast(v < -0.25, backend.dtype_name(v))
    tail = 0.25 - 1.0 / 16.0 / (ops.abs(v) + 1e-10)
    return ops.clip(v, -0.25, 0.25) + 0.5 + outside * tail
  raise ValueError(f"`distribution` must be one of {sorted(DISTRIBUTIONS)}, got {distribution!r}.")


@functools.lru_cache(maxsize=256)
def _routes(n, wires):
  """The row permutations of :func:`_through_layers` for ``n`` wires and the steps' ``wires``
  (``((u, v, u_out, v_out), ...)``, tuples of wire numbers): per step the permutation that puts
  the read wires first (``None`` where the rows already are in that order) and the number of
  comparators, then the permutation back to wire order. Plain NumPy, cached: a network's
  routing is fixed, and recomputing it costs more than the step itself on PyTorch's eager
  backend."""
  identity = np.arange(n)
  order = identity  # order[i]: the wire that row i holds
  steps = []
  for u, v, u_out, v_out in wires:
    read = np.array(u + v, np.int64)
    rest = np.setdiff1d(identity, read)
    index = np.argsort(order)[np.concatenate([read, rest])]
    steps.append((None if np.array_equal(index, identity) else index, len(u)))
    order = np.concatenate([np.array(u_out + v_out, np.int64), rest])
  back = np.argsort(order)
  return tuple(steps), None if np.array_equal(back, identity) else back


def _through_layers(rows, steps):
  """Runs ``rows`` (``[n, ...]``, one row per wire) through comparator layers.

  ``steps`` yields ``(reads, writes, combine)``: the step takes the rows of the wires
  ``reads = (u, v)`` (two arrays of ``c`` wires), ``combine(rows[u], rows[v])`` returns the two
  new blocks, written to the wires ``writes = (u', v')``; the other wires keep their rows. Between
  steps the rows stay in the order the last step left them (its written wires first), so a step
  costs one permutation, one split and a concatenation. Returns the rows in wire order.
  """
  wires = tuple(
    tuple(tuple(np.asarray(block).tolist()) for block in (*reads, *writes))
    for reads, writes, _ in steps
  )
  routes, back = _routes(rows.shape[0], wires)
  for (index, c), (_, _, combine) in zip(routes, steps):
    if index is not None:
      rows = backend.permute_rows(rows, index)
    first, second, kept = backend.split_rows(rows, [c, c, rows.shape[0] - 2 * c])
    rows = ops.concatenate([*combine(first, second), kept], axis=0)
  return rows if back is None else backend.permute_rows(rows, back)


def _check(network, distribution, steepness, art_lambda, networks=NETWORKS):
  checks.check_choice("network", network, networks)
  checks.check_choice("distribution", distribution, DISTRIBUTIONS)
  steepness = checks.check_float("steepness", steepness, minimum=0.0, strict=True)
  art_lambda = checks.check_float("art_lambda", art_lambda, minimum=0.0)
  return steepness, art_lambda


def _mix(alpha, first, second):
  """A relaxed comparator: ``(alpha first + (1 - alpha) second, (1 - alpha) first + alpha
  second)``, the (minimum, maximum) of the module docstring for the values.

  Each output is written as that weighted sum, not as ``second + alpha (first - second)`` and
  ``first + second - low``: those cancel where ``alpha`` is near 0 or 1 (a confident comparator,
  the common case), and in float32 the top-k cross-entropy of ``top1_mode="sort"`` lost about
  20x the accuracy of the authors' float32 code that way (docs/topk.md)."""
  rest = 1.0 - alpha
  return alpha * first + rest * second, rest * first + alpha * second


def _forward(x, layers, distribution, steepness, art_lambda):
  """Relaxed sorted values ``[n, B]`` and the swap weights ``alpha`` ``[c, B]`` of every layer,
  from the scores ``x`` ``[n, B]`` (wires first)."""
  alphas = []

  def compare(xa, xb):
    alphas.append(swap_probability(xb - xa, distribution, steepness, art_lambda))
    return _mix(alphas[-1], xa, xb)

  steps = [((layer.a, layer.b), (layer.lo, layer.hi), compare) for layer in layers]
  values = _through_layers(x, steps)
  return values, alphas


def _scores(scores):
  scores = checks.check_scores("scores", scores, rank=2, min_length=1)
  if scores.shape[-1] is None:
    raise ValueError(
      f"`scores` must have a list size known when traced (the network depends on it), got shape "
      f"{scores.shape}."
    )
  return scores


def sorting_network_sort(
  scores, network="odd_even", distribution="cauchy", steepness=10.0, art_lambda=0.25
):
  """Relaxed sorted values and permutation matrix of a differentiable sorting network.

  Petersen et al., ICML 2021 (Sec. 3) and ICLR 2022 (the monotonic sigmoids, Sec. 4);
  the same computation as diffsort's ``DiffSortNet(network, n, steepness, art_lambda,
  distribution=...)``, ascending. See the module docstring for the formulas.

  Args:
    scores: ``[B, n]`` real scores (``n`` known when traced); float16 / bfloat16 / integers are
      computed in float32, float64 stays float64.
    network: ``"odd_even"`` or ``"bitonic"`` (a selection network does not sort).
    distribution: the sigmoid, one of ``DISTRIBUTIONS``.
    steepness: the inverse temperature ``beta > 0``.
    art_lambda: the ART exponent ``lambda >= 0`` (used by ``"logistic_phi"`` only).

  Returns:
    ``(sorted_values [B, n], permutation [B, n, n])`` with ``permutation[b, i, j]`` the weight
    of input ``i`` at ascending position ``j``; rows and columns sum to 1.

  Example:
    >>> x = [[3.0, 1.0, 2.0]]
    >>> values, p = sorting_network_sort(x, distribution="logistic", steepness=100.0)
    >>> ops.convert_to_numpy(values).round(2)
    array([[1., 2., 3.]], dtype=float32)
    >>> ops.convert_to_numpy(p).round(2)[0]
    array([[0., 0., 1.],
           [1., 0., 0.],
           [0., 1., 0.]], dtype=float32)
  """
  steepness, art_lambda = _check(network, distribution, steepness, art_lambda, SORTING_NETWORKS)
  x = _scores(scores)
  n = x.shape[-1]
  layers = comparator_network(network, n)
  values, alphas = _forward(ops.transpose(x), layers, distribution, steepness, art_lambda)
  # p[j, b, i]: the weight of input i at position j (positions first, as the wires).
  eye = ops.eye(n, dtype=backend.dtype_name(x))[:, None, :]
  p = ops.broadcast_to(eye, (n, ops.shape(x)[0], n))
  p = _through_layers(
    p,
    [
      ((layer.a, layer.b), (layer.lo, layer.hi), functools.partial(_mix, alpha[:, :, None]))
      for layer, alpha in zip(layers, alphas)
    ],
  )
  return ops.transpose(values), ops.transpose(p, [1, 2, 0])


def sorting_network_topk(
  scores, k, network="odd_even", distribution="cauchy", steepness=10.0, art_lambda=0.25
):
  """The last ``k`` columns of the relaxed permutation: each input's weight at the top ``k``.

  Petersen et al., "Differentiable Top-k Classification Learning", ICML 2022, Sec. 3: only the
  top-``k`` part ``P[:, :, n-k:]`` of the permutation enters the top-``k`` loss, so it is
  computed backwards from the last ``k`` wires, ``P_topk = L_1 L_2 ... L_T E_k`` with ``L_t``
  the layer matrices and ``E_k`` the last ``k`` columns of the identity, carrying ``[n, k]``
  per example (``O(n k)`` per layer) instead of ``[n, n]``. Equal to
  ``sorting_network_sort(...)[1][:, :, -k:]`` up to rounding.

  Args:
    scores, distribution, steepness, art_lambda: as :func:`sorting_network_sort`.
    network: ``"odd_even"``, ``"bitonic"`` or ``"splitter_selection"``.
    k: how many top positions, ``1 <= k <= n``.

  Returns:
    ``[B, n, k]``: entry ``[b, i, j]`` is the weight of input ``i`` at ascending position
    ``n - k + j`` (the last column is the top-1). Rows sum to at most 1, columns to 1.

  Example:
    >>> top = sorting_network_topk([[3.0, 1.0, 2.0]], k=2, steepness=1e3)
    >>> ops.convert_to_numpy(top).round(2)[0]
    array([[0., 1.],
           [0., 0.],
           [1., 0.]], dtype=float32)
  """
  steepness, art_lambda = _check(network, distribution, steepness, art_lambda)
  x = _scores(scores)
  n = x.shape[-1]
  _check_k(k, n)
  layers = comparator_network(network, n, k if network == "splitter_selection" else None)
  _, alphas = _forward(ops.transpose(x), layers, distribution, steepness, art_lambda)
  last = ops.convert_to_tensor(np.eye(n, k, k - n), backend.dtype_name(x))  # [n, k], no n x n eye
  q = ops.broadcast_to(last[:, None, :], (n, ops.shape(x)[0], k))
  q = _through_layers(
    q,
    [
      ((layer.lo, layer.hi), (layer.a, layer.b), functools.partial(_mix, alpha[:, :, None]))
      for layer, alpha in zip(reversed(layers), reversed(alphas))
    ],
  )
  return ops.transpose(q, [1, 0, 2])
