"""The compatibility module: TensorFlow version check, Keras binding, TF-Ranking loader, mix-ups."""

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest
import tensorflow as tf

from tfrank4class import compat

CURRENT_STACK = compat.tensorflow_version() >= (2, 16)


def test_too_old_tensorflow_names_the_fix():
  with pytest.raises(
    ImportError,
    match=r"needs TensorFlow >= 2\.15, found 2\.14\.1\. Install the "
    r"current stack: python -m pip install "
    r"\"tensorflow==2\.21\.0\" \"tf-keras==2\.21\.0\"",
  ):
    compat.check_tensorflow_version("2.14.1")
  compat.check_tensorflow_version("2.15.1")
  compat.check_tensorflow_version("2.21.0")


def test_keras_binding_is_keras_2():
  if CURRENT_STACK:
    import tf_keras  # pylint: disable=g-import-not-at-top

    assert compat.keras is tf_keras and tf_keras.__version__.startswith("2.")
  else:
    assert compat.keras.layers.Layer is tf.keras.layers.Layer and tf.__version__.startswith("2.15")


def test_missing_tf_ranking_gives_the_command(monkeypatch):
  real = importlib.util.find_spec
  monkeypatch.setattr(
    importlib.util,
    "find_spec",
    lambda name, *a: None if name == "tensorflow_ranking" else real(name, *a),
  )
  monkeypatch.setattr(compat, "_TF_RANKING_MODULES", {})
  with pytest.raises(
    ImportError,
    match=r"tensorflow-ranking is not installed\. Run: python -m "
    r"pip install --no-deps \"tensorflow-ranking==0\.5\.5\"",
  ):
    compat.tf_ranking_module("losses_impl")


def test_tf_ranking_loader_leaves_no_stand_in_packages():
  compat.tf_ranking_module("keras.losses")
  if CURRENT_STACK:
    # The user's own `import tensorflow_ranking` still runs the real package __init__.
    assert "tensorflow_ranking" not in sys.modules
    assert "tensorflow_ranking.python" not in sys.modules


def _run(code, **env):
  environ = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
  environ.update(env)
  return subprocess.run(
    [sys.executable, "-c", textwrap.dedent(code)],
    env=environ,
    capture_output=True,
    text=True,
    timeout=300,
  )


@pytest.mark.skipif(not CURRENT_STACK, reason="TensorFlow 2.15 has no Keras 3")
def test_default_keras3_process_trains_with_tf_keras_and_refuses_mix_ups():
  result = _run("""
      import numpy as np, tensorflow as tf, keras
      assert keras.__version__.startswith("3.") and tf.keras.Model is keras.Model
      from tfrank4class import compat, heads, losses, metrics
      from tfrank4class.compat import keras as k2
      x = np.random.default_rng(0).normal(size=(32, 4)).astype("float32")
      y = np.argmax(x, 1)
      # The supported way: build the model with tf-keras.
      inp = k2.Input((4,))
      model = k2.Model(inp, heads.Rank4ClassHead(4, "latent_cross", hidden_units=(8,))(inp))
      model.compile("adam", loss=losses.get("softmax_loss"), metrics=[metrics.NDCG(2)])
      history = model.fit(x, y, epochs=1, verbose=0)
      assert np.isfinite(history.history["loss"][0])
      print("tf-keras ok")
      # Keras 3 compile with our loss or metric: refused at the first step.
      for kwargs in ({"loss": losses.get("softmax_loss")},
                     {"loss": "sparse_categorical_crossentropy", "metrics": [metrics.MRR()]}):
        k3 = keras.Sequential([keras.Input((4,)), keras.layers.Dense(4)])
        k3.compile("adam", **kwargs)
        try:
          k3.fit(x, y, epochs=1, verbose=0)
        except compat.KerasFlavourError as e:
          print("refused:", e)
      # Our layer on a Keras 3 tensor: refused.
      try:
        heads.Rank4ClassHead(4)(keras.Input((4,)))
      except compat.KerasFlavourError as e:
        print("refused:", e)
      """)
  assert result.returncode == 0, result.stderr[-3000:]
  assert "tf-keras ok" in result.stdout
  assert result.stdout.count("refused:") == 3, result.stdout
  assert "Build the model with tf-keras: `import tf_keras as keras`" in result.stdout
  assert "set TF_USE_LEGACY_KERAS=1 before TensorFlow is imported" in result.stdout


@pytest.mark.skipif(not CURRENT_STACK, reason="TensorFlow 2.15 brings its own Keras 2")
def test_missing_tf_keras_names_the_fix():
  result = _run("""
      import sys
      sys.modules["tf_keras"] = None  # as if tf-keras were not installed
      import tfrank4class.compat
      """)
  assert result.returncode != 0
  assert "tf-keras package, and it is not installed. Run: python -m pip install" in result.stderr
  version = "{}.{}".format(*compat.tensorflow_version())
  assert f'"tf-keras~={version}.0"' in result.stderr
