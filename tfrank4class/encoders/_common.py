"""Helpers shared by the encoders: argument checks."""

import os

from tfrank4class import checks


def check_image_shape(input_shape, minimum=1):
  """Returns ``input_shape`` as a tuple ``(H, W, 3)`` of ints ``>= minimum``, else raises."""
  try:
    shape = tuple(input_shape)
  except TypeError:
    raise ValueError(f"`input_shape` must be (height, width, 3), got {input_shape!r}.") from None
  if len(shape) != 3 or shape[2] != 3:
    raise ValueError(f"`input_shape` must be (height, width, 3), got {input_shape!r}.")
  for side in shape[:2]:
    checks.check_int("input_shape", side, minimum=minimum)
  return tuple(int(s) for s in shape)


def check_weights(weights, weights_path):
  """Refuses downloads: ``weights`` must be None; ``weights_path`` must be an existing local file.

  Returns the local path (or None).
  """
  if weights is not None:
    raise ValueError(
      f"`weights` must be None: tfrank4class never downloads weights, got weights={weights!r}. "
      "To start from pretrained weights, download the .h5 file yourself and pass its local "
      "path as `weights_path=...` (for ResNet50, the 'notop' file of keras.applications)."
    )
  if weights_path is None:
    return None
  path = os.fspath(weights_path)
  if not os.path.isfile(path):
    raise ValueError(f"`weights_path` must be an existing local weights file, got {path!r}.")
  return path


def check_units_or_none(name, units):
  return checks.check_int(name, units, minimum=1, allow_none=True)
