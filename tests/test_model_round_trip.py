"""Every head interaction and every encoder, end to end on the running Keras flavour.

For each case: build ``encoder -> Rank4ClassHead`` with :func:`tfrank4class.heads.build_model`,
fit one epoch, ``model.save("m.keras")`` and ``load_model`` without ``custom_objects`` (same
predictions), then write a serving SavedModel (Keras 3: ``model.export``; Keras 2: the SavedModel
format of ``model.save``) and serve it from a fresh Python process that never imports
tfrank4class (``tf.saved_model.load`` and the ``serving_default`` signature), comparing with the
predictions of the Keras model.
"""

import json
import os
import subprocess
import sys
import textwrap

import _tiny_bert
import numpy as np
import pytest
import tensorflow as tf

from tfrank4class import compat, encoders, losses
from tfrank4class.heads import build_model

keras = compat.keras
VOCAB = ["good", "bad", "film", "plot"]
TEXTS = ["good film", "bad plot", "good plot", "bad film", "film", "plot good"] * 2

SERVE = textwrap.dedent(
  """
  import json, sys
  import numpy as np
  import tensorflow as tf
  export_dir, inputs_path, out_path = sys.argv[1:]
  x = np.load(inputs_path, allow_pickle=False)
  serve = tf.saved_model.load(export_dir).signatures["serving_default"]
  (name,) = serve.structured_input_signature[1]
  outputs = serve(**{name: tf.constant(x)})
  (scores,) = outputs.values()
  np.save(out_path, scores.numpy())
  json.dump({"imported": sorted(m for m in sys.modules if m.startswith("tfrank4class"))},
            sys.stdout)
  """
)


def _export(model, path):
  """A serving SavedModel of ``model`` at ``path``, as each Keras writes one."""
  if compat.KERAS_3:
    model.export(str(path), verbose=False)
  else:
    model.save(str(path), save_format="tf")


def _served(export_dir, x, tmp_path):
  """Scores of the SavedModel at ``export_dir`` on ``x``, computed in a fresh process."""
  np.save(tmp_path / "x.npy", x)
  env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
  run = subprocess.run(
    [
      sys.executable,
      "-c",
      SERVE,
      str(export_dir),
      str(tmp_path / "x.npy"),
      str(tmp_path / "y.npy"),
    ],
    env=env,
    cwd=str(tmp_path),
    capture_output=True,
    text=True,
    timeout=600,
    check=False,
  )
  assert run.returncode == 0, run.stderr[-3000:]
  assert json.loads(run.stdout.strip().splitlines()[-1]) == {"imported": []}
  return np.load(tmp_path / "y.npy")


class _ToyTextEncoder(tf.Module):
  """A stand-in for a downloaded TF Hub text encoder: strings [B] -> a trainable table's rows."""

  def __init__(self):
    super().__init__()
    self.table = tf.Variable(np.random.default_rng(5).normal(size=(16, 6)), dtype=tf.float32)

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
  def __call__(self, texts):
    return {"pooled_output": tf.gather(self.table, tf.strings.to_hash_bucket_fast(texts, 16))}


def _images(shape, n=12):
  return np.random.default_rng(0).normal(size=(n, *shape)).astype(np.float32)


def _case(name, tmp_path):
  """(encoder, inputs) of the encoder ``name``."""
  if name == "small_cnn":
    enc = encoders.get("small_cnn", input_shape=(8, 8, 3), filters=(4,), embedding_dim=6)
    return enc, _images((8, 8, 3))
  if name == "vgg16_cifar":
    enc = encoders.get("vgg16_cifar", width_multiplier=1 / 32, embedding_dim=6)
    return enc, _images((32, 32, 3), n=4)
  if name == "resnet50":
    enc = encoders.get("resnet50", input_shape=(32, 32, 3), embedding_dim=6)
    return enc, _images((32, 32, 3), n=4)
  if name == "transformer":
    enc = encoders.get(
      "transformer",
      vocabulary=VOCAB,
      sequence_length=4,
      embedding_dim=8,
      num_heads=2,
      num_layers=1,
      ff_dim=8,
      dropout=0.0,
    )
    return enc, np.array(TEXTS)[:, None]
  if name == "saved_model":
    path = str(tmp_path / "toy_text_encoder")
    tf.saved_model.save(_ToyTextEncoder(), path)
    enc = encoders.get("saved_model", path=path, output_key="pooled_output", trainable=True)
    return enc, np.array(TEXTS)[:, None]
  if name == "bert_checkpoint":
    path = _tiny_bert.write_checkpoint(tmp_path / "tiny_bert", sentence=True)
    enc = encoders.get("bert_checkpoint", path=path, trainable=True)
    return enc, np.array(["hello world", "unaffable , b", "a b !", "world"] * 2)[:, None]
  raise AssertionError(name)


CLASS_FEATURES = np.random.default_rng(1).normal(size=(3, 4)).astype(np.float32)
CASES = {
  "dot-small_cnn": ("small_cnn", dict(interaction="dot")),
  "latent_cross-small_cnn": ("small_cnn", dict(interaction="latent_cross", hidden_units=(5,))),
  "concat-small_cnn": ("small_cnn", dict(interaction="concat", hidden_units=(5, 5))),
  "dot-features-small_cnn": (
    "small_cnn",
    dict(interaction="dot", class_features=CLASS_FEATURES, class_feature_units=(3,)),
  ),
  "concat-features-chunked-small_cnn": (
    "small_cnn",
    dict(
      interaction="concat",
      hidden_units=(4,),
      class_features=CLASS_FEATURES,
      class_chunk_size=2,
    ),
  ),
  "latent_cross-chunked-vgg16_cifar": (
    "vgg16_cifar",
    dict(interaction="latent_cross", hidden_units=(4,), class_chunk_size=2),
  ),
  "dot-resnet50": ("resnet50", dict(interaction="dot")),
  "concat-transformer": ("transformer", dict(interaction="concat", hidden_units=(4,))),
  "latent_cross-saved_model": ("saved_model", dict(interaction="latent_cross", hidden_units=(4,))),
  "dot-bert_checkpoint": ("bert_checkpoint", dict(interaction="dot")),
}


# The two large image backbones take about 50 s together. The default suite builds ResNet-50 from
# local weights and round-trips its config (tests/test_resnet.py), trains and round-trips VGG
# (tests/test_vgg.py), and takes every head through this test with the other encoders.
SLOW_CASES = ("dot-resnet50", "latent_cross-chunked-vgg16_cifar")


@pytest.mark.parametrize(
  "case",
  [pytest.param(c, marks=pytest.mark.slow) if c in SLOW_CASES else c for c in sorted(CASES)],
)
def test_fit_save_reload_and_serve(case, tmp_path):
  keras.utils.set_random_seed(0)
  encoder_name, head_kwargs = CASES[case]
  encoder, x = _case(encoder_name, tmp_path)
  model = build_model(encoder, 3, **head_kwargs)
  labels = np.arange(len(x)) % 3
  model.compile(optimizer=keras.optimizers.SGD(0.01), loss=losses.get("softmax_loss"))
  # A dataset: Keras 3 does not take numpy string arrays in `fit`.
  data = tf.data.Dataset.from_tensor_slices((x, labels)).batch(4)
  history = model.fit(data, epochs=1, verbose=0).history["loss"]
  assert np.isfinite(history[0])
  expected = model(tf.constant(x), training=False).numpy()
  assert expected.shape == (len(x), 3) and np.all(np.isfinite(expected))

  model.save(tmp_path / "m.keras")
  loaded = keras.models.load_model(tmp_path / "m.keras")
  np.testing.assert_allclose(
    loaded(tf.constant(x), training=False).numpy(), expected, rtol=1e-5, atol=1e-6
  )
  head = loaded.get_layer("rank4class_head")
  assert head.get_config() == model.get_layer("rank4class_head").get_config()
  for old, new in zip(model.weights, loaded.weights):
    np.testing.assert_array_equal(np.asarray(new), np.asarray(old))

  _export(model, tmp_path / "export")
  np.testing.assert_allclose(
    _served(tmp_path / "export", x, tmp_path), expected, rtol=1e-5, atol=1e-6
  )
