"""Writes the smooth top-k SVM fixtures from the authors' PyTorch code (difftopk 0.2.0).

difftopk bundles the smooth top-k SVM of Berrada et al. (ICLR 2018) in ``difftopk/smooth_topk.py``
(derived from oval-group/smooth-topk). This script runs its ``Topk_Smooth_SVM`` and
``Topk_Hard_SVM`` in float64 on fixed random cases (several numbers of classes up to 1,000, k,
temperatures down to 0.01, margins) and stores the per-example losses and two gradients of
``sum_b w_b * loss_b`` (a fixed random ``w``) with respect to the scores, for
``tests/test_smooth_svm.py``: ``grad``, central finite differences (step ``1e-6``) of the
reference's float64 forward pass, and ``autograd_grad``, what its custom backward pass returns.
At ``k = 1`` the two differ: difftopk 0.2.0's custom backward then returns gradients shifted by
one amount for every class but the true one (they no longer sum to 0 over a row, although the
loss is invariant to adding a constant to every score); elsewhere they agree up to the
backward's series approximation. The tests compare with ``grad``.

    python3 tools/smooth_topk_reference.py /work/venv-torch tests/fixtures/smooth_topk_svm.npz

With ``--backward_check`` (and no fixture path) it writes nothing and prints how far that
custom backward lies from the central differences at k = 5, tau = 0.1 on batches of 64 rows
(``BACKWARD_CHECK``), the figures ``docs/topk.md`` quotes (about 12 minutes on 2 shared cores,
nearly all of it the 2,000 forward passes of the differences at C = 1,000):

    python3 tools/smooth_topk_reference.py /work/venv-torch --backward_check

The venv is created (torch 2.13.0 CPU, difftopk and diffsort without their dependencies) when
the path does not exist yet, and reused otherwise (see ``tools/side_venv.py``). The package never
imports PyTorch.
"""

import argparse
import os
import subprocess
import sys

import numpy as np

#: (num_classes, k, tau, alpha, score scale); tau = 0 is the hard loss.
CASES = (
  (10, 1, 1.0, 1.0, 1.0),
  (10, 2, 0.5, 1.0, 1.0),
  (10, 5, 1.0, 1.0, 3.0),
  (10, 5, 0.0, 1.0, 1.0),
  (100, 5, 1.0, 1.0, 1.0),
  (100, 5, 0.1, 0.5, 1.0),
  (100, 3, 0.0, 0.5, 1.0),
  (1000, 5, 1.0, 1.0, 1.0),
  (1000, 5, 0.01, 1.0, 1.0),
  (1000, 5, 0.0, 1.0, 1.0),
)
BATCH = 6
STEP = 1e-6
#: ``--backward_check``: (num_classes, alpha) at k = 5, tau = 0.1, on larger batches.
BACKWARD_CHECK = ((10, 1.0), (100, 0.5), (100, 1.0), (1000, 1.0))
BACKWARD_CHECK_BATCH = 64


def cases():
  """The inputs of every case, from a fixed seed: ``(name, scores, labels, weights, case)``."""
  rng = np.random.default_rng(20180221)
  for i, (c, k, tau, alpha, scale) in enumerate(CASES):
    scores = rng.normal(size=(BATCH, c)) * scale
    labels = rng.integers(0, c, size=BATCH)
    weights = rng.normal(size=BATCH)
    yield f"case{i}", scores, labels, weights, (c, k, tau, alpha)


def make_loss(smooth_topk, c, k, tau, alpha):
  """difftopk's hard (``tau = 0``) or smooth top-k SVM over ``c`` classes."""
  import torch  # pylint: disable=g-import-not-at-top

  classes = torch.arange(c)
  if tau == 0.0:
    return smooth_topk.Topk_Hard_SVM(classes, k, alpha)
  return smooth_topk.Topk_Smooth_SVM(classes, k, tau, alpha)


def central_differences(fn, x, y, weights):
  """Central differences (step ``STEP``) of ``sum_b weights_b fn(x, y)_b`` in ``x`` (float64)."""
  import torch  # pylint: disable=g-import-not-at-top

  numeric = np.zeros(tuple(x.shape))
  with torch.no_grad():
    for j in range(x.shape[1]):  # rows are independent: one column of every row at a time
      step = torch.zeros_like(x)
      step[:, j] = STEP
      up, down = fn(x + step, y).numpy(), fn(x - step, y).numpy()
      numeric[:, j] = weights * (up - down) / (2 * STEP)
  return numeric


def backward_check():
  """Runs inside the side venv: how far difftopk's custom backward pass of ``Topk_Smooth_SVM``
  lies from central differences of its own float64 forward pass, at k = 5, tau = 0.1, on
  ``BACKWARD_CHECK_BATCH`` rows of standard normal scores (gradient of the sum of the losses)."""
  import torch  # pylint: disable=g-import-not-at-top
  from difftopk import smooth_topk  # pylint: disable=g-import-not-at-top

  rng = np.random.default_rng(20220717)
  print(f"k = 5, tau = 0.1, B = {BACKWARD_CHECK_BATCH}, float64, scores ~ N(0, 1)")
  print(f"{'C':>6}{'alpha':>7}{'max |backward - differences|':>30}{'max |gradient|':>16}")
  for c, alpha in BACKWARD_CHECK:
    scores = rng.normal(size=(BACKWARD_CHECK_BATCH, c))
    labels = torch.tensor(rng.integers(0, c, size=BACKWARD_CHECK_BATCH))
    fn = make_loss(smooth_topk, c, 5, 0.1, alpha)
    x = torch.tensor(scores, dtype=torch.float64, requires_grad=True)
    fn(x.clone(), labels).sum().backward()
    numeric = central_differences(fn, x, labels, np.ones(BACKWARD_CHECK_BATCH))
    gap = np.abs(x.grad.numpy() - numeric).max()
    print(f"{c:>6}{alpha:>7}{gap:>30.2e}{np.abs(numeric).max():>16.3f}", flush=True)


def worker(out):
  """Runs inside the side venv: evaluates the reference and writes ``out``."""
  import torch  # pylint: disable=g-import-not-at-top
  from difftopk import smooth_topk  # pylint: disable=g-import-not-at-top

  arrays = {}
  for name, scores, labels, weights, (c, k, tau, alpha) in cases():
    x = torch.tensor(scores, dtype=torch.float64, requires_grad=True)
    y = torch.tensor(labels, dtype=torch.int64)
    fn = make_loss(smooth_topk, c, k, tau, alpha)
    loss = fn(x.clone(), y)
    (loss * torch.tensor(weights)).sum().backward()
    numeric = central_differences(fn, x, y, weights)
    arrays[f"{name}_scores"] = scores
    arrays[f"{name}_labels"] = labels
    arrays[f"{name}_weights"] = weights
    arrays[f"{name}_params"] = np.array([c, k, tau, alpha])
    arrays[f"{name}_loss"] = loss.detach().numpy()
    arrays[f"{name}_grad"] = numeric
    arrays[f"{name}_autograd_grad"] = x.grad.numpy()
  np.savez_compressed(out, **arrays)
  print(f"wrote {len(CASES)} cases to {out}")


def main(argv):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("venv", help="the side venv (created if it does not exist)")
  parser.add_argument("out", nargs="?", help="the .npz fixture to write")
  parser.add_argument(
    "--backward_check",
    action="store_true",
    help="instead: print how far difftopk's backward lies from central differences",
  )
  parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if not args.backward_check and not args.out:
    parser.error("`out` (the .npz fixture to write) is required without --backward_check")
  if args.worker:
    backward_check() if args.backward_check else worker(args.out)
    return
  sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
  import side_venv  # pylint: disable=g-import-not-at-top

  python = side_venv.ensure(
    args.venv, ["torch==2.13.0", "numpy"], ["difftopk==0.2.0", "diffsort==0.2.0"]
  )
  command = [python, os.path.abspath(__file__), args.venv, "--worker"]
  command += ["--backward_check"] if args.backward_check else [os.path.abspath(args.out)]
  subprocess.run(command, check=True)


if __name__ == "__main__":
  main(sys.argv[1:])
