"""Would a longer patience change CIFAR-10 end-to-end runs of the evidence grid? An exploratory
check of the grid's early stopping, outside its protocol.

The protocol stops every run ``patience`` (8) epochs after its best validation NDCG@5
(:mod:`experiments.second.protocol`), and calls a run converged when its best epoch comes before its
last. That rule cannot tell a plateau the run would have left from the end of learning. ``run``
reruns chosen seeds runs of ``cifar10_e2e`` with their recorded settings, learning rate and seed,
except a longer ``--patience``; ``report`` puts each beside the grid's record: best epoch, epochs
run, best validation NDCG@5, test NDCG@5 and Top-1, and for how many leading epochs the two
validation curves agree (the same seed retraces the recorded run only where training is
bit-reproducible, which multi-threaded CPU training is not). A third row per run, "rerun, cut",
reads from the rerun's own curve where it would have stopped at the grid's patience, which
separates the patience from the run-to-run variation. The grid's verdicts stay those of its
protocol; this says whether a run stopped early.

Usage (from the repository root; resumable, each rerun is added to ``--output``, and processes
started side by side share it, each rerun trained once: :class:`experiments.store.RecordStore`):
  nice -n 15 .venv/bin/python -m experiments.second.patience run \
    --runs=topk_cross_entropy_loss:0,topk_cross_entropy_loss:2 --patience=24
  .venv/bin/python -m experiments.second.patience report
  .venv/bin/python -m experiments.second.patience run --smoke --output=/tmp/p.json
  --report_md=/tmp/p.md
``report`` writes the table to ``--report_md`` and, from the committed reruns
(``experiments/records/patience.json``), to the generated block of docs/evidence-grid.md.
``--smoke`` trains the grid's CIFAR smoke configuration: its own baseline (patience 1, 3 epochs),
rerun with patience 2, instead of reading the grid's records.
"""

import os

from absl import app, flags

from experiments import blocks, features, store, training
from experiments.second import grid, plan, protocol
from tfrank4class import losses as losses_lib
from tfrank4class.train import cli

FLAGS = flags.FLAGS
EXPERIMENT = "cifar10_e2e"
#: What identifies a rerun in the reruns' records, and every field a rerun record holds.
KEY_FIELDS = ("loss", "seed", "patience")
RERUN_FIELDS = KEY_FIELDS + (
  "interaction",
  "learning_rate",
  "best_epoch",
  "epochs_run",
  "validation_curve",
  "ndcg_5",
  "top_1",
)
BLOCKS_MODULE = "experiments.second.patience"


def define_flags():
  """The command line's flags, defined only when the script runs as a program: the tests import
  this module beside the training binaries, whose flags share some of these names."""
  flags.DEFINE_list(
    "runs",
    ["topk_cross_entropy_loss:0", "topk_cross_entropy_loss:2"],
    "Seeds runs of cifar10_e2e to rerun, as loss:seed (dot head).",
  )
  flags.DEFINE_integer(
    "patience", 24, "Epochs without a new best validation NDCG@5 before stopping."
  )
  flags.DEFINE_string(
    "grid_records",
    str(grid.RECORDS / "grid.json"),
    "The evidence grid's records, which hold the runs to rerun.",
  )
  flags.DEFINE_string("output", str(grid.RECORDS / "patience.json"), "The reruns (JSON list).")
  flags.DEFINE_string("report_md", str(grid.RECORDS / "patience.md"), "The table.")
  flags.DEFINE_string(
    "data_dir",
    os.environ.get("TFRANK4CLASS_DATA", str(store.ROOT.parent / "shared" / "datasets")),
    "Folder holding cifar10_jpeg/.",
  )
  flags.DEFINE_bool(
    "smoke",
    False,
    "The grid's CIFAR smoke images and CNN: trains its own baseline (patience 1, 3 epochs) and "
    "reruns it with patience 2, instead of reading the grid's records.",
  )
  flags.DEFINE_integer("threads", 0, "TensorFlow intra/inter-op threads (0: TensorFlow's default).")


def open_reruns(path):
  """The reruns' records in ``path``."""
  return store.RecordStore(path, KEY_FIELDS, check_rerun)


def parse_runs(runs):
  """``[(loss, seed)]`` from ``["loss:seed", ...]``; a UsageError names a malformed entry."""
  parsed = []
  for run in runs:
    loss, _, seed = run.partition(":")
    if not loss or not seed.isdigit():
      raise app.UsageError(f"--runs: {run!r} is not loss:seed (e.g. topk_cross_entropy_loss:0)")
    parsed.append((loss, int(seed)))
  return parsed


def grid_record(records, loss, seed):
  """The ``cifar10_e2e`` seeds record of ``loss`` + dot at ``seed``; a UsageError says which
  runs the records hold when it is not there."""
  seeds_runs = plan.select(records, experiment=EXPERIMENT, stage="seeds")
  found = plan.select(seeds_runs, loss=loss, interaction="dot", seed=seed)
  if not found:
    held = sorted({f"{r['loss']}:{r['seed']}" for r in seeds_runs})
    raise app.UsageError(
      f"--runs: no {EXPERIMENT} seeds record of {loss}:{seed} (dot); the records hold "
      f"{', '.join(held) or 'none'}"
    )
  return found[0]


def check_rerun(record):
  """``record`` if it holds every field of a rerun (``RERUN_FIELDS``), else a ValueError naming
  the missing ones: the check of the reruns' :class:`experiments.store.RecordStore`."""
  missing = [k for k in RERUN_FIELDS if k not in record]
  if missing:
    raise ValueError(f"A rerun record lacks {', '.join(missing)}: {sorted(record)}")
  return record


def agreeing_epochs(curve, other, tolerance=1e-6):
  """How many leading epochs of two validation curves agree within ``tolerance``."""
  count = 0
  for a, b in zip(curve, other):
    if abs(a - b) > tolerance:
      break
    count += 1
  return count


def early_stop(curve, patience):
  """``(best epoch, epochs run, best value)``, epochs from 1, of a run whose validation value
  after each epoch is ``curve``, stopped ``patience`` epochs after its best (the last strictly
  higher value), as :func:`experiments.training.train_run` stops it: where a longer run would have
  stopped at a shorter patience, read from its own curve."""
  best = 0
  for epoch, value in enumerate(curve):
    if value > curve[best]:
      best = epoch
    if epoch - best >= patience:
      return best + 1, epoch + 1, curve[best]
  return best + 1, len(curve), curve[best]


def rerun(splits, info, record, patience):
  """``record``'s run trained again on ``splits`` (``info``: their
  :func:`experiments.features.cifar_splits` info) with its settings, rate and seed at
  ``patience``: the run's result fields (:func:`experiments.training.train_run`) and the
  patience."""
  settings = dict(record["settings"], patience=patience)
  result = training.train_run(
    splits,
    info["num_classes"],
    record["loss"],
    record["interaction"],
    record["learning_rate"],
    record["seed"],
    settings,
  )
  return {**result, "patience": patience}


def table(pairs):
  """Markdown rows: for each ``(record, rerun)`` the record's run, the rerun, and where the rerun
  would have stopped at the record's patience (read from its curve; not tested there)."""
  lines = [
    "| loss | seed | run | patience | best epoch | epochs run | best val NDCG@5 | test NDCG@5 | "
    "test Top-1 | curves agree for |",
    "|---|---|---|---|---|---|---|---|---|---|",
  ]
  for record, again in pairs:
    agree = agreeing_epochs(record["validation_curve"], again["validation_curve"])
    agree = f"{agree} of {record['epochs_run']} epochs"
    for name, run in (("grid", record), ("rerun", again)):
      lines.append(
        f"| {record['loss']} | {record['seed']} | {name} | {run['patience']} | "
        f"{run['best_epoch']} | {run['epochs_run']} | {max(run['validation_curve']):.4f} | "
        f"{run['ndcg_5']:.4f} | {run['top_1']:.4f} | {agree} |"
      )
    best, stopped, value = early_stop(again["validation_curve"], record["patience"])
    lines.append(
      f"| {record['loss']} | {record['seed']} | rerun, cut | {record['patience']} | {best} | "
      f"{stopped} | {value:.4f} | - | - | |"
    )
  return lines


def pairs(grid_records, reruns):
  """``[(grid record, rerun)]``: every rerun beside the grid's record of its run, with the
  record's patience."""
  found = []
  for again in reruns:
    record = grid_record(grid_records, again["loss"], again["seed"])
    found.append((dict(record, patience=record["settings"]["patience"]), again))
  return found


def patience_blocks(grid_records, reruns):
  """``{name: lines}``: the docs' generated block of the reruns (:func:`table`)."""
  return {f"{BLOCKS_MODULE}:table": table(pairs(grid_records, reruns))}


def _smoke_baseline(splits, info):
  """``(records, runs, patience)``: a baseline trained as the grid would record it, in the
  grid's CIFAR smoke configuration, to rerun at patience 2."""
  settings = plan.grid_settings(losses_lib.names(), smoke=True, experiment=EXPERIMENT)
  settings = dict(settings, max_epochs=3, patience=1)
  loss, seed = "softmax_loss", 0
  result = training.train_run(splits, info["num_classes"], loss, "dot", 1e-3, seed, settings)
  record = {
    "experiment": EXPERIMENT,
    "stage": "seeds",
    "loss": loss,
    "interaction": "dot",
    "seed": seed,
    "learning_rate": 1e-3,
    "settings": settings,
    **result,
  }
  return [record], [(loss, seed)], 2


def _rerun_all(reruns, chosen, cifar, patience):
  """Reruns each record of ``chosen`` at ``patience`` that ``reruns`` lacks and no other process
  holds (``cifar()``: the splits and info, read when a run has to train)."""
  software = store.software_versions()
  for record in chosen:
    key = (record["loss"], record["seed"], patience)
    with reruns.claim(key) as mine:
      if mine:
        reruns.add(
          {
            "loss": record["loss"],
            "interaction": record["interaction"],
            "seed": record["seed"],
            "learning_rate": record["learning_rate"],
            "software": software,
            **rerun(*cifar(), record, patience),
          }
        )
      elif key not in reruns:
        print(f"{record['loss']}:{record['seed']}: another process is rerunning it", flush=True)
  reruns.refresh()


def _cifar_loader():
  """``cifar()``: the CIFAR-10 splits of the grid (its smoke ones with ``--smoke``), read once."""
  loaded = []

  def cifar():
    if not loaded:
      if FLAGS.smoke:
        smoke = plan.CIFAR_SMOKE
        loaded.append(features.cifar_splits(FLAGS.data_dir, smoke["model"], smoke["per_class"]))
      else:
        loaded.append(features.cifar_splits(FLAGS.data_dir, protocol.CIFAR))
    return loaded[0]

  return cifar


def _grid_records():
  if not os.path.isfile(FLAGS.grid_records):
    raise app.UsageError(
      f"--grid_records: {FLAGS.grid_records!r} is not a file (the evidence grid's records, "
      "experiments/records/grid.json)"
    )
  return plan.open_records(FLAGS.grid_records).records


def main(argv):
  name = grid.command(argv)
  runs = parse_runs(FLAGS.runs)
  if FLAGS.patience < 1:
    raise app.UsageError(f"--patience: {FLAGS.patience} is not a positive number of epochs")
  grid.setup_threads(FLAGS.threads)
  cifar = _cifar_loader()
  committed = os.path.abspath(FLAGS.output) == str(grid.RECORDS / "patience.json")
  if FLAGS.smoke:  # a baseline of its own, as the grid would record it; trains every time
    if committed:
      raise app.UsageError("--smoke: give an --output other than the committed reruns")
    records, runs, patience = _smoke_baseline(*cifar())
    if os.path.exists(FLAGS.output):
      os.remove(FLAGS.output)
  else:
    records, patience = _grid_records(), FLAGS.patience
  reruns = open_reruns(FLAGS.output)
  if name == "run":
    _rerun_all(reruns, [grid_record(records, loss, seed) for loss, seed in runs], cifar, patience)
  lines = table(pairs(records, reruns.records))
  print("\n".join(lines))
  os.makedirs(os.path.dirname(os.path.abspath(FLAGS.report_md)), exist_ok=True)
  with open(FLAGS.report_md, "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")
  if committed:
    for path in blocks.rewrite(BLOCKS_MODULE, patience_blocks(records, reruns.records)):
      print(f"rewrote the generated blocks of {path}")


if __name__ == "__main__":
  define_flags()
  cli.run(main, "experiments.second.patience")
