"""The compatibility module: TensorFlow version check, Keras binding, TF-Ranking loader, mix-ups."""

import importlib.util
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from tfrank4class import compat, losses, metrics
from tfrank4class.compat import keras


def test_too_old_tensorflow_names_the_fix():
  with pytest.raises(
    ImportError,
    match=r"needs TensorFlow >= 2\.16, found 2\.15\.1\. Install the "
    r"current stack: python -m pip install "
    r"\"tensorflow==2\.21\.0\" \"tf-keras==2\.21\.0\"",
  ):
    compat.check_tensorflow_version("2.15.1")
  compat.check_tensorflow_version("2.16.0")
  compat.check_tensorflow_version("2.21.0")


def test_keras_binding_follows_tf_keras():
  # The rule TensorFlow applies to `tf.keras`: Keras 3, or tf-keras with TF_USE_LEGACY_KERAS=1.
  assert compat.keras.Model is tf.keras.Model
  import keras  # pylint: disable=g-import-not-at-top

  if compat.legacy_keras_requested():
    assert compat.keras.__version__.startswith("2.") and compat.KERAS_PACKAGE == "tf_keras"
    assert not compat.KERAS_3
  else:
    assert compat.keras is keras and keras.__version__.startswith("3.") and compat.KERAS_3


@pytest.mark.parametrize(
  "value, legacy", [("1", True), ("true", True), ("True", True), ("0", False), ("yes", False)]
)
def test_legacy_keras_requested_reads_the_variable_as_tensorflow_does(value, legacy):
  # TensorFlow's lazy `tf.keras` loader accepts exactly "true", "True" and "1".
  assert compat.legacy_keras_requested({"TF_USE_LEGACY_KERAS": value}) is legacy
  assert compat.legacy_keras_requested({}) is False


def test_loss_reduction_maps_keras_2_auto():
  assert compat.loss_reduction("auto") == ("sum_over_batch_size" if compat.KERAS_3 else "auto")
  for reduction in ("sum", "none", "sum_over_batch_size"):
    assert compat.loss_reduction(reduction) == reduction


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


_MIX_UP = """
    import numpy as np, tensorflow as tf
    from tfrank4class import compat, heads, losses, metrics
    {imports}
    x = np.random.default_rng(0).normal(size=(32, 4)).astype("float32")
    y = np.argmax(x, 1)
    # The supported way: the model is built with the Keras that `tf.keras` is.
    assert native.Model is tf.keras.Model is compat.keras.Model
    inp = native.Input((4,))
    model = native.Model(inp, heads.Rank4ClassHead(4, "latent_cross", hidden_units=(8,))(inp))
    model.compile("adam", loss=losses.get("softmax_loss"), metrics=[metrics.NDCG(2)])
    history = model.fit(x, y, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    print("native ok", native.__version__)
    # The other Keras compiling our loss or metric: refused at compile or at the first step.
    for kwargs in ({{"loss": losses.get("softmax_loss")}},
                   {{"loss": "sparse_categorical_crossentropy", "metrics": [metrics.MRR()]}}):
      m = other.Sequential([other.Input((4,)), other.layers.Dense(4)])
      try:
        m.compile("adam", **kwargs)
        m.fit(x, y, epochs=1, verbose=0)
      except compat.KerasFlavourError as e:
        print("refused:", e)
    # Our layer on a symbolic tensor of the other Keras: refused.
    try:
      heads.Rank4ClassHead(4)(other.Input((4,)))
    except compat.KerasFlavourError as e:
      print("refused:", e)
    """


@pytest.mark.parametrize(
  "env, imports, native_version, fix",
  [
    ({}, "import keras as native, tf_keras as other", "3.", "build the model with `import keras`"),
    (
      {"TF_USE_LEGACY_KERAS": "1"},
      "import tf_keras as native, keras as other",
      "2.",
      "build the model with `import tf_keras as keras`",
    ),
  ],
  ids=["keras3", "legacy"],
)
@pytest.mark.both_flavours
def test_each_flavour_trains_and_refuses_the_other(env, imports, native_version, fix):
  result = _run(_MIX_UP.format(imports=imports), **env)
  assert result.returncode == 0, result.stderr[-3000:]
  assert f"native ok {native_version}" in result.stdout
  assert result.stdout.count("refused:") == 3, result.stdout
  assert fix in result.stdout


def test_missing_tf_keras_names_the_fix():
  result = _run(
    """
      import sys
      sys.modules["tf_keras"] = None  # as if tf-keras were not installed
      import tfrank4class.compat
      """,
    TF_USE_LEGACY_KERAS="1",
  )
  assert result.returncode != 0
  assert "tf-keras package, and it is not installed. Run: python -m pip install" in result.stderr
  version = "{}.{}".format(*compat.tensorflow_version())
  assert f'"tf-keras~={version}.0"' in result.stderr


def test_the_tensorflow_fence_names_the_setting_that_chose_another_backend(monkeypatch, tmp_path):
  """tf.data, the binaries and SavedModel refuse Keras's JAX and PyTorch backends on import,
  naming KERAS_BACKEND or the keras.json that chose the backend (the core runs there)."""
  monkeypatch.setattr(compat, "BACKEND", "jax")
  monkeypatch.setenv("KERAS_BACKEND", "jax")
  with pytest.raises(
    ImportError,
    match=r"^tfrank4class.data is TensorFlow by nature .* but "
    r"KERAS_BACKEND is 'jax': set KERAS_BACKEND=tensorflow before Keras",
  ):
    compat.require_tensorflow_backend("tfrank4class.data")
  path = tmp_path / "keras.json"
  path.write_text('{"backend": "torch"}')
  monkeypatch.setenv("KERAS_BACKEND", "")
  monkeypatch.setenv("KERAS_HOME", str(tmp_path))
  monkeypatch.setattr(compat, "BACKEND", "torch")
  with pytest.raises(
    ImportError,
    match=rf'the Keras config file {path} sets "backend": "torch": '
    r'set "backend": "tensorflow" there',
  ):
    compat.require_tensorflow_backend("tfrank4class.train")


def test_keras_backend_setting_reads_the_variable_then_keras_json(tmp_path):
  path = tmp_path / "keras.json"
  path.write_text('{"backend": "jax", "floatx": "float32"}')
  home = {"KERAS_HOME": str(tmp_path)}
  assert compat.keras_backend_setting(home) == ("jax", str(path))
  assert compat.keras_backend_setting({**home, "KERAS_BACKEND": ""}) == ("jax", str(path))
  assert compat.keras_backend_setting({**home, "KERAS_BACKEND": "torch"}) == (
    "torch",
    "KERAS_BACKEND",
  )
  # A keras.json that is not JSON, or that names no backend, is no setting (Keras reads it so).
  for text in ("{not json", '{"floatx": "float32"}'):
    path.write_text(text)
    assert compat.keras_backend_setting(home) == ("tensorflow", None)
  path.unlink()
  assert compat.keras_backend_setting(home) == ("tensorflow", None)


# Which backend Keras itself picks: its config module resolves it before Keras imports the
# backend, which fails here for all but TensorFlow (JAX is not installed, and Keras's numpy
# backend imports it too); the module stays loaded after the failed import.
_KERAS_PICKS = """
    import sys
    try:
      import keras
    except ImportError:
      pass
    print(sys.modules["keras.src.backend.config"].backend())
    """


@pytest.mark.slow  # five processes that import Keras: ~40 s; the fast test above reads the rule
def test_keras_backend_setting_is_the_backend_keras_itself_picks(tmp_path):
  (tmp_path / "keras.json").write_text('{"backend": "jax"}')
  # Keras writes a default keras.json into a KERAS_HOME that has none: one fresh home per case.
  (tmp_path / "empty1").mkdir()
  (tmp_path / "empty2").mkdir()
  cases = [
    ({"KERAS_HOME": str(tmp_path), "KERAS_BACKEND": ""}, ("jax", str(tmp_path / "keras.json"))),
    ({"KERAS_HOME": str(tmp_path), "KERAS_BACKEND": "tensorflow"}, ("tensorflow", "KERAS_BACKEND")),
    ({"KERAS_HOME": str(tmp_path / "empty1"), "KERAS_BACKEND": "jax"}, ("jax", "KERAS_BACKEND")),
    ({"KERAS_HOME": str(tmp_path / "empty2"), "KERAS_BACKEND": ""}, ("tensorflow", None)),
  ]
  for env, expected in cases:
    assert compat.keras_backend_setting(env) == expected
    keras_picks = _run(_KERAS_PICKS, **env)
    assert keras_picks.stdout.split()[-1:] == [expected[0]], keras_picks.stderr[-2000:]
  # The message's other fix: keras.json set to tensorflow.
  (tmp_path / "keras.json").write_text('{"backend": "tensorflow"}')
  code = "import tfrank4class.compat, keras; print(keras.backend.backend())"
  fixed = _run(code, KERAS_HOME=str(tmp_path), KERAS_BACKEND="")
  assert fixed.returncode == 0 and fixed.stdout.split()[-1] == "tensorflow", fixed.stderr[-2000:]


def test_the_callers_are_read_once_per_object_eagerly_and_once_per_trace(monkeypatch):
  walks = []
  check = compat.check_keras_flavour

  def counting(obj, args=(), kwargs=None, caller_modules=()):
    if caller_modules:
      walks.append(caller_modules)
    return check(obj, args, kwargs, caller_modules)

  monkeypatch.setattr(compat, "check_keras_flavour", counting)
  loss, metric = losses.get("softmax_loss"), metrics.MRR()
  y, s = np.array([0, 1]), np.array([[1.0, 0.0], [0.0, 1.0]], np.float32)
  for _ in range(3):
    loss(y, s)
  assert len(walks) == 1
  _ = metric.variables, metric.variables
  assert len(walks) == 2
  step = tf.function(lambda y, s: loss(y, s))
  for _ in range(3):
    step(y, s)
  assert len(walks) == 3  # traced once


class _Identity(keras.losses.Loss):
  """Keras's own ``Loss.__call__`` on values that are already losses: the reference reduction."""

  def call(self, y_true, y_pred):
    del y_true
    return y_pred


_VALUES = [
  np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32),
  np.array([1.0, 3.0, 5.0], np.float32),
  np.float32(2.5),
]
_KERAS_REDUCTIONS = ["sum", "none", "sum_over_batch_size"] + (
  ["mean", "mean_with_sample_weight"] if compat.KERAS_3 else ["auto"]
)


@pytest.mark.parametrize("reduction", _KERAS_REDUCTIONS)
def test_reduce_loss_is_the_bound_keras_reduction(reduction):
  loss = _Identity(reduction=reduction)
  for values in _VALUES:
    want = loss(values, values)
    np.testing.assert_allclose(compat.reduce_loss(loss, values), want, rtol=1e-6)


@pytest.mark.parametrize("reduction", ["sum", "sum_over_batch_size", compat.DEFAULT_REDUCTION])
def test_reduce_loss_under_a_strategy_is_the_bound_keras_rule(reduction, mirrored_strategy):
  """Keras 3 divides a mean by the replicas; Keras 2 refuses a mean outside ``compile``."""
  loss = _Identity(reduction=reduction)
  values = _VALUES[1]
  with mirrored_strategy.scope():
    try:
      want = loss(values, values)
    except ValueError as e:
      with pytest.raises(ValueError, match=r"Reduction.SUM"):
        compat.reduce_loss(loss, values)
      assert "Reduction.SUM" in str(e)
    else:
      np.testing.assert_allclose(compat.reduce_loss(loss, values), want, rtol=1e-6)
      per_replica = mirrored_strategy.run(lambda: compat.reduce_loss(loss, tf.constant(values)))
      reference = mirrored_strategy.run(lambda: loss(tf.constant(values), tf.constant(values)))
      np.testing.assert_allclose(
        mirrored_strategy.experimental_local_results(per_replica),
        mirrored_strategy.experimental_local_results(reference),
        rtol=1e-6,
      )


def test_keras_string_identifiers_reach_the_package_registries():
  for get in (keras.losses.get, tf.keras.losses.get):
    loss = get("approx_ndcg_loss")
    assert isinstance(loss, losses.RankingLoss) and loss.key == "approx_ndcg_loss"
  for get in (keras.metrics.get, tf.keras.metrics.get):
    metric = get("ndcg_5")
    assert isinstance(metric, metrics.NDCG) and metric.k == 5
  # Keras's own names and non-string identifiers are Keras's business, as before.
  assert keras.losses.get("mse") is keras.losses.get.keras_get("mse")
  mrr = metrics.MRR()
  assert keras.metrics.get(mrr) is mrr
  with pytest.raises(ValueError):
    keras.losses.get("no_such_loss")


def test_resolve_by_name_never_shadows_a_keras_name(monkeypatch):
  from tfrank4class.registry import Registry

  for module in compat._name_modules("losses"):  # pylint: disable=protected-access
    monkeypatch.setattr(module, "get", module.get)  # restored after the test
  mine = Registry("loss")
  mine.add("mse", lambda: "ours")
  mine.add("my_loss", lambda: "ours")
  compat.resolve_by_name("losses", mine)
  compat.resolve_by_name("losses", mine)  # idempotent: wraps Keras's own get, not the hook
  assert keras.losses.get("my_loss") == "ours" and tf.keras.losses.get("my_loss") == "ours"
  assert keras.losses.get("mse") is not None and keras.losses.get("mse") != "ours"
  assert compat.keras_resolves("losses", "mse")
  assert not compat.keras_resolves("losses", "my_loss")
  with pytest.raises(ValueError, match=r"`kind` must be one of \['losses', 'metrics'\], got 'x'"):
    compat.resolve_by_name("x", mine)


def test_no_package_name_is_a_keras_name():
  names = losses.names() + [n.replace("K", "3") for n in metrics.names()]
  assert not [n for n in names if compat.keras_resolves("losses", n)]
  assert not [n for n in names if compat.keras_resolves("metrics", n)]
