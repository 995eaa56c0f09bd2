"""Tests of tfrank4class.retrieval.model (the retrieval model builder) and of its SavedModel
export (tfrank4class.retrieval.export, TensorFlow only)."""

import numpy as np
import pytest

from tfrank4class import encoders
from tfrank4class.compat import keras, ops
from tfrank4class.losses.metric_learning import SmoothedCrossEntropy, TripletLoss
from tfrank4class.retrieval.model import RetrievalModel, build_retrieval_model


def _encoder():
  return encoders.get("small_cnn", input_shape=(8, 8, 3), filters=(4,), embedding_dim=6)


def _data(n=16, classes=4, seed=0):
  rng = np.random.default_rng(seed)
  return rng.normal(size=(n, 8, 8, 3)).astype(np.float32), np.arange(n) % classes


def test_cross_entropy_recipe_structure_and_initial_loss():
  built = build_retrieval_model(
    _encoder(),
    "cross_entropy",
    num_classes=4,
    embedding_dim=5,
    feature_norm="layer",
    dropout=0.5,
    optimizer="sgd",
  )
  assert isinstance(built, RetrievalModel) and isinstance(built.loss, SmoothedCrossEntropy)
  assert built.model.output_shape == (None, 4) and built.embedding_model.output_shape == (None, 5)
  clf = built.model.get_layer("classifier")
  assert not np.any(ops.convert_to_numpy(clf.kernel)) and not np.any(ops.convert_to_numpy(clf.bias))
  assert {w.name for w in built.embedding_model.weights} <= {w.name for w in built.model.weights}
  # Zero classifier: uniform softmax, so the smoothed cross-entropy is exactly log(4).
  x, y = _data()
  assert built.model.evaluate(x, y, verbose=0) == pytest.approx(np.log(4), rel=1e-5)
  # Their target: 0.9 on the class, 0.1 / 3 on each other class (utils/utils.py).
  assert (built.loss.label_smoothing, built.loss.spread) == (0.1, "other_classes")
  logits = np.array([[2.0, 0.0, 0.0, -1.0]], np.float32)
  logp = logits[0] - np.log(np.exp(logits[0].astype(np.float64)).sum())
  want = -(np.array([0.9, 0.1 / 3, 0.1 / 3, 0.1 / 3]) * logp).sum()
  assert float(built.loss([0], logits)) == pytest.approx(want, rel=1e-6)
  keras_style = build_retrieval_model(
    _encoder(), "cross_entropy", num_classes=4, loss_kwargs={"spread": "all_classes"}
  )
  assert keras_style.loss.spread == "all_classes"


def test_layer_feature_norm_standardises_features():
  enc = _encoder()
  built = build_retrieval_model(enc, "cross_entropy", num_classes=4, feature_norm="layer")
  x, _ = _data()
  feats = enc.predict(x, verbose=0).astype(np.float64)
  want = (feats - feats.mean(1, keepdims=True)) / np.sqrt(feats.var(1, keepdims=True) + 1e-3)
  np.testing.assert_allclose(built.embedding_model.predict(x, verbose=0), want, atol=1e-4)


def test_l2_normalize_and_no_norm():
  # Seeded: with some initialisations a row's embedding is all zero, and has no unit norm.
  keras.utils.set_random_seed(0)
  built = build_retrieval_model(
    _encoder(), "triplet_loss", embedding_dim=3, feature_norm="none", l2_normalize=True
  )
  x, _ = _data()
  emb = built.embedding_model.predict(x, verbose=0)
  np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
  assert built.model is built.embedding_model and isinstance(built.loss, TripletLoss)


@pytest.mark.parametrize(
  "loss, kwargs",
  [
    ("triplet_loss", {"mining": "semi_hard"}),
    ("contrastive_loss", {}),
    ("recall_loss", {"weighting": "loglog", "margin": 0.1}),
  ],
)
def test_embedding_losses_train(loss, kwargs):
  keras.utils.set_random_seed(0)
  built = build_retrieval_model(
    _encoder(), loss, embedding_dim=4, loss_kwargs=kwargs, optimizer=keras.optimizers.Adam(1e-2)
  )
  x, y = _data()
  hist = built.model.fit(x, y, batch_size=8, epochs=2, verbose=0, shuffle=False)
  assert np.all(np.isfinite(hist.history["loss"]))
  if loss == "recall_loss":
    assert built.loss.from_embeddings and built.loss.weighting == "loglog"


def test_fit_with_jit():
  x, y = _data()
  built = build_retrieval_model(_encoder(), "cross_entropy", num_classes=4, embedding_dim=5)
  built.model.compile(optimizer="adam", loss=built.loss, jit_compile=True)
  hist = built.model.fit(x, y, batch_size=8, epochs=1, verbose=0)
  assert np.isfinite(hist.history["loss"][0])


@pytest.mark.tensorflow_only
def test_fit_under_mirrored_strategy(mirrored_strategy):
  # (XLA cannot compile a step whose variables live on two logical CPUs, so no jit here.)
  x, y = _data()
  with mirrored_strategy.scope():
    built = build_retrieval_model(_encoder(), "triplet_loss", embedding_dim=5, optimizer="adam")
  hist = built.model.fit(x, y, batch_size=8, epochs=1, verbose=0)
  assert np.isfinite(hist.history["loss"][0])


def _trained(x, y):
  built = build_retrieval_model(
    _encoder(), "cross_entropy", num_classes=4, embedding_dim=5, optimizer="adam"
  )
  built.model.fit(x, y, epochs=1, verbose=0)
  return built


def test_keras_save_and_load(tmp_path):
  x, y = _data()
  built = _trained(x, y)
  built.model.save(tmp_path / "m.keras")
  loaded = keras.models.load_model(tmp_path / "m.keras")
  np.testing.assert_allclose(
    loaded.predict(x, verbose=0), built.model.predict(x, verbose=0), atol=1e-5
  )
  assert isinstance(loaded.loss, SmoothedCrossEntropy)


@pytest.mark.tensorflow_only
def test_saved_model_export(tmp_path):
  import tensorflow as tf  # noqa: PLC0415  (SavedModel is TensorFlow by nature)

  from tfrank4class.retrieval import export_embedding_model  # noqa: PLC0415

  x, y = _data()
  built = _trained(x, y)
  export_embedding_model(built.embedding_model, tmp_path / "export")
  serve = tf.saved_model.load(str(tmp_path / "export")).signatures["serving_default"]
  out = serve(inputs=tf.constant(x))
  assert list(out) == ["embedding"] and out["embedding"].shape == (16, 5)
  np.testing.assert_allclose(
    out["embedding"], built.embedding_model.predict(x, verbose=0), atol=1e-5
  )


def test_encoder_layer_needs_input_shape():
  layer = keras.layers.Flatten()
  built = build_retrieval_model(layer, "contrastive_loss", embedding_dim=3, input_shape=(2, 2))
  assert built.embedding_model.output_shape == (None, 3)
  with pytest.raises(ValueError, match=r"`input_shape` is required"):
    build_retrieval_model(keras.layers.Flatten(), "contrastive_loss")


def test_bad_arguments():
  with pytest.raises(ValueError, match=r"`num_classes` must be an integer >= 2, got None"):
    build_retrieval_model(_encoder(), "cross_entropy")
  with pytest.raises(
    ValueError, match=r"`feature_norm` must be one of \['batch', 'layer', 'none'\], got 'group'"
  ):
    build_retrieval_model(_encoder(), "cross_entropy", num_classes=3, feature_norm="group")
  with pytest.raises(
    ValueError, match=r"`loss` must be one of .* or a registered loss name, got 'nope'"
  ):
    build_retrieval_model(_encoder(), "nope")
  with pytest.raises(ValueError, match=r"`dropout` must be a finite number in \[0, 1\), got 1.0"):
    build_retrieval_model(_encoder(), "cross_entropy", num_classes=3, dropout=1.0)
  with pytest.raises(ValueError, match=r"must not set from_embeddings=False"):
    build_retrieval_model(_encoder(), "recall_loss", loss_kwargs={"from_embeddings": False})
  with pytest.raises(ValueError, match=r"`encoder` must output features \[B, F\]"):
    build_retrieval_model(keras.layers.Conv2D(2, 3), "triplet_loss", input_shape=(8, 8, 3))


def test_docstring_examples_run():
  import doctest

  from tfrank4class.retrieval import model

  result = doctest.testmod(model, optionflags=doctest.NORMALIZE_WHITESPACE)
  assert result.attempted > 0 and result.failed == 0, result
