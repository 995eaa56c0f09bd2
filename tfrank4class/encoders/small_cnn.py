"""A small CNN for quick runs and tests.

for each width f in ``filters``: conv3x3(f) -> ReLU -> 2x2 max pool;
then global average pooling -> Dense(embedding_dim, ReLU)
"""

from tfrank4class import checks
from tfrank4class.compat import keras
from tfrank4class.encoders import _common


def small_cnn(
  input_shape=(32, 32, 3),
  filters=(32, 64),
  embedding_dim=128,
  weights_path=None,
  name="small_cnn_encoder",
):
  """Builds a small CNN encoder ``[B, H, W, 3] -> [B, embedding_dim]``.

  Args:
    input_shape: ``(H, W, 3)``, ``H, W >= 2 ** len(filters)``.
    filters: conv widths, one conv + pooling stage each.
    embedding_dim: output size.
    weights_path: optional local weights file of the same architecture.
    name: model name.

  Example:
    >>> small_cnn(input_shape=(16, 16, 3), filters=(4,), embedding_dim=8).output_shape
    (None, 8)
  """
  filters = _units("filters", filters)
  input_shape = _common.check_image_shape(input_shape, minimum=2 ** len(filters))
  embedding_dim = checks.check_int("embedding_dim", embedding_dim, minimum=1)
  path = _common.check_weights(None, weights_path)
  images = keras.Input(shape=input_shape, dtype="float32", name="images")
  x = images
  for i, f in enumerate(filters):
    x = keras.layers.Conv2D(f, 3, padding="same", activation="relu", name=f"conv{i + 1}")(x)
    x = keras.layers.MaxPooling2D(2, name=f"pool{i + 1}")(x)
  x = keras.layers.GlobalAveragePooling2D(name="gap")(x)
  x = keras.layers.Dense(embedding_dim, activation="relu", name="embedding")(x)
  model = keras.Model(images, x, name=name)
  if path is not None:
    model.load_weights(path)
  return model


def _units(name, units):
  try:
    units = tuple(units)
  except TypeError:
    raise ValueError(
      f"`{name}` must be a non-empty sequence of positive integers, got {units!r}."
    ) from None
  if not units or any(isinstance(u, bool) or not isinstance(u, int) or u < 1 for u in units):
    raise ValueError(f"`{name}` must be a non-empty sequence of positive integers, got {units!r}.")
  return units
