"""Writes the Top-K fixtures: the authors' difftopk / diffsort 0.2.0 on fixed seeded cases.

    python3 tools/topk_reference.py [--venv /tmp/tfrank4class-venv-torch] \\
        [--out tests/fixtures/topk_networks.npz]

builds (or reuses) a side venv with ``torch==2.13.0``, ``numpy`` and, without dependencies,
``difftopk==0.2.0`` and ``diffsort==0.2.0`` (:func:`side_venv.ensure`), then runs itself there
with ``--compute``. Every case stores its inputs, the reference outputs and the gradient of
``sum(output * cotangent)`` with respect to the scores for a fixed random cotangent (of the mean
loss, for the loss cases), in float64. The tests (``tests/test_sorting_networks.py``,
``test_neuralsort.py``, ``test_softsort.py``, ``test_topk_cross_entropy.py``) compare
tfrank4class against them; neither they nor CI need PyTorch.

Kinds of case (``meta`` holds one JSON object per case, the arrays are ``"<case>/<name>"``):

* ``sort``: ``diffsort.DiffSortNet`` (odd-even, bitonic; every sigmoid), sorted values and the
  permutation, some with tied scores;
* ``topk``: ``difftopk.DiffTopkNet`` (odd-even dense, bitonic dense and sparse, splitter
  selection sparse), the top-``k`` columns;
* ``neuralsort``, ``softsort``: difftopk's ``NeuralSort`` and ``SoftSort`` in the loss's
  convention (SoftSort applied to ``-x`` and transposed, as ``TopKCrossEntropyLoss`` does);
* ``loss``: ``difftopk.TopKCrossEntropyLoss`` (every method, top-1 mode, ``m``), the batch mean.

Running the authors' code in float64 needs three adaptations, none of which changes its maths:
the default dtype is float64 (their ``torch.eye`` has no dtype), the networks' matrices are cast
to float64 (``get_sorting_network`` makes float32), and ``torch.FloatTensor`` is bound to
``torch.DoubleTensor`` while NeuralSort runs (it builds float32 constants). Their sparse
execution calls ``torch_sparse.spmm`` (a compiled extension we do not install); we provide that
one function as the equivalent ``torch.sparse_coo_tensor(index, value, (m, n)) @ matrix``, which
sums duplicate entries as ``torch_sparse`` does.
"""

import argparse
import json
import os
import subprocess
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_VENV = "/tmp/tfrank4class-venv-torch"
DEFAULT_OUT = os.path.join(ROOT, "tests", "fixtures", "topk_networks.npz")
DISTRIBUTIONS = ("logistic", "logistic_phi", "gaussian", "reciprocal", "cauchy", "optimal")


def _sparse_stub(torch):
  """A ``torch_sparse`` module with the one function difftopk's sparse execution calls."""
  module = types.ModuleType("torch_sparse")

  def spmm(index, value, m, n, matrix):
    return torch.sparse_coo_tensor(index, value, (m, n)) @ matrix

  module.spmm = spmm
  return module


def _double_network(torch, network):
  """The network's matrices in float64 (index arrays and masks are left as they are)."""
  return [[t.double() if i < 4 else t for i, t in enumerate(layer)] for layer in network]


def compute(out):
  import numpy as np
  import torch

  sys.modules["torch_sparse"] = _sparse_stub(torch)
  torch.set_default_dtype(torch.float64)
  import diffsort
  import difftopk

  arrays, meta = {}, []

  def grad_of(fn, x, *cotangents):
    x = torch.tensor(x, requires_grad=True)
    outputs = fn(x)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    total = sum((o * torch.tensor(c)).sum() for o, c in zip(outputs, cotangents))
    total.backward()
    return [o.detach().numpy() for o in outputs], x.grad.numpy()

  def add(kind, config, x, outputs, grad, cotangents, **extra):
    name = f"{kind}{len(meta)}"
    meta.append(dict(config, kind=kind, name=name))
    arrays[f"{name}/x"] = x
    arrays[f"{name}/grad"] = grad
    for i, (o, c) in enumerate(zip(outputs, cotangents)):
      arrays[f"{name}/out{i}"] = o
      arrays[f"{name}/cot{i}"] = c
    for key, value in extra.items():
      arrays[f"{name}/{key}"] = value

  rng = np.random.RandomState(2022)

  def scores(b, n, ties=False):
    if ties:
      return rng.randint(0, 3, size=(b, n)).astype(np.float64)
    return rng.randn(b, n) * 1.5

  # Sorting networks: sorted values and permutation.
  for network in ("odd_even", "bitonic"):
    for n in (5, 8):
      for distribution in DISTRIBUTIONS:
        for ties in (False, True) if n == 5 else (False,):
          art = 0.5 if (distribution == "logistic_phi" and n == 8) else 0.25
          config = dict(
            network=network, n=n, distribution=distribution, steepness=3.0, art_lambda=art
          )
          net = diffsort.DiffSortNet(
            network, n, steepness=3.0, art_lambda=art, distribution=distribution
          )
          net.sorting_network = _double_network(torch, net.sorting_network)
          x = scores(3, n, ties)
          cot = [rng.randn(3, n), rng.randn(3, n, n)]
          outs, grad = grad_of(net, x, *cot)
          add("sort", dict(config, ties=ties), x, outs, grad, cot)

  # Top-k networks (difftopk), dense and sparse execution.
  topk_cases = [
    ("odd_even", False, 6, 2, "cauchy"),
    ("odd_even", False, 10, 3, "logistic_phi"),
    ("bitonic", False, 6, 2, "logistic"),
    ("bitonic", True, 6, 2, "logistic"),
    ("bitonic", True, 10, 3, "optimal"),
    ("bitonic", True, 16, 5, "cauchy"),
    ("bitonic", True, 13, 1, "gaussian"),
    ("splitter_selection", True, 10, 3, "cauchy"),
    ("splitter_selection", True, 20, 5, "reciprocal"),
    ("splitter_selection", True, 16, 1, "logistic_phi"),
  ]
  for network, sparse, n, k, distribution in topk_cases:
    config = dict(
      network=network,
      sparse=sparse,
      n=n,
      k=k,
      distribution=distribution,
      steepness=2.0,
      art_lambda=0.25,
    )
    net = difftopk.DiffTopkNet(
      network, n, k, sparse=sparse, steepness=2.0, art_lambda=0.25, distribution=distribution
    )
    net.sorting_network = _double_network(torch, net.sorting_network)
    x = scores(3, n)
    cot = [rng.randn(3, n, k)]
    outs, grad = grad_of(lambda v, net=net: net(v)[1], x, *cot)
    add("topk", config, x, outs, grad, cot)

  # NeuralSort and SoftSort in the loss's (ascending, [item, position]) convention.
  float_tensor = torch.FloatTensor
  for n, tau, ties in ((4, 1.0, False), (7, 0.3, False), (6, 0.5, True)):
    x = scores(3, n, ties)
    cot = [rng.randn(3, n, n)]
    torch.FloatTensor = torch.DoubleTensor
    try:
      outs, grad = grad_of(difftopk.NeuralSort(tau=tau), x, *cot)
    finally:
      torch.FloatTensor = float_tensor
    add("neuralsort", dict(n=n, temperature=tau, ties=ties), x, outs, grad, cot)
  for n, tau, power, hard, ties in (
    (4, 1.0, 1.0, False, False),
    (7, 0.3, 1.0, False, False),
    (6, 0.5, 2.0, False, False),
    (6, 0.5, 1.0, True, False),
    (6, 0.7, 1.0, False, True),
  ):
    soft = difftopk.SoftSort(tau=tau, hard=hard, pow=power)
    x = scores(3, n, ties)
    cot = [rng.randn(3, n, n)]
    outs, grad = grad_of(lambda v, soft=soft: soft(-v).transpose(-2, -1), x, *cot)
    add(
      "softsort", dict(n=n, temperature=tau, power=power, hard=hard, ties=ties), x, outs, grad, cot
    )

  # The loss: TopKCrossEntropyLoss, mean over the batch.
  loss_cases = [
    ("odd_even", 5, [0.5, 0.5], None, "cauchy", 2.0, "sm"),
    ("odd_even", 10, [0.25, 0.25, 0.25, 0.25], None, "logistic_phi", 1.0, "smce"),
    ("odd_even", 7, [0.2, 0.0, 0.8], None, "optimal", 4.0, "sort"),
    ("bitonic", 10, [0.5, 0.0, 0.0, 0.0, 0.5], None, "logistic", 2.0, "sm"),
    ("bitonic", 12, [0.4, 0.3, 0.3], None, "cauchy", 3.0, "sort"),
    ("bitonic", 30, [0.5, 0.0, 0.0, 0.0, 0.5], 8, "logistic_phi", 2.0, "sm"),
    ("bitonic", 40, [0.6, 0.1, 0.1, 0.2], 16, "cauchy", 2.0, "smce"),
    ("splitter_selection", 10, [0.5, 0.0, 0.5], None, "cauchy", 2.0, "sm"),
    ("splitter_selection", 50, [0.5, 0.0, 0.0, 0.0, 0.5], 16, "reciprocal", 2.0, "sm"),
    ("splitter_selection", 20, [0.3, 0.3, 0.4], None, "gaussian", 1.0, "sort"),
    ("neuralsort", 8, [0.5, 0.0, 0.5], None, None, 2.0, "sm"),
    ("neuralsort", 20, [0.5, 0.5], 6, None, 1.0, "smce"),
    ("softsort", 8, [0.5, 0.0, 0.5], None, None, 2.0, "sm"),
    ("softsort", 9, [0.3, 0.7], None, None, 0.5, "sort"),
    ("softsort", 25, [0.5, 0.0, 0.0, 0.0, 0.5], 10, None, 2.0, "smce"),
  ]
  for method, n, p_k, m, distribution, inverse_temperature, top1_mode in loss_cases:
    config = dict(
      method=method,
      n=n,
      p_k=p_k,
      m=m,
      distribution=distribution,
      inverse_temperature=inverse_temperature,
      art_lambda=0.25,
      top1_mode=top1_mode,
    )
    loss = difftopk.TopKCrossEntropyLoss(
      method,
      inverse_temperature,
      p_k,
      n,
      m=m,
      distribution=distribution,
      art_lambda=0.25,
      top1_mode=top1_mode,
    )
    if hasattr(loss, "top_k_net"):
      loss.top_k_net.sorting_network = _double_network(torch, loss.top_k_net.sorting_network)
    x = scores(4, n)
    labels = rng.randint(0, n, size=4)
    torch.FloatTensor = torch.DoubleTensor
    try:
      target = torch.tensor(labels)
      outs, grad = grad_of(lambda v, f=loss, t=target: f(v, t), x, np.array(1.0))
    finally:
      torch.FloatTensor = float_tensor
    add("loss", config, x, outs, grad, [np.array(1.0)], labels=labels)

  arrays["meta"] = np.array(json.dumps(meta))
  np.savez_compressed(out, **arrays)
  print(f"wrote {len(meta)} cases to {out} ({os.path.getsize(out)} bytes)")


def main(argv):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--venv", default=DEFAULT_VENV, help="the side venv (built if missing)")
  parser.add_argument("--out", default=DEFAULT_OUT, help="the .npz file to write")
  parser.add_argument("--compute", action="store_true", help="(internal) run inside the venv")
  args = parser.parse_args(argv)
  if args.compute:
    compute(args.out)
    return
  sys.path.insert(0, HERE)
  import side_venv

  python = side_venv.ensure(
    args.venv, ["torch==2.13.0", "numpy"], ["difftopk==0.2.0", "diffsort==0.2.0"]
  )
  subprocess.run([python, os.path.abspath(__file__), "--compute", "--out", args.out], check=True)


if __name__ == "__main__":
  main(sys.argv[1:])
