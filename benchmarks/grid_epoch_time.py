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
The table also goes to ``grid_epoch_time.md`` in the output folder.
"""

import time

import grid_protocol as protocol
from _common import OUT, setup_tensorflow  # noqa: E402  (puts the repository on sys.path)
from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_list("losses", None, "Losses (default: the protocol's, as registered now).")
flags.DEFINE_list("heads", list(protocol.HEADS), "Heads.")
flags.DEFINE_integer("epochs", 2, "Epochs per configuration (the first one includes tracing).")
flags.DEFINE_integer("train_size", 36308, "Training rows.")
flags.DEFINE_integer("validation_size", 4548, "Validation rows.")
flags.DEFINE_bool("quick", False, "softmax and mean squared, dot head, 64/32 rows, 1 epoch.")
flags.DEFINE_integer("threads", 0, "TensorFlow intra/inter-op threads (0: TensorFlow's default).")

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


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  setup_tensorflow(FLAGS.threads)
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
  OUT.mkdir(parents=True, exist_ok=True)
  (OUT / "grid_epoch_time.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
  app.run(main)
