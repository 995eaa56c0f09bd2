"""benchmarks/feature_cache.py: embeddings of a trained model and the on-disk feature cache."""

import doctest
import json
import os

import feature_cache as features
import numpy as np
import pytest
import tensorflow as tf

from tfrank4class import encoders, heads


def _model():
  tf.keras.utils.set_random_seed(0)
  encoder = encoders.get("small_cnn", input_shape=(8, 8, 3), filters=(4,), embedding_dim=6)
  return encoder, heads.build_model(encoder, 3, interaction="latent_cross", hidden_units=(5,))


def test_embedding_model_outputs_the_encoder_embeddings():
  encoder, model = _model()
  x = np.random.default_rng(0).normal(size=(7, 8, 8, 3)).astype("float32")
  embed = features.embedding_model(model)
  np.testing.assert_allclose(embed(x).numpy(), encoder(x).numpy(), rtol=1e-6)
  # The head applied to the embeddings gives the model's scores.
  head = model.get_layer(features.HEAD_NAME)
  np.testing.assert_allclose(head(embed(x)).numpy(), model(x).numpy(), rtol=1e-5, atol=1e-6)


def test_extract_in_batches_equals_one_call():
  encoder, model = _model()
  x = np.random.default_rng(1).normal(size=(11, 8, 8, 3)).astype("float32")
  out = features.extract(features.embedding_model(model), x, batch_size=4)
  assert out.dtype == np.float32 and out.shape == (11, 6)
  np.testing.assert_allclose(out, encoder(x).numpy(), rtol=1e-6)


def test_embedding_model_without_head_is_refused():
  encoder, _ = _model()
  with pytest.raises(ValueError, match="no layer named 'rank4class_head'"):
    features.embedding_model(encoder)


def test_spec_key_is_canonical():
  assert features.spec_key({"a": 1, "b": [1, 2]}) == features.spec_key({"b": [1, 2], "a": 1})
  assert features.spec_key({"a": 1}) != features.spec_key({"a": 2})
  assert len(features.spec_key({})) == 16
  with pytest.raises(ValueError, match="`spec` must be JSON-serialisable"):
    features.spec_key({"a": object()})


def test_cache_builds_once_and_round_trips(tmp_path):
  cache = features.FeatureCache(tmp_path / "cache")
  spec = {"dataset": "x", "epochs": 2}
  calls = []
  data = {"train_x": np.arange(12, dtype=np.float32).reshape(3, 4), "train_y": np.array([0, 2, 1])}

  def build():
    calls.append(1)
    return data, {"note": "built"}

  for _ in range(3):
    arrays, info = cache.get_or_build(spec, build)
    assert info == {"note": "built"}
    assert sorted(arrays) == ["train_x", "train_y"]
    np.testing.assert_array_equal(arrays["train_x"], data["train_x"])
    np.testing.assert_array_equal(arrays["train_y"], data["train_y"])
  assert len(calls) == 1
  # A new process (a new cache object) finds the entry too.
  assert features.FeatureCache(tmp_path / "cache").load(spec) is not None
  assert features.FeatureCache(tmp_path / "cache").load({"dataset": "y"}) is None
  assert not [n for n in os.listdir(tmp_path / "cache") if ".tmp" in n]


def test_cache_entry_without_its_json_is_rebuilt(tmp_path):
  cache = features.FeatureCache(tmp_path)
  spec = {"k": 1}
  cache.save(spec, {"a": np.zeros(2)}, {})
  os.remove(cache.paths(spec)[1])  # e.g. killed between the two writes
  assert cache.load(spec) is None
  calls = []
  cache.get_or_build(spec, lambda: (calls.append(1) or {"a": np.ones(2)}, {}))
  assert calls == [1]


def test_cache_refuses_an_entry_of_another_spec(tmp_path):
  cache = features.FeatureCache(tmp_path)
  spec = {"k": 1}
  cache.save(spec, {"a": np.zeros(2)})
  npz, meta = cache.paths(spec)
  with open(meta, "w", encoding="utf-8") as f:
    json.dump({"spec": {"k": 2}, "info": {}}, f)
  with pytest.raises(ValueError, match="holds another spec"):
    cache.load(spec)


@pytest.mark.parametrize("directory", ["", None, 3])
def test_cache_directory_must_be_a_path(directory):
  with pytest.raises(ValueError, match="`directory` must be a folder path"):
    features.FeatureCache(directory)


def test_save_refuses_empty_arrays(tmp_path):
  with pytest.raises(ValueError, match="`arrays` must be a non-empty dict"):
    features.FeatureCache(tmp_path).save({"k": 1}, {})


def test_docstring_examples_run():
  assert doctest.testmod(features).failed == 0
