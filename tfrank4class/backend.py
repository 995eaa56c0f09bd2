"""What ``keras.ops`` lacks or spells differently per backend, written once for the whole core.

The core of the package (labels, checks, rank operators, losses, metrics, heads) is written on
``keras.ops`` and runs on Keras 3's TensorFlow, JAX and PyTorch backends (and, on TensorFlow, for
tf-keras models). Where ``keras.ops`` falls short, the one workaround lives here, and this is the
only module of the core that calls a backend's own library:

* :func:`stable_argsort`: ``keras.ops.argsort`` promises no order among ties on TensorFlow; every
  rank of the package breaks ties by the lower index first, on every backend;
* :func:`argsort_pairs`: a lexicographic sort on two int32 keys in one sort (``keras.ops`` has
  none; JAX's ``lax.sort`` takes several keys, TensorFlow and PyTorch sort one int64 key);
* :func:`top_k`: ``torch.topk`` does not order ties by index (TensorFlow and JAX put the lower
  index first); here all three do;
* :func:`take_along_axis`: Keras's form costs many small ops on TensorFlow (one gather here);
* :func:`where`: Keras's form is TensorFlow's broadcasting ``SelectV2``, slower than ``Select``
  on operands of one shape; every ``where`` of the core goes through this one;
* :func:`softplus`: PyTorch's returns ``x`` above 20, off by ``exp(-x)`` in float64;
* :func:`logsumexp_of_finite`, :func:`take_last`, :func:`constant`: a log-sum-exp, a gather by
  a constant index and a constant, in the library's own ops on PyTorch, where Keras's conversion
  of each operand costs more than a small op;
* :func:`hard_topk_svm`: the hard top-k SVM loss in PyTorch's own ops (eager PyTorch's time at
  tens of classes is the count of its ops);
* :func:`searchsorted`: ``keras.ops.searchsorted`` is 1-D only; here it is batched over leading
  axes, with each backend's own batched search;
* :func:`lgamma`, :func:`digamma`: not in ``keras.ops``;
* :func:`maximum`, :func:`minimum`, :func:`matmul`, :func:`cumsum`, :func:`floor`,
  :func:`mean`, :func:`segment_sum`, :func:`arctan`, :func:`divide_no_nan`, :func:`logaddexp`:
  in the inputs' dtype, where Keras 3.15's forms compute float64 in float32 on PyTorch
  (``ops.mean``, ``ops.floor`` and ``ops.arctan`` on JAX with x64 too);
* :func:`uniform`: ``keras.random.uniform``'s numbers, drawn on TensorFlow with Philox under XLA
  too, where TensorFlow's automatic choice of algorithm is about 17x slower on a CPU;
* :func:`custom_gradient`: ``keras.ops.custom_gradient`` is ``tf.custom_gradient`` on TensorFlow
  and ``jax.custom_gradient`` on JAX, whose gradient function receives the upstream gradient as
  its argument; on PyTorch Keras calls it as ``grad_fn(*inputs, upstream=...)`` and saves every
  input for the backward pass (so every input must be a tensor). One signature here;
* :func:`vector_jacobian`: ``keras.ops`` has no autodiff; a custom gradient that recomputes its
  forward pass (the chunked heads) takes the gradients of that recomputation with it;
* :func:`sequential_map`, :func:`sequential_fori_loop`: ``keras.ops.map`` and
  ``keras.ops.fori_loop`` one item at a time on every backend (on TensorFlow they run up to 10
  iterations at once in a graph);
* :func:`static_value`, :func:`dtype_name`, :func:`graph_assert`: a value known when traced,
  a dtype's name, and TensorFlow's in-graph assertion (nothing on the other backends);
* :func:`invert_permutation`: batched, in O(n), with TensorFlow's own op outside XLA (the one
  place that asks TensorFlow's internals whether XLA compiles the graph); :func:`do_not_convert`
  keeps AutoGraph off the rank operators (TensorFlow only);
* :func:`compiled_by_xla`: whether XLA compiles the code (JAX; TensorFlow's ``jit_compile``);
* :func:`is_concrete`: whether a tensor's values can be read now (eager) or are being traced
  (``tf.function``, ``jax.jit``, ``torch.compile``, Keras's symbolic shapes), so that a
  data-dependent check can raise eagerly and mark the result NaN when traced
  (:meth:`tfrank4class.labels.Labels.mark_invalid`).
* :func:`map_row_blocks`: a row-wise function a block of rows at a time on TensorFlow's graph
  executor on a CPU (which runs each op over the whole tensor before the next), so that a large
  ``[B, C]`` batch's intermediates stay in the cache; :func:`count_nonzero_signs`: the non-zero
  entries of signs in one reduction kernel on TensorFlow (``keras.ops`` spends two);
* :func:`materialized`: an optimization barrier on JAX, so that XLA neither recomputes a fused
  producer in each consumer nor schedules a written-out gradient's ``[B, C]`` values before the
  forward's reduction;
* :func:`xla_cluster`: a function compiled by XLA inside TensorFlow's graph (a nested
  ``jit_compile=True`` function), where TensorFlow's one-op-at-a-time kernels cost a pass over
  memory each.

Example:
  >>> from tfrank4class.compat import ops
  >>> ops.convert_to_numpy(stable_argsort(ops.convert_to_tensor([[1.0, 3.0, 3.0, 2.0]]),
  ...                                     descending=True))
  array([[1, 2, 3, 0]]...)
  >>> values, indices = top_k(ops.convert_to_tensor([[2.0, 5.0, 5.0, 1.0]]), 2)
  >>> ops.convert_to_numpy(indices)
  array([[1, 2]]...)
"""

# Over 500 lines: the one module of the core that calls a backend's own library, so that every
# workaround sits in one place (tests/test_layout.py).
import importlib
import math

import keras as _keras_3
import numpy as np

from tfrank4class.compat import BACKEND, keras, ops


def name():
  """The Keras 3 backend the core runs on: ``"tensorflow"`` (also for tf-keras), ``"jax"`` or
  ``"torch"``."""
  return BACKEND


def _library():
  if BACKEND == "tensorflow":
    import tensorflow as tf  # noqa: PLC0415  (the backend's own library, only here)

    return tf
  if BACKEND == "jax":
    import jax  # noqa: PLC0415

    return jax
  import torch  # noqa: PLC0415

  return torch


def stable_argsort(x, axis=-1, descending=False):
  """Indices that sort ``x`` along ``axis``; equal values keep their order (lower index first).

  ``descending=True`` sorts from the largest down, still with ties in index order (not the
  reverse of the ascending order).
  """
  x = ops.convert_to_tensor(x)
  if BACKEND == "tensorflow":
    tf = _library()
    direction = "DESCENDING" if descending else "ASCENDING"
    return tf.argsort(x, axis=axis, direction=direction, stable=True)
  if BACKEND == "jax":
    import jax.numpy as jnp  # noqa: PLC0415

    return jnp.argsort(x, axis=axis, stable=True, descending=descending).astype("int32")
  torch = _library()
  return torch.argsort(x, dim=axis, descending=descending, stable=True).to(torch.int32)


def argsort_pairs(primary, secondary):
  """Indices (int32) that sort the last axis of the int32 ``primary`` ascending, ties by the int32
  ``secondary`` ascending, then by the lower index: one sort, a two-key one on JAX, on the int64
  key ``primary * 2^32 + secondary + 2^31`` (exact for every int32 pair) elsewhere."""
  primary, secondary = ops.convert_to_tensor(primary), ops.convert_to_tensor(secondary)
  if BACKEND == "jax":
    import jax.numpy as jnp  # noqa: PLC0415

    index = jnp.broadcast_to(jnp.arange(primary.shape[-1], dtype="int32"), primary.shape)
    return _library().lax.sort((primary, secondary, index), num_keys=2, is_stable=True)[-1]
  key = ops.cast(primary, "int64") * 2**32 + (ops.cast(secondary, "int64") + 2**31)
  return stable_argsort(key)


def top_k(x, k):
  """``(values, indices)`` of the ``k`` largest entries of the last axis of ``x``, largest first,
  ties by the lower index first on every backend (``k`` a Python int). Where NaN goes differs
  (JAX and PyTorch: first, as in their descending sorts; TensorFlow: not consistently); the
  package checks scores for NaN before it ranks them."""
  x = ops.convert_to_tensor(x)
  if BACKEND == "torch" and k > 0:
    return _torch_top_k(x, k)
  values, indices = ops.top_k(x, k, sorted=True)
  return values, ops.cast(indices, "int32")


def _torch_top_k(x, k):
  """:func:`top_k` on PyTorch, whose ``topk`` leaves the order of ties open. Where the ``k + 1``
  largest of every row are distinct (no NaN), ``topk``'s own answer (one kernel and a check);
  else the ``k``-th value from ``topk``, every entry above it and the first entries equal to it
  (in index order) chosen, the chosen ones gathered in index order and stably sorted: O(n) per
  row plus a sort of ``k``, in place of a full stable sort (several times slower: the measurement
  is in benchmarks/backends.md)."""
  torch = _library()
  first = torch.topk(x, min(k + 1, x.shape[-1]), dim=-1)
  steps = first.values[..., :-1] > first.values[..., 1:]
  if bool(torch.all(steps)):  # no tie within the k + 1 largest (nor a NaN): topk's order holds
    return first.values[..., :k], first.indices[..., :k].to(torch.int32)
  kth = first.values[..., k - 1 : k]
  x_nan, kth_nan = torch.isnan(x), torch.isnan(kth)
  above = (x > kth) | (x_nan & ~kth_nan)
  tied = (x == kth) | (x_nan & kth_nan)
  room = k - torch.sum(above, dim=-1, keepdim=True)
  chosen = above | (tied & (torch.cumsum(tied.to(torch.int32), dim=-1) <= room))
  n = x.shape[-1]
  later_is_lower = torch.arange(n, 0, -1, device=x.device)  # topk of it: the chosen, by index
  index = torch.topk(torch.where(chosen, later_is_lower, 0), k, dim=-1).indices
  values, order = torch.sort(torch.gather(x, -1, index), dim=-1, descending=True, stable=True)
  return values, torch.gather(index, -1, order).to(torch.int32)


def hard_topk_svm(scores, ids, rivals, enough, k, alpha):
  """The hard top-k SVM loss ``max(alpha + (s_r - s_y) / k, 0)`` per row of ``scores`` ``[B, C]``
  on PyTorch, in its own ops (eager PyTorch's time at tens of classes is mostly the count of its
  ops and Keras's conversion of each operand: see :func:`logsumexp_of_finite`); TensorFlow and
  JAX take the Keras form of :mod:`tfrank4class.losses.topk.smooth_svm`.

  ``s_y`` is the score of the true class ``ids`` (int ``[B]``), ``s_r`` that of the ``k``-th of
  the ``rivals`` (bool ``[B, C]``; ``None``: every class but the true one) in the order of
  :func:`top_k` (score descending, ties by the lower index first), found on the scores held
  constant and gathered, so that the gradient is ``(e_r - e_y) / k`` where the loss is positive,
  as the Keras form's (``alpha + s_r / k - s_y / k``: within a few units in the last place of
  its ``alpha + (s_r - s_y) / k``). Where ``enough`` (bool ``[B]``, or ``None``) is False,
  ``s_r`` is ``s_y`` (the row's value is then ``alpha``, gradient 0; the caller sets it to 0).
  ``C > k``.
  """
  if BACKEND != "torch":
    raise NotImplementedError("`hard_topk_svm` is PyTorch's form; see its docstring.")
  torch = _library()
  true_index = ids.to(torch.int64)[:, None]
  if rivals is None:
    masked = scores.detach().scatter(1, true_index, -math.inf)
  else:
    masked = scores.detach().masked_fill(~rivals, -math.inf)
  first = torch.topk(masked, k + 1, dim=-1)  # C > k
  if bool(torch.all(first.values[:, :-1] > first.values[:, 1:])):  # no tie: _torch_top_k's test
    kth_index = first.indices[:, k - 1 : k]
  else:
    kth_index = _torch_top_k(masked, k)[1][:, k - 1 :].to(torch.int64)
  if enough is not None:
    kth_index = torch.where(enough[:, None], kth_index, true_index)
  pair = torch.gather(scores, 1, torch.cat([kth_index, true_index], 1))  # s_r, s_y: one gather
  # alpha + s_r / k - s_y / k in one op (its gradient one node, not a slice, a sub and a division)
  weights = scores.new_tensor([1 / k, -1 / k])
  return torch.relu(torch.addmv(scores.new_tensor(alpha), pair, weights))


def take_along_axis(x, indices, axis=-1):
  """``keras.ops.take_along_axis(x, indices, axis)``, on TensorFlow one batched ``tf.gather``
  where ``axis`` is the last and ``indices`` has the static leading shape of ``x`` (Keras's form
  adds a broadcast, a fix of negative indices and two transposes: a third of the ops of a RaMBO loss
  under ``tf.function``)."""
  x, indices = ops.convert_to_tensor(x), ops.convert_to_tensor(indices)
  rank, leading = len(x.shape), tuple(x.shape[:-1])
  last = axis in (-1, rank - 1) and None not in leading
  if BACKEND != "tensorflow" or not last or tuple(indices.shape[:-1]) != leading:
    return ops.take_along_axis(x, indices, axis=axis)
  return _library().gather(x, indices, batch_dims=rank - 1, axis=-1)


def searchsorted(sorted_sequence, values, side="left"):
  """For each of ``values [..., m]``, its insertion index in ``sorted_sequence [..., n]`` (sorted
  ascending along the last axis; the leading axes match): the number of entries ``< v``
  (``side="left"``) or ``<= v`` (``side="right"``). int32."""
  if side not in ("left", "right"):
    raise ValueError(f"`side` must be 'left' or 'right', got {side!r}.")
  sorted_sequence = ops.convert_to_tensor(sorted_sequence)
  values = ops.convert_to_tensor(values)
  if BACKEND == "tensorflow":
    tf = _library()
    return tf.searchsorted(sorted_sequence, values, side=side, out_type=tf.int32)
  if BACKEND == "jax":
    import jax.numpy as jnp  # noqa: PLC0415

    search = jnp.vectorize(lambda a, v: jnp.searchsorted(a, v, side=side), signature="(n),(m)->(m)")
    return search(sorted_sequence, values).astype("int32")
  torch = _library()
  return torch.searchsorted(
    sorted_sequence.contiguous(), values.contiguous(), right=side == "right"
  ).to(torch.int32)


def logaddexp(a, b):
  """``log(exp(a) + exp(b))`` in the inputs' dtype (``keras.ops.logaddexp`` returns float32 for
  float64 on PyTorch), with the exact gradient at ``a == b``; on PyTorch the library's own
  ``logaddexp`` (one op: :func:`logsumexp_of_finite` says why that matters there), which also
  gives ``-inf`` and ``inf`` where both operands are, where the shifted form here gives NaN."""
  if BACKEND == "torch":
    return _library().logaddexp(*_torch_operands(a, b))
  top = ops.stop_gradient(maximum(a, b))
  return top + ops.log(ops.exp(a - top) + ops.exp(b - top))


def softplus(x):
  """``log(1 + exp(x))`` elementwise, accurate in float64 on every backend: ``keras.ops.softplus``
  on PyTorch is ``torch.nn.functional.softplus``, which returns ``x`` itself above its threshold
  20 (an error of ``exp(-x)``, 1.9e-9 at 20.1); here that threshold is 40, where ``exp(-x)``
  lies below float64's resolution of ``x`` (TensorFlow's and JAX's forms are exact)."""
  if BACKEND == "torch":
    torch = _library()
    return torch.nn.functional.softplus(torch.as_tensor(x), threshold=40.0)
  return ops.softplus(x)


def logsumexp_of_finite(terms):
  """``log sum exp`` over the last axis of finite ``terms``, shifted by their maximum (held
  constant), keeping the ``exp`` for the gradient.

  Not ``keras.ops.logsumexp``: PyTorch's own op recomputes the ``exp`` for its gradient, and
  TensorFlow's adds a case for non-finite maxima that finite terms never need. On PyTorch (eager)
  the library's own ops, in one call: there Keras's conversion of each operand is most of the time
  of a small op, and a loss at tens of classes is mostly the count of its ops.
  """
  if BACKEND == "torch":
    torch = _library()
    terms = torch.as_tensor(terms)
    top = terms.detach().amax(dim=-1, keepdim=True)
    return torch.log(torch.exp(terms - top).sum(dim=-1)) + top[..., 0]
  top = ops.stop_gradient(ops.max(terms, axis=-1, keepdims=True))
  return ops.log(ops.sum(ops.exp(terms - top), axis=-1)) + top[..., 0]


def take_last(x, indices):
  """``keras.ops.take(x, indices, axis=-1)`` for a constant numpy integer array ``indices`` (in
  range): ``x[..., indices]``, of shape ``x.shape[:-1] + indices.shape``. On PyTorch (eager) the
  library's own indexing, without Keras's conversion of the operands (see
  :func:`logsumexp_of_finite`)."""
  if BACKEND == "torch":
    torch = _library()
    x = torch.as_tensor(x)
    flat = torch.index_select(x, -1, torch.as_tensor(indices.reshape(-1), device=x.device))
    return flat.reshape(x.shape[:-1] + indices.shape)
  return ops.take(x, indices, axis=-1)


def constant(array, like):
  """The numpy ``array`` as a tensor of the dtype (and, on PyTorch, the device) of ``like``; on
  PyTorch without Keras's conversion (see :func:`logsumexp_of_finite`)."""
  if BACKEND == "torch":
    return _library().as_tensor(array, dtype=like.dtype, device=like.device)
  return ops.convert_to_tensor(array, dtype=dtype_name(like))


def _logsumexp_scan(x, reverse):
  """Hillis-Steele scan of ``logaddexp`` along the last axis (``n`` static): ``ceil(log2 n)``
  steps of slices and ``where``s, each combining every entry with the one ``2^k`` before it."""
  n = x.shape[-1]
  index = ops.arange(n)
  step = 1
  while step < n:
    if reverse:
      shifted, has = ops.pad(x[:, step:], [[0, 0], [0, step]]), index < n - step
    else:
      shifted, has = ops.pad(x[:, :-step], [[0, 0], [step, 0]]), index >= step
    x = where(ops.expand_dims(has, 0), logaddexp(x, shifted), x)
    step *= 2
  return x


def cumulative_logsumexp(x, reverse=False):
  """``log(sum(exp(x_j)))`` over ``j <= i`` (``j >= i`` with ``reverse``) along the last axis of
  ``[B, n]``, finite at any spread of ``x``, with the exact gradient at ties; NaN where a sum
  takes in a NaN.

  Where every row spans less than 60 (600 in float64): ``m + log(cumsum(exp(x - m)))`` with ``m``
  the row's maximum, all of whose terms are normal floats (with its gradient, twice as fast as the
  scans under ``tf.function``). Else each library's own ``O(n)`` scan
  (``tf.math.cumulative_logsumexp``, which drops NaNs, ``jax.lax.cumlogsumexp``,
  ``torch.logcumsumexp``), except under XLA on TensorFlow, where that op lowers to a slower
  windowed reduction and a Hillis-Steele scan of ``logaddexp`` (``log2 n`` elementwise passes,
  ``n`` static) is faster.
  """
  x = ops.convert_to_tensor(x)
  top = ops.stop_gradient(ops.max(x, axis=-1, keepdims=True))
  spread = 600.0 if dtype_name(x) == "float64" else 60.0
  narrow = ops.all(ops.min(x, axis=-1, keepdims=True) >= top - spread)  # False for a NaN
  flip = (lambda y: ops.flip(y, axis=-1)) if reverse else (lambda y: y)

  def shifted():
    return top + ops.log(flip(cumsum(flip(ops.exp(x - top)), axis=-1)))

  return ops.cond(narrow, shifted, lambda: _scanned(x, reverse, flip))


def _scanned(x, reverse, flip):
  has_nan = flip(cumsum(flip(ops.cast(ops.isnan(x), "int32")), axis=-1)) > 0
  if BACKEND == "tensorflow":
    if _in_xla_context():
      sums = _logsumexp_scan(x, reverse)
    else:
      sums = _library().math.cumulative_logsumexp(x, axis=-1, reverse=reverse)
  elif BACKEND == "jax":
    sums = _library().lax.cumlogsumexp(x, axis=x.ndim - 1, reverse=reverse)
  else:
    sums = flip(_library().logcumsumexp(flip(x), dim=-1))
  return where(has_nan, float("nan"), sums)


#: The elementwise functions taken from each library itself: ``{function: {backend: (module,
#: name)}}``.
_OWN_ELEMENTWISE = {
  "arctan": {
    "tensorflow": ("tensorflow.math", "atan"),
    "jax": ("jax.numpy", "arctan"),
    "torch": ("torch", "arctan"),
  },
  "lgamma": {
    "tensorflow": ("tensorflow.math", "lgamma"),
    "jax": ("jax.scipy.special", "gammaln"),
    "torch": ("torch", "lgamma"),
  },
  "digamma": {
    "tensorflow": ("tensorflow.math", "digamma"),
    "jax": ("jax.scipy.special", "digamma"),
    "torch": ("torch", "digamma"),
  },
}


def _own_elementwise(function, x):
  """``function`` of ``_OWN_ELEMENTWISE`` applied to ``x`` by the backend's own library."""
  module, attribute = _OWN_ELEMENTWISE[function][BACKEND]
  return getattr(importlib.import_module(module), attribute)(ops.convert_to_tensor(x))


def arctan(x):
  """``arctan(x)`` elementwise in the dtype of ``x``: ``keras.ops.arctan`` computes float64 in
  float32 on JAX, with ``jax_enable_x64`` too (Keras 3.15's ``result_type`` maps float64 to
  float32 on every backend but TensorFlow)."""
  return _own_elementwise("arctan", x)


def lgamma(x):
  """``log |Gamma(x)|`` elementwise."""
  return _own_elementwise("lgamma", x)


def digamma(x):
  """``d/dx log Gamma(x)`` elementwise."""
  return _own_elementwise("digamma", x)


def uniform(shape, seed, dtype):
  """``keras.random.uniform(shape, dtype=dtype, seed=seed)`` for a ``keras.random.SeedGenerator``
  ``seed``: the same numbers outside XLA (TensorFlow: Philox, its own choice there, from Keras's
  seed; under XLA a different stream of the same law). On JAX ``seed`` may also be a generator's
  state (a ``[2]`` key array): the numbers the generator would draw, without advancing it."""
  if BACKEND != "tensorflow":
    return _keras_3.random.uniform(shape, dtype=dtype, seed=seed)
  tf = _library()
  state = ops.cast(ops.mod(seed.next(), 2**31 - 2), "int32")  # as Keras casts it
  if _in_xla_context():  # the raw ops below compile to a draw ~70x slower at [64, 1000] on CPU
    return tf.random.stateless_uniform(shape, state, dtype=dtype, alg="philox")
  # ``tf.random.stateless_uniform(shape, state, alg="philox")`` in two graph ops rather than about
  # 20 (on CPU and GPU this op scrambles the seed into Philox's key and counter as its Python does).
  key, counter = tf.raw_ops.StatelessRandomGetKeyCounter(seed=state)
  return tf.raw_ops.StatelessRandomUniformV2(
    shape=shape, key=key, counter=counter, alg=1, dtype=dtype
  )


def custom_gradient(f):
  """Decorator: ``f(*tensors)`` returns ``(y, grad_fn)``, ``grad_fn(upstream)`` the tuple of
  gradients, one per input (``None`` for an input without one); the same on every backend.

  Every positional argument must be a tensor (PyTorch saves them for the backward pass); close
  over Python numbers and options instead of passing them.
  """
  if BACKEND == "torch":

    def adapted(*tensors):
      y, grad_fn = f(*tensors)

      def torch_grad(*unused_inputs, upstream):
        return tuple(grad_fn(upstream))

      return y, torch_grad

    return ops.custom_gradient(adapted)

  def with_tuple(*tensors):
    y, grad_fn = f(*tensors)

    def grad(upstream, variables=None):  # TensorFlow passes `variables` when some are used
      del variables
      grads = tuple(grad_fn(upstream))
      return grads if len(grads) > 1 or BACKEND == "jax" else grads[0]

    return y, grad

  return ops.custom_gradient(with_tuple)


def vector_jacobian(fn, inputs, upstream):
  """The gradients of ``sum(upstream * fn(*inputs))`` with respect to each of ``inputs`` (a
  list of tensors), with the backend's own autodiff: ``tf.GradientTape``, ``jax.vjp`` or
  ``torch.autograd.grad``. An input that ``fn`` does not use gets a zero gradient. The inputs
  must be distinct tensors (TensorFlow's tape gives a tensor passed twice its whole gradient in
  both places). For use inside a :func:`custom_gradient`'s gradient function (PyTorch runs that
  with gradients off; this turns them on).

  Example:
    >>> x, y = ops.convert_to_tensor([1.0, 2.0]), ops.convert_to_tensor([5.0, 6.0])
    >>> [ops.convert_to_numpy(g) for g in vector_jacobian(lambda a, b: a * a, [x, y], ops.ones(2))]
    [array([2., 4.], dtype=float32), array([0., 0.], dtype=float32)]
  """
  library = _library()
  if BACKEND == "jax":
    return list(library.vjp(fn, *inputs)[1](upstream))
  if BACKEND == "torch":
    with library.enable_grad():
      leaves = [x.detach().requires_grad_(True) for x in inputs]
      grads = library.autograd.grad(fn(*leaves), leaves, grad_outputs=upstream, allow_unused=True)
  else:
    with library.GradientTape() as tape:
      tape.watch(inputs)
      again = fn(*inputs)
    grads = tape.gradient(again, inputs, output_gradients=upstream)
  return [ops.zeros_like(x) if g is None else g for g, x in zip(grads, inputs)]


def sequential_map(f, xs):
  """``keras.ops.map(f, xs)`` evaluated one item at a time, so that one item's intermediates are
  alive at a time, forward and backward (the chunked heads bound their memory with it). ``f``
  returns a tensor of the dtype of ``xs``. TensorFlow: ``tf.map_fn(parallel_iterations=1)``;
  JAX's ``lax.map`` and PyTorch's loop (``keras.ops.map``) are sequential already.

  Example:
    >>> xs = ops.convert_to_tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> ops.convert_to_numpy(sequential_map(lambda x: x * ops.sum(x), xs))
    array([[ 3.,  6.],
           [21., 28.]], dtype=float32)
  """
  if BACKEND == "tensorflow":
    return _library().map_fn(f, xs, parallel_iterations=1)
  return ops.map(f, xs)


def sequential_fori_loop(lower, upper, body, init):
  """``keras.ops.fori_loop(lower, upper, body, init)`` one iteration at a time on every backend,
  so that one iteration's intermediates are alive at a time (the sorters' block-wise pairwise
  sums bound their memory with it). TensorFlow: ``tf.while_loop(parallel_iterations=1)``
  (``keras.ops.fori_loop`` there runs up to 10 iterations at once in a graph); JAX's
  ``fori_loop`` and PyTorch's loop are sequential already. Not differentiable on every backend:
  call it where the gradient is written by hand.

  Example:
    >>> ops.convert_to_numpy(sequential_fori_loop(0, 4, lambda i, total: total + i, 0))
    array(6...)
  """
  if BACKEND == "tensorflow":
    tf = _library()
    return tf.while_loop(
      lambda i, _: i < upper,
      lambda i, value: (i + 1, body(i, value)),
      (lower, init),
      parallel_iterations=1,
    )[1]
  return ops.fori_loop(lower, upper, body, init)


def is_concrete(x):
  """Whether the values of ``x`` can be read now: ``False`` while a function is traced
  (``tf.function``, ``jax.jit``, ``torch.compile``) and for Keras's symbolic tensors."""
  if isinstance(x, keras.KerasTensor) if hasattr(keras, "KerasTensor") else False:
    return False
  if isinstance(x, (np.ndarray, np.generic, int, float, bool, list, tuple)):
    return True
  if BACKEND == "tensorflow":
    tf = _library()
    return tf.executing_eagerly() and hasattr(x, "numpy")
  if BACKEND == "jax":
    import jax  # noqa: PLC0415

    return not isinstance(x, jax.core.Tracer)
  torch = _library()
  if torch.compiler.is_compiling():
    return False
  return not (isinstance(x, torch.Tensor) and x.device.type == "meta")


def state_is_carried(variable):
  """Whether an assignment to ``variable`` made now, in traced code, outlives the trace. On JAX
  (Keras's trainer maps the model's variables in a ``keras.StatelessScope``): ``True`` in a scope
  mapping it, ``False`` in one that does not or outside any, ``None`` under shape inference (a
  symbolic scope). ``True`` on TensorFlow and PyTorch. Ask :func:`is_concrete` first."""
  if BACKEND != "jax":
    return True
  # Keras has no public accessor of the current scopes.
  from keras.src.backend.common import stateless_scope, symbolic_scope  # noqa: PLC0415

  if symbolic_scope.in_symbolic_scope():
    return None
  scope = stateless_scope.get_stateless_scope()
  return scope is not None and scope.get_current_value(variable) is not None


def static_value(x):
  """The value of ``x`` as numpy if known now (a Python number, an array, an eager tensor, or a
  TensorFlow tensor whose value is fixed when traced), else ``None``."""
  if x is None or isinstance(x, (int, float, np.ndarray, np.generic)):
    return None if x is None else np.asarray(x)
  if BACKEND == "tensorflow":
    return _library().get_static_value(x)
  if is_concrete(x):
    return ops.convert_to_numpy(x)
  return None


def dtype_name(x):
  """The dtype of tensor ``x`` as Keras names it: ``"float32"``, ``"int64"``, ``"bool"``..."""
  return _keras_3.backend.standardize_dtype(x.dtype)


def where(condition, x1, x2):
  """``keras.ops.where(condition, x1, x2)``; on TensorFlow, its ``Select`` kernel on operands of
  one shape where Keras would broadcast with ``SelectV2``.

  ``SelectV2`` takes a generic broadcasting path, slower than ``Select`` on operands of one
  shape (``Select`` also needs no broadcast of a ``[B, 1]`` condition), and a loss takes a dozen
  per step: TF-Ranking's softmax loss under ``tf.function`` takes 0.84-0.89x the time it took
  with ``keras.ops.where`` (medians at C = 10, 100, 1,000, B = 64; ``benchmarks/backends.py``;
  benchmarks/backends.md, "Select, not SelectV2"). So on TensorFlow a scalar operand (a Python
  number, or a 0-d tensor) is filled to the shape of the other operand, and a condition
  ``[B, 1, ..., 1]`` against operands ``[B, ...]`` becomes a vector ``[B]`` (``Select`` picks
  whole rows by one).
  Anything else (operands of two shapes, dtypes Keras would promote, a condition that is not
  bool, unknown dimensions after the first, Keras's symbolic tensors) is ``keras.ops.where``'s,
  as on the other backends.

  Example:
    >>> c = ops.convert_to_tensor([[True], [False]])
    >>> ops.convert_to_numpy(where(c, ops.ones((2, 3)), 0.0)).tolist()
    [[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]
  """
  symbolic = any(isinstance(x, _keras_3.KerasTensor) for x in (condition, x1, x2))
  if BACKEND == "tensorflow" and not symbolic:
    selected = _select(condition, x1, x2)
    if selected is not None:
      return selected
  return ops.where(condition, x1, x2)


def _select(condition, x1, x2):
  """:func:`where` as TensorFlow's ``Select``, or ``None`` where that needs ``SelectV2``."""
  tf = _library()
  condition = tf.convert_to_tensor(condition)
  operands = [x if isinstance(x, (int, float)) else tf.convert_to_tensor(x) for x in (x1, x2)]
  numbers = [x for x in operands if isinstance(x, (int, float))]
  tensors = [x for x in operands if not isinstance(x, (int, float))]
  if condition.dtype != tf.bool or condition.shape.rank is None or not tensors:
    return None
  dtype = tensors[0].dtype
  integral = dtype.is_integer and not any(isinstance(x, float) for x in numbers)
  if any(t.dtype != dtype for t in tensors) or (numbers and not (dtype.is_floating or integral)):
    return None
  full = [t for t in tensors if t.shape.rank != 0]
  shape = (full or [condition])[0].shape
  if (
    shape.rank in (None, 0)
    or None in shape[1:]
    or any(t.shape.as_list() != shape.as_list() for t in full)
  ):
    return None
  if condition.shape.as_list() != shape.as_list():
    rows = condition.shape.rank == shape.rank and condition.shape[1:].as_list() == [1] * (
      shape.rank - 1
    )
    if not rows or condition.shape[0] != shape[0]:
      return None
    condition = tf.reshape(condition, [-1])
  dims = shape if shape.is_fully_defined() else tf.shape((full or [condition])[0])

  def filled(x):
    x = tf.convert_to_tensor(x, dtype)
    return x if x.shape.rank else tf.fill(dims, x)

  return tf.raw_ops.Select(condition=condition, x=filled(operands[0]), y=filled(operands[1]))


def divide_no_nan(x, y):
  """``x / y``, 0 where ``y == 0``, in the inputs' dtype (``keras.ops.divide_no_nan`` returns
  float32 for float64 inputs on PyTorch, Keras 3.15).

  Example:
    >>> ops.convert_to_numpy(divide_no_nan(np.array([1.0, 2.0]), np.array([2.0, 0.0]))).tolist()
    [0.5, 0.0]
  """
  x, y = ops.convert_to_tensor(x), ops.convert_to_tensor(y)
  nonzero = ops.not_equal(y, 0)
  quotient = x / where(nonzero, y, ops.ones_like(y))
  return where(nonzero, quotient, ops.zeros_like(quotient))


# float64 kept: Keras 3.15's ``result_type`` maps float64 to float32 on PyTorch (and for
# ``ops.mean``/``ops.floor`` on JAX with x64); these forms call the library's own function there.


def _torch_operands(a, b):
  """``a`` and ``b`` as tensors of the dtype of PyTorch's own promotion of the pair."""
  torch = _library()
  if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype:
    return a, b  # the common case, without Keras's conversion (see logsumexp_of_finite)
  a = a if isinstance(a, (int, float)) else ops.convert_to_tensor(a)
  b = b if isinstance(b, (int, float)) else ops.convert_to_tensor(b)
  dtype = _library().result_type(a, b)
  return ops.convert_to_tensor(a, dtype), ops.convert_to_tensor(b, dtype)


def _binary(name):
  """``keras.ops.<name>(a, b)`` in the inputs' dtype (PyTorch: its own function)."""

  def kept(a, b):
    if BACKEND != "torch":
      return getattr(ops, name)(a, b)
    return getattr(_library(), name)(*_torch_operands(a, b))

  kept.__name__ = kept.__qualname__ = name
  kept.__doc__ = f"``keras.ops.{name}(a, b)`` in the inputs' dtype."
  return kept


maximum, minimum, matmul = (_binary(name) for name in ("maximum", "minimum", "matmul"))


def cumsum(x, axis):
  """``keras.ops.cumsum(x, axis)`` in the dtype of ``x``."""
  if BACKEND != "torch":
    return ops.cumsum(x, axis=axis)
  return _library().cumsum(ops.convert_to_tensor(x), dim=axis)


def floor(x):
  """``keras.ops.floor(x)`` in the dtype of float ``x``."""
  if BACKEND == "torch":
    return _library().floor(ops.convert_to_tensor(x))
  if BACKEND == "jax":
    return _library().numpy.floor(ops.convert_to_tensor(x))
  return ops.floor(x)


def segment_sum(x, segments, num_segments):
  """``keras.ops.segment_sum`` of ``x`` ``[N]`` in its dtype (PyTorch: a scatter-add)."""
  if BACKEND != "torch":
    return ops.segment_sum(x, segments, num_segments=num_segments)
  zeros = ops.zeros((num_segments,), dtype_name(x))
  return ops.scatter_update(zeros, ops.reshape(segments, (-1, 1)), x, reduction="add")


def mean(x, axis=None, keepdims=False):
  """``keras.ops.mean(x, axis, keepdims)`` computed in the dtype of float ``x``."""
  if BACKEND == "torch":
    return _library().mean(ops.convert_to_tensor(x), dim=axis, keepdim=keepdims)
  if BACKEND == "jax":
    return _library().numpy.mean(ops.convert_to_tensor(x), axis=axis, keepdims=keepdims)
  return ops.mean(x, axis=axis, keepdims=keepdims)


def graph_assert(condition, data):
  """On TensorFlow inside ``tf.function``: a ``tf.debugging.Assert(condition, data)`` beside the
  computation (the call fails with its message when the function runs; XLA drops it). Elsewhere
  nothing: callers check eagerly themselves and mark a traced result NaN
  (:func:`tfrank4class.checks.check_values`)."""
  if BACKEND == "tensorflow":
    _library().debugging.Assert(condition, data, summarize=10)


def host_callback(callback, *tensors):
  """JAX: ``callback(*arrays)`` on the host with the values of ``tensors`` when the compiled
  function runs (``jax.debug.callback``); an exception it raises fails the call. Elsewhere
  nothing."""
  if BACKEND == "jax":
    import jax  # noqa: PLC0415

    jax.debug.callback(callback, *tensors)


def compiled_by_xla():
  """Whether the code being run or traced is compiled by XLA: always on JAX, under
  ``jit_compile=True`` on TensorFlow, never on PyTorch. Where a choice between two forms is made
  by value at run time (a ``cond``), XLA reserves memory for both and compiles both; such code
  takes its one always-valid form here."""
  if BACKEND == "jax":
    return True
  return BACKEND == "tensorflow" and _in_xla_context()


def materialized(tensors):
  """The list ``tensors`` itself, each computed in full before any op that reads it: on JAX an
  optimization barrier (``jax.lax.optimization_barrier``), elsewhere unchanged.

  XLA fuses a cheap elementwise producer into each of its consumers, recomputing it in every
  one; where each round of a loop feeds several ops of the next (products of polynomials, one
  coefficient read by up to ``k + 1`` products) the recomputation compounds over the rounds: the
  smooth top-k SVM's products at ``C = 100,000`` took 233 ms a call in place of 33 ms
  (docs/topk.md). And XLA on CPU turns a top-k whose values are sliced (the ``k``-th apart) into
  a full sort of the row (1.7 s against 20 ms there) unless its outputs pass through here.
  Also an order: a written-out gradient (:func:`custom_gradient`) that recomputes ``[B, n]``
  values from its inputs does not depend on the forward's result, and XLA's CPU scheduler may
  then compute them before the forward's reduction has consumed its own, holding both at once;
  passing the inputs through here together with the forward's result puts them after it.
  TensorFlow's graph and PyTorch run the backward after the forward anyway.

  Example:
    >>> [ops.convert_to_numpy(t).tolist() for t in materialized([ops.ones(2)])]
    [[1.0, 1.0]]
  """
  if BACKEND != "jax":
    return list(tensors)
  return list(_library().lax.optimization_barrier(list(tensors)))


def _in_xla_context():
  """Whether the TensorFlow graph being traced is compiled by XLA (``jit_compile=True``).

  TensorFlow has no public API for this; ``tensorflow.python.ops.control_flow_util`` (present and
  unchanged from TensorFlow 2.16 to 2.21) is read here, on the TensorFlow backend only. Outside a
  graph it is ``False``.
  """
  from tensorflow.python.framework import ops as tf_ops  # noqa: PLC0415
  from tensorflow.python.ops import control_flow_util  # noqa: PLC0415

  return control_flow_util.GraphOrParentsInXlaContext(tf_ops.get_default_graph())


def invert_permutation(perm):
  """The inverse of every permutation ``perm[b]`` of ``0..n-1`` in an integer ``[B, n]`` tensor:
  ``inverse[b, perm[b, i]] = i``, in O(B n) (no second sort).

  A scatter on every backend, except TensorFlow outside XLA, where the batch is inverted with
  ``tf.math.invert_permutation`` on the flattened rows (a scatter, ``tf.scatter_nd``, is about 60x
  slower there: docs/rambo.md, "Inversion under XLA"; a second argsort about 8x at 1000 x 1000).
  Under XLA ``invert_permutation`` does not lower when the permutation comes from a gathered
  tensor, so XLA gets the scatter, which it fuses well.

  Example:
    >>> from tfrank4class.compat import ops
    >>> ops.convert_to_numpy(invert_permutation(ops.convert_to_tensor([[1, 2, 0]]))).tolist()
    [[2, 0, 1]]
  """
  shape = ops.shape(perm)
  rows, n = shape[0], shape[1]
  dtype = dtype_name(perm)
  if BACKEND == "tensorflow" and not _in_xla_context():
    # Shift row b into [b n, (b + 1) n) and invert all rows as one permutation.
    offsets = ops.arange(rows, dtype=dtype)[:, None] * ops.cast(n, dtype)
    flat = _library().math.invert_permutation(ops.reshape(perm + offsets, [-1]))
    return ops.reshape(flat, shape) - offsets
  # A scatter of the positions (``scatter_update``: ``keras.ops.scatter`` loops in Python on
  # PyTorch).
  row_ids = ops.broadcast_to(ops.arange(rows, dtype=dtype)[:, None], shape)
  indices = ops.reshape(ops.stack([row_ids, perm], axis=-1), [-1, 2])
  positions = ops.reshape(ops.broadcast_to(ops.arange(n, dtype=dtype)[None, :], shape), [-1])
  return ops.reshape(ops.scatter_update(ops.zeros_like(perm), indices, positions), shape)


def split_rows(x, sizes):
  """The consecutive blocks of ``sizes`` rows (Python ints summing to ``x.shape[0]``) of ``x``.

  ``keras.ops.split`` at the cumulative sizes, whose gradient is one concatenation (three
  slices, each with a full-size gradient, made the sorting networks 1.6-6.8x slower under
  ``tf.function``: ``benchmarks/backends.py``, 5 rounds); on PyTorch ``torch.split``, as
  Keras's ``split`` recomputes its split points through NumPy on every eager call.

  Example:
    >>> from tfrank4class.compat import ops
    >>> [ops.convert_to_numpy(b).tolist() for b in split_rows(ops.arange(5), [2, 2, 1])]
    [[0, 1], [2, 3], [4]]
  """
  if BACKEND == "torch":
    return list(_library().split(ops.convert_to_tensor(x), list(sizes), dim=0))
  return ops.split(x, np.cumsum(sizes)[:-1].tolist(), axis=0)


def permute_rows(x, index):
  """``x[index]`` along axis 0 for a fixed permutation ``index`` (a NumPy integer array).

  Its gradient is the inverse permutation, one gather: on TensorFlow and JAX a custom gradient
  (the gather's own gradient is a segment sum, TensorFlow's ``IndexedSlices``, a scatter under
  XLA); on PyTorch ``torch.index_select``, whose native backward is already a cheap
  ``index_add`` and which spares eager mode the Python-side ``autograd.Function`` of
  :func:`custom_gradient` and ``keras.ops.take``'s conversions (the custom gradient took 2.3x
  as long, forward and backward of ``[16, 64, 16]``: median of 7 interleaved rounds, 1.7-3.4x).

  Example:
    >>> from tfrank4class.compat import ops
    >>> import numpy as np
    >>> ops.convert_to_numpy(permute_rows(ops.convert_to_tensor([10.0, 20.0, 30.0]),
    ...                                   np.array([2, 0, 1]))).tolist()
    [30.0, 10.0, 20.0]
  """
  forward = np.asarray(index).astype(np.int32)
  if BACKEND == "torch":
    torch, x = _library(), ops.convert_to_tensor(x)
    return torch.index_select(x, 0, torch.as_tensor(forward, dtype=torch.int64, device=x.device))
  inverse = np.argsort(forward).astype(np.int32)

  @custom_gradient
  def permute(values):
    return ops.take(values, forward, axis=0), lambda upstream: (
      ops.take(upstream, inverse, axis=0),
    )

  return permute(x)


def do_not_convert(fn):
  """``fn`` marked for AutoGraph not to convert (TensorFlow backend; elsewhere ``fn`` itself).

  The rank operators have no tensor-dependent Python control flow; converting them made the first
  trace of a loss take about 7 s instead of 0.5 s (docs/rambo.md, "AutoGraph"). The metrics'
  ``update_state`` neither: tf-keras converts it even eagerly, which rewrites its errors into an
  "in user code" traceback that Keras 3 does not add.
  """
  if BACKEND != "tensorflow":
    return fn
  return _library().autograph.experimental.do_not_convert(fn)


def map_row_blocks(f, tensors, rows):
  """``f(*tensors)`` for tensors ``[B, ...]`` and a row-wise ``f`` (row ``i`` of its float32
  ``[B, k]`` result depends on row ``i`` of each input only), evaluated ``rows`` rows at a time,
  one block after another, in a TensorFlow graph that XLA does not compile, on a machine without
  a GPU, when the batch spans more than 8 blocks (``tf.map_fn(parallel_iterations=1)`` over the
  blocks; a ``tf.cond`` on the batch size when it is known only at run time). TensorFlow runs
  each element-wise op over the whole tensor before the next, so on a large ``[B, C]`` every op
  streams through main memory; a block's intermediates stay in the CPU's cache. Eagerly, under
  XLA, with a GPU, on JAX (which fuses the ops) and on PyTorch, and for smaller batches,
  ``f(*tensors)`` at once. The last block overlaps the one before it when ``rows`` does not
  divide ``B`` (its rows are computed twice, alike).

  Example:
    >>> x = ops.convert_to_tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    >>> ops.convert_to_numpy(map_row_blocks(lambda v: ops.sum(v, axis=-1, keepdims=True), [x], 2))
    array([[ 3.],
           [ 7.],
           [11.]], dtype=float32)
  """
  if BACKEND != "tensorflow" or is_concrete(tensors[0]) or _in_xla_context():
    return f(*tensors)
  tf = _library()
  if tf.config.list_logical_devices("GPU"):  # the blocks are for a CPU's cache
    return f(*tensors)
  batch = tensors[0].shape[0]
  if batch is not None:
    return _blocks(f, tensors, rows) if batch > 8 * rows else f(*tensors)
  return tf.cond(
    tf.shape(tensors[0])[0] > 8 * rows, lambda: _blocks(f, tensors, rows), lambda: f(*tensors)
  )


#: The largest list length for which :func:`count_nonzero_signs` takes TensorFlow's Euclidean
#: norm: the square of a float32 square root of ``n <= 2**21`` is within ``3 * 2**-3`` of ``n``.
_NORM_COUNT_MAX = 2**21


def count_nonzero_signs(signs):
  """The number of non-zero entries along the last axis of float32 ``signs`` (every entry -1, 0
  or 1) as float32: ``sum(|signs|)``, exact below ``2**24`` entries. On TensorFlow, up to
  ``2**21`` entries, the square of its ``reduce_euclidean_norm`` rounded: one kernel reading the
  signs once, where ``abs`` and ``sum`` are two passes (XLA, which has no such kernel, fuses them;
  other backends and longer lists: ``sum(|signs|)``). A NaN entry makes the count NaN.

  Example:
    >>> ops.convert_to_numpy(count_nonzero_signs(ops.convert_to_tensor([[1.0, 0.0, -1.0, 1.0]])))
    array([3.], dtype=float32)
  """
  length = signs.shape[-1]
  if BACKEND != "tensorflow" or length is None or length > _NORM_COUNT_MAX or _in_xla_context():
    return ops.sum(ops.abs(signs), axis=-1)
  return ops.round(ops.square(_library().math.reduce_euclidean_norm(signs, axis=-1)))


def _blocks(f, tensors, rows):
  """:func:`map_row_blocks`'s loop over blocks of ``rows`` rows (TensorFlow)."""
  tf = _library()
  batch = tf.shape(tensors[0])[0]
  count = (batch + rows - 1) // rows

  def block(i):
    start = tf.minimum(i * rows, batch - rows)
    return f(*(x[start : start + rows] for x in tensors))

  blocks = tf.map_fn(block, tf.range(count), fn_output_signature=tf.float32, parallel_iterations=1)
  row = tf.range(batch)
  index = tf.minimum(row // rows, count - 1)
  position = index * rows + row - tf.minimum(index * rows, batch - rows)
  return tf.gather(tf.reshape(blocks, [count * rows, -1]), position)


def xla_cluster(fn):
  """``fn`` compiled by XLA as a cluster of its own where TensorFlow traces a graph that XLA does
  not compile already (``tf.function`` without ``jit_compile``): a nested
  ``tf.function(jit_compile=True)``, which XLA compiles once per input shape at run time.
  Eagerly, under ``jit_compile=True``, and on JAX (XLA compiles the whole function) and PyTorch,
  ``fn`` itself.

  For a pass over every entry that TensorFlow's kernels run one op at a time over memory but
  XLA fuses into one (the counts of :func:`tfrank4class.ranking.blackbox.blackbox_marked_rank`,
  the attention sorter's one-item passes). ``fn`` takes and returns tensors (or tuples of them)
  and has no gradient of its own.
  """
  if BACKEND != "tensorflow":
    return fn
  tf = _library()
  compiled = tf.function(fn, jit_compile=True, autograph=False)

  def clustered(*tensors):
    if tf.executing_eagerly() or _in_xla_context():
      return fn(*tensors)
    return compiled(*tensors)

  return clustered
