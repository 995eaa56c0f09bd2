"""The collapse's cause, measured: how hard each loss pushes down a dominant wrong class.

The second edition saw top-k CE + concat and smooth SVM + concat rank one class first for every
input. The protocol measures, for each loss, the gradient with respect to the score of a wrong
class that dominates the list, at the score scales the records show: on the score vector
``s = scale * e_d`` (class ``d`` wrong and ``scale`` above every other class, the true class
``y`` among them at 0), :func:`dominant_gradient` is ``d loss / d s_d``. Gradient descent lowers
``s_d`` by the learning rate times it: near 0, nothing moves the dominant class down. Softmax
cross-entropy gives ``softmax(s)_d = e^scale / (e^scale + n - 1)``, close to 1 at large scales;
the losses of :data:`LOSSES` are the protocol's list (top-k CE at its frozen-feature setting with
each ``top1_mode``, the smooth SVM at each ``tau`` of its sweep).

Example:
  >>> round(dominant_gradient("softmax_loss", {}, 10, 2.0), 4)  # e^2 / (e^2 + 9)
  0.4509
"""

import numpy as np
import tensorflow as tf

from experiments import training
from experiments.third import protocol
from tfrank4class import checks

_FROZEN = {**protocol.CELLS["topk_ce_frozen"][1], "m": None, "inverse_temperature": 1.0}
#: Name -> (registry loss, arguments): the losses whose push on a dominant class is measured.
LOSSES = {
  "softmax": ("softmax_loss", {}),
  **{
    f"topk_ce top1_mode={mode}": ("topk_cross_entropy_loss", {**_FROZEN, "top1_mode": mode})
    for mode in ("sm", "smce", "sort")
  },
  **{
    f"smooth_svm k=5 tau={tau:g}": ("smooth_topk_svm_loss", {"k": 5, "alpha": 1.0, "tau": tau})
    for tau in protocol.scale_grid("svm_k5")
  },
}
#: The score scales the table shows (the second edition's collapsed cells reached 21.7 to 151
#: nats of softmax cross-entropy, that is scales of that order).
SCALES = (1.0, 3.0, 10.0, 30.0, 100.0)


def dominant_gradient(loss, kwargs, num_classes, scale, true_class=0, dominant=1):
  """``d loss / d s_dominant`` at ``s = scale * e_dominant`` with ``true_class`` the label (see
  the module docstring)."""
  num_classes = checks.check_int("num_classes", num_classes, minimum=2)
  scale = checks.check_float("scale", scale, minimum=0.0)
  if true_class == dominant or not (0 <= true_class < num_classes and 0 <= dominant < num_classes):
    raise ValueError(
      f"`true_class` ({true_class}) and `dominant` ({dominant}) must be two different classes "
      f"in [0, {num_classes})."
    )
  scores = np.zeros((1, num_classes), np.float32)
  scores[0, dominant] = scale
  scores = tf.Variable(scores)
  loss_object = training.build_loss(loss, kwargs)
  with tf.GradientTape() as tape:
    value = loss_object(tf.constant([true_class]), scores)
  return float(tape.gradient(value, scores)[0, dominant])


def gradient_table(num_classes, scales=SCALES):
  """``{loss name: [gradient at each scale]}`` for :data:`LOSSES` with ``num_classes`` classes."""
  return {
    name: [dominant_gradient(loss, kwargs, num_classes, s) for s in scales]
    for name, (loss, kwargs) in LOSSES.items()
  }


def table_lines(num_classes, scales=SCALES):
  """A Markdown table of :func:`gradient_table`."""
  lines = [
    f"| loss ({num_classes} classes) | " + " | ".join(f"scale {s:g}" for s in scales) + " |",
    "|---|" + "---|" * len(scales),
  ]
  for name, values in gradient_table(num_classes, scales).items():
    lines.append(f"| {name} | " + " | ".join(f"{v:.4g}" for v in values) + " |")
  return lines
