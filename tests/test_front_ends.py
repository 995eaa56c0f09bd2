"""Keras 3 and tf-keras give every loss and metric the same values, gradients and errors.

The package's Keras objects are written once against ``compat.keras``, which a process binds to
Keras 3 (TensorFlow 2.16+) or, with ``TF_USE_LEGACY_KERAS=1``, to tf-keras. This module runs
``tests/_front_end_probe.py`` once in a process of each flavour (the two at the same time) and
compares what they wrote, for the whole loss registry and every metric class, on the same fixed
inputs (integer class ids ``[B]`` and ``[B, 1]``, graded dense relevance with a padded item):

* loss values and their gradients with respect to ``y_pred``, and loss values with sample
  weights, reduced and unreduced (``reduction="none"``, shapes included): the flavours differ in
  how their ``Loss.__call__`` treats labels, scores and sample weights, so the same maths must
  come out through both (:class:`tfrank4class.losses.base.Loss`);
* metric results after an unweighted and a weighted update;
* the type and message of every error in the probe's table of bad calls (bad constructor
  arguments and names, bad labels and scores), and of any computation that raises (dense
  relevance handed to an embedding loss).

The sampling losses are compared like the others: the seeded TF-Ranking losses (Gumbel
ApproxNDCG, YetiLogistic) get ``seed=3``, and ``tf.random.set_seed(0)`` right before each
computation fixes the random tie order of ListMLE and CoupledRankDistil too (TensorFlow derives
their op seeds from the global seed and a counter that ``set_seed`` resets), so with the same
calls in the same order both processes draw the same numbers.
"""

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import _front_end_probe as probe
import numpy as np
import pytest

from tfrank4class import losses
from tfrank4class.losses import base

pytestmark = [
  pytest.mark.skipif(
    importlib.util.find_spec("tf_keras") is None,
    reason="needs tf-keras installed, to compare the two Keras flavours",
  ),
  pytest.mark.both_flavours,
]

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Float32 maths on identical inputs through identical TensorFlow ops: only the order of a
# reduction may differ between the flavours' Loss.__call__.
RTOL, ATOL = 1e-6, 1e-7


def _env(legacy):
  env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
  env.update(PYTHONPATH=str(ROOT), NO_GCE_CHECK="true", TF_CPP_MIN_LOG_LEVEL="2")
  if legacy:
    env["TF_USE_LEGACY_KERAS"] = "1"
  return env


@pytest.fixture(scope="module")
def probes(tmp_path_factory):
  """``{"keras3": (values, info), "tf_keras": (values, info)}`` from one probe run per flavour."""
  out = tmp_path_factory.mktemp("front_ends")
  script = str(pathlib.Path(__file__).with_name("_front_end_probe.py"))
  runs = {}
  for flavour, legacy in (("keras3", False), ("tf_keras", True)):
    runs[flavour] = subprocess.Popen(
      [sys.executable, script, str(out / flavour)],
      env=_env(legacy),
      cwd=str(ROOT),
      stdout=subprocess.PIPE,
      stderr=subprocess.STDOUT,
      text=True,
    )
  results = {}
  for flavour, run in runs.items():
    log, _ = run.communicate(timeout=600)
    assert run.returncode == 0, f"the {flavour} probe failed:\n{log[-5000:]}"
    values = dict(np.load(out / f"{flavour}.npz"))
    info = json.loads((out / f"{flavour}.json").read_text())
    results[flavour] = (values, info)
  return results


def test_the_probes_ran_one_flavour_each(probes):
  assert probes["keras3"][1]["keras_3"] is True
  assert probes["tf_keras"][1]["keras_3"] is False
  assert probes["tf_keras"][1]["keras"] == "tf_keras"


def _compare(probes, errors, values):
  """Asserts that both flavours failed alike on every computation whose key starts with
  ``errors``, and computed the same numbers for every value key that starts with one of
  ``values``; returns those value keys."""
  (new, new_info), (old, old_info) = probes["keras3"], probes["tf_keras"]
  new_errors, old_errors = new_info["errors"], old_info["errors"]
  keys = sorted(k for k in old_errors if k.startswith(errors))
  assert keys, f"the probe computed nothing under {errors!r}"
  assert keys == sorted(k for k in new_errors if k.startswith(errors))
  for key in keys:
    assert new_errors[key] == old_errors[key], key
  computed = sorted(k for k in old if k.startswith(values))
  assert computed == sorted(k for k in new if k.startswith(values))
  for key in computed:
    assert new[key].shape == old[key].shape, key
    assert np.all(np.isfinite(old[key])), key
    np.testing.assert_allclose(new[key], old[key], rtol=RTOL, atol=ATOL, err_msg=key)
  return computed


@pytest.mark.parametrize("name", losses.names())
def test_loss_values_and_gradients_match(probes, name):
  computed = _compare(probes, f"compute/{name}/", (f"loss/{name}/", f"grad/{name}/"))
  # Every loss takes class ids in both shapes, with its gradient.
  for kind in ("ids", "ids_b1"):
    assert {f"loss/{name}/{kind}", f"grad/{name}/{kind}"} <= set(computed)
  errors = probes["keras3"][1]["errors"]
  if name in ("contrastive_loss", "triplet_loss"):  # embeddings: class ids only
    assert errors[f"compute/{name}/dense"].startswith("ValueError: `y_true` must be class ids")
  elif name in ("smooth_topk_svm_loss", "soft_rank_topk_loss"):  # one true class per list
    assert errors[f"compute/{name}/dense"].startswith(
      "ValueError: `y_true` given as dense relevance must have at most one entry > 0 per row"
    )
  else:
    assert f"loss/{name}/dense" in computed


def test_every_registered_loss_reduces_through_the_base_class():
  # What makes the unreduced shapes equal: Keras 3's own Loss.__call__ would give values with
  # [B, 1] sample weights the shape [B, 1] where Keras 2 gives [B].
  assert [n for n in losses.names() if not isinstance(losses.get(n), base.Loss)] == []


@pytest.mark.parametrize("name", losses.names())
def test_sample_weighted_loss_values_match(probes, name):
  for kind in ("weighted", "none"):
    key = f"{kind}/{name}"
    assert _compare(probes, f"compute/{key}", key) == [key]


@pytest.mark.parametrize("name", sorted(probe.METRICS))
def test_metric_values_match(probes, name):
  computed = _compare(probes, f"compute/metric/{name}/", f"metric/{name}/")
  assert len(computed) == 3  # ids, [B, 1] ids, dense relevance


@pytest.mark.parametrize("call", sorted(probe.BAD_CALLS))
def test_error_messages_match(probes, call):
  new, old = probes["keras3"][1]["errors"][call], probes["tf_keras"][1]["errors"][call]
  assert old != "no error", f"{call} raised nothing"
  assert new == old
