"""Would a longer patience change CIFAR-10 end-to-end runs of the evidence grid? An exploratory
check of the second edition's early stopping, outside its protocol.

The protocol stops every run ``patience`` (8) epochs after its best validation NDCG@5
(``grid_protocol``), and calls a run converged when its best epoch comes before its last. That
rule cannot tell a plateau the run would have left from the end of learning. This script reruns
chosen seeds runs of ``cifar10_e2e`` with their recorded settings, learning rate and seed, except
a longer ``--patience``, and puts each beside the grid's record: best epoch, epochs run, best
validation NDCG@5, test NDCG@5 and Top-1, and for how many leading epochs the two validation
curves agree (the same seed retraces the recorded run only where training is bit-reproducible,
which multi-threaded CPU training is not). A third row per run, "rerun, cut", reads from the
rerun's own curve where it would have stopped at the grid's patience, which separates the
patience from the run-to-run variation. The grid's verdicts stay those of its protocol; this
says whether a run stopped early.

Usage (from the repository root; resumable, each rerun is added to ``grid_patience.json``, and
processes started side by side share it, each rerun trained once: ``grid_store.RecordStore``):
  nice -n 15 .venv/bin/python benchmarks/grid_patience.py \
    --runs=topk_cross_entropy_loss:0,topk_cross_entropy_loss:2 --patience=24
  .venv/bin/python benchmarks/grid_patience.py --quick   # smoke images and CNN, its own baseline
The table also goes to ``grid_patience.md`` in the output folder (``grid_patience_quick.*`` for
``--quick``, which trains afresh every time).
"""

import os

import _common  # first: puts the repository on sys.path before anything imports the package
from absl import app, flags

FLAGS = flags.FLAGS
EXPERIMENT = "cifar10_e2e"
#: What identifies a rerun in ``grid_patience.json``, and every field a rerun record holds.
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
    str(_common.ROOT / "benchmarks" / "out" / "rank4class_grid_v2.json"),
    "The evidence grid's records, which hold the runs to rerun.",
  )
  flags.DEFINE_string(
    "data_dir",
    os.environ.get("TFRANK4CLASS_DATA", str(_common.ROOT.parent / "shared" / "datasets")),
    "Folder holding cifar10_jpeg/.",
  )
  flags.DEFINE_bool(
    "quick",
    False,
    "The grid's CIFAR smoke images and CNN: trains its own baseline (patience 1, 3 epochs) and "
    "reruns it with patience 2, instead of reading the grid's records.",
  )
  flags.DEFINE_integer("threads", 0, "TensorFlow intra/inter-op threads (0: TensorFlow's default).")


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
  import rank4class_grid_v2 as grid_v2  # pylint: disable=g-import-not-at-top

  seeds_runs = grid_v2.select(records, experiment=EXPERIMENT, stage="seeds")
  found = grid_v2.select(seeds_runs, loss=loss, interaction="dot", seed=seed)
  if not found:
    held = sorted({f"{r['loss']}:{r['seed']}" for r in seeds_runs})
    raise app.UsageError(
      f"--runs: no {EXPERIMENT} seeds record of {loss}:{seed} (dot); the records hold "
      f"{', '.join(held) or 'none'}"
    )
  return found[0]


def check_rerun(record):
  """``record`` if it holds every field of a rerun (``RERUN_FIELDS``), else a ValueError naming
  the missing ones: the check of ``grid_store.RecordStore`` for ``grid_patience.json``."""
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
  higher value), as ``rank4class_grid_v2.train_run`` stops it: where a longer run would have
  stopped at a shorter patience, read from its own curve."""
  best = 0
  for epoch, value in enumerate(curve):
    if value > curve[best]:
      best = epoch
    if epoch - best >= patience:
      return best + 1, epoch + 1, curve[best]
  return best + 1, len(curve), curve[best]


def rerun(splits, info, record, patience):
  """``record``'s run trained again on ``splits`` (``info``: ``rank4class_grid_v2.cifar_splits``)
  with its settings, rate and seed at ``patience``: the run's result fields
  (``rank4class_grid_v2.train_run``) and the patience."""
  import rank4class_grid_v2 as grid_v2  # pylint: disable=g-import-not-at-top

  settings = dict(record["settings"], patience=patience)
  result = grid_v2.train_run(
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


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  runs = parse_runs(FLAGS.runs)
  if FLAGS.patience < 1:
    raise app.UsageError(f"--patience: {FLAGS.patience} is not a positive number of epochs")
  _common.setup_tensorflow(FLAGS.threads)
  import grid_store  # pylint: disable=g-import-not-at-top
  import rank4class_grid_v2 as grid_v2  # pylint: disable=g-import-not-at-top

  from tfrank4class import losses as losses_lib  # pylint: disable=g-import-not-at-top

  loaded = []

  def cifar():  # ``(splits, info)``, read once and only when a run has to train
    if not loaded:
      per_class = grid_v2.CIFAR_SMOKE["per_class"] if FLAGS.quick else None
      loaded.append(grid_v2.cifar_splits(FLAGS.data_dir, per_class, smoke=FLAGS.quick))
    return loaded[0]

  if FLAGS.quick:  # a baseline of its own, as the grid would record it
    splits, info = cifar()
    settings = grid_v2.grid_settings(losses_lib.names(), smoke=True, experiment=EXPERIMENT)
    settings = dict(settings, max_epochs=3, patience=1)
    loss, seed, patience = "softmax_loss", 0, 2
    result = grid_v2.train_run(splits, info["num_classes"], loss, "dot", 1e-3, seed, settings)
    records = [
      {
        "experiment": EXPERIMENT,
        "stage": "seeds",
        "loss": loss,
        "interaction": "dot",
        "seed": seed,
        "learning_rate": 1e-3,
        "settings": settings,
        **result,
      }
    ]
    runs = [(loss, seed)]
  else:
    if not os.path.isfile(FLAGS.grid_records):
      raise app.UsageError(
        f"--grid_records: {FLAGS.grid_records!r} is not a file (the evidence grid's records, "
        "benchmarks/out/rank4class_grid_v2.json)"
      )
    records = grid_v2.open_records(FLAGS.grid_records).records
    patience = FLAGS.patience
  chosen = [grid_record(records, loss, seed) for loss, seed in runs]
  name = "grid_patience_quick" if FLAGS.quick else "grid_patience"
  path = _common.OUT / f"{name}.json"
  if FLAGS.quick and path.exists():
    path.unlink()  # the smoke rerun trains every time
  store = grid_store.RecordStore(path, KEY_FIELDS, check_rerun)
  for record in chosen:
    key = (record["loss"], record["seed"], patience)
    with store.claim(key) as mine:
      if mine:
        store.add(
          {
            "loss": record["loss"],
            "interaction": record["interaction"],
            "seed": record["seed"],
            "learning_rate": record["learning_rate"],
            "software": _common.software_versions(),
            **rerun(*cifar(), record, patience),
          }
        )
      elif key not in store:
        print(f"{record['loss']}:{record['seed']}: another process is rerunning it", flush=True)
  store.refresh()
  pairs = []  # every rerun recorded so far, beside its grid record
  for again in store.records:
    record = grid_record(records, again["loss"], again["seed"])
    pairs.append((dict(record, patience=record["settings"]["patience"]), again))
  lines = table(pairs)
  print("\n".join(lines))
  (_common.OUT / f"{name}.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
  from tfrank4class.train import cli  # pylint: disable=g-import-not-at-top

  define_flags()
  cli.run(main, "grid_patience.py")
