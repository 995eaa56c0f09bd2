"""ResNet50 image encoder (He et al., CVPR 2016) from ``keras.applications``.

    h = W_p GAP(ResNet50_conv(x)) + b_p      (projection only with ``embedding_dim``)

Float images ``[B, H, W, 3]`` in, instance embeddings ``[B, 2048]`` (or ``[B, embedding_dim]``)
out. Normalisation belongs to the data pipeline. Weights are random by default; pretrained weights
come only from a local file (``weights_path``), never from the network.
"""

from tfrank4class.compat import keras
from tfrank4class.encoders import _common


def resnet50(
  input_shape=(224, 224, 3),
  weights=None,
  weights_path=None,
  pooling="avg",
  embedding_dim=None,
  name="resnet50_encoder",
):
  """Builds a ResNet50 encoder model ``[B, H, W, 3] -> [B, d]``.

  Args:
    input_shape: ``(H, W, 3)`` with ``H, W >= 32`` (the Keras application's minimum).
    weights: must be ``None``; ``"imagenet"`` is refused (no downloads) -- pass a local file as
      ``weights_path`` instead.
    weights_path: optional path of a local ``.h5`` weights file for the convolutional base
      (``include_top=False``), e.g. Keras' ``resnet50_weights_tf_dim_ordering_tf_kernels_notop.h5``.
    pooling: ``"avg"`` or ``"max"`` global pooling of the last feature map.
    embedding_dim: if set, a linear projection to this size follows the pooling.
    name: model name.

  Returns:
    A functional ``keras.Model``.

  Example:
    >>> enc = resnet50(input_shape=(32, 32, 3))
    >>> enc.output_shape
    (None, 2048)
  """
  input_shape = _common.check_image_shape(input_shape, minimum=32)
  path = _common.check_weights(weights, weights_path)
  if pooling not in ("avg", "max"):
    raise ValueError(f"`pooling` must be one of ['avg', 'max'], got {pooling!r}.")
  embedding_dim = _common.check_units_or_none("embedding_dim", embedding_dim)
  base = keras.applications.ResNet50(
    include_top=False, weights=None, input_shape=input_shape, pooling=pooling
  )
  if path is not None:
    try:
      base.load_weights(path)
    except (ValueError, OSError) as e:
      raise ValueError(
        f"Could not load ResNet50 (include_top=False) weights from weights_path={path!r}: {e}"
      ) from None
  images = keras.Input(shape=input_shape, dtype="float32", name="images")
  x = base(images)
  if embedding_dim is not None:
    x = keras.layers.Dense(embedding_dim, name="projection")(x)
  return keras.Model(images, x, name=name)
