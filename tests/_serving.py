"""Shared by the export tests: serve a SavedModel in a fresh Python process that imports only
TensorFlow, as a serving system would."""

import json
import os
import subprocess
import sys

_SCRIPT = """
import json, sys, tensorflow as tf
export_dir, argument, inputs, dtype = sys.argv[1:]
serve = tf.saved_model.load(export_dir).signatures["serving_default"]
out = serve(**{argument: tf.constant(json.loads(inputs), dtype)})
def plain(v):
  if v.dtype == tf.string:
    return [[c.decode() for c in row] for row in v.numpy()]
  return v.numpy().tolist()
print(json.dumps({name: plain(v) for name, v in out.items()}))
print(json.dumps("tfrank4class" in sys.modules))
"""


def serve_in_a_fresh_process(export_dir, argument, inputs, dtype):
  """``({output name: nested list}, whether tfrank4class was imported)`` of
  ``serving_default(argument=tf.constant(inputs, dtype))`` in a fresh process (strings decoded)."""
  lines = subprocess.run(
    [sys.executable, "-c", _SCRIPT, str(export_dir), argument, json.dumps(inputs), dtype],
    env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    cwd="/",
    check=True,
    capture_output=True,
    text=True,
  ).stdout.splitlines()
  return json.loads(lines[-2]), json.loads(lines[-1])
