"""The difftopk / diffsort fixtures written by ``tools/topk_reference.py``, by kind of case."""

import json
import pathlib

import numpy as np

FIXTURE = pathlib.Path(__file__).parent / "fixtures" / "topk_networks.npz"


def cases(kind):
  """``[(config, arrays)]`` of every case of ``kind``: ``arrays`` maps ``x``, ``grad``,
  ``out0``, ``cot0``, ... (and ``labels`` for the loss) to float64 / int arrays."""
  with np.load(FIXTURE) as data:
    meta = json.loads(str(data["meta"]))
    found = []
    for config in meta:
      if config["kind"] != kind:
        continue
      prefix = config["name"] + "/"
      arrays = {k[len(prefix) :]: data[k] for k in data.files if k.startswith(prefix)}
      found.append((config, arrays))
  return found


def case_id(config):
  """A readable test id for a case."""
  skip = ("kind", "name")
  return config["name"] + "-" + "-".join(f"{v}" for k, v in config.items() if k not in skip)


def value_and_grad(fn, x, cotangents):
  """``fn(x)`` (a tensor or tuple of tensors) and the gradient of ``sum(out * cotangent)``."""
  import tensorflow as tf

  x = tf.convert_to_tensor(x)
  with tf.GradientTape() as tape:
    tape.watch(x)
    outputs = fn(x)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    total = tf.add_n([tf.reduce_sum(o * tf.cast(c, o.dtype)) for o, c in zip(outputs, cotangents)])
  return [o.numpy() for o in outputs], tape.gradient(total, x).numpy()


def finite_difference(fn, x, cotangents, eps=1e-6):
  """Central differences of ``sum(fn(x) * cotangent)`` in float64, one entry at a time."""
  x = np.asarray(x, np.float64)

  def total(v):
    outputs = fn(v)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    return sum(float(np.sum(np.asarray(o) * c)) for o, c in zip(outputs, cotangents))

  grad = np.zeros_like(x)
  for index in np.ndindex(*x.shape):
    up, down = x.copy(), x.copy()
    up[index] += eps
    down[index] -= eps
    grad[index] = (total(up) - total(down)) / (2 * eps)
  return grad
