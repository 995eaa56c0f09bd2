"""The third edition's label noise: a training label replaced, with probability ``p``, by a class
drawn within its group (Berrada et al.'s rule) or among all classes (the contrast).

:func:`group_noise`: each training row, independently with probability ``p``, gets a class drawn
uniformly from its true class's group, the true class included (so the effective flip rate is
``p (g - 1) / g`` for a group of ``g``); a class in no group, or alone in its group, never changes.
:func:`uniform_noise` is the same with one group of every class. Both draw with
``numpy.random.default_rng(seed)`` (noise seed 0 in the protocol): the same labels on every call.

Example:
  >>> y = np.repeat(np.arange(4), 2500)
  >>> noisy = group_noise(y, 0.5, [[0, 1], [2, 3]])
  >>> bool(np.all((noisy < 2) == (y < 2)))  # a label stays in its group
  True
  >>> round(flip_rate(y, noisy), 2)  # about p (g - 1) / g = 0.25
  0.24
"""

import numpy as np

from tfrank4class import checks


def _check(labels, p, seed):
  labels = np.asarray(labels)
  if labels.ndim != 1 or not np.issubdtype(labels.dtype, np.integer):
    raise ValueError(
      f"`labels` must be integer class ids of shape [N], got dtype {labels.dtype} and shape "
      f"{labels.shape}."
    )
  p = checks.check_float("p", p)
  if not 0.0 <= p <= 1.0:
    raise ValueError(f"`p` must be a probability in [0, 1], got {p!r}.")
  return labels, p, checks.check_int("seed", seed, minimum=0)


def group_noise(labels, p, groups, seed=0):
  """``labels`` (int ``[N]``) with each row replaced, with probability ``p``, by a class drawn
  uniformly from its group in ``groups`` (lists of class ids, disjoint), itself included.

  The draw: one uniform number per row (replaced when below ``p``), then one uniform choice per
  replaced row, in row order, from ``numpy.random.default_rng(seed)``.
  """
  labels, p, seed = _check(labels, p, seed)
  members = {}
  for i, group in enumerate(groups):
    for c in group:
      if c in members:
        raise ValueError(f"`groups`: class {c} is in two groups ({members[c]} and {i}).")
      members[c] = i
  rng = np.random.default_rng(seed)
  replaced = np.flatnonzero(rng.random(len(labels)) < p)
  picks = rng.random(len(replaced))
  noisy = labels.copy()
  for row, u in zip(replaced, picks):
    group = members.get(int(labels[row]))
    if group is not None:
      options = groups[group]
      noisy[row] = options[min(int(u * len(options)), len(options) - 1)]
  return noisy


def uniform_noise(labels, p, num_classes, seed=0):
  """:func:`group_noise` with one group of all ``num_classes`` classes."""
  num_classes = checks.check_int("num_classes", num_classes, minimum=2)
  return group_noise(labels, p, [list(range(num_classes))], seed)


def flip_rate(labels, noisy):
  """The share of rows whose label changed."""
  labels, noisy = np.asarray(labels), np.asarray(noisy)
  if labels.shape != noisy.shape:
    raise ValueError(f"`labels` {labels.shape} and `noisy` {noisy.shape} must have one shape.")
  return float(np.mean(labels != noisy)) if len(labels) else 0.0
