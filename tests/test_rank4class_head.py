"""Tests of tfrank4class.heads.rank4class_head."""

import numpy as np
import pytest
import tensorflow as tf

from tfrank4class import compat, losses
from tfrank4class.heads import Rank4ClassHead

INTERACTIONS = ["dot", "latent_cross", "concat"]


def test_dot_head_equals_dense_layer_sec_3_2():
  """Rank4Class Sec. 3.2: Dense(C) is a dot-product head over c_i = [W_{:,i}; b_i]."""
  rng = np.random.default_rng(0)
  d, num_classes = 6, 5
  h = rng.normal(size=(4, d)).astype(np.float32)
  dense = tf.keras.layers.Dense(num_classes)
  dense(h)
  kernel, bias = rng.normal(size=(d, num_classes)), rng.normal(size=num_classes)
  dense.set_weights([kernel, bias])
  head = Rank4ClassHead(num_classes, interaction="dot")
  head(h)
  # Independently of set_dense_weights: write the table [kernel; bias]^T by hand.
  head.class_encoder.table.assign(np.vstack([kernel, bias[None, :]]).T)
  expected = h.astype(np.float64) @ kernel + bias
  np.testing.assert_allclose(head(h).numpy(), expected, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(head(h).numpy(), dense(h).numpy(), rtol=1e-5, atol=1e-5)
  other = Rank4ClassHead(num_classes)
  other(h)
  other.set_dense_weights(kernel, bias)
  np.testing.assert_allclose(other(h).numpy(), expected, rtol=1e-5, atol=1e-5)
  no_bias = Rank4ClassHead(num_classes, use_bias=False)
  no_bias(h)
  no_bias.set_dense_weights(kernel)
  np.testing.assert_allclose(no_bias(h).numpy(), h @ kernel, rtol=1e-5, atol=1e-5)


def test_dot_head_equals_dense_layer_at_initialisation():
  """Same seeded kernel initializer, no weights set: same kernel, zero bias, same output."""
  rng = np.random.default_rng(7)
  d, num_classes = 6, 5
  h = rng.normal(size=(4, d)).astype(np.float32)
  dense = tf.keras.layers.Dense(num_classes, kernel_initializer=tf.keras.initializers.HeNormal(3))
  head = Rank4ClassHead(num_classes, embeddings_initializer=tf.keras.initializers.HeNormal(3))
  np.testing.assert_allclose(head(h).numpy(), dense(h).numpy(), rtol=1e-6, atol=1e-6)
  table = head.class_encoder.table.numpy()
  np.testing.assert_array_equal(table[:, :d].T, dense.kernel.numpy())
  np.testing.assert_array_equal(table[:, d], np.zeros(num_classes))
  # Another bias initializer reaches the bias column; other heads keep theirs.
  ones = Rank4ClassHead(num_classes, bias_initializer="ones")
  ones(h)
  np.testing.assert_array_equal(ones.class_encoder.table.numpy()[:, d], np.ones(num_classes))
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
  np.testing.assert_allclose(clone(x).numpy(), head(x).numpy(), rtol=1e-6)
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
def test_trains_under_mixed_float16(mixed_float16, kwargs):
  """float16 compute, float32 variables: scores in float16, one finite training step."""
  del mixed_float16
  tf.keras.utils.set_random_seed(0)
  rng = np.random.default_rng(9)
  x = rng.normal(size=(8, 6)).astype(np.float32)
  head = Rank4ClassHead(4, **kwargs)
  model = _model(head, 6)
  assert model.outputs[0].dtype == tf.float16
  assert all(w.dtype == tf.float32 for w in head.weights)
  model.compile(optimizer=tf.keras.optimizers.Adam(0.01), loss=losses.get("softmax_loss"))
  assert np.isfinite(model.train_on_batch(x, rng.integers(0, 4, size=8)))


def test_class_embedding_sizes():
  h = tf.ones([2, 3])
  sizes = {}
  for name, kwargs in [
    ("dot", {}),
    ("dot", {"use_bias": False}),
    ("latent_cross", {}),
    ("concat", {}),
    ("concat", {"class_embedding_dim": 7}),
  ]:
    head = Rank4ClassHead(4, interaction=name, hidden_units=(2,), **kwargs)
    assert head(h).shape == (2, 4)
    sizes[(name, tuple(kwargs.items()))] = head.class_encoder.all_embeddings().shape[1]
  assert list(sizes.values()) == [4, 3, 3, 3, 7]


def test_class_features_head_matches_numpy():
  rng = np.random.default_rng(2)
  feats = rng.normal(size=(4, 5)).astype(np.float32)
  h = rng.normal(size=(3, 2)).astype(np.float32)
  head = Rank4ClassHead(4, interaction="dot", class_features=feats)
  out = head(h).numpy()
  proj = head.class_encoder._mlp[0]
  c = feats @ proj.kernel.numpy() + proj.bias.numpy()  # [C, d + 1]
  np.testing.assert_allclose(out, np.hstack([h, np.ones((3, 1))]) @ c.T, rtol=1e-5, atol=1e-5)


def _model(head, d):
  return tf.keras.Sequential([tf.keras.Input((d,)), head])


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
  expected = model(x).numpy()
  model.save(tmp_path / "m.keras")
  loaded = tf.keras.models.load_model(tmp_path / "m.keras")
  np.testing.assert_allclose(loaded(x).numpy(), expected, rtol=1e-6)
  assert loaded.layers[-1].get_config() == head.get_config()
  if with_features:  # features come back from the weights, not the config
    np.testing.assert_array_equal(loaded.layers[-1].class_encoder.class_features.numpy(), feats)
  if (interaction, with_features) in (("dot", False), ("concat", True)):  # SavedModel: slower
    if compat.KERAS_3:  # Keras 3 writes SavedModels for serving only, with `export`
      model.export(str(tmp_path / "sm"), verbose=False)
      exported = tf.saved_model.load(str(tmp_path / "sm"))  # keep it alive while serving
      served = exported.serve(tf.constant(x))
    else:
      model.save(tmp_path / "sm")
      served = tf.keras.models.load_model(tmp_path / "sm")(x)
    np.testing.assert_allclose(served.numpy(), expected, rtol=1e-6)


def test_get_config_round_trip():
  head = Rank4ClassHead(
    3,
    interaction="concat",
    hidden_units=(4, 2),
    activation="tanh",
    class_embedding_dim=5,
    class_chunk_size=2,
  )
  x = tf.random.normal([2, 4], seed=1)
  out = head(x).numpy()
  clone = Rank4ClassHead.from_config(head.get_config())
  clone(x)
  clone.set_weights(head.get_weights())
  np.testing.assert_allclose(clone(x).numpy(), out, rtol=1e-6)


@pytest.mark.parametrize("interaction", INTERACTIONS)
def test_trains_under_mirrored_strategy(mirrored_strategy, interaction):
  tf.keras.utils.set_random_seed(0)  # deterministic initial weights
  rng = np.random.default_rng(4)
  x = rng.normal(size=(32, 6)).astype(np.float32)
  y = rng.integers(0, 4, size=32)
  assert mirrored_strategy.num_replicas_in_sync == 2
  with mirrored_strategy.scope():
    model = _model(
      Rank4ClassHead(4, interaction=interaction, hidden_units=(8, 8), class_chunk_size=3), 6
    )
    model.compile(optimizer=tf.keras.optimizers.Adam(0.05), loss=losses.get("softmax_loss"))
  history = model.fit(x, y, batch_size=16, epochs=4, verbose=0).history["loss"]
  assert np.all(np.isfinite(history)) and history[-1] < history[0]


def test_trains_with_jit_compile():
  tf.keras.utils.set_random_seed(0)  # deterministic initial weights
  rng = np.random.default_rng(5)
  x = rng.normal(size=(16, 4)).astype(np.float32)
  y = rng.integers(0, 3, size=16)
  model = _model(
    Rank4ClassHead(3, interaction="latent_cross", hidden_units=(8,), class_chunk_size=2), 4
  )
  model.compile(
    optimizer=tf.keras.optimizers.Adam(0.05), loss=losses.get("approx_ndcg_loss"), jit_compile=True
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
    Rank4ClassHead(3, class_embedding_dim=4)(tf.ones([2, 4]))
  with pytest.raises(
    ValueError,
    match=r"Mismatched embedding sizes: interaction "
    r"'latent_cross' needs class_embedding_dim = 4",
  ):
    Rank4ClassHead(3, interaction="latent_cross", class_embedding_dim=8)(tf.ones([2, 4]))
  with pytest.raises(ValueError, match=r"expects instance embeddings of shape \[B, d\]"):
    Rank4ClassHead(3)(tf.ones([2, 4, 4]))
  with pytest.raises(ValueError, match=r"`class_chunk_size` must be an integer >= 1 or None"):
    Rank4ClassHead(3, interaction="concat", class_chunk_size=-2)
  head = Rank4ClassHead(3, interaction="concat")
  head(tf.ones([1, 2]))
  with pytest.raises(ValueError, match=r"set_dense_weights needs interaction='dot'"):
    head.set_dense_weights(np.zeros((2, 3)), np.zeros(3))
  head = Rank4ClassHead(3)
  head(tf.ones([1, 2]))
  with pytest.raises(ValueError, match=r"`kernel` must have shape \[d, num_classes\] = \(2, 3\)"):
    head.set_dense_weights(np.zeros((3, 3)), np.zeros(3))
