"""Tests of the encoder registry tfrank4class.encoders.get."""

import pytest

from tfrank4class import encoders
from tfrank4class.compat import BACKEND


def test_names_and_get():
  assert encoders.names() == [
    "bert_checkpoint",
    "resnet50",
    "saved_model",
    "small_cnn",
    "transformer",
    "vgg16_cifar",
  ]
  encoder = encoders.get("small_cnn", input_shape=(8, 8, 3), filters=(2,), embedding_dim=3)
  assert encoder.output_shape == (None, 3)


@pytest.mark.tensorflow_only
def test_raw_string_encoder_by_name():
  text = encoders.get(
    "transformer",
    vocabulary=["a", "b"],
    sequence_length=4,
    embedding_dim=4,
    num_heads=1,
    num_layers=1,
    ff_dim=4,
  )
  assert text.output_shape == (None, 4)


@pytest.mark.parametrize(
  "name, kwargs",
  [
    ("transformer", {"vocabulary": ["a", "b"]}),
    ("bert_checkpoint", {"path": "/nonexistent"}),
    ("saved_model", {"path": "/nonexistent"}),
  ],
)
def test_tensorflow_encoders_name_the_backend_elsewhere(name, kwargs):
  """The raw-string and SavedModel encoders are TensorFlow's: on JAX and PyTorch asking for one
  is an ImportError naming it and the setting, before any argument is read."""
  if BACKEND == "tensorflow":
    pytest.skip("the TensorFlow backend builds them (tested in their own files)")
  with pytest.raises(ImportError, match=rf"encoders\.{name}.*KERAS_BACKEND"):
    encoders.get(name, **kwargs)


def test_unknown_name():
  with pytest.raises(
    ValueError,
    match=r"`name` must be one of \['bert_checkpoint', 'resnet50', 'saved_model', "
    r"'small_cnn', 'transformer', 'vgg16_cifar'\], got 'bert'",
  ):
    encoders.get("bert")


def test_encoders_registry_keeps_its_dict_like_use():
  from tfrank4class.encoders.small_cnn import small_cnn
  from tfrank4class.registry import Registry

  assert isinstance(encoders.ENCODERS, Registry)
  assert list(encoders.ENCODERS) == encoders.names()
  assert encoders.ENCODERS["small_cnn"] is small_cnn and "bert" not in encoders.ENCODERS
