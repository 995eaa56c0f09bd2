"""tfrank4class-evaluate: Top-1, Top-5, NDCG@5 and MRR of a trained model on a split, as a table.

    tfrank4class-evaluate --model_dir=runs/demo                  # its best.keras, its dataset
    tfrank4class-evaluate --checkpoint=model.keras --dataset=cifar10 --data_dir=...
    tfrank4class-evaluate --saved_model=runs/demo/export --dataset=goemotions_sample

``--on_corrupt=skip`` drops the malformed lines of a text split and the undecodable files of an
image split (reporting them on stderr) instead of stopping, as in ``tfrank4class-train``. A user
error (missing data, a malformed line, an undecodable image, a split the dataset does not have, an
unknown metric, a missing, damaged or foreign model) ends the program with one line,
``tfrank4class-evaluate: error: <message>``. Every dataset has ``validation`` and ``test`` splits
(``--split=validation,test``); the program says what the validation split is (CIFAR and ImageNet:
a fixed hold-out of 10% of train). The model file or SavedModel is checked to be there before any
data is read, and every split of ``--split`` before the model loads, so a bad one is reported at
once.

Importing the module defines its flags without parsing any (``run()`` parses them):

  >>> from tfrank4class.train import evaluate
  >>> evaluate.FLAGS["metrics"].default
  ['top_1', 'top_5', 'ndcg_5', 'mrr']
"""

from absl import app, flags

from tfrank4class import data as data_lib
from tfrank4class import metrics as metrics_lib
from tfrank4class.train import cli, experiment, results, run_dir, serving

flags.DEFINE_string("model_dir", None, "A training run: evaluates its best.keras on its dataset.")
flags.DEFINE_string("checkpoint", None, "A .keras model file.")
flags.DEFINE_string("saved_model", None, "A SavedModel exported by tfrank4class.")
flags.DEFINE_enum(
  "dataset", None, data_lib.names(), "Dataset (default: the run's, with --model_dir)."
)
flags.DEFINE_string(
  "data_dir", None, "Where the dataset is (default: the run's, with --model_dir)."
)
flags.DEFINE_list("split", ["test"], "Split(s) to evaluate.")
flags.DEFINE_list(
  "metrics",
  list(metrics_lib.registry.DEFAULT_NAMES),
  f"Metrics to report, in this order ({', '.join(metrics_lib.registry.PATTERNS)}; K a whole "
  "number).",
)
flags.DEFINE_integer("batch_size", 256, "Evaluation batch size.", lower_bound=1)
flags.DEFINE_enum(
  "on_corrupt",
  "error",
  list(data_lib.ON_CORRUPT),
  "A malformed text line or undecodable image: error (stop, naming the file and "
  "line) or skip (drop it; the dropped lines are counted and named on stderr).",
)
FLAGS = flags.FLAGS
#: The flags by topic, as ``--help`` lists them.
HELP_GROUPS = (
  ("Model (exactly one)", ("model_dir", "checkpoint", "saved_model")),
  ("Data", ("dataset", "data_dir", "split", "on_corrupt", "batch_size")),
  ("Metrics", ("metrics",)),
)


def _known_metrics(names):
  """Flag validator of --metrics: every name is a metric of the registry."""
  for name in names:
    try:
      metrics_lib.registry.parse(name)
    except ValueError as e:
      raise flags.ValidationError(str(e)) from None
  return True


flags.register_validator("metrics", _known_metrics)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  experiment.quiet_tensorflow_logs()
  sources = [f for f in ("model_dir", "checkpoint", "saved_model") if FLAGS[f].value]
  if len(sources) != 1:
    raise app.UsageError(
      f"Give exactly one of --model_dir, --checkpoint, --saved_model; got {sources or 'none'}."
    )
  dataset, data_dir = FLAGS.dataset, FLAGS.data_dir
  if FLAGS.model_dir:
    config = experiment.ExperimentConfig.from_model_dir(FLAGS.model_dir)
    dataset, data_dir = dataset or config.dataset, data_dir or config.data_dir
  if dataset is None:
    raise app.UsageError("--dataset is required with --checkpoint or --saved_model.")
  # The model is there (a cheap check) before any data is read; it loads after.
  if FLAGS.saved_model:
    serving.check_saved_model(FLAGS.saved_model)
  else:
    run_dir.checkpoint_path(FLAGS.model_dir, FLAGS.checkpoint)
  # Every split is checked (name, data) before the model loads and before any is evaluated.
  batch_size, on_corrupt = FLAGS.batch_size, FLAGS.on_corrupt
  batches = [
    (split, results.evaluation_batches(dataset, split, data_dir, batch_size, on_corrupt))
    for split in FLAGS.split
  ]
  if FLAGS.saved_model:
    model = serving.saved_model_scorer(FLAGS.saved_model)
  else:
    model = experiment.load_checkpoint(FLAGS.model_dir, FLAGS.checkpoint)
  # A top_K beyond the model's classes: one line from the first batch (results.evaluate_batches).
  rows = [(split, results.evaluate_batches(model, b, tuple(FLAGS.metrics))) for split, b in batches]
  if any(data_lib.canonical_split(split)[0] == "validation" for split in FLAGS.split):
    print(f"The validation split of {dataset}: {data_lib.info(dataset, data_dir).validation}.")
  print(results.format_table(rows, list(rows[0][1])))


def run():
  cli.run(main, "tfrank4class-evaluate", HELP_GROUPS)


if __name__ == "__main__":
  run()
