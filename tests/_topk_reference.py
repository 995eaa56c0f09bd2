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
  """``fn(x)`` (a tensor or tuple of tensors) and the gradient of ``sum(out * cotangent)``, as
  numpy, on the active backend."""
  import backend_testing as bt  # noqa: PLC0415

  from tfrank4class import backend  # noqa: PLC0415
  from tfrank4class.compat import ops  # noqa: PLC0415

  def as_tuple(outputs):
    return outputs if isinstance(outputs, tuple) else (outputs,)

  def total(v):
    outputs = as_tuple(fn(v))
    terms = [ops.sum(o * ops.cast(c, backend.dtype_name(o))) for o, c in zip(outputs, cotangents)]
    return sum(terms[1:], terms[0])

  _, (grad,) = bt.value_and_grad(total, x)
  return [bt.numpy(o) for o in as_tuple(fn(ops.convert_to_tensor(x)))], grad


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
