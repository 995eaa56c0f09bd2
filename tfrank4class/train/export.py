"""tfrank4class-export: write the serving SavedModel of a training run's best checkpoint.

tfrank4class-export --model_dir=runs/demo --export_dir=runs/demo/export

The run's files and ``--export_dir`` are checked before the model loads. An existing export in
``--export_dir`` is refused unless ``--overwrite``; a directory holding anything else is always
refused. The SavedModel is written beside ``--export_dir`` and renamed into place whole (an export
already there stays until the new one is complete).
"""

from absl import app, flags

from tfrank4class import checks, errors
from tfrank4class import data as data_lib
from tfrank4class.train import cli, experiment, serving

flags.DEFINE_string(
  "model_dir", None, "Required: a training run (its best.keras and config.json).", required=True
)
flags.DEFINE_string("export_dir", None, "Required: where to write the SavedModel.", required=True)
flags.DEFINE_string("checkpoint", None, "A .keras file to export instead of model_dir/best.keras.")
flags.DEFINE_integer("top_k", 5, "Classes returned by the serving signature.", lower_bound=1)
flags.DEFINE_bool("overwrite", False, "Replace an export already in --export_dir.")
FLAGS = flags.FLAGS
#: The flags by topic, as ``--help`` lists them.
HELP_GROUPS = (
  ("Model", ("model_dir", "checkpoint")),
  ("Export", ("export_dir", "overwrite", "top_k")),
)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  experiment.quiet_tensorflow_logs()
  try:
    checks.check_writable_dir("export_dir", FLAGS.export_dir)
  except ValueError as e:
    raise errors.InvalidConfigError(str(e)) from e
  serving.check_export_dir(FLAGS.export_dir, FLAGS.overwrite, "--overwrite")
  config = experiment.ExperimentConfig.from_model_dir(FLAGS.model_dir)
  model = experiment.load_checkpoint(FLAGS.model_dir, FLAGS.checkpoint)
  class_names = data_lib.info(config.dataset, config.data_dir).class_names
  serving.export_saved_model(model, config.dataset, class_names, FLAGS.export_dir, FLAGS.top_k)
  print(f"Exported {FLAGS.checkpoint or FLAGS.model_dir} to {FLAGS.export_dir}")


def run():
  cli.run(main, "tfrank4class-export", HELP_GROUPS)


if __name__ == "__main__":
  run()
