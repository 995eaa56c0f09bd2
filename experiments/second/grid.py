"""Which loss and which head? The evidence grid (docs/evidence-grid.md), run and reported.

Runs the pre-registered protocol of :mod:`experiments.second.protocol` as
:mod:`experiments.second.plan` lays
it out: on frozen all-MiniLM-L6-v2 sentence embeddings of GoEmotions (experiments ``clean``,
``noise20``, ``noise40``) and end to end on CIFAR-10 (``cifar10_e2e``), a learning-rate sweep
then the evaluation seeds of every loss x head, each run trained by
:func:`experiments.training.train_run`. Every finished run is one JSON record in ``--output``
(:mod:`experiments.store`, rewritten atomically after each run); a restarted grid skips the runs
it finds there and refuses to continue with other settings. The embeddings are computed once and
cached under ``--work_dir`` (:mod:`experiments.features`).

``report`` writes ``--report_md`` and ``--report_png`` from the records
(:mod:`experiments.second.report`)
and, when they are the committed ones (``experiments/records/grid.json``), rewrites the generated
blocks of README.md and docs/evidence-grid.md (:mod:`experiments.blocks`); ``run`` runs the
missing runs first.

Usage (from the repository root; the full grid is long, see docs/evidence-grid.md):
  nice -n 15 .venv/bin/python -m experiments.second.grid run --experiments=clean
  nice -n 15 .venv/bin/python -m experiments.second.grid run --experiments=clean,cifar10_e2e
  .venv/bin/python -m experiments.second.grid report
  .venv/bin/python -m experiments.second.grid run --smoke --output=/tmp/g.json --work_dir=/tmp/w \
    --report_md=/tmp/g.md --report_png=/tmp/g.png
"""

import os
import sys
import time

import tensorflow as tf
from absl import app, flags

from experiments import blocks, features, store, training
from experiments.second import plan, protocol, report
from tfrank4class import checks, errors
from tfrank4class import losses as losses_lib
from tfrank4class.train import cli

#: How often a process waiting on other processes' runs reads the records again (``wait_hours``).
WAIT_POLL_SECONDS = 60
RECORDS = store.ROOT / "experiments" / "records"
COMMANDS = ("run", "report")
FLAGS = flags.FLAGS


def define_flags():
  """The command line's flags, defined only when the grid runs as a program: the tests import this
  module beside the training binaries, whose flags share some of these names."""
  flags.DEFINE_list("experiments", ["clean"], f"Experiments, in order: {list(plan.EXPERIMENTS)}.")
  flags.DEFINE_list("stages", list(plan.STAGES), "Stages to run (the seeds stage needs the sweep).")
  flags.DEFINE_string(
    "data_dir",
    os.environ.get("TFRANK4CLASS_DATA", str(store.ROOT.parent / "shared" / "datasets")),
    "Folder holding goemotions/ and cifar10_jpeg/.",
  )
  flags.DEFINE_string(
    "work_dir", str(store.ROOT / "runs" / "grid"), "Feature cache (not committed)."
  )
  flags.DEFINE_string("output", str(RECORDS / "grid.json"), "The records (JSON list).")
  flags.DEFINE_string("report_md", str(RECORDS / "grid.md"), "The report.")
  flags.DEFINE_string("report_png", str(RECORDS / "grid.png"), "The forest plot.")
  flags.DEFINE_bool("smoke", False, "Random features and tiny sizes, for tests.")
  flags.DEFINE_integer("max_epochs", None, "Epoch budget (default: the protocol's).")
  flags.DEFINE_integer("max_runs", None, "Stop after this many new runs (for timing).")
  flags.DEFINE_integer("threads", 0, "TensorFlow intra/inter-op threads (0: TensorFlow's default).")
  flags.DEFINE_float(
    "wait_hours",
    0.0,
    "When this process has nothing it can run yet but runs are still planned (held by other grid "
    "processes on the same --output, or seeds waiting on a sweep), read the records again every "
    "minute, for at most this many hours in all (0: stop at once).",
  )


def _scheduling(experiments, options):
  """The waiting budget in seconds (``wait_hours`` of :func:`run_grid`'s ``options``), with
  ``experiments`` checked; a bad value raises ``tfrank4class.errors.InvalidConfigError`` (a
  ``ValueError``) that names it, which the command line prints on one line."""
  try:
    for experiment in experiments:
      if experiment not in plan.EXPERIMENTS:
        raise ValueError(
          f"`experiments`: unknown {experiment!r}; allowed: {list(plan.EXPERIMENTS)}."
        )
    wait_hours = checks.check_float("wait_hours", options.get("wait_hours", 0.0), minimum=0)
  except ValueError as e:
    raise errors.InvalidConfigError(str(e)) from None
  return 3600.0 * wait_hours


def _check_resumable(records, settings, output):
  """Refuses records of ``output`` that follow other settings than ``settings`` now."""
  for record in records.records:
    if record["settings"] != settings[record["experiment"]]:
      raise errors.InvalidConfigError(
        f"{output} holds runs of {record['experiment']} with other settings "
        f"({record['settings']!r}) than now ({settings[record['experiment']]!r}); use another "
        "--output or move that file away."
      )


class _Data:
  """The splits of each kind of experiment (frozen features, images), loaded once."""

  def __init__(self, work_dir, data_dir, smoke):
    self.work_dir, self.data_dir, self.smoke = work_dir, data_dir, smoke
    self._loaded = {}

  def __call__(self, experiment):
    """``(splits, info)`` of ``experiment``."""
    kind = "image" if experiment in plan.IMAGE_EXPERIMENTS else "features"
    if kind not in self._loaded:
      self._loaded[kind] = self._images() if kind == "image" else self._features()
    return self._loaded[kind]

  def _images(self):
    if self.smoke:
      smoke = plan.CIFAR_SMOKE
      return features.cifar_splits(self.data_dir, smoke["model"], smoke["per_class"])
    return features.cifar_splits(self.data_dir, protocol.CIFAR)

  def _features(self):
    if self.smoke:
      smoke = plan.SMOKE
      found = features.smoke_features(smoke["sizes"], smoke["feature_dim"], smoke["num_classes"])
    else:
      found = features.minilm_features(self.work_dir, self.data_dir)
    arrays, info = found
    splits = {s: (arrays[f"{s}_x"], arrays[f"{s}_y"]) for s in ("train", "validation", "test")}
    return splits, info


def _train_and_record(records, run, data, settings, software):
  """Trains the planned ``run`` and adds its record to ``records``; returns the record."""
  experiment, stage, loss, head, rate, seed = run
  splits, info = data(experiment)
  x, y = splits["train"]
  if plan.EXPERIMENTS[experiment]:
    y = features.noisy_labels(
      y, plan.EXPERIMENTS[experiment], info["num_classes"], seed=protocol.NOISE_SEED
    )
  run_splits = {**splits, "train": (x, y)}
  result = training.train_run(
    run_splits, info["num_classes"], loss, head, rate, seed, settings[experiment]
  )
  image = experiment in plan.IMAGE_EXPERIMENTS
  dataset = "smoke" if data.smoke else (protocol.CIFAR["dataset"] if image else protocol.DATASET)
  record = {
    "edition": protocol.EDITION,
    "experiment": experiment,
    "stage": stage,
    "loss": loss,
    "interaction": head,
    "learning_rate": rate,
    "seed": seed,
    "dataset": dataset,
    "feature_key": info["feature_key"],
    "settings": settings[experiment],
    "software": software,
    **result,
  }
  if image:
    record.update({f"n_{s}": int(len(splits[s][1])) for s in splits})
  records.add(record)
  return record


def _train_first_free(records, runnable, data, settings, software):
  """Trains and records the first of the ``runnable`` runs that no other process holds; returns
  its record, or ``None`` when every one is held."""
  for run in runnable:
    with records.claim((protocol.EDITION,) + run) as mine:
      if mine:
        return _train_and_record(records, run, data, settings, software)
  return None


def _log(message):
  print(message, file=sys.stderr, flush=True)


def run_grid(
  output, work_dir, data_dir, experiments=("clean",), stages=plan.STAGES, smoke=False, **options
):
  """Runs every missing run (see the module doc) and returns the records
  (:func:`experiments.second.plan.open_records`).

  ``options``: ``max_epochs`` (overrides the protocol's budget), ``max_runs`` (stop after that
  many new runs), ``registered_losses`` (default ``tfrank4class.losses.names()``),
  ``wait_hours`` (default 0).

  Several processes may run the same experiments on one ``output``: each claims a run before
  training it (``RecordStore.claim``) and takes the first planned run no other process holds, so
  no run is trained twice and no process idles while another has runs queued. When nothing is
  left that this process can run now (the remaining runs are held by other processes, or are
  seeds waiting for a sweep) but runs are still planned, it reads the records again every
  ``WAIT_POLL_SECONDS`` until it can go on, for at most ``wait_hours`` in all; then, or at once
  with ``wait_hours=0``, it stops, and a later start runs the rest.
  """
  wait_left = _scheduling(experiments, options)
  registered = options.get("registered_losses") or losses_lib.names()
  settings = {
    e: plan.grid_settings(registered, smoke, options.get("max_epochs"), e) for e in plan.EXPERIMENTS
  }
  records = plan.open_records(output)
  _check_resumable(records, settings, output)
  data, software = _Data(work_dir, data_dir, smoke), store.software_versions()
  ran, start, waiting = 0, time.perf_counter(), False
  max_runs = options.get("max_runs")
  while max_runs is None or ran < max_runs:
    planned = [
      run for e in experiments for run in plan.planned_runs(records, [e], stages, settings[e])
    ]
    runnable = [t for t in planned if t[4] is not None]
    record = _train_first_free(records, runnable, data, settings, software)
    if record is None:
      if not planned or wait_left <= 0:
        break
      if not waiting:
        _log(
          f"[waiting] {len(planned)} runs planned, none this process can run yet (held by other "
          f"processes, or seeds waiting for a sweep); reading the records every "
          f"{WAIT_POLL_SECONDS} s for at most {wait_left / 3600:.2f} h"
        )
      waiting, nap = True, min(WAIT_POLL_SECONDS, wait_left)
      time.sleep(nap)
      wait_left -= nap
      records.refresh()
      continue
    waiting, ran = False, ran + 1
    _log(
      f"[{ran} new, {len(runnable) - 1} known to do, {time.perf_counter() - start:.0f}s] "
      f"{record['experiment']} {record['stage']} {record['loss']} {record['interaction']} lr "
      f"{record['learning_rate']:g} seed {record['seed']}: ndcg_5 {record['ndcg_5']:.4f}, best "
      f"epoch {record['best_epoch']}/{record['epochs_run']}"
    )
  return records


def setup_threads(threads):
  """``threads > 0`` fixes TensorFlow's intra- and inter-op thread pools."""
  if threads:
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)


def command(argv):
  """The one command of ``argv`` (``run`` or ``report``); a UsageError otherwise."""
  if len(argv) != 2 or argv[1] not in COMMANDS:
    raise app.UsageError(f"Give one command, {' or '.join(COMMANDS)}; got {argv[1:]}")
  return argv[1]


def main(argv):
  if command(argv) == "run":
    setup_threads(FLAGS.threads)
    run_grid(
      FLAGS.output,
      FLAGS.work_dir,
      FLAGS.data_dir,
      experiments=FLAGS.experiments,
      stages=FLAGS.stages,
      smoke=FLAGS.smoke,
      max_epochs=FLAGS.max_epochs,
      max_runs=FLAGS.max_runs,
      wait_hours=FLAGS.wait_hours,
    )
  records = plan.open_records(FLAGS.output).records
  report.write_report(records, FLAGS.report_md, FLAGS.report_png)
  if os.path.abspath(FLAGS.output) == str(RECORDS / "grid.json"):  # the committed records
    for path in blocks.rewrite(report.BLOCKS_MODULE, report.grid_blocks(records)):
      print(f"rewrote the generated blocks of {path}")


if __name__ == "__main__":
  define_flags()
  cli.run(main, "experiments.second.grid")
