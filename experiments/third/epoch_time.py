"""Epoch cost of the third edition's cells with and without XLA: the measurement behind its
first deviation (``protocol.DEVIATIONS``).

``run`` trains each cell of ``--cells`` with the dot head on random, L2-normalised 384-d
features of CLINC150's training shape (15,000 rows, 150 classes, batch 256, Adam 1e-3, the
cell's centre scale), built and compiled as :func:`experiments.third.training.train_run` builds
them, once with ``jit_compile=False`` and once with ``True``, interleaved, over ``--rounds``
rounds. A timing is the mean of two epochs after a first, untimed epoch that traces and
compiles. The table gives, per cell and mode, the median and the range over the rounds, and
the ratio without / with XLA taken within each round.

Usage (from the repository root):
  nice .venv/bin/python -m experiments.third.epoch_time run --rounds=2
  .venv/bin/python -m experiments.third.epoch_time run --smoke
"""

import time

import numpy as np
from absl import app, flags

from experiments import training
from experiments.third import protocol, scaled_head
from tfrank4class.compat import keras
from tfrank4class.train import cli

FLAGS = flags.FLAGS
FEATURE_DIM = 384
#: (training rows, classes, timed epochs) of the measurement and of the smoke run.
SHAPE = {"full": (15_000, 150, 2), "smoke": (512, 10, 1)}


def define_flags():
  """The command line's flags (defined only when this runs as a program)."""
  flags.DEFINE_list("cells", list(protocol.CELLS), "Cells of protocol.CELLS.")
  flags.DEFINE_integer("rounds", 2, "Interleaved rounds.")
  flags.DEFINE_bool("smoke", False, "Tiny sizes and softmax only, for tests.")


def epoch_seconds(x, y, cell, jit_compile, epochs):
  """Seconds per epoch of ``cell`` + dot head on ``(x, y)``, after one untimed epoch."""
  keras.utils.set_random_seed(0)
  model = scaled_head.head_model(x.shape[1], int(y.max()) + 1, "dot")
  loss, kwargs = protocol.loss_arguments(cell, protocol.CELLS[cell][3])
  model.compile(
    optimizer=keras.optimizers.Adam(1e-3),
    loss=training.build_loss(loss, kwargs),
    jit_compile=jit_compile,
  )
  inputs = training.arrays_dataset(x, y, protocol.BATCH_SIZE, shuffle_seed=0)
  model.fit(inputs, epochs=1, verbose=0, shuffle=False)
  start = time.perf_counter()
  model.fit(inputs, epochs=epochs, verbose=0, shuffle=False)
  return (time.perf_counter() - start) / epochs


def measure(cells, rounds, rows, num_classes, epochs):
  """``{cell: {False: [s per round], True: [...]}}``, the modes interleaved in every round."""
  rng = np.random.default_rng(0)
  x = rng.normal(size=(rows, FEATURE_DIM)).astype("float32")
  x /= np.linalg.norm(x, axis=1, keepdims=True)
  y = np.arange(rows) % num_classes
  found = {cell: {False: [], True: []} for cell in cells}
  for r in range(rounds):
    for cell in cells:
      for jit_compile in (False, True) if r % 2 == 0 else (True, False):
        found[cell][jit_compile].append(epoch_seconds(x, y, cell, jit_compile, epochs))
  return found


def table_lines(found):
  """A Markdown table of :func:`measure`'s timings: median (min-max) per mode and the ratio."""

  def span(v):
    return f"{np.median(v):.2f} ({min(v):.2f}-{max(v):.2f})"

  lines = ["| cell | s / epoch, no XLA | s / epoch, XLA | no XLA / XLA |", "|---|---|---|---|"]
  for cell, t in found.items():
    ratio = [a / b for a, b in zip(t[False], t[True])]
    lines.append(f"| {cell} | {span(t[False])} | {span(t[True])} | {span(ratio)} |")
  return lines


def main(argv):
  if len(argv) != 2 or argv[1] != "run":
    raise app.UsageError(f"Give the one command, run; got {argv[1:]}")
  rows, num_classes, epochs = SHAPE["smoke" if FLAGS.smoke else "full"]
  cells = ["softmax"] if FLAGS.smoke else FLAGS.cells
  unknown = [c for c in cells if c not in protocol.CELLS]
  if unknown:
    raise app.UsageError(f"`cells`: unknown {unknown}; allowed: {list(protocol.CELLS)}.")
  print("\n".join(table_lines(measure(cells, FLAGS.rounds, rows, num_classes, epochs))))


if __name__ == "__main__":
  define_flags()
  cli.run(main, "experiments.third.epoch_time")
