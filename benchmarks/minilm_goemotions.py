"""How long does embedding GoEmotions' training comments with all-MiniLM-L6-v2 take?

Builds the ``bert_checkpoint`` encoder on the installed all-MiniLM-L6-v2 (``make minilm``), draws
``--batches`` random batches of ``--batch_size`` single-label training comments (seeded), embeds
them with the model in a ``tf.function`` (strings in: the WordPiece tokenisation is part of the
time) after one warm-up batch, and extrapolates the mean time per batch to the whole set of
single-label training comments. Prints a table: wall seconds per batch (mean, min, max), the CPU
seconds of the process per batch (summed over its threads: on a machine shared with other jobs,
CPU / threads is what the wall time would be with the cores to itself), the mean longest token
count of a batch (the work is cut to it), and both extrapolated to the whole set.

Usage:
  nice .venv/bin/python benchmarks/minilm_goemotions.py [--threads 2] [--batches 20]
    [--batch_size 64] [--max_length 128] [--data DIR] [--quick]
``--data`` defaults to $TFRANK4CLASS_DATA or ../shared/datasets; ``--quick`` times 2 batches of 8.
The table also goes to ``minilm_goemotions.json`` in the output folder.
"""

import argparse
import json
import math
import os
import time

from _common import OUT, ROOT, setup_tensorflow  # noqa: E402


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--threads", type=int, default=2)
  parser.add_argument("--batches", type=int, default=20)
  parser.add_argument("--batch_size", type=int, default=64)
  parser.add_argument("--max_length", type=int, default=None, help="default: the checkpoint's")
  parser.add_argument("--data", default=os.environ.get("TFRANK4CLASS_DATA"))
  parser.add_argument("--quick", action="store_true", help="2 batches of 8, for the smoke test")
  args = parser.parse_args()
  if args.quick:
    args.batches, args.batch_size = 2, 8
  tf = setup_tensorflow(args.threads)
  import numpy as np  # pylint: disable=g-import-not-at-top

  from tfrank4class.data import goemotions  # pylint: disable=g-import-not-at-top
  from tfrank4class.encoders import (  # pylint: disable=g-import-not-at-top
    huggingface_bert,
    huggingface_checkpoint,
  )

  data = args.data or str(ROOT.parent / "shared" / "datasets")
  texts, labels, _ = goemotions.read_tsv(os.path.join(data, "goemotions", "train.tsv"), 28)
  texts = np.array([t for t, ids in zip(texts, labels) if len(ids) == 1], dtype=object)
  start = time.perf_counter()
  model = huggingface_bert.bert_checkpoint(
    huggingface_checkpoint.installed_minilm_path(), max_length=args.max_length
  )
  build = time.perf_counter() - start
  embed = tf.function(lambda x: model(x))
  vectorize = model.get_layer("wordpiece")
  pad_id = model.get_layer("bert").pad_id
  rng = np.random.default_rng(0)
  batches = [
    tf.constant(list(rng.choice(texts, args.batch_size, replace=False)))
    for _ in range(args.batches + 1)
  ]
  embed(batches[0]).numpy()  # warm-up: tracing
  seconds, cpu_seconds, longest = [], [], []
  for batch in batches[1:]:
    start, cpu_start = time.perf_counter(), time.process_time()
    embed(batch).numpy()
    seconds.append(time.perf_counter() - start)
    cpu_seconds.append(time.process_time() - cpu_start)
    longest.append(int(np.max(np.sum(vectorize(batch).numpy() != pad_id, axis=1))))
  total_batches = math.ceil(len(texts) / args.batch_size)
  mean = float(np.mean(seconds))
  print(
    f"all-MiniLM-L6-v2, {args.threads} threads, batch {args.batch_size}, "
    f"max_length {vectorize.output_sequence_length}, build {build:.1f} s"
  )
  cpu = float(np.mean(cpu_seconds))
  table = "\n".join(
    [
      "| comments | batches timed | wall s/batch mean (min-max) | CPU s/batch "
      "| longest tokens/batch | est. wall total | est. CPU total |",
      "|---|---|---|---|---|---|---|",
      f"| {len(texts)} | {len(seconds)} | {mean:.3f} ({min(seconds):.3f}-{max(seconds):.3f}) | "
      f"{cpu:.3f} | {np.mean(longest):.1f} | {mean * total_batches / 60:.1f} min "
      f"({total_batches} batches) | {cpu * total_batches / 60:.1f} min |",
    ]
  )
  print(table)
  OUT.mkdir(parents=True, exist_ok=True)
  with open(OUT / "minilm_goemotions.json", "w") as f:
    json.dump({"args": vars(args), "seconds": seconds, "cpu_seconds": cpu_seconds}, f, indent=1)


if __name__ == "__main__":
  main()
