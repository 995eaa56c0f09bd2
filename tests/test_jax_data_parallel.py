"""JAX: ``keras.distribution.DataParallel`` trains and evaluates with the package's losses and
metrics (they are ``keras.ops``), on two CPU devices.

The devices come from ``XLA_FLAGS=--xla_force_host_platform_device_count=2``, which must be set
before JAX starts, so the run is a subprocess. In it, a Rank4Class model trains one epoch with
a tfrank4class loss and metrics on batches sharded over both devices, and ``evaluate`` on the
sharded batches is compared with the same loss on one device and with Top-1 computed in numpy
from the predictions.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tfrank4class import compat

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = textwrap.dedent(
  """
  import json
  import jax
  import numpy as np
  import keras
  from tfrank4class import heads, losses, metrics

  devices = jax.devices()
  assert [d.platform for d in devices] == ["cpu", "cpu"], devices
  keras.distribution.set_distribution(keras.distribution.DataParallel(devices=devices))
  rng = np.random.default_rng(5)
  x = rng.standard_normal((64, 8)).astype("float32")
  y = rng.integers(0, 6, 64).astype("int32")
  keras.utils.set_random_seed(0)
  inputs = keras.Input((8,))
  hidden = keras.layers.Dense(16, activation="relu")(inputs)
  model = keras.Model(inputs, heads.Rank4ClassHead(6, hidden_units=(8,))(hidden))
  loss = losses.get("approx_ndcg_loss")
  model.compile(optimizer="adam", loss=loss, metrics=[metrics.get("top_1"), metrics.get("ndcg_5")])
  model.fit(x, y, batch_size=16, epochs=1, verbose=0)
  kernel = model.trainable_weights[0].value
  assert len(kernel.sharding.device_set) == 2  # the weights live on both devices
  evaluated = model.evaluate(x, y, batch_size=64, verbose=0, return_dict=True)
  keras.distribution.set_distribution(None)
  scores = np.asarray(model.predict(x, batch_size=64, verbose=0))
  rank = 1 + np.sum(scores > scores[np.arange(64), y][:, None], axis=1)  # no ties in float noise
  reference = {
    "loss": float(loss(y, scores)),  # on one device
    "top_1_accuracy": float(np.mean(rank == 1)),
    "ndcg_5": float(np.mean(np.where(rank <= 5, 1 / np.log2(rank + 1), 0.0))),
  }
  print("RESULT", json.dumps({"sharded": evaluated, "reference": reference}))
  """
)


@pytest.mark.skipif(compat.BACKEND != "jax", reason="keras.distribution runs on JAX")
def test_data_parallel_over_two_cpu_devices_trains_and_evaluates():
  env = {
    **os.environ,
    "KERAS_BACKEND": "jax",
    "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
    "PYTHONPATH": ROOT,
  }
  done = subprocess.run(
    [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300
  )
  assert done.returncode == 0, done.stderr[-3000:]
  line = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")][-1]
  result = json.loads(line.removeprefix("RESULT "))
  sharded, reference = result["sharded"], result["reference"]
  assert set(sharded) == {"loss", "top_1_accuracy", "ndcg_5"}, sharded
  for name, value in reference.items():
    assert sharded[name] == pytest.approx(value, rel=1e-5, abs=1e-6), name
