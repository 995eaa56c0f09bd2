"""Epoch cost of every loss and head of the evidence grid: the wall-time estimates' measurement.

``run`` trains each loss x head of :mod:`experiments.second.protocol` for ``--epochs`` epochs
through
the grid's own run (:func:`experiments.training.train_run`, patience off) and prints the wall
and process CPU seconds per epoch (CPU time is the better guide on a shared machine). The
default, ``--experiment=clean``, trains heads on random features of the primary experiment's
shape (36,308 training rows of 384-d, 28 classes, 4,548 validation rows scored after every
epoch, batch 256); docs/evidence-grid.md's wall-time estimate multiplies these by the epochs per
run. ``--experiment=cifar10_e2e`` times the CIFAR-10 end-to-end runs on the real images under
``--data_dir`` (the whole training folder and test split, as the grid reads them), and the table
adds the test Top-1 and the best validation NDCG@5 reached, a first sign of where the model is
heading (not its converged value).

Usage (from the repository root):
  nice .venv/bin/python -m experiments.second.epoch_time run --heads=dot
  .venv/bin/python -m experiments.second.epoch_time run --losses=softmax_loss --heads=dot,concat
  .venv/bin/python -m experiments.second.epoch_time run --smoke   # two losses, dot, tiny sizes
  nice .venv/bin/python -m experiments.second.epoch_time run --experiment=cifar10_e2e \\
    --losses=softmax_loss --heads=dot --epochs=3
The table also goes to ``--output`` (default: ``epoch_time.md`` in the working directory).
"""

import os
import time

import numpy as np
from absl import flags

from experiments import features, store, training
from experiments.second import grid, plan, protocol
from tfrank4class import losses as losses_lib
from tfrank4class.train import cli

FLAGS = flags.FLAGS
FEATURE_DIM, NUM_CLASSES = 384, 28


def define_flags():
  """The command line's flags (defined only when this runs as a program)."""
  flags.DEFINE_list("losses", None, "Losses (default: the protocol's, as registered now).")
  flags.DEFINE_list("heads", list(protocol.HEADS), "Heads.")
  flags.DEFINE_integer("epochs", 2, "Epochs per configuration (the first one includes tracing).")
  flags.DEFINE_integer("train_size", 36308, "Training rows.")
  flags.DEFINE_integer("validation_size", 4548, "Validation rows.")
  flags.DEFINE_bool(
    "smoke",
    False,
    "softmax and mean squared, dot head, 64/32 rows, 1 epoch (cifar10_e2e: softmax, dot, the "
    "grid's smoke images and CNN, 1 epoch).",
  )
  flags.DEFINE_integer("threads", 0, "TensorFlow intra/inter-op threads (0: TensorFlow's default).")
  flags.DEFINE_enum("experiment", "clean", ["clean", "cifar10_e2e"], "Which experiment's runs.")
  flags.DEFINE_string(
    "data_dir",
    os.environ.get("TFRANK4CLASS_DATA", str(store.ROOT.parent / "shared" / "datasets")),
    "Folder holding cifar10_jpeg/ (--experiment=cifar10_e2e).",
  )
  flags.DEFINE_string("output", "epoch_time.md", "Where the table goes too.")


def random_splits(train_size, validation_size, seed=0):
  """Random features and labels of the primary experiment's shape (validation doubles as test)."""
  rng = np.random.default_rng(seed)

  def split(n):
    return rng.normal(size=(n, FEATURE_DIM)).astype("float32"), rng.integers(0, NUM_CLASSES, n)

  train, validation = split(train_size), split(validation_size)
  return {"train": train, "validation": validation, "test": validation}


def epoch_seconds(splits, num_classes, loss, head, epochs, settings):
  """``(wall, cpu, result)``: seconds per epoch of ``loss`` + ``head`` in the grid's run with
  ``settings``, for ``epochs`` epochs (patience off), and the run's result."""
  settings = dict(settings, max_epochs=epochs, patience=epochs)
  wall, cpu = time.perf_counter(), time.process_time()
  result = training.train_run(splits, num_classes, loss, head, 1e-3, 0, settings)
  return (time.perf_counter() - wall) / epochs, (time.process_time() - cpu) / epochs, result


def _configuration():
  """``(splits, num_classes, settings, losses, heads)`` the flags ask for."""
  image = FLAGS.experiment == "cifar10_e2e"
  if FLAGS.smoke:
    FLAGS.epochs, FLAGS.train_size, FLAGS.validation_size = 1, 64, 32
    FLAGS.losses = FLAGS.losses or (["softmax_loss"] if image else plan.SMOKE["losses"])
    FLAGS.heads = ["dot"]
  settings = plan.grid_settings(losses_lib.names(), FLAGS.smoke, experiment=FLAGS.experiment)
  if image:
    start = time.perf_counter()
    model = plan.CIFAR_SMOKE["model"] if FLAGS.smoke else protocol.CIFAR
    per_class = plan.CIFAR_SMOKE["per_class"] if FLAGS.smoke else None
    splits, info = features.cifar_splits(FLAGS.data_dir, model, per_class)
    print(f"loading: {time.perf_counter() - start:.0f}s wall", flush=True)
    return splits, info["num_classes"], settings, FLAGS.losses or ["softmax_loss"], FLAGS.heads
  splits = random_splits(FLAGS.train_size, FLAGS.validation_size)
  return splits, NUM_CLASSES, settings, FLAGS.losses or settings["losses"], FLAGS.heads


def main(argv):
  if len(argv) != 2 or argv[1] != "run":
    raise grid.app.UsageError(f"Give the one command, run; got {argv[1:]}")
  grid.setup_threads(FLAGS.threads)
  splits, num_classes, settings, losses, heads = _configuration()
  lines = [
    "| loss | head | wall s / epoch | CPU s / epoch | epochs | test Top-1 | best val NDCG@5 |",
    "|---|---|---|---|---|---|---|",
  ]
  print("\n".join(lines), flush=True)
  for loss in losses:
    for head in heads:
      wall, cpu, r = epoch_seconds(splits, num_classes, loss, head, FLAGS.epochs, settings)
      lines.append(
        f"| {loss} | {head} | {wall:.2f} | {cpu:.2f} | {FLAGS.epochs} | {r['top_1']:.4f} | "
        f"{r['validation']['ndcg_5']:.4f} |"
      )
      print(lines[-1], flush=True)
  with open(FLAGS.output, "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
  define_flags()
  cli.run(main, "experiments.second.epoch_time")
