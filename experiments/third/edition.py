"""The evidence's third edition (docs/evidence-third-edition.md), run and reported.

``run`` works through the experiments of :mod:`experiments.third.protocol` in the protocol's
order as :mod:`experiments.third.plan` lays them out (sweep, then seeds, per experiment), each run
trained by :func:`experiments.third.training.train_run` on cached MiniLM features
(:mod:`experiments.third.text_data`), with the protocol's label noise on the training split
(:mod:`experiments.third.label_noise`). Every finished run is one JSON record appended atomically to
``--output`` (:class:`experiments.store.RecordStore`: resumable, a run never repeated, several
processes on one file, each claiming a run before training it). ``report`` writes
``--report_md`` from the records (:mod:`experiments.third.report`) and, for the committed
records, the generated blocks of docs/evidence-third-edition.md.

Usage (from the repository root):
  nohup nice -n 19 .venv/bin/python -m experiments.third.edition run &
  .venv/bin/python -m experiments.third.edition report
  .venv/bin/python -m experiments.third.edition run --smoke --output=/tmp/t.json \
    --report_md=/tmp/t.md
"""

import os
import sys

import tensorflow as tf
from absl import app, flags

from experiments import blocks, features, store
from experiments.third import label_noise, plan, protocol, report, text_data, training
from tfrank4class import errors
from tfrank4class.train import cli

RECORDS = store.ROOT / "experiments" / "records"
FLAGS = flags.FLAGS


def define_flags():
  """The command line's flags (defined only when this module runs as a program)."""
  flags.DEFINE_list(
    "experiments", None, "Experiments, in order (default: all, in the protocol's order)."
  )
  flags.DEFINE_string(
    "data_dir",
    os.environ.get("TFRANK4CLASS_DATA", str(store.ROOT.parent / "shared" / "datasets")),
    "Folder holding clinc150/, banking77/ and goemotions/.",
  )
  flags.DEFINE_string("work_dir", str(store.ROOT / "runs" / "third"), "Feature cache.")
  flags.DEFINE_string("output", str(RECORDS / "third.json"), "The records (JSON list).")
  flags.DEFINE_string("report_md", str(RECORDS / "third.md"), "The report.")
  flags.DEFINE_bool("smoke", False, "Random features and tiny sizes, for tests.")
  flags.DEFINE_integer("max_runs", None, "Stop after this many new runs.")


def device():
  """The device the runs train on: the first GPU's name, else ``"cpu"``."""
  gpus = tf.config.list_logical_devices("GPU")
  return gpus[0].name if gpus else "cpu"


class Data:
  """The splits of each dataset and of each noise condition, loaded once."""

  def __init__(self, work_dir, data_dir, smoke):
    self.work_dir, self.data_dir, self.smoke = work_dir, data_dir, smoke
    self._splits, self._noisy = {}, {}

  def clean(self, dataset):
    """``(splits, info)`` of ``dataset``."""
    if dataset not in self._splits:
      if self.smoke:
        s = plan.SMOKE
        arrays, info = features.smoke_features(s["sizes"], s["feature_dim"], s["num_classes"])
        splits = {k: (arrays[f"{k}_x"], arrays[f"{k}_y"]) for k in s["sizes"]}
        self._splits[dataset] = splits, info
      else:
        self._splits[dataset] = text_data.dataset_features(self.work_dir, self.data_dir, dataset)
    return self._splits[dataset]

  def __call__(self, design):
    """``(splits, info)`` of an experiment's ``design``: its training labels noisy when it has
    noise; ``info["flip_rate"]`` is the share of training labels that changed."""
    splits, info = self.clean(design["dataset"])
    if design["noise"] is None:
      return splits, {**info, "flip_rate": 0.0}
    key = (design["dataset"], tuple(design["noise"]))
    if key not in self._noisy:
      kind, p = design["noise"]
      x, y = splits["train"]
      if kind == "uniform":
        noisy = label_noise.uniform_noise(y, p, info["num_classes"], protocol.NOISE_SEED)
      else:
        groups = (
          plan.SMOKE["groups"]
          if self.smoke
          else text_data.label_groups(self.data_dir, design["dataset"])
        )
        noisy = label_noise.group_noise(y, p, groups, protocol.NOISE_SEED)
      self._noisy[key] = {**splits, "train": (x, noisy)}, label_noise.flip_rate(y, noisy)
    noisy_splits, rate = self._noisy[key]
    return noisy_splits, {**info, "flip_rate": rate}


def train_and_record(records, run, data, context):
  """Trains the planned ``run`` and adds its record; returns the record."""
  experiment, stage, cell, head, rate, scale, seed, budget = run
  found = plan.settings(experiment, data.smoke)
  splits, info = data(found)
  run_settings = {**found, "max_epochs": budget}
  result = training.train_run(
    splits, info["num_classes"], cell, head, rate, scale, seed, run_settings
  )
  record = {
    "edition": protocol.EDITION,
    **dict(zip(plan.KEY_FIELDS[1:], run)),
    "dataset": found["dataset"],
    "num_classes": info["num_classes"],
    "feature_key": info["feature_key"],
    "flip_rate": info["flip_rate"],
    "sizes": {k: int(len(v[1])) for k, v in splits.items()},
    "settings": found,
    **context,
    **result,
  }
  records.add(record)
  return record


def _log(message):
  print(message, file=sys.stderr, flush=True)


def _describe(record, done):
  test = record["test"].get("top_1", {})
  return (
    f"[{done} new] {record['experiment']} {record['stage']} {record['cell']} {record['head']} "
    f"lr {record['learning_rate']:.3g} scale {record['scale']} seed {record['seed']}: "
    f"test top-1 {test.get('top_1', float('nan')):.4f}, {record['epochs_run']} epochs "
    f"({record['stopped_by']}), {record['train_seconds']:.0f}s"
  )


def run_all(output, work_dir, data_dir, names=None, smoke=False, max_runs=None):
  """Runs every planned run of the experiments ``names`` (all, in order, by default) that no
  other process holds, until none is left or ``max_runs`` new runs; returns the records."""
  known = plan.experiments(smoke)
  names = list(known) if names is None else list(names)
  for name in names:
    if name not in known:
      raise errors.InvalidConfigError(f"`experiments`: unknown {name!r}; allowed: {list(known)}.")
  records = plan.open_records(output)
  for record in records.records:
    if record["settings"] != plan.settings(record["experiment"], smoke):
      raise errors.InvalidConfigError(
        f"{output} holds runs of {record['experiment']} with other settings than now; use "
        "another --output or declare the change as a deviation."
      )
  data = Data(work_dir, data_dir, smoke)
  context = {"software": store.software_versions(), "device": device()}
  done = 0
  while max_runs is None or done < max_runs:
    runnable = [r for r in plan.planned_runs(records, names, smoke) if r[4] is not None]
    record = None
    for run in runnable:
      with records.claim((protocol.EDITION,) + run) as mine:
        if mine:
          record = train_and_record(records, run, data, context)
          break
    if record is None:
      break
    done += 1
    _log(_describe(record, done))
  return records


def command(argv):
  """The one command of ``argv`` (``run`` or ``report``)."""
  if len(argv) != 2 or argv[1] not in ("run", "report"):
    raise app.UsageError(f"Give one command, run or report; got {argv[1:]}")
  return argv[1]


def main(argv):
  if command(argv) == "run":
    run_all(
      FLAGS.output, FLAGS.work_dir, FLAGS.data_dir, FLAGS.experiments, FLAGS.smoke, FLAGS.max_runs
    )
  records = plan.open_records(FLAGS.output).records
  found = report.complete_comparisons(records, FLAGS.smoke)
  report.write_report(records, FLAGS.report_md, smoke=FLAGS.smoke, found=found)
  if os.path.abspath(FLAGS.output) == str(RECORDS / "third.json"):
    generated = [
      (report.BLOCKS_MODULE, report.doc_blocks(records)),
      (report.VERDICTS_MODULE, report.verdict_blocks(records, found)),
    ]
    for module, found_blocks in generated:
      for path in blocks.rewrite(module, found_blocks):
        print(f"rewrote the generated blocks of {path}")


if __name__ == "__main__":
  define_flags()
  cli.run(main, "experiments.third.edition")
