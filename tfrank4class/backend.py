"""What ``keras.ops`` lacks or spells differently per backend, written once for the whole core.

The core of the package (labels, checks, rank operators, losses, metrics, heads) is written on
``keras.ops`` and runs on Keras 3's TensorFlow, JAX and PyTorch backends (and, on TensorFlow, for
tf-keras models). Where ``keras.ops`` falls short, the one workaround lives here, and this is the
only module of the core that calls a backend's own library:

* :func:`stable_argsort`: ``keras.ops.argsort`` promises no order among ties on TensorFlow; every
  rank of the package breaks ties by the lower index first, on every backend;
* :func:`top_k`: ``torch.topk`` does not order ties by index (TensorFlow and JAX put the lower
  index first); here all three do;
* :func:`searchsorted`: ``keras.ops.searchsorted`` is 1-D only; here it is batched over leading
  axes, with each backend's own batched search;
* :func:`lgamma`, :func:`digamma`: not in ``keras.ops``;
* :func:`custom_gradient`: ``keras.ops.custom_gradient`` is ``tf.custom_gradient`` on TensorFlow
  and ``jax.custom_gradient`` on JAX, whose gradient function receives the upstream gradient as
  its argument; on PyTorch Keras calls it as ``grad_fn(*inputs, upstream=...)`` and saves every
  input for the backward pass (so every input must be a tensor). One signature here;
* :func:`static_value`, :func:`dtype_name`, :func:`graph_assert`: a value known when traced,
  a dtype's name, and TensorFlow's in-graph assertion (nothing on the other backends);
* :func:`is_concrete`: whether a tensor's values can be read now (eager) or are being traced
  (``tf.function``, ``jax.jit``, ``torch.compile``, Keras's symbolic shapes), so that a
  data-dependent check can raise eagerly and mark the result NaN when traced
  (:meth:`tfrank4class.labels.Labels.mark_invalid`).

Example:
  >>> from tfrank4class.compat import ops
  >>> ops.convert_to_numpy(stable_argsort(ops.convert_to_tensor([[1.0, 3.0, 3.0, 2.0]]),
  ...                                     descending=True))
  array([[1, 2, 3, 0]]...)
  >>> values, indices = top_k(ops.convert_to_tensor([[2.0, 5.0, 5.0, 1.0]]), 2)
  >>> ops.convert_to_numpy(indices)
  array([[1, 2]]...)
"""

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


def top_k(x, k):
  """``(values, indices)`` of the ``k`` largest entries of the last axis of ``x``, largest first,
  ties by the lower index first on every backend (``k`` a Python int)."""
  x = ops.convert_to_tensor(x)
  if BACKEND == "torch":
    order = stable_argsort(x, axis=-1, descending=True)[..., :k]
    return ops.take_along_axis(x, order, axis=-1), order
  values, indices = ops.top_k(x, k, sorted=True)
  return values, ops.cast(indices, "int32")


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


def lgamma(x):
  """``log |Gamma(x)|`` elementwise."""
  x = ops.convert_to_tensor(x)
  if BACKEND == "tensorflow":
    return _library().math.lgamma(x)
  if BACKEND == "jax":
    import jax.scipy.special  # noqa: PLC0415

    return jax.scipy.special.gammaln(x)
  return _library().lgamma(x)


def digamma(x):
  """``d/dx log Gamma(x)`` elementwise."""
  x = ops.convert_to_tensor(x)
  if BACKEND == "tensorflow":
    return _library().math.digamma(x)
  if BACKEND == "jax":
    import jax.scipy.special  # noqa: PLC0415

    return jax.scipy.special.digamma(x)
  return _library().digamma(x)


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


def graph_assert(condition, data):
  """On TensorFlow inside ``tf.function``: a ``tf.debugging.Assert(condition, data)`` beside the
  computation (the call fails with its message when the function runs; XLA drops it). Elsewhere
  nothing: callers check eagerly themselves and mark a traced result NaN
  (:func:`tfrank4class.checks.check_values`)."""
  if BACKEND == "tensorflow":
    _library().debugging.Assert(condition, data, summarize=10)
