"""VGG16 for 32x32 CIFAR images (Simonyan & Zisserman, ICLR 2015; the CIFAR variant with batch
normalisation of Liu & Deng, ACPR 2015).

    13 conv3x3 layers [64, 64, M, 128, 128, M, 256 x3, M, 512 x3, M, 512 x3, M], each
    conv -> BN -> ReLU, M = 2x2 max pooling, then flatten (1 x 1 x 512) -> Dense(embedding_dim)

Float images ``[B, 32, 32, 3]`` in, ``[B, embedding_dim]`` out.
"""

from tfrank4class import checks
from tfrank4class.compat import keras
from tfrank4class.encoders import _common

#: Conv widths of VGG16; "M" is a 2x2 max pooling.
VGG16_LAYERS = (
  64,
  64,
  "M",
  128,
  128,
  "M",
  256,
  256,
  256,
  "M",
  512,
  512,
  512,
  "M",
  512,
  512,
  512,
  "M",
)


def _conv_blocks(x, batch_norm, width_multiplier):
  """VGG16's thirteen 3x3 convolutions (each with batch norm and ReLU) and five 2x2 poolings."""
  block, conv = 1, 1
  for spec in VGG16_LAYERS:
    if spec == "M":
      x = keras.layers.MaxPooling2D(2, name=f"block{block}_pool")(x)
      block, conv = block + 1, 1
      continue
    filters = max(1, int(round(spec * width_multiplier)))
    x = keras.layers.Conv2D(
      filters, 3, padding="same", use_bias=not batch_norm, name=f"block{block}_conv{conv}"
    )(x)
    if batch_norm:
      x = keras.layers.BatchNormalization(name=f"block{block}_bn{conv}")(x)
    x = keras.layers.ReLU(name=f"block{block}_relu{conv}")(x)
    conv += 1
  return x


def vgg16_cifar(
  input_shape=(32, 32, 3),
  embedding_dim=512,
  batch_norm=True,
  dropout=0.0,
  width_multiplier=1.0,
  weights=None,
  weights_path=None,
  name="vgg16_cifar_encoder",
):
  """Builds the CIFAR VGG16 encoder ``[B, H, W, 3] -> [B, embedding_dim]``.

  Args:
    input_shape: ``(H, W, 3)``; ``H`` and ``W`` must be multiples of 32 (five 2x2 poolings).
    embedding_dim: size of the final (ReLU) fully connected layer, 512 in the CIFAR variant.
    batch_norm: batch normalisation after each convolution.
    dropout: dropout rate before the final layer, in ``[0, 1)``.
    width_multiplier: scales every conv width (``> 0``); 1.0 is VGG16, smaller values give a
      quicker model with the same depth.
    weights: must be ``None`` (no downloads).
    weights_path: optional local weights file (``model.save_weights`` of the same architecture).
    name: model name.

  Example:
    >>> vgg16_cifar(width_multiplier=0.125, embedding_dim=32).output_shape
    (None, 32)
  """
  input_shape = _common.check_image_shape(input_shape, minimum=32)
  if input_shape[0] % 32 or input_shape[1] % 32:
    raise ValueError(
      f"`input_shape` must have height and width divisible by 32, got {input_shape!r}."
    )
  path = _common.check_weights(weights, weights_path)
  embedding_dim = checks.check_int("embedding_dim", embedding_dim, minimum=1)
  dropout = checks.check_float("dropout", dropout, minimum=0.0)
  if dropout >= 1.0:
    raise ValueError(f"`dropout` must be in [0, 1), got {dropout!r}.")
  width_multiplier = checks.check_float(
    "width_multiplier", width_multiplier, minimum=0.0, strict=True
  )
  images = keras.Input(shape=input_shape, dtype="float32", name="images")
  x = _conv_blocks(images, batch_norm, width_multiplier)
  x = keras.layers.GlobalAveragePooling2D(name="pool")(x)  # 1x1 at 32x32: a flatten
  if dropout:
    x = keras.layers.Dropout(dropout, name="dropout")(x)
  x = keras.layers.Dense(embedding_dim, activation="relu", name="embedding")(x)
  model = keras.Model(images, x, name=name)
  if path is not None:
    try:
      model.load_weights(path)
    except (ValueError, OSError) as e:
      raise ValueError(
        f"Could not load VGG16-CIFAR weights from weights_path={path!r}: {e}"
      ) from None
  return model
