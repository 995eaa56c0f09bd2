"""Prints what the core's move to ``keras.ops`` must work around, on the Keras backend it runs on.

Run it once per backend, each in a venv that has Keras 3 and that backend (the package itself is
not imported):

    KERAS_BACKEND=tensorflow .venv/bin/python tools/keras_ops_probe.py
    KERAS_BACKEND=jax /tmp/venv-jax/bin/python tools/keras_ops_probe.py
    KERAS_BACKEND=torch /tmp/venv-torch/bin/python tools/keras_ops_probe.py

(``/tmp/venv-jax``: Python 3.12 with ``keras jax jaxlib``; ``/tmp/venv-torch``: Python 3.11 with
``torch==2.13.0 keras``, see ``tools/side_venv.py``.) Each line is one fact: whether ``argsort``
and ``top_k`` order ties by index (eagerly, and compiled where the backend compiles), whether
``searchsorted`` takes batched sorted rows, which special functions exist, how the gradient
function of ``keras.ops.custom_gradient`` is called, and what ``keras.ops.shape`` returns for an
unknown batch size inside a TensorFlow graph. BUILD_NOTES.md records its output.
"""

import keras
import numpy as np
from keras import ops

BACKEND = keras.backend.backend()


def _ties_by_index(fn, values, want):
  return bool(np.array_equal(ops.convert_to_numpy(fn(values)), want))


def _compiled(fn):
  """``fn`` compiled the way the backend compiles (identity for torch eager)."""
  if BACKEND == "tensorflow":
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    return tf.function(fn, jit_compile=True)
  if BACKEND == "jax":
    import jax  # pylint: disable=g-import-not-at-top

    return jax.jit(fn)
  return fn


def _tie_facts():
  values = np.random.default_rng(0).integers(0, 3, size=(4, 2000)).astype("float32")
  stable = np.argsort(values, axis=-1, kind="stable")
  facts = {}
  for mode, wrap in (("eager", lambda f: f), ("compiled", _compiled)):
    argsort = wrap(lambda v: ops.argsort(v))
    top_k = wrap(lambda v: ops.top_k(-v, 10)[1])
    facts[f"argsort orders ties by index ({mode})"] = _ties_by_index(argsort, values, stable)
    facts[f"top_k orders ties by index ({mode})"] = _ties_by_index(top_k, values, stable[:, :10])
  return facts


def _custom_gradient_call():
  """How the gradient function is called: ``(upstream)`` or ``(*inputs, upstream=...)``."""
  seen = {}

  @ops.custom_gradient
  def double(x):
    def grad(*args, upstream=None):
      seen["positional"] = len(args)
      seen["upstream keyword"] = upstream is not None
      return (upstream if upstream is not None else args[0]) * 2.0

    return x * 2.0, grad

  x = np.ones(3, "float32")
  if BACKEND == "jax":
    import jax  # pylint: disable=g-import-not-at-top

    jax.grad(lambda v: ops.sum(double(v)))(x)
  elif BACKEND == "torch":
    import torch  # pylint: disable=g-import-not-at-top

    t = torch.tensor(x, requires_grad=True)
    ops.sum(double(t)).backward()
  else:
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    v = tf.Variable(x)
    with tf.GradientTape() as tape:
      y = ops.sum(double(v))
    tape.gradient(y, v)
  return seen


def _searchsorted_batched():
  try:
    ops.searchsorted(np.array([[1.0, 2.0, 3.0]]), np.array([[2.5]]))
    return "yes"
  except (ValueError, TypeError, NotImplementedError) as e:
    return f"no ({type(e).__name__}: {str(e).splitlines()[0][:80]})"


def main():
  print(f"backend {BACKEND}, Keras {keras.__version__}")
  for fact, value in _tie_facts().items():
    print(f"{fact}: {value}")
  print(f"searchsorted over batched rows: {_searchsorted_batched()}")
  names = ("digamma", "lgamma", "erf", "erfc", "logsumexp", "log_softmax", "segment_sum")
  print("special functions in keras.ops: " + ", ".join(f"{n} {hasattr(ops, n)}" for n in names))
  print(f"custom_gradient calls the gradient function with: {_custom_gradient_call()}")
  if BACKEND == "tensorflow":
    import tensorflow as tf  # pylint: disable=g-import-not-at-top

    shapes = []
    graph_fn = tf.function(lambda v: shapes.append(ops.shape(v)) or ops.sum(v))
    graph_fn.get_concrete_function(tf.TensorSpec([None, 5]))
    print(f"keras.ops.shape of a [None, 5] tensor in a tf.function: {shapes[0]}")


if __name__ == "__main__":
  main()
