"""What the version before the consolidation saved still loads and computes the same.

The fixture was written by ``tests/fixtures/saved_before_consolidation/make.py`` on commit
7724dc6, under each stack of the time (``tf2.15``: TensorFlow 2.15 with Keras 2.15, a stack that
release 0.1.0 was the last to support; ``tf2.21``: tf-keras 2.21), and both are loaded on today's
stack: every registered loss and five metrics as Keras serializations with
their values on fixed inputs, and a compiled ``.keras`` model with a Rank4Class head, a TF-Ranking
loss and ranking metrics, with its predictions. Nothing here is computed by the code under test
first: the expected numbers are the old version's.

Under Keras 3 the configs (written by Keras 2) load as they are, except that Keras 2's default
reduction ``"auto"`` has no Keras 3 spelling: it loads as ``"sum_over_batch_size"``, which is what
``"auto"`` means in ``fit`` (``compat.loss_reduction``). A TF-Ranking loss (``RankingLoss``) loads
with ``normalization="tf_ranking"``, the normalisation it was saved with (the argument, and the
per-list default, came later; docs/losses.md), so it gives the old value. The ``.keras`` model
files were written by Keras 2 (tf-keras, Keras 2.15), whose ``.keras`` format Keras 3 does not
read, so that test runs under tf-keras only.
"""

import json
import pathlib

import numpy as np
import pytest
import tensorflow as tf

import tfrank4class.heads  # noqa: F401  (registers the head: `import tfrank4class` alone does not)
import tfrank4class.losses  # noqa: F401
import tfrank4class.metrics  # noqa: F401
from tfrank4class import compat

FIXTURE = pathlib.Path(__file__).parent / "fixtures" / "saved_before_consolidation"
STACKS = ("tf2.15", "tf2.21")
# Losses that sample give a value that depends on the random state: Gumbel noise (Gumbel
# ApproxNDCG, YetiLogistic), or a random order among tied labels (ListMLE, CoupledRankDistil:
# one-hot labels tie every other class). Only their config is compared.
STOCHASTIC = {
  "gumbel_approx_ndcg_loss",
  "yeti_logistic_loss",
  "list_mle_loss",
  "coupled_rankdistil_loss",
}


def _inputs(stack):
  return np.load(FIXTURE / stack / "inputs.npy", allow_pickle=True).item()


def _rows(stack, kind):
  return json.loads((FIXTURE / stack / f"{kind}.json").read_text())


def _cases(kind):
  return [(stack, name) for stack in STACKS for name in sorted(_rows(stack, kind))]


def _as_loaded(config):
  """A Keras 2 loss config as the bound Keras loads it: ``reduction`` in its spelling, and a
  TF-Ranking loss (a ``key`` in its config) with TF-Ranking's normalisation."""
  loaded = {**config, "reduction": compat.loss_reduction(config["reduction"])}
  if "key" in config:
    loaded["normalization"] = "tf_ranking"
  return loaded


@pytest.mark.parametrize("stack, name", _cases("losses"))
def test_old_loss_configs_load_and_give_the_old_values(stack, name):
  row = _rows(stack, "losses")[name]
  inputs = _inputs(stack)
  loss = compat.keras.saving.deserialize_keras_object(row["config"])
  assert loss.get_config() == _as_loaded(row["config"]["config"])
  assert type(loss).from_config(loss.get_config()).get_config() == loss.get_config()
  if name not in STOCHASTIC:
    value = float(loss(inputs["labels"], inputs["scores"]))
    assert value == pytest.approx(row["value"], rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("stack, name", _cases("metrics"))
def test_old_metric_configs_load_and_give_the_old_values(stack, name):
  row = _rows(stack, "metrics")[name]
  inputs = _inputs(stack)
  metric = compat.keras.saving.deserialize_keras_object(row["config"])
  metric.update_state(inputs["labels"], inputs["scores"])
  assert float(metric.result()) == pytest.approx(row["value"], rel=1e-6, abs=1e-7)


@pytest.mark.skipif(
  compat.KERAS_3,
  reason="model.keras was saved by Keras 2 (tf-keras / Keras 2.15); Keras 3's load_model does not "
  "read Keras 2 .keras files (it cannot locate their 'Functional' class), with or without "
  "tfrank4class",
)
@pytest.mark.parametrize("stack", STACKS)
def test_old_keras_model_loads_without_custom_objects_and_predicts_the_same(stack):
  inputs = _inputs(stack)
  model = compat.keras.models.load_model(FIXTURE / stack / "model.keras")
  want = np.load(FIXTURE / stack / "model_outputs.npy")
  np.testing.assert_allclose(model.predict(inputs["x"], verbose=0), want, rtol=1e-5, atol=1e-6)
  # The compiled loss and metrics came back too (the loss with the normalisation it was trained
  # with), and the model still trains.
  assert model.loss.normalization == "tf_ranking"
  history = model.fit(inputs["x"], inputs["labels"], epochs=1, verbose=0).history
  assert np.isfinite(history["loss"][0])
  assert {"top_1_accuracy", "ndcg_5"} <= set(history)
  assert isinstance(model.layers[-1], tf.Module)
