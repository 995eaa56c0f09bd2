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
