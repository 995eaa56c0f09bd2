"""The README's code runs as printed: the Keras 3 quick start trains, saves, reloads and serves."""

import os
import pathlib
import re
import subprocess
import sys
import textwrap

import numpy as np

from tfrank4class import compat

ROOT = pathlib.Path(__file__).resolve().parents[1]
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "NO_GCE_CHECK": "true", "PYTHONPATH": str(ROOT)}


def _blocks(section):
  """The ```python blocks of the README section headed ``section``."""
  text = (ROOT / "README.md").read_text(encoding="utf-8")
  body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
  return re.findall(r"```python\n(.*?)```", body, re.DOTALL)


def _run(code, cwd):
  result = subprocess.run(
    [sys.executable, "-c", code], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=600
  )
  assert result.returncode == 0, result.stderr[-3000:]
  return result.stdout


def test_quick_start_trains_saves_reloads_and_serves(tmp_path):
  # Under tf-keras the same code runs with `tf.keras` for `keras`.
  quick_start, head = _blocks("Using the library")[:2]
  rng = np.random.default_rng(0)
  np.save(tmp_path / "features.npy", rng.normal(size=(128, 64)).astype("float32"))
  np.save(tmp_path / "labels.npy", rng.integers(0, 10, size=128))
  setup = "import numpy as np\nfeatures, labels = np.load('features.npy'), np.load('labels.npy')\n"
  check = textwrap.dedent("""
    np.save("scores.npy", model.predict(features[:8], verbose=0))
    reloaded = keras.models.load_model("ranker.keras")
    np.testing.assert_allclose(reloaded.predict(features[:8], verbose=0), np.load("scores.npy"),
                               rtol=1e-5, atol=1e-6)
    """)
  if not compat.KERAS_3:  # `import keras` is Keras 3 whatever tf.keras is; tf.keras follows
    quick_start = quick_start.replace("import keras\n", "from tensorflow import keras\n")
  _run(setup + quick_start + check + head, tmp_path)
  served = _run(
    textwrap.dedent("""
      import sys, numpy as np, tensorflow as tf
      x = np.load("features.npy")[:8]
      loaded = tf.saved_model.load("ranker_savedmodel")  # kept: it owns the variables
      scores = loaded.serve(tf.constant(x)).numpy()
      np.save("served.npy", scores)
      print(sorted(m for m in sys.modules if m.startswith("tfrank4class")))
      """),
    tmp_path,
  )
  assert served.strip() == "[]"  # served without importing tfrank4class
  np.testing.assert_allclose(
    np.load(tmp_path / "served.npy"), np.load(tmp_path / "scores.npy"), rtol=1e-5, atol=1e-6
  )


def test_own_loss_and_metric_train_save_and_reload(tmp_path):
  """The README's own loss and metric: weighted fit, ``.keras`` round trip, values by hand."""
  definitions, usage, _ = _blocks("Writing your own loss or metric")
  rng = np.random.default_rng(1)
  np.save(tmp_path / "features.npy", rng.normal(size=(64, 16)).astype("float32"))
  np.save(tmp_path / "labels.npy", rng.integers(0, 5, size=64))
  np.save(tmp_path / "weights.npy", rng.uniform(0.0, 2.0, size=64).astype("float32"))
  setup = textwrap.dedent("""
    import numpy as np
    features, labels = np.load("features.npy"), np.load("labels.npy")
    weights = np.load("weights.npy")
    """)
  check = textwrap.dedent("""
    scores = model.predict(features, verbose=0)
    np.testing.assert_allclose(reloaded.predict(features, verbose=0), scores, rtol=1e-6)
    results = reloaded.evaluate(features, labels, sample_weight=weights, batch_size=64,
                                verbose=0, return_dict=True)
    np.save("scores.npy", scores)
    np.save("results.npy", [results["loss"], results["hit_3"]])
    """)
  _run(setup + definitions + usage + check, tmp_path)
  scores = np.load(tmp_path / "scores.npy")
  labels, weights = np.load(tmp_path / "labels.npy"), np.load(tmp_path / "weights.npy")
  # By hand: softmax cross-entropy of the true class, weighted mean over the 64 examples; hit@3
  # = the true class among the three highest scores, weighted mean over the lists.
  log_p = scores - np.log(np.exp(scores).sum(1, keepdims=True))
  cross_entropy = -log_p[np.arange(64), labels]
  hits = (np.argsort(-scores, 1)[:, :3] == labels[:, None]).any(1)
  loss, hit_3 = np.load(tmp_path / "results.npy")
  np.testing.assert_allclose(loss, np.sum(weights * cross_entropy) / 64, rtol=1e-5)
  np.testing.assert_allclose(hit_3, np.sum(weights * hits) / np.sum(weights), rtol=1e-5)


def test_own_embedding_loss_trains_saves_and_reloads(tmp_path):
  """The README's own embedding loss: fit, ``.keras`` round trip, the loss by hand."""
  definitions, _, embedding = _blocks("Writing your own loss or metric")
  rng = np.random.default_rng(2)
  np.save(tmp_path / "features.npy", rng.normal(size=(32, 16)).astype("float32"))
  np.save(tmp_path / "labels.npy", rng.integers(0, 4, size=32))
  setup = "import numpy as np\nfeatures, labels = np.load('features.npy'), np.load('labels.npy')\n"
  check = textwrap.dedent("""
    embeddings = embedder.predict(features, verbose=0)
    np.testing.assert_allclose(reloaded_embedder.predict(features, verbose=0), embeddings,
                               rtol=1e-6)
    np.save("embeddings.npy", embeddings)
    np.save("loss.npy", reloaded_embedder.evaluate(features, labels, batch_size=32, verbose=0))
    """)
  _run(setup + definitions + embedding + check, tmp_path)
  e, labels = np.load(tmp_path / "embeddings.npy"), np.load(tmp_path / "labels.npy")
  e = e / np.linalg.norm(e, axis=1, keepdims=True)
  d = np.sqrt(np.maximum(((e[:, None] - e[None]) ** 2).sum(-1), 1e-12))
  same = labels[:, None] == labels[None]
  want = []
  for i in range(32):
    pos = same[i] & (np.arange(32) != i)
    pull = (d[i, pos] ** 2).mean() if pos.any() else 0.0
    push = np.maximum(1.0 - d[i, ~same[i]], 0.0).mean() if (~same[i]).any() else 0.0
    want.append(pull + push)
  np.testing.assert_allclose(np.load(tmp_path / "loss.npy"), np.mean(want), rtol=1e-5)


def test_learning_top_k_trains(tmp_path):
  (code,) = _blocks("Learning Top-K")
  rng = np.random.default_rng(0)
  setup = (
    "import numpy as np\n"
    "features = np.random.default_rng(0).normal(size=(64, 64)).astype('float32')\n"
    f"labels = np.array({rng.integers(0, 100, size=64).tolist()})\n"
  )
  check = "assert np.isfinite(model.evaluate(features, labels, verbose=0)).all()\n"
  _run(setup + code + check, tmp_path)
