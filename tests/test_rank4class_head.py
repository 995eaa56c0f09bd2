"""Tests of tfrank4class.heads.rank4class_head."""

import numpy as np
import pytest
from backend_testing import numpy

from tfrank4class import compat, losses
from tfrank4class.compat import BACKEND, keras
from tfrank4class.heads import Rank4ClassHead

INTERACTIONS = ["dot", "latent_cross", "concat"]


def test_dot_head_equals_dense_layer_sec_3_2():
  """Rank4Class Sec. 3.2: Dense(C) is a dot-product head over c_i = [W_{:,i}; b_i]."""
  rng = np.random.default_rng(0)
  d, num_classes = 6, 5
  h = rng.normal(size=(4, d)).astype(np.float32)
  dense = keras.layers.Dense(num_classes)
  dense(h)
  kernel, bias = rng.normal(size=(d, num_classes)), rng.normal(size=num_classes)
  dense.set_weights([kernel, bias])
  head = Rank4ClassHead(num_classes, interaction="dot")
  head(h)
  # Independently of set_dense_weights: write the table [kernel; bias]^T by hand.
  head.class_encoder.table.assign(np.vstack([kernel, bias[None, :]]).T)
  expected = h.astype(np.float64) @ kernel + bias
  np.testing.assert_allclose(numpy(head(h)), expected, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(numpy(head(h)), numpy(dense(h)), rtol=1e-5, atol=1e-5)
  other = Rank4ClassHead(num_classes)
  other(h)
  other.set_dense_weights(kernel, bias)
  np.testing.assert_allclose(numpy(other(h)), expected, rtol=1e-5, atol=1e-5)
  no_bias = Rank4ClassHead(num_classes, use_bias=False)
  no_bias(h)
  no_bias.set_dense_weights(kernel)
  np.testing.assert_allclose(numpy(no_bias(h)), h @ kernel, rtol=1e-5, atol=1e-5)


def test_dot_head_equals_dense_layer_at_initialisation():
  """Same seeded kernel initializer, no weights set: same kernel, zero bias, same output."""
  rng = np.random.default_rng(7)
  d, num_classes = 6, 5
  h = rng.normal(size=(4, d)).astype(np.float32)
  dense = keras.layers.Dense(num_classes, kernel_initializer=keras.initializers.HeNormal(3))
  head = Rank4ClassHead(num_classes, embeddings_initializer=keras.initializers.HeNormal(3))
  np.testing.assert_allclose(numpy(head(h)), numpy(dense(h)), rtol=1e-6, atol=1e-6)
  table = numpy(head.class_encoder.table)
  np.testing.assert_array_equal(table[:, :d].T, numpy(dense.kernel))
  np.testing.assert_array_equal(table[:, d], np.zeros(num_classes))
  # Another bias initializer reaches the bias column; other heads keep theirs.
  ones = Rank4ClassHead(num_classes, bias_initializer="ones")
  ones(h)
  np.testing.assert_array_equal(numpy(ones.class_encoder.table)[:, d], np.ones(num_classes))
  assert ones.get_config()["bias_initializer"]["class_name"] == "Ones"
  no_bias = Rank4ClassHead(num_classes, use_bias=False)
  no_bias(h)
  assert no_bias.class_encoder.bias_initializer is None


def test_config_saved_before_bias_initializer_still_loads(tmp_path):
  """A head config without `bias_initializer` (saved before it existed) loads; weights come back."""
  rng = np.random.default_rng(8)
  head = Rank4ClassHead(4)
  x = rng.normal(size=(2, 3)).astype(np.float32)
  head(x)
  head.class_encoder.table.assign(rng.normal(size=(4, 4)))
  config = head.get_config()
  del config["bias_initializer"]
  clone = Rank4ClassHead.from_config(config)
  clone(x)
  clone.set_weights(head.get_weights())
  np.testing.assert_allclose(numpy(clone(x)), numpy(head(x)), rtol=1e-6)
  assert clone.get_config()["bias_initializer"]["class_name"] == "Zeros"


@pytest.mark.parametrize(
  "kwargs",
  [
    {"interaction": "dot"},
    {"interaction": "dot", "use_bias": False},
    {"interaction": "dot", "class_features": np.eye(4), "class_feature_units": (3,)},
    {"interaction": "latent_cross", "hidden_units": (8,)},
    {"interaction": "latent_cross", "hidden_units": (8,), "class_chunk_size": 3},
    {"interaction": "concat", "hidden_units": (8, 8), "class_chunk_size": 3},
    {"interaction": "concat", "hidden_units": ()},
  ],
  ids=[
    "dot",
    "dot_no_bias",
    "dot_features",
    "latent_cross",
    "latent_cross_chunked",
    "concat_chunked",
    "concat_linear",
  ],
)
def test_trains_under_mixed_float16(kwargs):
  """float16 compute, float32 variables: scores in float16, one finite training step."""
  keras.utils.set_random_seed(0)
  rng = np.random.default_rng(9)
  x = rng.normal(size=(8, 6)).astype(np.float32)
  previous = keras.mixed_precision.global_policy()
  keras.mixed_precision.set_global_policy("mixed_float16")
  try:
    head = Rank4ClassHead(4, **kwargs)
  finally:
    keras.mixed_precision.set_global_policy(previous)
  model = _model(head, 6)
  assert _dtype_name(model.outputs[0].dtype) == "float16"
  assert all(_dtype_name(w.dtype) == "float32" for w in head.weights)
  model.compile(optimizer=keras.optimizers.Adam(0.01), loss=losses.get("softmax_loss"))
  assert np.isfinite(model.train_on_batch(x, rng.integers(0, 4, size=8)))


def test_class_embedding_sizes():
  h = np.ones((2, 3), np.float32)
  sizes = {}
  for name, kwargs in [
    ("dot", {}),
    ("dot", {"use_bias": False}),
    ("latent_cross", {}),
    ("concat", {}),
    ("concat", {"class_embedding_dim": 7}),
  ]:
    head = Rank4ClassHead(4, interaction=name, hidden_units=(2,), **kwargs)
    assert tuple(head(h).shape) == (2, 4)
    sizes[(name, tuple(kwargs.items()))] = head.class_encoder.all_embeddings().shape[1]
  assert list(sizes.values()) == [4, 3, 3, 3, 7]


def test_class_features_head_matches_numpy():
  rng = np.random.default_rng(2)
  feats = rng.normal(size=(4, 5)).astype(np.float32)
  h = rng.normal(size=(3, 2)).astype(np.float32)
  head = Rank4ClassHead(4, interaction="dot", class_features=feats)
  out = numpy(head(h))
  proj = head.class_encoder._mlp[0]
  c = feats @ numpy(proj.kernel) + numpy(proj.bias)  # [C, d + 1]
  np.testing.assert_allclose(out, np.hstack([h, np.ones((3, 1))]) @ c.T, rtol=1e-5, atol=1e-5)


def _model(head, d):
  return keras.Sequential([keras.Input((d,)), head])


def _dtype_name(dtype):
  """A dtype's name: Keras 3 spells dtypes as strings, tf-keras as ``tf.DType``."""
  return getattr(dtype, "name", dtype)


@pytest.mark.parametrize("interaction", INTERACTIONS)
@pytest.mark.parametrize("with_features", [False, True])
def test_keras_and_savedmodel_round_trip(tmp_path, interaction, with_features):
  rng = np.random.default_rng(3)
  feats = rng.normal(size=(4, 3)).astype(np.float32) if with_features else None
  head = Rank4ClassHead(
    4,
    interaction=interaction,
    hidden_units=(5, 5),
    class_features=feats,
    class_feature_units=(2,),
    class_chunk_size=3,
  )
  model = _model(head, 6)
  x = rng.normal(size=(2, 6)).astype(np.float32)
  expected = numpy(model(x))
  model.save(tmp_path / "m.keras")
  loaded = keras.models.load_model(tmp_path / "m.keras")
  np.testing.assert_allclose(numpy(loaded(x)), expected, rtol=1e-6)
  assert loaded.layers[-1].get_config() == head.get_config()
  if with_features:  # features come back from the weights, not the config
    np.testing.assert_array_equal(numpy(loaded.layers[-1].class_encoder.class_features), feats)


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("interaction, with_features", [("dot", False), ("concat", True)])
def test_savedmodel_round_trip(tmp_path, interaction, with_features):
  import tensorflow as tf  # noqa: PLC0415

  rng = np.random.default_rng(3)
  feats = rng.normal(size=(4, 3)).astype(np.float32) if with_features else None
  head = Rank4ClassHead(
    4, interaction=interaction, hidden_units=(5, 5), class_features=feats, class_chunk_size=3
  )
  model = _model(head, 6)
  x = rng.normal(size=(2, 6)).astype(np.float32)
  expected = numpy(model(x))
  if compat.KERAS_3:  # Keras 3 writes SavedModels for serving only, with `export`
    model.export(str(tmp_path / "sm"), verbose=False)
    exported = tf.saved_model.load(str(tmp_path / "sm"))  # keep it alive while serving
    served = exported.serve(tf.constant(x))
  else:
    model.save(tmp_path / "sm")
    served = keras.models.load_model(tmp_path / "sm")(x)
  np.testing.assert_allclose(numpy(served), expected, rtol=1e-6)


def test_get_config_round_trip():
  head = Rank4ClassHead(
    3,
    interaction="concat",
    hidden_units=(4, 2),
    activation="tanh",
    class_embedding_dim=5,
    class_chunk_size=2,
  )
  x = np.random.default_rng(1).normal(size=(2, 4)).astype(np.float32)
  out = numpy(head(x))
  clone = Rank4ClassHead.from_config(head.get_config())
  clone(x)
  clone.set_weights(head.get_weights())
  np.testing.assert_allclose(numpy(clone(x)), out, rtol=1e-6)


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("interaction", INTERACTIONS)
def test_trains_under_mirrored_strategy(mirrored_strategy, interaction):
  keras.utils.set_random_seed(0)  # deterministic initial weights
  rng = np.random.default_rng(4)
  x = rng.normal(size=(32, 6)).astype(np.float32)
  y = rng.integers(0, 4, size=32)
  assert mirrored_strategy.num_replicas_in_sync == 2
  with mirrored_strategy.scope():
    model = _model(
      Rank4ClassHead(4, interaction=interaction, hidden_units=(8, 8), class_chunk_size=3), 6
    )
    model.compile(optimizer=keras.optimizers.Adam(0.05), loss=losses.get("softmax_loss"))
  history = model.fit(x, y, batch_size=16, epochs=4, verbose=0).history["loss"]
  assert np.all(np.isfinite(history)) and history[-1] < history[0]


def test_trains_with_jit_compile():
  if BACKEND == "torch":
    pytest.skip("jit_compile is torch.compile on PyTorch: it needs a C++ toolchain at run time")
  keras.utils.set_random_seed(0)  # deterministic initial weights
  rng = np.random.default_rng(5)
  x = rng.normal(size=(16, 4)).astype(np.float32)
  y = rng.integers(0, 3, size=16)
  model = _model(
    Rank4ClassHead(3, interaction="latent_cross", hidden_units=(8,), class_chunk_size=2), 4
  )
  model.compile(
    optimizer=keras.optimizers.Adam(0.05), loss=losses.get("approx_ndcg_loss"), jit_compile=True
  )
  history = model.fit(x, y, batch_size=8, epochs=4, verbose=0).history["loss"]
  assert np.all(np.isfinite(history)) and history[-1] < history[0]


def test_bad_input():
  with pytest.raises(ValueError, match=r"`num_classes` must be an integer >= 2, got 1"):
    Rank4ClassHead(1)
  with pytest.raises(
    ValueError,
    match=r"`interaction` must be one of \['concat', 'dot', "
    r"'latent_cross'\], got 'bilinear'",
  ):
    Rank4ClassHead(3, interaction="bilinear")
  with pytest.raises(
    ValueError,
    match=r"`class_features` must have first dimension "
    r"num_classes=3 \(one row per class\), got shape \(2, 4\)",
  ):
    Rank4ClassHead(3, class_features=np.zeros((2, 4)))
  with pytest.raises(
    ValueError,
    match=r"Mismatched embedding sizes: interaction 'dot' with "
    r"use_bias=True needs class_embedding_dim = 5 for instance "
    r"embeddings of size d = 4, got class_embedding_dim=4",
  ):
    Rank4ClassHead(3, class_embedding_dim=4)(np.ones((2, 4), np.float32))
  with pytest.raises(
    ValueError,
    match=r"Mismatched embedding sizes: interaction "
    r"'latent_cross' needs class_embedding_dim = 4",
  ):
    Rank4ClassHead(3, interaction="latent_cross", class_embedding_dim=8)(
      np.ones((2, 4), np.float32)
    )
  with pytest.raises(ValueError, match=r"expects instance embeddings of shape \[B, d\]"):
    Rank4ClassHead(3)(np.ones((2, 4, 4), np.float32))
  with pytest.raises(ValueError, match=r"`class_chunk_size` must be an integer >= 1 or None"):
    Rank4ClassHead(3, interaction="concat", class_chunk_size=-2)
  head = Rank4ClassHead(3, interaction="concat")
  head(np.ones((1, 2), np.float32))
  with pytest.raises(ValueError, match=r"set_dense_weights needs interaction='dot'"):
    head.set_dense_weights(np.zeros((2, 3)), np.zeros(3))
  head = Rank4ClassHead(3)
  head(np.ones((1, 2), np.float32))
  with pytest.raises(ValueError, match=r"`kernel` must have shape \[d, num_classes\] = \(2, 3\)"):
    head.set_dense_weights(np.zeros((3, 3)), np.zeros(3))
