"""tfrank4class-train: train a Rank4Class model on any dataset, loss and strategy.

    tfrank4class-train --dataset=goemotions_sample --loss=approx_ndcg_loss \\
        --model_dir=runs/demo --export_dir=runs/demo/export

Every flag maps onto a field of ``tfrank4class.train.config.ExperimentConfig``; unknown
values are refused with the allowed ones before any data is read. After training, the best
checkpoint (by ``--best_metric`` on the validation split, never on the test split unless
``--select_on_test``) is evaluated on the validation and test splits, the table is printed and
written to ``model_dir/results.json``, and the model is exported for serving to ``--export_dir``.
The program says at the start what the validation split is (CIFAR and ImageNet: a fixed hold-out
of 10% of train, left out of training).

One run per ``--model_dir``: a second run on a directory in use stops at once, naming the run
that holds it. Started again with the same flags, a killed run resumes and says where, and a
complete run (its ``results.json``, written last) prints "run already complete" and its results
and writes nothing; other flags are refused with the differing ones named. ``--start_over``
deletes the run and trains from scratch. An export already in ``--export_dir`` is refused before
training, unless ``--start_over`` (the new export then replaces it).
"""

import json

from absl import app, flags

from tfrank4class import data as data_lib
from tfrank4class import encoders as encoders_lib
from tfrank4class import losses as losses_lib
from tfrank4class import metrics as metrics_lib
from tfrank4class.heads import sampled
from tfrank4class.train import cli, experiment, run_dir, serving
from tfrank4class.train import config as config_lib
from tfrank4class.train import strategy as strategy_lib

_D = config_lib.ExperimentConfig()
flags.DEFINE_enum("dataset", _D.dataset, data_lib.names(), "Dataset to train on.")
flags.DEFINE_string(
  "data_dir",
  None,
  "Where the dataset is (image folder, TSV files or TFDS "
  "data dir); default: TFDS' default, or the embedded files of "
  "goemotions_sample.",
)
flags.DEFINE_enum(
  "on_corrupt",
  _D.on_corrupt,
  list(data_lib.ON_CORRUPT),
  "A malformed text line or undecodable image: error (stop, naming the file and "
  "line) or skip (drop it; the dropped lines are counted and named on stderr).",
)
flags.DEFINE_enum(
  "encoder",
  _D.encoder,
  ["auto"] + encoders_lib.names(),
  "Instance encoder; auto: transformer for text, small_cnn for images.",
)
flags.DEFINE_string("encoder_kwargs", "{}", "JSON object of encoder arguments.")
flags.DEFINE_enum(
  "interaction",
  _D.interaction,
  list(config_lib.INTERACTIONS),
  "Instance-class interaction of the Rank4Class head.",
)
flags.DEFINE_list(
  "hidden_units",
  [str(u) for u in config_lib.DEFAULT_HIDDEN_UNITS],
  "MLP widths of the latent_cross / concat interactions (refused with "
  "--interaction=dot, which has no MLP).",
)
flags.DEFINE_enum("loss", _D.loss, losses_lib.names(), "Loss, by registry name.")
flags.DEFINE_string("loss_kwargs", "{}", "JSON object of loss arguments.")
flags.DEFINE_integer(
  "sampled_negatives",
  None,
  "Train on sampled lists: each example's true class and this many negatives drawn by "
  "--sampler (sampled softmax with the log-Q correction under --loss=softmax_loss; any loss "
  "takes the lists; latent_cross and concat run their MLP on the sampled candidates only), "
  "scoring every class only at evaluation and serving. Default: every class's score in "
  "training.",
  lower_bound=1,
)
flags.DEFINE_enum(
  "sampler",
  _D.sampler,
  list(sampled.DISTRIBUTIONS),
  "How --sampled_negatives are drawn: uniform over the classes, or log_uniform (Zipf over class "
  "ids sorted by decreasing frequency).",
)
flags.DEFINE_list(
  "metrics",
  list(_D.metrics),
  "Metrics of the final table and results.json, in this order "
  f"({', '.join(metrics_lib.registry.PATTERNS)}; K a whole number).",
)
flags.DEFINE_string(
  "best_metric", _D.best_metric, "Validation metric that picks the best checkpoint."
)
flags.DEFINE_bool(
  "select_on_test",
  _D.select_on_test,
  "Choose the best checkpoint on the TEST split instead of the validation split (the protocol "
  "of papers without a validation split; the test results are then optimistic). Every dataset "
  "has a validation split (CIFAR and ImageNet: a fixed hold-out of 10% of train).",
)
flags.DEFINE_integer("batch_size", _D.batch_size, "Global batch size.", lower_bound=1)
flags.DEFINE_integer(
  "epochs", _D.epochs, "Training epochs (at most, with early stopping).", lower_bound=1
)
flags.DEFINE_integer(
  "early_stopping_patience",
  None,
  "Stop this many epochs after the best epoch by validation --best_metric (the evaluated and "
  "exported best.keras is that epoch's); default: no early stopping, train --epochs.",
  lower_bound=1,
)
flags.DEFINE_integer(
  "steps",
  None,
  "Training steps per epoch (default: one pass over the training split).",
  lower_bound=1,
)
flags.DEFINE_enum("optimizer", _D.optimizer, sorted(config_lib.OPTIMIZERS), "Optimizer.")
flags.DEFINE_float("learning_rate", _D.learning_rate, "Learning rate.", lower_bound=0.0)
flags.DEFINE_enum(
  "strategy",
  _D.strategy,
  list(strategy_lib.STRATEGIES),
  "tf.distribute strategy; multi_worker_mirrored reads the cluster from TF_CONFIG.",
)
flags.DEFINE_string("tpu", None, "TPU name or grpc://host:port, with --strategy=tpu.")
flags.DEFINE_list(
  "devices",
  None,
  "Devices of --strategy=mirrored, e.g. /gpu:0,/gpu:1 (default: all GPUs, else CPU); one this "
  "machine does not have is refused. /cpu:0,/cpu:1 splits the CPU into two logical devices.",
)
flags.DEFINE_float(
  "cluster_timeout",
  _D.cluster_timeout,
  "Seconds a --strategy=multi_worker_mirrored task waits for every task of TF_CONFIG to start "
  "before it stops, naming those that did not.",
  lower_bound=0.0,
)
flags.DEFINE_string("model_dir", None, "Checkpoints, best.keras, TensorBoard logs, backups.")
flags.DEFINE_string(
  "export_dir",
  None,
  "Where to write the serving SavedModel (not over an export, see --start_over).",
)
flags.DEFINE_integer("seed", _D.seed, "Random seed (weights, shuffling).", lower_bound=0)
flags.DEFINE_integer(
  "backup_every", _D.backup_every, "Steps between mid-epoch backups.", lower_bound=1
)
flags.DEFINE_bool(
  "start_over",
  _D.start_over,
  "Delete the run already in --model_dir (results, backup, checkpoints, logs) and train from "
  "scratch; a new export then replaces one in --export_dir. Without it, a complete run in "
  "--model_dir prints its results and stops, a killed one resumes, a different configuration "
  "there is refused, and so is an export already in --export_dir.",
)
flags.DEFINE_integer("top_k", 5, "Classes returned by the serving signature.", lower_bound=1)
flags.DEFINE_enum("keras_verbose", "1", ["0", "1", "2"], "Keras progress output: 1 = progress bar.")

FLAGS = flags.FLAGS
#: The flags by topic, as ``--help`` lists them.
HELP_GROUPS = (
  ("Data", ("dataset", "data_dir", "on_corrupt")),
  ("Model", ("encoder", "encoder_kwargs", "interaction", "hidden_units")),
  (
    "Loss and metrics",
    (
      "loss",
      "loss_kwargs",
      "sampled_negatives",
      "sampler",
      "metrics",
      "best_metric",
      "select_on_test",
    ),
  ),
  (
    "Training",
    (
      "batch_size",
      "epochs",
      "early_stopping_patience",
      "steps",
      "optimizer",
      "learning_rate",
      "seed",
      "keras_verbose",
    ),
  ),
  ("Distribution", ("strategy", "tpu", "devices", "cluster_timeout")),
  ("Run directory and export", ("model_dir", "start_over", "backup_every", "export_dir", "top_k")),
)


def _json_flag(name):
  try:
    value = json.loads(FLAGS[name].value)
  except json.JSONDecodeError as e:
    raise app.UsageError(f"--{name} must be a JSON object, got {FLAGS[name].value!r}: {e}") from e
  if not isinstance(value, dict):
    raise app.UsageError(f"--{name} must be a JSON object, got {FLAGS[name].value!r}.")
  return value


def config_from_flags():
  """The ``ExperimentConfig`` the flags describe, validated."""
  try:
    hidden_units = tuple(int(u) for u in FLAGS.hidden_units)
  except ValueError as e:
    raise app.UsageError(f"--hidden_units must be integers, got {FLAGS.hidden_units}.") from e
  config = experiment.ExperimentConfig(
    dataset=FLAGS.dataset,
    data_dir=FLAGS.data_dir,
    on_corrupt=FLAGS.on_corrupt,
    encoder=FLAGS.encoder,
    encoder_kwargs=_json_flag("encoder_kwargs"),
    interaction=FLAGS.interaction,
    hidden_units=hidden_units if FLAGS["hidden_units"].present else None,
    loss=FLAGS.loss,
    loss_kwargs=_json_flag("loss_kwargs"),
    sampled_negatives=FLAGS.sampled_negatives,
    sampler=FLAGS.sampler,
    metrics=tuple(FLAGS.metrics),
    batch_size=FLAGS.batch_size,
    epochs=FLAGS.epochs,
    early_stopping_patience=FLAGS.early_stopping_patience,
    steps=FLAGS.steps,
    optimizer=FLAGS.optimizer,
    learning_rate=FLAGS.learning_rate,
    strategy=FLAGS.strategy,
    tpu=FLAGS.tpu,
    devices=tuple(FLAGS.devices) if FLAGS.devices else None,
    cluster_timeout=FLAGS.cluster_timeout,
    model_dir=FLAGS.model_dir,
    export_dir=FLAGS.export_dir,
    seed=FLAGS.seed,
    best_metric=FLAGS.best_metric,
    select_on_test=FLAGS.select_on_test,
    backup_every=FLAGS.backup_every,
    start_over=FLAGS.start_over,
    verbose=int(FLAGS.keras_verbose),
  )
  try:
    return config.validate()
  except ValueError as e:
    raise app.UsageError(str(e)) from e


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  experiment.quiet_tensorflow_logs()
  config = config_from_flags()
  finished = run_dir.finished_results(config)
  if finished is not None:
    print(
      f"{config.model_dir}: run already complete (its {run_dir.RESULTS_FILE}); nothing trained "
      "or written. --start_over trains it again."
    )
    _print_results(config, list(finished.items()))
    return
  if config.export_dir:
    serving.check_export_dir(config.export_dir, config.start_over, "--start_over")
  result = experiment.train(config)
  if not strategy_lib.is_chief(result.strategy):
    return  # the chief evaluates and exports a non-distributed copy of the best checkpoint
  model = experiment.best_model(config, result)
  rows = experiment.evaluate_splits(model, config, result.info)
  _print_results(config, rows)
  if config.export_dir:
    serving.export_saved_model(
      model, config.dataset, result.info.class_names, config.export_dir, top_k=FLAGS.top_k
    )
    print(f"Exported the serving SavedModel to {config.export_dir}")
  if config.model_dir:
    run_dir.write_results(config.model_dir, rows)  # last: the run is complete


def _print_results(config, rows):
  # The split that chose best.keras: training refused a dataset without a validation split
  # unless --select_on_test (results.selection_split).
  chosen_on = "test" if config.select_on_test else "validation"
  print(
    f"\n{config.dataset} / {config.loss} / {config.interaction} (best checkpoint by "
    f"{chosen_on} {config.best_metric}):"
  )
  print(experiment.format_table(rows, list(rows[0][1])))


def run():
  cli.run(main, "tfrank4class-train", HELP_GROUPS)


if __name__ == "__main__":
  run()
