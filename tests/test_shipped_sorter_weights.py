"""The shipped sorter weights give the same ranks under every Keras flavour and backend.

Each learned sorter's forward pass is written out in numpy, reading the arrays straight from
``tfrank4class/resources/sorters/<kind>.npz`` by their keys (no Keras, no layer code), and the
sorter loaded by ``pretrained()`` must agree with it. This pins every array to its role (a kernel
loaded as a recurrent kernel, or a moving mean as a beta, would change the ranks) under Keras 3
(TensorFlow, JAX and PyTorch backends) and tf-keras alike, which load the same files. A second
expectation is committed: the ranks the TensorFlow code gave before the keras.ops port
(``tests/fixtures/shipped_sorter_outputs.npz``, written by ``tools/sorter_outputs_reference.py``).
"""

import json
import pathlib

import backend_testing
import numpy as np
import pytest
from scipy.special import expit as sigmoid

from tfrank4class.ranking import synthetic
from tfrank4class.ranking.sorter_base import RESOURCE_DIR
from tfrank4class.ranking.sorters import PRETRAINED_SORTERS

BN_EPSILON = 1e-3  # Keras' BatchNormalization default, in both flavours


def shipped(kind):
  with open(RESOURCE_DIR / f"{kind}.json") as f:
    config = json.load(f)["config"]
  with np.load(RESOURCE_DIR / f"{kind}.npz") as data:
    return config, {key: data[key].astype(np.float64) for key in data.files}


def standardize(s):
  centred = s - s.mean(-1, keepdims=True)
  return centred / np.sqrt((centred**2).mean(-1, keepdims=True) + 1e-12)


def attention_reference(s):
  config, w = shipped("attention")
  z = standardize(s)
  n = z.shape[-1]
  diff = z[:, None, :] - z[:, :, None]  # [b, i, j] = z_j - z_i
  others = ~np.eye(n, dtype=bool)[None]
  gap = np.maximum(np.where(others, np.abs(diff), np.inf).min(-1), 1e-6)
  feats = [
    np.log((others & (np.abs(diff) <= h)).sum(-1) + 0.5) - np.log(2 * h) + np.log(gap)
    for h in config["bandwidths"]
  ]
  x = np.concatenate([np.stack(feats, -1) / 5.0, np.full(z.shape + (1,), np.log(n) / 5.0)], -1)
  x = np.tanh(x @ w["hidden1/kernel"] + w["hidden1/bias"])
  x = np.tanh(x @ w["hidden2/kernel"] + w["hidden2/bias"])
  logit = (x @ w["sharpness_logit/kernel"] + w["sharpness_logit/bias"])[..., 0]
  lo, hi = config["min_sharpness"], config["max_sharpness"]
  k = np.minimum((lo + (hi - lo) * sigmoid(logit)) / gap, 1e7)
  # 1 + sum_{j != i} sigmoid(k_i (z_j - z_i)); the j = i term is sigmoid(0) = 1/2.
  return 1.0 + sigmoid(k[:, :, None] * diff).sum(-1) - 0.5


def lstm_pass(x, w, prefix):
  """Keras' LSTM (gates i, f, c, o; sigmoid recurrent activation) over ``x`` [b, n, d]."""
  units = w[f"{prefix}/recurrent_kernel"].shape[0]
  h = np.zeros((x.shape[0], units))
  c = np.zeros_like(h)
  out = []
  for t in range(x.shape[1]):
    gates = x[:, t] @ w[f"{prefix}/kernel"] + h @ w[f"{prefix}/recurrent_kernel"]
    i, f, g, o = np.split(gates + w[f"{prefix}/bias"], 4, axis=-1)
    c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
    h = sigmoid(o) * np.tanh(c)
    out.append(h)
  return np.stack(out, 1)


def lstm_reference(s):
  config, w = shipped("lstm")
  x = standardize(s)[:, :, None]
  for i in range(config["num_layers"]):
    forward = lstm_pass(x, w, f"bilstm_{i}/forward")
    backward = lstm_pass(x[:, ::-1], w, f"bilstm_{i}/backward")[:, ::-1]
    x = np.concatenate([forward, backward], -1)
  p = sigmoid((x @ w["head/kernel"] + w["head/bias"])[..., 0])
  return 1.0 + (s.shape[-1] - 1) * p


def batch_norm(x, w, prefix):
  scale = w[f"{prefix}/gamma"] / np.sqrt(w[f"{prefix}/moving_variance"] + BN_EPSILON)
  return (x - w[f"{prefix}/moving_mean"]) * scale + w[f"{prefix}/beta"]


def dilated_same_conv(x, kernel, dilation):
  """1-D convolution, ``padding="same"``, no bias: x [b, n, c], kernel [width, c, out]."""
  width = kernel.shape[0]
  left = dilation * (width - 1) // 2
  padded = np.pad(x, [(0, 0), (left, dilation * (width - 1) - left), (0, 0)])
  n = x.shape[1]
  return sum(padded[:, k * dilation : k * dilation + n] @ kernel[k] for k in range(width))


def conv_reference(s):
  config, w = shipped("conv")
  x = standardize(s)[:, :, None] @ w["stem/kernel"][0] + w["stem/bias"]
  for i in range(config["num_blocks"]):
    h = np.maximum(batch_norm(x, w, f"bn_{i}"), 0.0)
    x = x + dilated_same_conv(h, w[f"conv_{i}/kernel"], 2 ** (i % 6))
  x = np.maximum(batch_norm(x, w, "bn_final"), 0.0).reshape(x.shape[0], -1)
  p = sigmoid(x @ w["head/kernel"] + w["head/bias"])
  return 1.0 + (s.shape[-1] - 1) * p


# float32 rounding: ~3e-6 on the ranks of the attention and LSTM sorters, ~1.3e-4 through the
# conv sorter's 8 residual blocks and 6,400-wide head (ranks in [1, 100]).
@pytest.mark.parametrize(
  "kind,reference,n,atol",
  [
    ("attention", attention_reference, 23, 1e-4),
    ("lstm", lstm_reference, 17, 1e-4),
    ("conv", conv_reference, 100, 1e-3),
  ],
)
def test_pretrained_sorter_matches_a_numpy_forward_pass_of_the_shipped_arrays(
  kind, reference, n, atol
):
  scores, _ = synthetic.synthetic_batch(4, n, seed=[21, n])
  got = backend_testing.numpy(PRETRAINED_SORTERS.get(kind)(scores))
  np.testing.assert_allclose(got, reference(scores.astype(np.float64)), atol=atol)


FIXTURE = pathlib.Path(__file__).parent / "fixtures" / "shipped_sorter_outputs.npz"


def test_pretrained_sorters_give_the_ranks_of_the_tensorflow_code_before_the_port():
  # Same float32 arithmetic up to the order of operations: the differences are rounding, as in
  # the numpy test above (n = 300 takes the block-wise path of the attention sorter).
  with np.load(FIXTURE) as data:
    fixture = dict(data)
  cases = sorted(key.split("/")[0] for key in fixture if key.endswith("/scores"))
  assert cases == ["attention_2", "attention_23", "attention_300", "conv_100", "lstm_17"]
  for case in cases:
    sorter = PRETRAINED_SORTERS.get(case.split("_")[0])
    got = backend_testing.numpy(sorter(fixture[f"{case}/scores"]))
    atol = 1e-3 if case.startswith("conv") else 1e-4
    np.testing.assert_allclose(got, fixture[f"{case}/ranks"], atol=atol, err_msg=case)


def test_every_shipped_array_is_a_weight_and_every_weight_is_shipped():
  for kind in PRETRAINED_SORTERS.names():
    _, arrays = shipped(kind)
    table = PRETRAINED_SORTERS.get(kind).weight_table()
    assert sorted(table) == sorted(arrays), kind
    for key, variable in table.items():
      np.testing.assert_array_equal(backend_testing.numpy(variable), arrays[key].astype(np.float32))


def test_weight_file_with_a_missing_or_misshaped_array_is_refused(tmp_path):
  from tfrank4class.ranking.attention_sorter import AttentionSorter

  sorter = AttentionSorter(hidden_units=4)
  sorter.export_weights(tmp_path / "a")
  with np.load(tmp_path / "a.npz") as data:
    arrays = dict(data)
  del arrays["hidden2/bias"]
  arrays["hidden1/kernel"] = np.zeros([3, 3], np.float32)
  np.savez(tmp_path / "a.npz", **arrays)
  with pytest.raises(ValueError, match=r"\['hidden1/kernel', 'hidden2/bias'\]"):
    AttentionSorter.load_weights_file(tmp_path / "a")
