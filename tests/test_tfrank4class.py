"""The package import: it registers every Keras object, so a .keras file loads in a new process,
on every backend; on JAX and PyTorch it imports no TensorFlow."""

import json
import subprocess
import sys
import textwrap

import numpy as np
from backend_testing import numpy

import tfrank4class
from tfrank4class import heads, losses, metrics
from tfrank4class.compat import BACKEND, keras


def test_import_registers_the_keras_objects_for_load_model(tmp_path):
  rng = np.random.default_rng(0)
  x = rng.normal(size=(16, 6)).astype("float32")
  y = rng.integers(0, 5, size=16)
  inputs = keras.Input((6,))
  scores = heads.Rank4ClassHead(5, "latent_cross", hidden_units=(4,))(inputs)
  model = keras.Model(inputs, scores)
  model.compile(
    "adam", loss=losses.get("approx_ndcg_loss"), metrics=[metrics.NDCG(5), metrics.MRR()]
  )
  model.fit(x, y, epochs=1, verbose=0)
  path = tmp_path / "model.keras"
  model.save(path)
  np.save(tmp_path / "x.npy", x)
  code = f"""
    import numpy as np
    import tfrank4class  # nothing else of ours
    from tfrank4class.compat import keras, ops
    model = keras.models.load_model({str(path)!r})
    x = np.load({str(tmp_path / "x.npy")!r})
    np.save({str(tmp_path / "scores.npy")!r}, ops.convert_to_numpy(model(x)))
    print(type(model.loss).__name__, [type(m).__name__ for m in model.metrics])
    """
  result = subprocess.run(
    [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300
  )
  assert result.returncode == 0, result.stderr[-3000:]
  np.testing.assert_allclose(np.load(tmp_path / "scores.npy"), numpy(model(x)), rtol=1e-6)
  assert "RankingLoss" in result.stdout


def test_the_import_loads_tensorflow_only_on_its_backend():
  """On JAX and PyTorch ``import tfrank4class`` (all of the core) imports no TensorFlow and none
  of the TensorFlow-by-nature modules; on TensorFlow it also imports ``tfrank4class.data``, whose
  WordPieceVectorizer saved BERT encoders hold."""
  code = """
    import json, sys
    import tfrank4class
    fenced = ("tfrank4class.data", "tfrank4class.train", "tfrank4class.retrieval.inputs",
              "tfrank4class.encoders.saved_model_text")
    print(json.dumps(sorted(m for m in ("tensorflow", "tf_keras", *fenced) if m in sys.modules)))
    """
  result = subprocess.run(
    [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300
  )
  assert result.returncode == 0, result.stderr[-3000:]
  loaded = json.loads(result.stdout.strip().splitlines()[-1])
  if BACKEND == "tensorflow":
    assert {"tensorflow", "tfrank4class.data", "tfrank4class.encoders.saved_model_text"} <= set(
      loaded
    )
  else:
    assert loaded == []


def test_public_subpackages():
  assert tfrank4class.__all__ == ["encoders", "heads", "losses", "metrics", "ranking", "saving"]
  assert tfrank4class.saving.load_model.__module__ == "tfrank4class.saving"
  assert tfrank4class.losses.get is losses.get


def test_re_exported_names_are_the_one_implementation():
  from tfrank4class import labels, retrieval
  from tfrank4class.metrics import functional
  from tfrank4class.ranking import precision
  from tfrank4class.retrieval import evaluation, model

  assert losses.class_ids is labels.class_ids
  assert losses.to_relevance is labels.to_relevance
  assert functional.harmonic_difference is precision.harmonic_difference
  assert retrieval.retrieval_recall_at_k is evaluation.retrieval_recall_at_k
  assert retrieval.build_retrieval_model is model.build_retrieval_model


#: The public packages: what their ``__all__`` lists is the public API (the rest is private).
PUBLIC_PACKAGES = (
  "tfrank4class",
  "tfrank4class.losses",
  "tfrank4class.losses.rambo",
  "tfrank4class.losses.sodeep",
  "tfrank4class.metrics",
  "tfrank4class.ranking",
  "tfrank4class.heads",
  "tfrank4class.encoders",
  "tfrank4class.retrieval",
)


def test_every_exported_class_is_in_a_public_packages_all():
  """registry.export lists every public Keras class; each is reachable from the ``__all__`` of a
  public package, and every ``__all__`` name exists (a TensorFlow-by-nature one raises the
  fence's ImportError off TensorFlow)."""
  import importlib  # noqa: PLC0415

  from tfrank4class import registry  # noqa: PLC0415

  reachable = set()
  for name in PUBLIC_PACKAGES:
    package = importlib.import_module(name)
    assert package.__all__, name
    for attribute in package.__all__:
      try:
        reachable.add(id(getattr(package, attribute)))
      except ImportError as e:
        assert BACKEND != "tensorflow" and "TensorFlow by nature" in str(e), (name, attribute)
  missing = sorted(n for n, cls in registry.PUBLIC.items() if id(cls) not in reachable)
  assert not missing, f"exported but in no public __all__: {missing}"
  assert len(registry.PUBLIC) >= 30
