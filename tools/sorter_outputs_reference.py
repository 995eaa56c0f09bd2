"""Writes the shipped sorters' ranks as computed by the TensorFlow code before the keras.ops port.

The learned sorters were written in ``tf.*`` up to commit ``9e9106c``. This script exports the
``tfrank4class`` package of such a commit (``git archive``) to a temporary directory, and a child
process (this Python, which needs TensorFlow) loads each shipped sorter there with
``PRETRAINED_SORTERS.get(kind)`` and ranks fixed float32 score lists. The inputs and those ranks
go to ``tests/fixtures/shipped_sorter_outputs.npz`` (keys ``"<kind>_<n>/scores"`` and
``"<kind>_<n>/ranks"``), for ``tests/test_shipped_sorter_weights.py``, which checks that the
ported sorters give the same ranks on every Keras backend. Run from the repository root:

    python tools/sorter_outputs_reference.py 9e9106c tests/fixtures/shipped_sorter_outputs.npz
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

#: (kind, list length): n = 2 and 300 take the 2-item and the block-wise (n > 256) paths.
CASES = (("attention", 2), ("attention", 23), ("attention", 300), ("lstm", 17), ("conv", 100))

_RANK = """
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from tfrank4class.ranking.sorters import PRETRAINED_SORTERS
import tfrank4class
assert tfrank4class.__file__.startswith(sys.argv[1]), tfrank4class.__file__
inputs = dict(np.load(sys.argv[2]))
ranks = {}
for key, scores in inputs.items():
  sorter = PRETRAINED_SORTERS.get(key.split("_")[0])
  ranks[key.replace("/scores", "/ranks")] = sorter(scores).numpy()
np.savez(sys.argv[3], **inputs, **ranks)
"""


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("commit", help="a commit whose sorters are written in tf.*")
  parser.add_argument("output", help="the .npz fixture to write")
  args = parser.parse_args()
  output = os.path.abspath(args.output)
  rng = np.random.default_rng(2026)
  inputs = {f"{kind}_{n}/scores": rng.normal(size=(4, n)).astype(np.float32) for kind, n in CASES}
  with tempfile.TemporaryDirectory() as tmp:
    archive = subprocess.run(
      ["git", "archive", args.commit, "tfrank4class"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
    np.savez(os.path.join(tmp, "inputs.npz"), **inputs)
    subprocess.run(
      [sys.executable, "-c", _RANK, tmp, os.path.join(tmp, "inputs.npz"), output],
      check=True,
      cwd=tmp,
    )


if __name__ == "__main__":
  main()
