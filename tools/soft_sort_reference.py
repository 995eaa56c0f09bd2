"""Writes the soft sort / soft rank fixtures from the authors' NumPy code (fast-soft-sort).

google-research/fast-soft-sort holds the reference implementation of Blondel et al., "Fast
Differentiable Sorting and Ranking" (ICML 2020); its ``fast_soft_sort/numpy_ops.py`` runs on
NumPy and SciPy alone (numba only speeds it up). This script runs its ``SoftRank`` and
``SoftSort`` in float64 on fixed cases (several list sizes, both regularisations, both
directions, several strengths, lists with ties) and stores the values and the vector-Jacobian
products with a fixed random vector (``vjp``: the reference's own ``vjp``; ``numeric_vjp``:
central finite differences of its ``compute``, for the lists of up to 100 items), for
``tests/test_permutahedron.py``. The two differ where the reference's ``vjp`` is not the derivative
of its ``compute``: at ties (where neither exists; its ``np.argsort`` orders tied values
arbitrarily) and for ``SoftSort`` with ``"kl"``, whose ``vjp`` weighs each block by the softmax
of ``rho / eps`` rather than of the sorted values. Run:

    python3 tools/soft_sort_reference.py REPO /work/venv-torch tests/fixtures/soft_sort.npz

``REPO`` is a checkout of fast-soft-sort, or a git directory without a work tree (such as the
one the ``fetch`` tool writes); its ``fast_soft_sort`` folder is then exported to a temporary
directory with ``git archive``. The side venv (NumPy, SciPy) is created when its path does not
exist yet, and reused otherwise (``tools/side_venv.py``).
"""

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

#: (n, regularization, regularization_strength, direction, ties)
CASES = (
  (5, "l2", 1.0, "ASCENDING", False),
  (5, "kl", 1.0, "DESCENDING", False),
  (10, "l2", 0.1, "DESCENDING", False),
  (10, "l2", 1.0, "ASCENDING", True),
  (10, "kl", 0.5, "ASCENDING", True),
  (10, "kl", 10.0, "DESCENDING", False),
  (100, "l2", 1.0, "DESCENDING", False),
  (100, "l2", 10.0, "ASCENDING", True),
  (100, "kl", 1.0, "ASCENDING", False),
  (1000, "l2", 1.0, "DESCENDING", False),
  (1000, "kl", 0.1, "ASCENDING", False),
)
ROWS = 3
STEP = 1e-6
NUMERIC_UP_TO = 100


def cases():
  """Every case's inputs from a fixed seed: ``(name, scores, cotangent, case)``."""
  rng = np.random.default_rng(20200216)
  for i, (n, reg, eps, direction, ties) in enumerate(CASES):
    scores = rng.normal(size=(ROWS, n))
    if ties:
      scores = np.round(scores * 2) / 2  # a few values repeat
    cotangent = rng.normal(size=(ROWS, n))
    yield f"case{i}", scores, cotangent, (n, reg, eps, direction)


def worker(package_parent, out):
  """Runs inside the side venv: evaluates the reference and writes ``out``."""
  sys.path.insert(0, package_parent)
  from fast_soft_sort import numpy_ops  # pylint: disable=g-import-not-at-top

  arrays = {}
  for name, scores, cotangent, (n, reg, eps, direction) in cases():
    for op_name, op in (("rank", numpy_ops.SoftRank), ("sort", numpy_ops.SoftSort)):

      def compute(row, op=op, direction=direction, eps=eps, reg=reg):
        return op(row, direction, eps, reg).compute()

      values, vjp, numeric = [], [], []
      for row, vector in zip(scores, cotangent):
        operator = op(row, direction=direction, regularization_strength=eps, regularization=reg)
        values.append(operator.compute())
        vjp.append(operator.vjp(vector))
        if n <= NUMERIC_UP_TO:
          grad = np.zeros(n)
          for j in range(n):
            step = np.zeros(n)
            step[j] = STEP
            grad[j] = vector @ (compute(row + step) - compute(row - step)) / (2 * STEP)
          numeric.append(grad)
      arrays[f"{name}_{op_name}"] = np.array(values)
      arrays[f"{name}_{op_name}_vjp"] = np.array(vjp)
      if numeric:
        arrays[f"{name}_{op_name}_numeric_vjp"] = np.array(numeric)
    arrays[f"{name}_scores"] = scores
    arrays[f"{name}_cotangent"] = cotangent
    arrays[f"{name}_params"] = np.array([n, eps, reg == "kl", direction == "DESCENDING"])
  np.savez_compressed(out, **arrays)
  print(f"wrote {len(CASES)} cases to {out}")


def export(repo, destination):
  """The folder that holds ``fast_soft_sort`` (a checkout, or exported from a git directory)."""
  if os.path.isdir(os.path.join(repo, "fast_soft_sort")):
    return repo
  archive = subprocess.run(
    ["git", "--git-dir", repo, "archive", "HEAD", "fast_soft_sort"], check=True, capture_output=True
  ).stdout
  subprocess.run(["tar", "-x", "-C", destination], input=archive, check=True)
  return destination


def main(argv):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("repo", help="fast-soft-sort: a checkout or a git directory")
  parser.add_argument("venv", help="the side venv (created if it does not exist)")
  parser.add_argument("out", help="the .npz fixture to write")
  parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args.worker:
    worker(args.repo, args.out)
    return
  sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
  import side_venv  # pylint: disable=g-import-not-at-top

  python = side_venv.ensure(args.venv, ["numpy", "scipy"])
  with tempfile.TemporaryDirectory() as tmp:
    parent = export(os.path.abspath(args.repo), tmp)
    subprocess.run(
      [python, os.path.abspath(__file__), parent, args.venv, os.path.abspath(args.out), "--worker"],
      check=True,
    )


if __name__ == "__main__":
  main(sys.argv[1:])
