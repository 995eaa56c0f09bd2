"""The registry helper (tfrank4class.registry), and the loss registry built on it: every
TF-Ranking key with integer labels, in compile, fit and save/load."""

import ast
import doctest
import functools
import pathlib
import sys

import _tf_ranking_reference as tf_ranking_reference
import numpy as np
import pytest
import tensorflow as tf
from _loss_arguments import loss as short_list_loss

from tfrank4class import compat, losses, metrics
from tfrank4class import registry as registry_lib
from tfrank4class.registry import Registry

tfr_losses = compat.tf_ranking_module("keras.losses")

C = 5


def _data(n=64, seed=0):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(n, 6)).astype(np.float32)
  y = (np.abs(x[:, :C]).argmax(1)).astype(np.int64)  # a learnable rule
  return x, y


def _model():
  tf.keras.utils.set_random_seed(0)
  return tf.keras.Sequential(
    [tf.keras.Input((6,)), tf.keras.layers.Dense(16, activation="relu"), tf.keras.layers.Dense(C)]
  )


def test_registry_lists_every_tf_ranking_key():
  assert set(tfr_losses.RankingLossKey.all_keys()) <= set(losses.names())
  for key in (
    "softmax_loss",
    "pairwise_logistic_loss",
    "approx_ndcg_loss",
    "gumbel_approx_ndcg_loss",
    "mean_squared_loss",
  ):
    assert key in losses.names()


# Losses that sample (Gumbel noise, label-tie shuffling): compared on finiteness only.
STOCHASTIC = (
  "gumbel_approx_ndcg_loss",
  "coupled_rankdistil_loss",
  "yeti_logistic_loss",
  "list_mle_loss",
)


@pytest.mark.parametrize("key", losses.registry.TFR_KEYS)
def test_value_equals_tf_ranking_on_one_hot(key):
  _, y = _data(8)
  scores = np.random.default_rng(1).normal(size=(8, C)).astype(np.float32)
  ours = losses.get(key, normalization="tf_ranking")(y, scores)
  tfr_scores = scores[..., None] if key == "ordinal_loss" else scores
  theirs = tf_ranking_reference.loss(key)(tf.one_hot(y, C), tfr_scores)
  if key in STOCHASTIC:
    assert np.isfinite(ours.numpy()) and np.isfinite(theirs.numpy())
    return
  np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-5)
  # [B, 1] ids and dense relevance give the same value as [B] ids.
  ours = losses.get(key)
  value = ours(y, scores).numpy()
  np.testing.assert_allclose(ours(y[:, None], scores).numpy(), value, rtol=1e-6)
  np.testing.assert_allclose(ours(np.eye(C)[y], scores).numpy(), value, rtol=1e-6)


@pytest.mark.parametrize("key", losses.registry.TFR_KEYS)
def test_trains_and_round_trips(key, tmp_path):
  x, y = _data()
  model = _model()
  model.compile(optimizer=tf.keras.optimizers.Adam(0.01), loss=losses.get(key))
  history = model.fit(x, y, batch_size=16, epochs=3, verbose=0)
  assert np.all(np.isfinite(history.history["loss"]))
  path = str(tmp_path / "m.keras")
  model.save(path)
  loaded = tf.keras.models.load_model(path)
  assert isinstance(loaded.loss, losses.RankingLoss) and loaded.loss.key == key
  np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0), rtol=1e-5)
  if key not in STOCHASTIC:
    np.testing.assert_allclose(
      model.evaluate(x, y, verbose=0), loaded.evaluate(x, y, verbose=0), rtol=1e-5
    )


def test_softmax_loss_training_improves_accuracy():
  x, y = _data(256)
  model = _model()
  model.compile(optimizer=tf.keras.optimizers.Adam(0.02), loss=losses.get("softmax_loss"))
  before = (model.predict(x, verbose=0).argmax(1) == y).mean()
  model.fit(x, y, batch_size=32, epochs=20, verbose=0)
  after = (model.predict(x, verbose=0).argmax(1) == y).mean()
  assert after > max(0.8, before + 0.3)


def test_under_mirrored_strategy(mirrored_strategy):
  x, y = _data()
  with mirrored_strategy.scope():
    model = _model()
    model.compile(optimizer="adam", loss=losses.get("approx_ndcg_loss"))
  history = model.fit(x, y, batch_size=16, epochs=1, verbose=0)
  assert np.isfinite(history.history["loss"][0])


def test_lambda_weight_round_trip():
  loss = losses.get("pairwise_logistic_loss", lambda_weight=tfr_losses.NDCGLambdaWeightV2())
  config = tf.keras.utils.serialize_keras_object(loss)
  restored = tf.keras.utils.deserialize_keras_object(config)
  _, y = _data(8)
  scores = np.random.default_rng(2).normal(size=(8, C)).astype(np.float32)
  np.testing.assert_allclose(restored(y, scores).numpy(), loss(y, scores).numpy(), rtol=1e-6)
  assert isinstance(restored.loss_kwargs["lambda_weight"], tfr_losses.NDCGLambdaWeightV2)


def test_unknown_name_lists_known_names():
  with pytest.raises(
    ValueError, match=r"Unknown loss name 'softmax'; known losses are: .*softmax_loss"
  ):
    losses.get("softmax")


def test_bad_kwargs_and_labels():
  with pytest.raises(
    ValueError, match=r"Invalid keyword arguments \['nope'\] for loss 'softmax_loss'"
  ):
    losses.get("softmax_loss", nope=1)
  with pytest.raises(ValueError, match=r"`y_true` must be class ids in \[0, num_classes=5\)"):
    losses.get("softmax_loss")([0, 7], np.zeros((2, C), np.float32))
  with pytest.raises(ValueError, match=r"y_pred.*shape \[batch_size, list_size\]"):
    losses.get("softmax_loss")([0], np.zeros((C,), np.float32))


def test_register_rejects_duplicates():
  with pytest.raises(ValueError, match="already registered"):
    losses.register("softmax_loss")(type("Dup", (tf.keras.losses.Loss,), {}))


@pytest.mark.parametrize("name", ["mse", "categorical_crossentropy", "Huber"])
def test_register_refuses_a_keras_loss_name(name):
  with pytest.raises(ValueError, match=rf"Cannot register a loss named '{name}': it is a Keras"):
    losses.register(name)
  assert name not in losses.names()


def test_compile_fit_evaluate_and_reload_with_string_names(tmp_path):
  """``compile(loss="approx_ndcg_loss", metrics=["ndcg_5", "mrr"])`` builds the registry's loss
  and metrics: one training step, then ``evaluate`` equals them computed directly."""
  x, y = _data(32)
  tf.keras.utils.set_random_seed(0)
  model = tf.keras.Sequential([tf.keras.Input((6,)), tf.keras.layers.Dense(C)])
  model.compile(optimizer="adam", loss="approx_ndcg_loss", metrics=["ndcg_5", "mrr"])
  model.fit(x, y, batch_size=32, epochs=1, verbose=0)
  got = model.evaluate(x, y, batch_size=32, verbose=0, return_dict=True)
  scores = model.predict(x, verbose=0)
  want = {"loss": losses.get("approx_ndcg_loss")(y, scores), "ndcg_5": metrics.NDCG(5)}
  want["ndcg_5"].update_state(y, scores)
  mrr = metrics.MRR()
  mrr.update_state(y, scores)
  np.testing.assert_allclose(got["loss"], float(want["loss"]), rtol=1e-5)
  np.testing.assert_allclose(got["ndcg_5"], float(want["ndcg_5"].result()), rtol=1e-5)
  np.testing.assert_allclose(got["mrr"], float(mrr.result()), rtol=1e-5)
  model.save(tmp_path / "strings.keras")
  reloaded = tf.keras.models.load_model(tmp_path / "strings.keras")
  again = reloaded.evaluate(x, y, batch_size=32, verbose=0, return_dict=True)
  np.testing.assert_allclose([again[k] for k in got], list(got.values()), rtol=1e-5)


OWN = [n for n in losses.names() if n not in losses.registry.TFR_KEYS]


@pytest.mark.parametrize("name", OWN)
def test_own_losses_train_with_integer_labels_and_round_trip(name, tmp_path):
  """Every loss of ours in the registry, with its defaults, in compile/fit/save/load."""
  x, y = _data()
  model = _model()  # [B, 5] outputs: scores over 5 classes, or 5-d embeddings for pairwise losses
  model.compile(optimizer=tf.keras.optimizers.Adam(0.01), loss=short_list_loss(name))
  history = model.fit(x, y, batch_size=16, epochs=2, verbose=0, shuffle=False)
  assert np.all(np.isfinite(history.history["loss"]))
  path = str(tmp_path / "m.keras")
  model.save(path)
  loaded = tf.keras.models.load_model(path)
  assert type(loaded.loss) is type(model.loss)
  assert loaded.loss.get_config() == model.loss.get_config()
  np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0), rtol=1e-5)


@pytest.mark.parametrize("name", losses.names())
def test_every_loss_trains_under_mixed_float16(name, mixed_float16):
  """A float16 last layer (the mixed_float16 policy) trains one step with every registered loss."""
  del mixed_float16
  x, y = _data(16)
  model = _model()
  assert model(x[:1]).dtype == tf.float16  # the scores reach the loss in float16
  model.compile(optimizer=tf.keras.optimizers.Adam(0.01), loss=short_list_loss(name))
  loss = model.train_on_batch(x, y)
  assert np.isfinite(loss)


@pytest.mark.parametrize("dtype", [tf.float16, tf.bfloat16])
def test_half_precision_scores_give_the_float32_value(dtype):
  """Half-precision scores are scored in float32: the value of the same (rounded) scores in float32.

  In float16 itself ``exp(12) > 65504`` overflows, so the softmax loss of these scores would be
  inf or NaN; the reference below is TF-Ranking's loss on float32 copies of the rounded scores.
  """
  _, y = _data(8)
  scores = 12.0 * np.random.default_rng(3).normal(size=(8, C))
  half = tf.cast(scores, dtype)
  reference = tf_ranking_reference.loss("softmax_loss")(tf.one_hot(y, C), tf.cast(half, tf.float32))
  ours = losses.get("softmax_loss")(y, half)
  assert ours.dtype == tf.float32
  np.testing.assert_allclose(ours.numpy(), reference.numpy(), rtol=1e-6)


# --- the Registry helper -------------------------------------------------------------------------


def _widgets():
  widgets = Registry("widget", argument="kind")
  widgets.add("plain", dict)  # dict(**kwargs) returns the keyword arguments it was given
  widgets.add("bolt", lambda size=1: ("bolt", size))
  widgets.add_pattern("gear_N", r"gear_(0*[1-9][0-9]*)", lambda n, **kw: ("gear", n, kw), int)
  return widgets


def test_registry_doctests():
  result = doctest.testmod(registry_lib, optionflags=doctest.ELLIPSIS)
  assert result.attempted >= 5 and result.failed == 0


def test_registry_module_imports_only_the_standard_library():
  # `import tfrank4class` itself imports Keras (it registers the Keras objects), but the
  # registry module depends on no framework: its module-level imports are the standard
  # library's (`export` imports the Keras binding when it is called).
  tree = ast.parse(pathlib.Path(registry_lib.__file__).read_text(encoding="utf-8"))
  imported = set()
  for node in tree.body:
    if isinstance(node, ast.Import):
      imported.update(alias.name.split(".")[0] for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
      imported.add((node.module or "").split(".")[0])
  assert imported and imported <= set(sys.stdlib_module_names), imported


def test_registry_unknown_name_names_argument_value_and_known_names():
  with pytest.raises(ValueError) as e:
    _widgets().get("nut")
  assert str(e.value) == "`kind` must be one of ['bolt', 'gear_N', 'plain'], got 'nut'."
  # Non-string names are unknown names too (a ValueError, not a TypeError on hashing).
  for bad in (None, 3, ["bolt"], {"a": 1}):
    with pytest.raises(ValueError, match=r"`kind` must be one of \['bolt', 'gear_N', 'plain'\]"):
      _widgets().get(bad)


def test_registry_custom_message_fields():
  widgets = Registry("widget", message="{kind}|{argument}|{value!r}|{names}|{joined}|{aliases}")
  widgets.add("b", dict)
  widgets.add("a", dict)
  widgets.add_alias("x", "a")
  with pytest.raises(ValueError) as e:
    widgets.get("c")
  assert str(e.value) == "widget|name|'c'|['a', 'b']|a, b|{'x': 'a'}"


def test_registry_passes_kwargs_through():
  widgets = _widgets()
  assert widgets.get("plain", a=1, b="two") == {"a": 1, "b": "two"}
  assert widgets.get("bolt") == ("bolt", 1) and widgets.get("bolt", size=7) == ("bolt", 7)
  assert widgets.get("gear_12", teeth=3) == ("gear", 12, {"teeth": 3})


def test_registry_patterns():
  widgets = _widgets()
  name, _, args = widgets.resolve("gear_3")
  assert (name, args) == ("gear_3", (3,))
  assert widgets.get("gear_007") == ("gear", 7, {})  # leading zeros: int("007") == 7
  for bad in ("gear_0", "gear_00", "gear_", "gear_x", "gear_N", "gear_3 ", "xgear_3"):
    assert bad not in widgets
    with pytest.raises(ValueError, match=rf"got '{bad}'"):
      widgets.get(bad)
  # A plain name is found before a pattern that also matches it.
  widgets.add("gear_1", lambda: "special")
  assert widgets.get("gear_1") == "special" and widgets.get("gear_2") == ("gear", 2, {})


def test_registry_refuses_duplicates_and_bad_names():
  widgets = _widgets()
  for name in ("plain", "gear_N"):
    with pytest.raises(ValueError, match=rf"A widget named '{name}' is already registered\."):
      widgets.add(name, dict)
  with pytest.raises(ValueError, match="already registered"):
    widgets.register("bolt")(dict)
  with pytest.raises(ValueError, match="already registered"):
    widgets.add_pattern("bolt", r"bolt_([0-9])", dict)
  widgets.add_alias("screw", "bolt")
  with pytest.raises(ValueError, match="A widget named 'screw' is already registered"):
    widgets.add("screw", dict)
  with pytest.raises(ValueError, match="no widget named 'nail'"):
    widgets.add_alias("pin", "nail")
  for bad in ("", None, 3):
    with pytest.raises(ValueError, match=rf"A widget name must be a non-empty string, got {bad!r}"):
      widgets.add(bad, dict)
  # The refused registrations left the registry as it was.
  assert widgets.names() == ("bolt", "gear_N", "plain")


def test_registry_names_are_sorted_and_stable():
  widgets = Registry("widget")
  for name in ("zeta", "alpha", "mu"):
    widgets.register(name)(dict)
  widgets.add_pattern("beta_K", r"beta_([0-9]+)", dict)
  widgets.add_alias("a", "alpha")
  expected = ("alpha", "beta_K", "mu", "zeta")  # sorted; aliases not listed
  assert widgets.names() == expected and widgets.names() == expected
  assert isinstance(widgets.names(), tuple)
  assert list(widgets) == list(expected) and len(widgets) == 4
  assert widgets.aliases() == {"a": "alpha"}


def test_registry_register_decorator_returns_the_factory():
  widgets = Registry("widget")

  @widgets.register("thing")
  class Thing:
    def __init__(self, x=0):
      self.x = x

  assert Thing.__name__ == "Thing" and widgets["thing"] is Thing
  assert isinstance(widgets.get("thing", x=2), Thing) and widgets.get("thing", x=2).x == 2


def test_registry_mapping_access_aliases_and_case_folding():
  widgets = Registry("widget", fold_case=True)
  widgets.add("imagenet2012", dict)
  widgets.add_alias("imagenet", "imagenet2012")
  assert widgets.resolve("ImageNet").name == "imagenet2012"
  assert widgets["IMAGENET"] is dict and "imagenet2012" in widgets and "cifar" not in widgets
  with pytest.raises(KeyError):
    widgets["cifar"]
  with pytest.raises(ValueError, match=r"got 'CIFAR'"):  # the message shows the name as given
    widgets.get("CIFAR")
  with pytest.raises(ValueError, match="looked up in lower case"):
    widgets.add("MNIST", dict)


def test_losses_registry_is_a_registry():
  assert isinstance(losses.registry.LOSSES, Registry)
  assert losses.names() == list(losses.registry.LOSSES.names()) == sorted(losses.names())
  assert set(losses.registry.TFR_KEYS) <= set(losses.names())
  for key in losses.registry.TFR_KEYS:
    factory = losses.registry.LOSSES[key]
    assert isinstance(factory, functools.partial) and factory.args == (key,)
  assert losses.registry.LOSSES["recall_loss"] is losses.RecallLoss
  # An instance is returned unchanged; unknown non-string names are a ValueError.
  loss = losses.RecallLoss()
  assert losses.get(loss) is loss
  with pytest.raises(ValueError, match=r"Unknown loss name None; known losses are: "):
    losses.get(None)
