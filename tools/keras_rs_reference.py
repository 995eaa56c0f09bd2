"""Writes ``tests/fixtures/keras_rs.npz``: keras-rs's own loss and metric values on fixed inputs.

``tests/test_keras_rs_names.py`` checks the losses and metrics that a keras-rs user reaches for
by name (``tfrank4class.losses.PairwiseHingeLoss``, ..., ``tfrank4class.metrics.DCG``, ...)
against these values. keras-rs is never a dependency: this script builds a side venv with
keras-rs 0.4.0 on JAX (``tools/side_venv.py``) and runs itself there with ``--compute``.

    python3 tools/keras_rs_reference.py [--venv /tmp/venv-keras-rs]

Inputs (seeded): graded labels in {0, 1, 2, 3} with padded items (-1), at least one relevant
item per list, untied scores; a keras-rs ``{"labels", "mask"}`` dict; and, for ListMLE (whose
tied labels are ordered at random), lists of distinct labels.
"""

import argparse
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "..", "tests", "fixtures", "keras_rs.npz")
PACKAGES = ("keras-rs==0.4.0", "keras==3.15.1", "jax==0.12.0.1", "jaxlib==0.12.0.1", "numpy")
LOSSES = (
  "PairwiseHingeLoss",
  "PairwiseLogisticLoss",
  "PairwiseSoftZeroOneLoss",
  "PairwiseMeanSquaredError",
)
#: name -> (keras-rs class, its keyword arguments).
METRICS = {
  "dcg_3": ("DCG", {"k": 3}),
  "ndcg_3": ("NDCG", {"k": 3}),
  "mrr": ("MeanReciprocalRank", {}),
  "map": ("MeanAveragePrecision", {}),
  "precision_3": ("PrecisionAtK", {"k": 3}),
  "recall_3": ("RecallAtK", {"k": 3}),
}


def inputs(seed=0, batch=6, size=7):
  """Graded labels with padding, a mask, untied scores and distinct labels for ListMLE."""
  rng = np.random.default_rng(seed)
  labels = rng.integers(0, 4, size=(batch, size)).astype("float32")
  labels[:, 0] = np.maximum(labels[:, 0], 1.0)  # at least one relevant item per list
  labels[rng.random((batch, size)) < 0.15] = -1.0
  labels[:, 0] = np.maximum(labels[:, 0], 1.0)
  mask = rng.random((batch, size)) > 0.2
  mask[:, 0] = True
  scores = rng.permutation(batch * size).reshape(batch, size).astype("float32") / 10.0
  distinct = np.stack([rng.permutation(size) for _ in range(batch)]).astype("float32")
  return {"labels": labels, "mask": mask, "scores": scores, "distinct": distinct}


def compute(path):
  os.environ["KERAS_BACKEND"] = "jax"
  import keras_rs  # noqa: PLC0415  (only in the side venv)

  data = inputs()
  out = dict(data)
  for name in LOSSES:
    loss = getattr(keras_rs.losses, name)(reduction="none")
    out[name] = np.asarray(loss(data["labels"], data["scores"]))
    masked = {"labels": data["labels"], "mask": data["mask"]}
    out[name + "_masked"] = np.asarray(loss(masked, data["scores"]))
  list_mle = keras_rs.losses.ListMLELoss(reduction="none")
  out["ListMLELoss"] = np.asarray(list_mle(data["distinct"], data["scores"]))
  for name, (cls, kwargs) in METRICS.items():
    for suffix, labels in (("", data["labels"]), ("_masked", None)):
      metric = getattr(keras_rs.metrics, cls)(shuffle_ties=False, **kwargs)
      labels = labels if labels is not None else {"labels": data["labels"], "mask": data["mask"]}
      metric.update_state(labels, data["scores"])
      out[name + suffix] = np.asarray(metric.result())
  np.savez(path, **out)
  print(f"wrote {path}")


def main(argv):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--venv", default="/tmp/venv-keras-rs", help="the side venv")
  parser.add_argument("--python", default="python3.12", help="the interpreter that creates it")
  parser.add_argument("--compute", action="store_true", help="(inside the side venv)")
  args = parser.parse_args(argv)
  if args.compute:
    compute(os.path.abspath(FIXTURE))
    return
  sys.path.insert(0, HERE)
  import side_venv  # noqa: PLC0415

  interpreter = side_venv.ensure(args.venv, PACKAGES, python=args.python)
  subprocess.run([interpreter, os.path.abspath(__file__), "--compute"], check=True)


if __name__ == "__main__":
  main(sys.argv[1:])
