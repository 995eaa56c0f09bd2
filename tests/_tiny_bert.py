"""A tiny random BERT checkpoint folder in the Hugging Face format, written by hand.

``config.json``, ``vocab.txt``, ``tokenizer_config.json`` and a ``model.safetensors`` written with
struct + json (independently of the package's reader); optionally the sentence-transformers files.
Imported by test_huggingface_bert.py and test_model_round_trip.py; not a test module.
"""

import json
import pathlib
import struct

import numpy as np

VOCAB = [
  "[PAD]",
  "[UNK]",
  "[CLS]",
  "[SEP]",
  "[MASK]",
  "hello",
  ",",
  "world",
  "!",
  "un",
  "##aff",
  "##able",
  "cafe",
  "b",
  "a",
  "我",
]
CONFIG = {
  "architectures": ["BertModel"],
  "model_type": "bert",
  "hidden_act": "gelu",
  "hidden_size": 8,
  "num_hidden_layers": 2,
  "num_attention_heads": 2,
  "intermediate_size": 12,
  "max_position_embeddings": 16,
  "type_vocab_size": 2,
  "layer_norm_eps": 1e-12,
  "vocab_size": len(VOCAB),
  "pad_token_id": 0,
}


def random_tensors(config, seed=0):
  """Torch-layout BERT weights ([out, in] kernels), plus tensors the encoder must ignore."""
  rng = np.random.default_rng(seed)
  d, f = config["hidden_size"], config["intermediate_size"]

  def normal(*shape, scale=0.5):
    return (scale * rng.standard_normal(shape)).astype(np.float32)

  t = {
    "embeddings.position_ids": np.arange(config["max_position_embeddings"])[None].astype(np.int64),
    "embeddings.word_embeddings.weight": normal(config["vocab_size"], d),
    "embeddings.position_embeddings.weight": normal(config["max_position_embeddings"], d),
    "embeddings.token_type_embeddings.weight": normal(config["type_vocab_size"], d),
    "embeddings.LayerNorm.weight": 1 + normal(d, scale=0.1),
    "embeddings.LayerNorm.bias": normal(d, scale=0.1),
    "pooler.dense.weight": normal(d, d),
    "pooler.dense.bias": normal(d),
  }
  for i in range(config["num_hidden_layers"]):
    p = f"encoder.layer.{i}."
    for name, (rows, cols) in {
      "attention.self.query": (d, d),
      "attention.self.key": (d, d),
      "attention.self.value": (d, d),
      "attention.output.dense": (d, d),
      "intermediate.dense": (f, d),
      "output.dense": (d, f),
    }.items():
      t[p + name + ".weight"] = normal(rows, cols)
      t[p + name + ".bias"] = normal(rows, scale=0.1)
    for name in ("attention.output.LayerNorm", "output.LayerNorm"):
      t[p + name + ".weight"] = 1 + normal(d, scale=0.1)
      t[p + name + ".bias"] = normal(d, scale=0.1)
  return t


def write_safetensors(path, tensors):
  """The safetensors layout by hand: u64 header length, JSON header, little-endian data."""
  names = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64"}
  header, chunks, offset = {"__metadata__": {"format": "pt"}}, [], 0
  for name, array in tensors.items():
    raw = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes()
    header[name] = {
      "dtype": names[array.dtype],
      "shape": list(array.shape),
      "data_offsets": [offset, offset + len(raw)],
    }
    chunks.append(raw)
    offset += len(raw)
  text = json.dumps(header).encode()
  with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def write_checkpoint(folder, config=CONFIG, tensors=None, vocab=VOCAB, sentence=False):
  folder = pathlib.Path(folder)
  folder.mkdir(parents=True, exist_ok=True)
  (folder / "config.json").write_text(json.dumps(config))
  (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
  (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))
  write_safetensors(folder / "model.safetensors", tensors or random_tensors(config))
  if sentence:  # the sentence-transformers files: mean pooling, then Normalize
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(
      json.dumps({"pooling_mode_mean_tokens": True, "pooling_mode_cls_token": False})
    )
    modules = [
      {"idx": 0, "path": "", "type": "sentence_transformers.models.Transformer"},
      {"idx": 1, "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
      {"idx": 2, "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 10}))
  return str(folder)
