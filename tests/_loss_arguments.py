"""Arguments the losses of the registry need on the short lists of the registry-wide tests.

The Top-K losses default to k = 5, which needs more than 5 classes; the tests that run every
registered loss (on 4 to 5 classes) build them through :func:`loss` so that a loss added later
with such a requirement is given its arguments in one place. Not a test module.
"""

from tfrank4class import losses

SHORT_LISTS = {
  "smooth_topk_svm_loss": {"k": 2},
  "soft_rank_topk_loss": {"k": 2},
  "topk_cross_entropy_loss": {"p_k": [0.5, 0.5]},
}


def loss(name, **kwargs):
  """``losses.get(name, **kwargs)`` with the arguments short lists need."""
  return losses.get(name, **{**SHORT_LISTS.get(name, {}), **kwargs})
