"""What a backend-neutral test needs from the backend it runs on: numpy out, gradients, the ways
a function is compiled there, and finite differences to check a gradient against.

A test file that imports neither TensorFlow nor a TensorFlow-by-nature module runs on every leg
of CI (Keras 3 on TensorFlow, JAX and PyTorch, and tf-keras); it feeds numpy arrays, calls the
package, and reads results back with :func:`numpy`:

    value, grads = value_and_grad(lambda s: ops.sum(loss_fn(s, labels)), scores)
    for mode in compile_modes():
      np.testing.assert_allclose(numpy(compiled(fn, mode)(x)), expected)
"""

import contextlib

import numpy as np

from tfrank4class.compat import BACKEND, ops

#: The compiled forms tested on each backend ("eager" is the uncompiled call). PyTorch: eager
#: only (``torch.compile`` needs a C++ toolchain at run time; docs/backends.md, "Caveats").
COMPILE_MODES = {
  "tensorflow": ("eager", "function", "xla"),
  "jax": ("eager", "jit"),
  "torch": ("eager",),
}


def numpy(x):
  """``x`` (a tensor of any backend, or a nest of them) as numpy."""
  if isinstance(x, (tuple, list)):
    return type(x)(numpy(v) for v in x)
  return np.asarray(ops.convert_to_numpy(x))


def compile_modes():
  """The compile modes of the active backend (see :data:`COMPILE_MODES`)."""
  return COMPILE_MODES[BACKEND]


def compiled(fn, mode):
  """``fn`` compiled as ``mode`` says on the active backend (``"eager"``: ``fn`` itself)."""
  if mode == "eager":
    return fn
  if BACKEND == "tensorflow":
    import tensorflow as tf  # noqa: PLC0415

    return tf.function(fn, jit_compile=mode == "xla")
  if BACKEND == "jax":
    import jax  # noqa: PLC0415

    return jax.jit(fn)
  raise ValueError(f"No compile mode {mode!r} on {BACKEND}; modes: {compile_modes()}.")


def quickest(fn):
  """``fn`` in the form that runs a large function quickest on the active backend, for checks of
  values rather than of a compile mode: jitted on JAX (called eagerly, JAX compiles each op for
  each new shape, which makes a large function many times slower), else ``fn`` itself."""
  return compiled(fn, "jit") if BACKEND == "jax" else fn


def value_and_grad(fn, *args):
  """``(value, grads)`` of a scalar ``fn(*args)`` with respect to every arg, as numpy, on the
  active backend (TensorFlow's ``GradientTape``, ``jax.grad``, PyTorch's autograd)."""
  args = [np.asarray(a) for a in args]
  if BACKEND == "tensorflow":
    import tensorflow as tf  # noqa: PLC0415

    variables = [tf.Variable(a) for a in args]
    with tf.GradientTape() as tape:
      value = fn(*[tf.convert_to_tensor(v) for v in variables])
    grads = tape.gradient(value, variables)
    return numpy(value), [None if g is None else numpy(g) for g in grads]
  if BACKEND == "jax":
    import jax  # noqa: PLC0415

    value, grads = jax.value_and_grad(fn, argnums=tuple(range(len(args))))(*args)
    return numpy(value), [numpy(g) for g in grads]
  import torch  # noqa: PLC0415

  tensors = [torch.tensor(a, requires_grad=True) for a in args]
  value = fn(*tensors)
  value.backward()
  return numpy(value.detach()), [None if t.grad is None else numpy(t.grad) for t in tensors]


def finite_difference_grad(fn, x, eps=1e-3):
  """Central differences of the scalar ``fn(x)`` (numpy in float64 where the backend allows)
  with respect to every entry of ``x``."""
  x = np.asarray(x, np.float64)
  grad = np.zeros_like(x)
  for index in np.ndindex(x.shape):
    step = np.zeros_like(x)
    step[index] = eps
    up = float(numpy(fn((x + step).astype(x.dtype))))
    down = float(numpy(fn((x - step).astype(x.dtype))))
    grad[index] = (up - down) / (2 * eps)
  return grad


def float64():
  """A context in which float64 inputs stay float64: JAX computes in float32 unless
  ``jax_enable_x64`` is on (on for the block here); the other backends need nothing."""
  if BACKEND == "jax":
    import jax  # noqa: PLC0415

    return jax.enable_x64(True)
  return contextlib.nullcontext()
