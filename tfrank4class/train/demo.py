"""The README's main job (``make demo``): classification as ranking on embedded real data.

Runs the training binary (``python -m tfrank4class.train``) on its embedded default, the
GoEmotions sample shipped in the package (single-label rows, 28 emotions), once per loss:
TF-Ranking's softmax, pairwise logistic and ApproxNDCG losses, each training a Transformer text
encoder with a latent-cross Rank4Class head. It then prints Top-1, Top-5, NDCG@5 and MRR on the
test split per loss, and answers one real test example through the exported SavedModel of the
run with the best validation NDCG@5, in a fresh Python process that imports only TensorFlow.
The stderr of each child process (TensorFlow's start-up lines, warnings) goes to ``stderr.log``
in its run folder (``serve_stderr.log`` in the work dir for the server), so that only the progress
bars, tables and the served answer reach the terminal.

    python -m tfrank4class.train.demo [--workdir runs/demo] [--epochs 2]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

from tfrank4class.data import goemotions

LOSSES = ("softmax_loss", "pairwise_logistic_loss", "approx_ndcg_loss")
COLUMNS = ("top_1", "top_5", "ndcg_5", "mrr")
#: Where each child process's stderr goes, in its run folder (the serving child's: in ``workdir``).
STDERR_LOG = "stderr.log"

_SERVE = """
import sys, tensorflow as tf
model = tf.saved_model.load(sys.argv[1])
out = model.signatures["serving_default"](text=tf.constant([sys.argv[2]]))
for cls, score in zip(out["top_k_classes"][0].numpy(), out["top_k_scores"][0].numpy()):
  print(f"    {cls.decode():<16} {score:8.3f}")
print("    (tfrank4class imported by the server: %s)" % ("tfrank4class" in sys.modules))
"""


def _first_single_label_test_example():
  """(text, emotion) of the first single-label row of the embedded test split."""
  emotions = goemotions.read_emotions(goemotions.sample_dir() / "emotions.txt")
  texts, labels, _ = goemotions.read_tsv(goemotions.sample_dir() / "test.tsv", len(emotions))
  for text, ids in zip(texts, labels):
    if len(ids) == 1:
      return text, emotions[ids[0]]
  raise RuntimeError("The embedded GoEmotions test split has no single-label row.")


def beside_interpreter(program, executable=None, cwd=None):
  """The path of ``program`` in the running interpreter's directory (the virtual environment's
  ``bin/``, where ``saved_model_cli`` is, and which is not on ``PATH`` under ``make demo``),
  relative to ``cwd`` (default: the working directory) when it lies below it.

  Example:
    >>> beside_interpreter("saved_model_cli", "/repo/.venv/bin/python", cwd="/repo")
    '.venv/bin/saved_model_cli'
    >>> beside_interpreter("saved_model_cli", "/usr/bin/python3", cwd="/repo")
    '/usr/bin/saved_model_cli'
  """
  path = os.path.join(os.path.dirname(executable or sys.executable), program)
  relative = os.path.relpath(path, cwd or os.getcwd())
  return path if relative.startswith("..") else relative


def _run_logged(command, env, log_path, capture_stdout=False):
  """Runs ``command`` with its stderr in the file ``log_path``; returns its stdout if captured.

  TensorFlow's C++ start-up lines and Keras warnings go to a child's stderr, and would land in
  the middle of the demo's tables in a terminal; the log keeps them. A child that fails makes
  the demo fail with the end of that log.
  """
  os.makedirs(os.path.dirname(log_path), exist_ok=True)
  with open(log_path, "w") as log:
    result = subprocess.run(
      command,
      env=env,
      stderr=log,
      stdout=subprocess.PIPE if capture_stdout else None,
      text=True,
    )
  if result.returncode:
    with open(log_path) as log:
      tail = log.read()[-4000:]
    sys.exit(f"{tail}\nThe demo stopped: {command[1:3]} failed (all its stderr: {log_path}).")
  return result.stdout


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--workdir", default=os.path.join("runs", "demo"))
  parser.add_argument("--epochs", type=int, default=2)
  args = parser.parse_args(argv)
  shutil.rmtree(args.workdir, ignore_errors=True)
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "NO_GCE_CHECK": "true"}
  results = {}
  for loss in LOSSES:
    run_dir = os.path.join(args.workdir, loss)
    print(f"\n=== Training with {loss} ===", flush=True)
    _run_logged(
      [
        sys.executable,
        "-m",
        "tfrank4class.train",
        f"--loss={loss}",
        f"--epochs={args.epochs}",
        f"--model_dir={run_dir}",
        f"--export_dir={os.path.join(run_dir, 'export')}",
      ],
      env,
      os.path.join(run_dir, STDERR_LOG),
    )
    with open(os.path.join(run_dir, "results.json")) as f:
      results[loss] = json.load(f)

  print("\nGoEmotions sample, test split (best checkpoint of each run by validation NDCG@5):")
  width = max(len(loss) for loss in LOSSES)
  print(f"{'loss':<{width}}  " + "  ".join(f"{c:>7}" for c in COLUMNS))
  for loss in LOSSES:
    print(f"{loss:<{width}}  " + "  ".join(f"{results[loss]['test'][c]:>7.4f}" for c in COLUMNS))

  best = max(LOSSES, key=lambda loss: results[loss]["validation"]["ndcg_5"])
  export_dir = os.path.join(args.workdir, best, "export")
  text, emotion = _first_single_label_test_example()
  print(f"\nServing one real test example with the {best} export ({export_dir}):")
  print(f"  text: {text!r}\n  true emotion: {emotion}\n  top 5:")
  served = _run_logged(
    [sys.executable, "-c", _SERVE, export_dir, text],
    env,
    os.path.join(args.workdir, "serve_" + STDERR_LOG),
    capture_stdout=True,
  )
  print(served, end="")
  cli = beside_interpreter("saved_model_cli")
  print(f"\nInspect it with: {cli} show --dir {export_dir} --all")


if __name__ == "__main__":
  main()
