"""Shared set-up of the training tests: a tiny text run, and the training binary's command."""

import json
import os
import sys

from tfrank4class.train import config as config_lib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY_TEXT = {
  "max_tokens": 2000,
  "sequence_length": 16,
  "embedding_dim": 16,
  "num_heads": 1,
  "ff_dim": 16,
}


def tiny(**kwargs):
  """An ``ExperimentConfig`` of a tiny text run (4 steps of 32 examples), with ``kwargs``."""
  defaults = dict(
    encoder_kwargs=TINY_TEXT, hidden_units=(16,), batch_size=32, epochs=1, steps=4, verbose=0
  )
  return config_lib.ExperimentConfig(**{**defaults, **kwargs})


def train_cmd(model_dir, *extra):
  """The command line of a tiny run of ``tfrank4class-train`` in ``model_dir``."""
  return [
    sys.executable,
    "-m",
    "tfrank4class.train",
    f"--model_dir={model_dir}",
    f"--encoder_kwargs={json.dumps(TINY_TEXT)}",
    "--hidden_units=16",
    "--batch_size=32",
    "--keras_verbose=0",
    *extra,
  ]


def env(**extra):
  """The environment of a training subprocess: this checkout's package, quiet, no GCE probe."""
  return {
    **os.environ,
    "TF_CPP_MIN_LOG_LEVEL": "3",
    "NO_GCE_CHECK": "true",
    "PYTHONPATH": ROOT,
    **extra,
  }
