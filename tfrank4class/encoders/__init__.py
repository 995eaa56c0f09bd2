"""Instance encoders: images or raw text to instance embeddings ``[B, d]``.

``get(name, **kwargs)`` builds one by name: ``"resnet50"``, ``"vgg16_cifar"``, ``"small_cnn"``,
``"transformer"`` (a small Transformer over ``TextVectorization`` tokens, raw strings in),
``"saved_model"`` (a local BERT/ELECTRA-style SavedModel) and ``"bert_checkpoint"`` (a local
Hugging Face BERT checkpoint folder, e.g. all-MiniLM-L6-v2). Every encoder is a functional
``keras.Model`` that round-trips through ``model.save`` / ``keras.models.load_model``.

Backends. The image encoders and the layers over token ids (:class:`BertEncoder`,
:class:`TransformerTextEncoder`) run on every Keras 3 backend. The raw-string encoders
(``"transformer"``, ``"bert_checkpoint"``: string tensors, ``TextVectorization``, WordPiece) and
``"saved_model"`` (a TensorFlow SavedModel; :mod:`~tfrank4class.encoders.saved_model_text` is
imported on the TensorFlow backend only) are TensorFlow's by nature: on JAX and PyTorch they
raise ``ImportError`` (:func:`tfrank4class.compat.require_tensorflow_backend`).
"""

from tfrank4class import compat
from tfrank4class.encoders.huggingface_bert import BertEncoder, bert_checkpoint
from tfrank4class.encoders.resnet import resnet50
from tfrank4class.encoders.small_cnn import small_cnn
from tfrank4class.encoders.text_transformer import TransformerTextEncoder, transformer
from tfrank4class.encoders.vgg import vgg16_cifar
from tfrank4class.registry import Registry

__all__ = [
  "bert_checkpoint",
  "BertEncoder",
  "ENCODERS",
  "get",
  "names",
  "resnet50",
  "saved_model",
  "small_cnn",
  "transformer",
  "TransformerTextEncoder",
  "vgg16_cifar",
]

if compat.BACKEND == "tensorflow":
  from tfrank4class.encoders.saved_model_text import SavedModelEncoder, saved_model

  __all__ += ["SavedModelEncoder"]
else:

  def saved_model(path, **kwargs):
    """``"saved_model"`` is TensorFlow's: on this backend it raises ``ImportError``."""
    del path, kwargs
    compat.require_tensorflow_backend("tfrank4class.encoders.saved_model (a SavedModel)")


#: The encoders by name (``ENCODERS["resnet50"]`` is the builder; :func:`get` calls it).
ENCODERS = Registry("encoder")
ENCODERS.add("resnet50", resnet50)
ENCODERS.add("vgg16_cifar", vgg16_cifar)
ENCODERS.add("small_cnn", small_cnn)
ENCODERS.add("transformer", transformer)
ENCODERS.add("saved_model", saved_model)
ENCODERS.add("bert_checkpoint", bert_checkpoint)


def names():
  """All encoder names :func:`get` accepts, sorted."""
  return list(ENCODERS.names())


def get(name, **kwargs):
  """Builds the encoder ``name`` with ``kwargs``.

  Example:
    >>> get("small_cnn", input_shape=(8, 8, 3), filters=(4,), embedding_dim=6).output_shape
    (None, 6)
  """
  return ENCODERS.get(name, **kwargs)
