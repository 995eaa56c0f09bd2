"""Tests of tfrank4class.heads.class_encoder."""

import numpy as np
import pytest
from backend_testing import numpy

from tfrank4class.compat import keras, ops
from tfrank4class.heads.class_encoder import ClassEncoder


def test_table_is_a_one_hot_lookup():
  enc = ClassEncoder(num_classes=4, embedding_dim=3)
  table = np.arange(12, dtype=np.float32).reshape(4, 3)
  enc.build(None)
  enc.table.assign(table)
  # c_i = W^T e_i: multiplying the one-hot matrix by the table picks rows.
  ids = np.array([2, 0, 3])
  one_hot = np.eye(4, dtype=np.float32)[ids]
  np.testing.assert_array_equal(numpy(enc(ids)), one_hot @ table)
  np.testing.assert_array_equal(numpy(enc.all_embeddings()), table)
  assert tuple(enc(np.array([[1, 2]])).shape) == (1, 2, 3)
  assert [v.name.split("/")[-1].split(":")[0] for v in enc.trainable_variables] == ["table"]


def test_class_features_mlp_matches_numpy():
  rng = np.random.default_rng(0)
  feats = rng.normal(size=(5, 6)).astype(np.float32)
  enc = ClassEncoder(5, 3, class_features=feats, hidden_units=(4,), activation="tanh")
  out = numpy(enc.all_embeddings())
  (w1, b1), (w2, b2) = [(numpy(dense.kernel), numpy(dense.bias)) for dense in enc._mlp]
  np.testing.assert_allclose(out, np.tanh(feats @ w1 + b1) @ w2 + b2, rtol=1e-5, atol=1e-6)
  # The features are stored but not trained by default.
  assert len(enc.non_trainable_variables) == 1
  np.testing.assert_array_equal(numpy(enc.non_trainable_variables[0]), feats)
  assert (
    ClassEncoder(5, 3, class_features=feats, train_class_features=True).all_embeddings() is not None
  )


def test_class_features_from_a_tensor_and_linear_projection():
  feats = ops.convert_to_tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
  enc = ClassEncoder(3, 2, class_features=feats)
  enc.build(None)
  w = enc._mlp[0]
  w.kernel.assign([[1.0, 2.0], [3.0, 4.0]])
  w.bias.assign([0.5, -0.5])
  # Rows: [1,0]W+b, [0,1]W+b, [1,1]W+b
  np.testing.assert_allclose(
    numpy(enc(np.array([0, 1, 2]))), [[1.5, 1.5], [3.5, 3.5], [4.5, 5.5]], rtol=1e-6
  )


def test_config_round_trip_restores_features_from_weights():
  feats = np.random.default_rng(1).normal(size=(3, 2)).astype(np.float32)
  enc = ClassEncoder(3, 4, class_features=feats, hidden_units=(5,))
  out = numpy(enc.all_embeddings())
  config = enc.get_config()
  assert config["class_feature_dim"] == 2 and "class_features" not in config
  clone = ClassEncoder.from_config(config)
  clone.build(None)
  clone.set_weights(enc.get_weights())
  np.testing.assert_allclose(numpy(clone.all_embeddings()), out, rtol=1e-6)


def test_bias_initializer_makes_a_dense_like_table():
  """Kernel part drawn on Dense's [e - 1, C] shape (transposed), last column from the bias init."""
  enc = ClassEncoder(
    3,
    5,
    embeddings_initializer=keras.initializers.GlorotUniform(4),
    bias_initializer=keras.initializers.Constant(0.25),
  )
  enc.build(None)
  table = numpy(enc.table)
  dense_kernel = numpy(keras.initializers.GlorotUniform(4)((4, 3)))  # Dense(3), 4 inputs
  np.testing.assert_array_equal(table[:, :4], dense_kernel.T)
  np.testing.assert_array_equal(table[:, 4], [0.25] * 3)
  # Glorot's bound uses Dense's fans: sqrt(6 / (4 + 3)), not the table's sqrt(6 / (3 + 5)).
  assert np.abs(table[:, :4]).max() <= np.sqrt(6 / 7)
  config = enc.get_config()
  assert config["bias_initializer"]["class_name"] == "Constant"
  del config["bias_initializer"]  # configs saved before the argument existed still load
  assert ClassEncoder.from_config(config).bias_initializer is None


def test_bad_input():
  with pytest.raises(ValueError, match=r"`num_classes` must be an integer >= 2, got 1"):
    ClassEncoder(1, 3)
  with pytest.raises(ValueError, match=r"`embedding_dim` must be an integer >= 1, got 0"):
    ClassEncoder(3, 0)
  with pytest.raises(
    ValueError,
    match=r"`class_features` must have first dimension "
    r"num_classes=3 \(one row per class\), got shape \(4, 2\)",
  ):
    ClassEncoder(3, 2, class_features=np.zeros((4, 2)))
  with pytest.raises(
    ValueError,
    match=r"`class_features` must have shape \[num_classes, p\], "
    r"got shape \(3,\)",
  ):
    ClassEncoder(3, 2, class_features=np.zeros(3))
  with pytest.raises(ValueError, match=r"`class_features` must be finite"):
    ClassEncoder(2, 2, class_features=[[1.0], [np.nan]])
  with pytest.raises(ValueError, match=r"`class_features` must be a numeric matrix"):
    ClassEncoder(2, 2, class_features=[["a"], ["b"]])
  with pytest.raises(TypeError, match=r"`class_ids` must be an integer tensor, got dtype float32"):
    ClassEncoder(3, 2)(np.array([0.0], np.float32))
  with pytest.raises(
    ValueError,
    match=r"`bias_initializer` applies to the class table only, got "
    r"'zeros' together with class features",
  ):
    ClassEncoder(2, 2, class_features=[[1.0], [2.0]], bias_initializer="zeros")
  with pytest.raises(
    ValueError,
    match=r"`bias_initializer` needs embedding_dim >= 2 \(kernel rows "
    r"plus the bias\), got embedding_dim=1",
  ):
    ClassEncoder(2, 1, bias_initializer="zeros")
