"""Head-epoch cost of every loss and head of the evidence grid's second edition.

Trains each loss x head of ``grid_protocol`` for ``--epochs`` epochs on random features of the
primary experiment's shape (36,308 training rows of 384-d, 28 classes, 4,548 validation rows
scored after every epoch, batch 256) and prints the wall and process CPU seconds per epoch. The
second edition's wall-time estimate (docs/evidence-grid.md) multiplies these by the epochs per
run. CPU time is the better guide on a shared machine.

Usage (from the repository root):
  nice .venv/bin/python benchmarks/grid_epoch_time.py --heads=dot
  .venv/bin/python benchmarks/grid_epoch_time.py --losses=softmax_loss --heads=dot,concat
  .venv/bin/python benchmarks/grid_epoch_time.py --quick   # two losses, dot, tiny sizes
  nice .venv/bin/python benchmarks/grid_epoch_time.py --experiment=cifar10_e2e \
    --losses=softmax_loss --heads=dot --epochs=3
The table also goes to ``grid_epoch_time.md`` in the output folder.

``--experiment=cifar10_e2e`` times the CIFAR-10 end-to-end experiment instead, on the real
images under ``--data_dir`` (the whole training folder and test split, as the grid reads them):
each configuration trains ``--epochs`` epochs through the grid's own run
(``rank4class_grid_v2.train_run``, patience off) and the table adds the test Top-1 and the best
validation NDCG@5 reached, a first sign of where the model is heading (not its converged value).
"""

import os
import time

import _common  # first: puts the repository on sys.path before anything imports the package
import grid_protocol as protocol
from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_list("losses", None, "Losses (default: the protocol's, as registered now).")
flags.DEFINE_list("heads", list(protocol.HEADS), "Heads.")
flags.DEFINE_integer("epochs", 2, "Epochs per configuration (the first one includes tracing).")
flags.DEFINE_integer("train_size", 36308, "Training rows.")
flags.DEFINE_integer("validation_size", 4548, "Validation rows.")
flags.DEFINE_bool(
  "quick",
  False,
  "softmax and mean squared, dot head, 64/32 rows, 1 epoch (cifar10_e2e: softmax, dot, the "
  "grid's smoke images and CNN, 1 epoch).",
)
flags.DEFINE_integer("threads", 0, "TensorFlow intra/inter-op threads (0: TensorFlow's default).")
flags.DEFINE_enum("experiment", "clean", ["clean", "cifar10_e2e"], "Which experiment's runs.")
flags.DEFINE_string(
  "data_dir",
  os.environ.get("TFRANK4CLASS_DATA", str(_common.ROOT.parent / "shared" / "datasets")),
  "Folder holding cifar10_jpeg/ (--experiment=cifar10_e2e).",
)

FEATURE_DIM, NUM_CLASSES = 384, 28


def epoch_seconds(loss, head, epochs, train_size, validation_size):
  """``(wall, cpu)`` seconds per epoch of ``loss`` + ``head`` on random features."""
  import grid_store as grid  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top

  rng = np.random.default_rng(0)
  train = (
    rng.normal(size=(train_size, FEATURE_DIM)).astype("float32"),
    rng.integers(0, NUM_CLASSES, train_size),
  )
  validation = (
    rng.normal(size=(validation_size, FEATURE_DIM)).astype("float32"),
    rng.integers(0, NUM_CLASSES, validation_size),
  )
  model = grid.head_model(
    FEATURE_DIM, NUM_CLASSES, head, () if head == "dot" else protocol.HIDDEN_UNITS
  )
  grid.compile_model(model, loss, protocol.LOSS_KWARGS.get(loss))
  wall, cpu = time.perf_counter(), time.process_time()
  grid.fit_and_evaluate(
    model, train, validation, validation, epochs=epochs, batch_size=protocol.BATCH_SIZE, seed=0
  )
  return (time.perf_counter() - wall) / epochs, (time.process_time() - cpu) / epochs


def cifar_epoch_seconds(splits, num_classes, loss, head, epochs, settings):
  """``(wall, cpu, result)`` per epoch of ``loss`` + ``head`` in the CIFAR-10 end-to-end run."""
  import rank4class_grid_v2 as grid_v2  # pylint: disable=g-import-not-at-top

  settings = dict(settings, max_epochs=epochs, patience=epochs)
  wall, cpu = time.perf_counter(), time.process_time()
  result = grid_v2.train_run(splits, num_classes, loss, head, 1e-3, 0, settings)
  return (time.perf_counter() - wall) / epochs, (time.process_time() - cpu) / epochs, result


def main_cifar(heads):
  import rank4class_grid_v2 as grid_v2  # pylint: disable=g-import-not-at-top

  from tfrank4class import losses as losses_lib  # pylint: disable=g-import-not-at-top

  start = time.perf_counter()
  per_class = grid_v2.CIFAR_SMOKE["per_class"] if FLAGS.quick else None
  splits, info = grid_v2.cifar_splits(FLAGS.data_dir, per_class, smoke=FLAGS.quick)
  print(f"loading: {time.perf_counter() - start:.0f}s wall", flush=True)
  settings = grid_v2.grid_settings(losses_lib.names(), smoke=FLAGS.quick, experiment="cifar10_e2e")
  lines = [
    "| loss | head | wall s / epoch | CPU s / epoch | epochs | test Top-1 | best val NDCG@5 |",
    "|---|---|---|---|---|---|---|",
  ]
  print("\n".join(lines))
  for loss in FLAGS.losses or ["softmax_loss"]:
    for head in heads:
      wall, cpu, r = cifar_epoch_seconds(
        splits, info["num_classes"], loss, head, FLAGS.epochs, settings
      )
      lines.append(
        f"| {loss} | {head} | {wall:.1f} | {cpu:.1f} | {FLAGS.epochs} | {r['top_1']:.4f} | "
        f"{r['validation']['ndcg_5']:.4f} |"
      )
      print(lines[-1], flush=True)
  _common.OUT.mkdir(parents=True, exist_ok=True)
  (_common.OUT / "grid_epoch_time_cifar10.md").write_text("\n".join(lines) + "\n")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  _common.setup_tensorflow(FLAGS.threads)
  if FLAGS.experiment == "cifar10_e2e":
    if FLAGS.quick:  # the grid's CIFAR smoke configuration: a few real images, a tiny CNN
      FLAGS.losses, FLAGS.epochs = ["softmax_loss"], 1
    return main_cifar(["dot"] if FLAGS.quick else FLAGS.heads)
  from tfrank4class import losses as losses_lib  # pylint: disable=g-import-not-at-top

  if FLAGS.quick:
    FLAGS.losses, FLAGS.heads = ["softmax_loss", "mean_squared_loss"], ["dot"]
    FLAGS.epochs, FLAGS.train_size, FLAGS.validation_size = 1, 64, 32
  losses = FLAGS.losses or protocol.losses(losses_lib.names())
  lines = ["| loss | head | wall s / epoch | CPU s / epoch |", "|---|---|---|---|"]
  print("\n".join(lines))
  for loss in losses:
    for head in FLAGS.heads:
      wall, cpu = epoch_seconds(loss, head, FLAGS.epochs, FLAGS.train_size, FLAGS.validation_size)
      lines.append(f"| {loss} | {head} | {wall:.2f} | {cpu:.2f} |")
      print(lines[-1], flush=True)
  _common.OUT.mkdir(parents=True, exist_ok=True)
  (_common.OUT / "grid_epoch_time.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
  app.run(main)
