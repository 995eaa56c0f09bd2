"""A numpy reference for the gradients of the RaMBO losses (imported by test_rambo_base.py,
test_rambo_recall.py and test_rambo_average_precision.py; not a test module).

Written from Rolinek et al. (CVPR 2020), not from the package: the margin of Eq. 14-15, Algorithm 1
(one blackbox ranker: ``y_lambda = y + lambda * dL/drk``, ``dL/dy = -(rk(y) - rk(y_lambda)) /
lambda``) applied to ``rk(y)`` only, with ``rk(y^+)`` of Eq. 17 / 21 a constant, and ``dL/drk`` of
the losses of Eq. 20 and 22 derived by hand:

    L_rec (log)    = 1/|P| sum_{i in P} log(1 + r_i),  r_i = rk_i - rk+_i
                     dL/drk_i = 1 / (|P| (1 + r_i))
    L_rec (loglog) = 1/|P| sum_{i in P} log(1 + log(1 + r_i))
                     dL/drk_i = 1 / (|P| (1 + log(1 + r_i)) (1 + r_i))
    L_AP           = 1 - 1/|P| sum_{i in P} rk+_i / rk_i
                     dL/drk_i = rk+_i / (|P| rk_i^2)

and 0 for irrelevant items. Package conventions the reference follows: ties go to the lower index
first; items with relevance < 0 are left out of the ranking (and get no gradient); ``lambda_`` is
for ranks normalised by the list length ``n`` (the row length, padding included), i.e.
``lambda_ * n`` on integer ranks.
"""

import numpy as np


def rank_within(scores, mask):
  """Rank of every item among the items of its own group (``mask`` True / False) in its row,
  1 = highest, ties by lower index first."""
  out = np.zeros(scores.shape)
  for b in range(scores.shape[0]):
    for group in (True, False):
      idx = np.flatnonzero(mask[b] == group)
      order = np.argsort(-scores[b, idx], kind="stable")
      out[b, idx[order]] = np.arange(1, idx.size + 1)
  return out


def rank_derivative(kind, rk, rk_plus, relevant):
  """``dL/drk`` of one list's loss, every row a list (see the module docstring)."""
  count = relevant.sum(-1, keepdims=True)
  r = np.where(relevant, rk - rk_plus, 0.0)
  if kind == "log":
    per_item = 1.0 / (1.0 + r)
  elif kind == "loglog":
    per_item = 1.0 / ((1.0 + np.log1p(r)) * (1.0 + r))
  elif kind == "ap":
    per_item = rk_plus / rk**2
  else:
    raise ValueError(kind)
  return np.where(relevant, per_item, 0.0) / np.maximum(count, 1)


def list_gradient(scores, relevance, lambda_, kind, margin=0.0, weight=1.0):
  """``d(weight * sum over rows of L)/d scores`` by Algorithm 1 with rk+ constant.

  ``weight`` scales ``dL/drk`` before the blackbox step (the gradient is not linear in it).
  """
  scores = np.asarray(scores, np.float64)
  relevance = np.asarray(relevance, np.float64)
  valid, relevant = relevance >= 0, relevance > 0
  shifted = np.where(valid, scores + np.where(relevant, -margin / 2, margin / 2), 0.0)  # Eq. 14
  rk = rank_within(shifted, valid)
  rk_plus = rank_within(shifted, relevant)  # a constant: no blackbox step for it
  g = weight * rank_derivative(kind, rk, rk_plus, relevant)
  lam = lambda_ * scores.shape[1]
  perturbed = rank_within(shifted + lam * g, valid)
  return np.where(valid, -(rk - perturbed) / lam, 0.0)


def map_gradient(scores, relevance, lambda_, margin=0.0):
  """Gradient of 1 - mAP (columns are the lists; mean over the classes with a relevant item)."""
  relevance = np.asarray(relevance, np.float64)
  present = (relevance > 0).any(0).sum()
  return list_gradient(np.transpose(scores), relevance.T, lambda_, "ap", margin, 1 / present).T


def apc_gradient(scores, relevance, lambda_, margin=0.0):
  """Gradient of 1 - AP of all entries of ``scores`` as one list (Eq. 23)."""
  scores = np.asarray(scores, np.float64)
  flat = list_gradient(scores.reshape(1, -1), np.reshape(relevance, (1, -1)), lambda_, "ap", margin)
  return flat.reshape(scores.shape)
