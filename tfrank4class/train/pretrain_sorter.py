"""Pretrains a SoDeep sorter on synthetic lists (Engilberge et al., CVPR 2019, Sec. 3.1).

    tfrank4class-pretrain-sorter --sorter=attention --min_list_size=3 --max_list_size=300 \\
        --steps=3000 --batch_size=128 --learning_rate=3e-3 --output=/tmp/sorters/attention

Loss (Eq. 1): the L1 distance between predicted and exact ranks, here on normalised ranks
(Eq. 1 sums raw-rank distances; dividing by ``n - 1`` puts lists of every length on one scale),

    L = mean_{b, i} | (rank_hat_{b,i} - 1) / (n - 1) - (rank_{b,i} - 1) / (n - 1) |,

minimised with Adam whose learning rate halves every ``--halve_every`` steps. The paper
(Sec. 4.1.1) uses Adam at 1e-3, halved every 100 epochs of 100,000 lists, batches of 512 lists
of length 100; our defaults (1e-3, halved every 2,000 steps of 128 lists of length 10-100) are
shorter so that a sorter pretrains in minutes on a CPU; the flags used for the shipped weights
are in docs/sodeep.md, "Shipped weights". Checkpoints and
TensorBoard summaries go to ``--model_dir`` (training resumes from its latest checkpoint); every
``--eval_every`` steps the sorter is scored on a fixed held-out synthetic set and, when it
improves, exported to ``--output`` (``.json`` + ``.npz``, loadable with
``<SorterClass>.load_weights_file`` or ``pretrained(path=...)``), so the run can be stopped at
any time and the best weights so far are on disk.
"""

import json
import os
import pathlib
import time
import typing

import tensorflow as tf
from absl import app, flags, logging

from tfrank4class import atomic, checks, errors
from tfrank4class.compat import keras
from tfrank4class.ranking import synthetic
from tfrank4class.ranking.sorters import SORTERS
from tfrank4class.train import cli

FLAGS = flags.FLAGS
flags.DEFINE_enum("sorter", "attention", list(SORTERS.names()), "Sorter architecture.")
flags.DEFINE_integer("min_list_size", 10, "Shortest training list (>= 2).")
flags.DEFINE_integer("max_list_size", 100, "Longest training list (conv: must equal min).")
flags.DEFINE_integer("steps", 10000, "Training steps.")
flags.DEFINE_integer("batch_size", 128, "Lists per step.")
flags.DEFINE_float("learning_rate", 1e-3, "Initial Adam learning rate.")
flags.DEFINE_integer("halve_every", 2000, "Halve the learning rate every this many steps.")
flags.DEFINE_string("output", None, "Path prefix of the exported best weights (.json/.npz).")
flags.DEFINE_string("model_dir", None, "Checkpoints and TensorBoard logs (default: <output>_run).")
flags.DEFINE_integer("eval_every", 250, "Evaluate (and maybe export) every this many steps.")
flags.DEFINE_integer("eval_lists", 512, "Held-out lists per evaluation length.")
flags.DEFINE_list("eval_list_sizes", None, "Evaluation lengths (default: min, max and between).")
flags.DEFINE_float("max_minutes", None, "Stop after this much wall time (best weights kept).")
flags.DEFINE_integer("seed", 0, "Seed of the training data stream and initialisation.")
# TensorFlow aborts the process on a negative thread count: the flag refuses it.
flags.DEFINE_integer(
  "threads", 1, "TensorFlow intra/inter-op threads (0: TensorFlow chooses).", lower_bound=0
)
flags.DEFINE_integer("units", 64, "lstm: units per direction.")
flags.DEFINE_integer("num_layers", 2, "lstm: stacked BiLSTM layers.")
flags.DEFINE_integer("filters", 64, "conv: channels.")
flags.DEFINE_integer("num_blocks", 8, "conv: residual BN-ReLU-Conv blocks.")
flags.DEFINE_integer("kernel_size", 3, "conv: kernel width.")
flags.DEFINE_integer("hidden_units", 32, "attention: width of the temperature MLP.")
#: The flags by topic, as ``--help`` lists them.
HELP_GROUPS = (
  (
    "Sorter",
    ("sorter", "units", "num_layers", "filters", "num_blocks", "kernel_size", "hidden_units"),
  ),
  ("Synthetic lists", ("min_list_size", "max_list_size", "seed")),
  (
    "Training",
    ("steps", "batch_size", "learning_rate", "halve_every", "max_minutes", "threads"),
  ),
  ("Evaluation", ("eval_every", "eval_lists", "eval_list_sizes")),
  ("Output", ("output", "model_dir")),
)

#: Seed offset of the held-out evaluation data (disjoint from training seeds 0..).
EVAL_SEED = 987654321


#: The hyper-parameters (flags) each sorter kind takes; the others are ignored for that kind.
SORTER_HPARAMS = {
  "lstm": ("units", "num_layers"),
  "conv": ("filters", "num_blocks", "kernel_size"),
  "attention": ("hidden_units",),
}


def build_sorter(kind, list_size=None, **hparams):
  """Returns an untrained sorter layer of ``kind`` ('lstm', 'conv' or 'attention').

  Hyper-parameters of ``kind`` that are not given keep the sorter class's own defaults.

  Raises:
    ValueError: ``kind`` is not one of ``SORTERS.names()``.
  """
  kind = SORTERS.resolve(kind).name
  kwargs = {k: hparams[k] for k in SORTER_HPARAMS[kind] if k in hparams}
  if kind == "conv":
    kwargs["list_size"] = list_size
  return SORTERS.get(kind, **kwargs)


def normalised_l1(predicted, exact):
  """Eq. 1 on normalised ranks: mean |(rank_hat - 1) - (rank - 1)| / (n - 1) over ``[B, n]``."""
  n = tf.cast(tf.shape(exact)[-1], exact.dtype)
  return tf.reduce_mean(tf.abs(predicted - exact)) / (n - 1.0)


def check_arguments(
  kind,
  min_list_size,
  max_list_size,
  steps,
  batch_size,
  learning_rate,
  halve_every,
  output,
  model_dir=None,
  eval_every=250,
  eval_lists=512,
  eval_list_sizes=None,
  max_minutes=None,
  seed=0,
  verbose=1,
  **hparams,
):
  """Raises a ``ValueError`` naming the first bad argument of :func:`train` (same arguments),
  before any step: counts, sizes, paths, and the sorter's own checks (it builds the sorter of
  ``hparams`` and throws it away)."""
  del verbose
  checks.check_int("min_list_size", min_list_size, minimum=2)
  checks.check_int("max_list_size", max_list_size, minimum=min_list_size)
  for name, value in (("steps", steps), ("batch_size", batch_size), ("halve_every", halve_every)):
    checks.check_int(name, value, minimum=1)
  checks.check_float("learning_rate", learning_rate, minimum=0.0, strict=True)
  checks.check_int("eval_every", eval_every, minimum=1)
  checks.check_int("eval_lists", eval_lists, minimum=1)
  for size in eval_list_sizes or ():
    checks.check_int("eval_list_sizes", size, minimum=2)
  checks.check_float("max_minutes", max_minutes, minimum=0.0, strict=True, allow_none=True)
  checks.check_int("seed", seed, minimum=0)
  if not output:
    raise ValueError("`output` (the path prefix of the exported weights) must be given.")
  checks.check_writable_dir("output", os.path.dirname(os.path.abspath(output)))
  checks.check_writable_dir("model_dir", model_dir or output + "_run")
  if kind == "conv" and min_list_size != max_list_size:
    raise ValueError(
      f"The conv sorter is tied to one list length: min_list_size ({min_list_size}) must "
      f"equal max_list_size ({max_list_size})."
    )
  if kind == "conv" and any(n != max_list_size for n in eval_list_sizes or ()):
    raise ValueError(
      f"The conv sorter is tied to one list length: `eval_list_sizes` {eval_list_sizes} must "
      f"all equal max_list_size ({max_list_size})."
    )
  build_sorter(kind, list_size=max_list_size, **hparams)


def _halving_schedule(learning_rate, halve_every):
  """The learning rate ``learning_rate * 0.5 ** floor(step / halve_every)``."""
  return keras.optimizers.schedules.ExponentialDecay(
    learning_rate, decay_steps=halve_every, decay_rate=0.5, staircase=True
  )


def _held_out_sets(eval_lists, eval_list_sizes, min_list_size, max_list_size):
  """``{n: (scores, exact ranks)}``: ``eval_lists`` fixed synthetic lists per length ``n``.

  The lengths default (``eval_list_sizes=None``) to the shortest, the longest and their
  geometric mean; the data is seeded by :data:`EVAL_SEED` and ``n``, so it never overlaps the
  training stream and is the same in every run.
  """
  if eval_list_sizes is None:
    eval_list_sizes = sorted(
      {min_list_size, max_list_size, int(round((min_list_size * max_list_size) ** 0.5))}
    )
  return {n: synthetic.synthetic_batch(eval_lists, n, seed=[EVAL_SEED, n]) for n in eval_list_sizes}


def _restore_checkpoint(sorter, optimizer, model_dir):
  """``(step, best, manager)``: the step and best held-out error variables, checkpointed with
  the sorter and optimizer in ``<model_dir>/ckpt`` and restored from its latest checkpoint."""
  step = tf.Variable(0, dtype=tf.int64, name="step")
  best = tf.Variable(float("inf"), dtype=tf.float64, name="best_eval")
  sorter.build_for_export()
  ckpt = tf.train.Checkpoint(sorter=sorter, optimizer=optimizer, step=step, best=best)
  folder = os.path.join(model_dir, "ckpt")
  try:
    manager = tf.train.CheckpointManager(ckpt, folder, max_to_keep=2)
    if manager.latest_checkpoint:
      ckpt.restore(manager.latest_checkpoint)
      logging.info("Resumed from %s at step %d", manager.latest_checkpoint, int(step))
  except (tf.errors.OpError, ValueError, IndexError) as e:  # IndexError: a truncated file
    raise errors.DamagedFileError(
      folder,
      "pretraining checkpoint",
      e,
      f"Delete {folder} to pretrain from step 0 (the weights exported to --output are kept), "
      "or pass another --model_dir.",
    ) from None
  return step, best, manager


def _step_functions(sorter, optimizer, list_size=None):
  """``(train_step, predict)``: one Adam step on the L1 of Eq. 1, and inference, as
  ``tf.function``s over score lists ``[B, list_size]`` (any length when ``list_size`` is None)."""
  signature = [tf.TensorSpec([None, list_size], tf.float32)] * 2

  @tf.function(input_signature=signature)
  def train_step(scores, ranks):
    with tf.GradientTape() as tape:
      loss = normalised_l1(sorter(scores, training=True), ranks)
    grads = tape.gradient(loss, sorter.trainable_variables)
    optimizer.apply_gradients(zip(grads, sorter.trainable_variables))
    return loss

  @tf.function(input_signature=[signature[0]])
  def predict(scores):
    return sorter(scores, training=False)

  return train_step, predict


def _write_scalars(writer, step, scalars):
  """Writes ``{tag: value}`` as TensorBoard scalars at ``step``."""
  with writer.as_default(step=step):
    for tag, value in scalars.items():
      tf.summary.scalar(tag, value)


def _evaluate(predict, eval_sets):
  """``{n: normalised L1}`` of ``predict`` on each held-out set of :func:`_held_out_sets`."""
  return {n: float(normalised_l1(predict(s), r)) for n, (s, r) in eval_sets.items()}


def _record_evaluation(sorter, output, writer, best_var, errors, step, run_metadata, start):
  """Writes the held-out ``errors`` at ``step`` to TensorBoard and the log, and exports
  ``sorter``'s weights to ``output`` if their mean beats ``best_var``."""
  _write_scalars(writer, step, {f"eval/l1_normalised_rank_n{n}": e for n, e in errors.items()})
  mean_error = sum(errors.values()) / len(errors)
  if mean_error < float(best_var):
    best_var.assign(mean_error)
    sorter.export_weights(
      output,
      metadata={
        "step": step,
        "eval_l1_normalised_rank": {str(k): v for k, v in errors.items()},
        **run_metadata,
        "train_minutes_this_run": round((time.time() - start) / 60, 2),
      },
    )
  logging.info("step %d eval %s (best %.5f)", step, json.dumps(errors), float(best_var))


class _Run(typing.NamedTuple):
  """What the steps of one pretraining run work with (built by :func:`_prepare_run`)."""

  sorter: object
  schedule: object
  train_step: object
  predict: object
  eval_sets: dict
  step_var: tf.Variable
  best_var: tf.Variable
  manager: object
  writer: object
  output: str
  metadata: dict


def _prepare_run(kind, settings, output, model_dir, eval_lists, eval_list_sizes, hparams):
  """The sorter, its optimiser and steps, the data, the held-out sets and the restored state.

  ``settings`` holds the run's ``min_list_size``, ``max_list_size``, ``batch_size``,
  ``learning_rate``, ``halve_every`` and ``seed``; it is also the metadata of the exported weights.
  """
  min_list_size, max_list_size = settings["min_list_size"], settings["max_list_size"]
  batch_size, seed = settings["batch_size"], settings["seed"]
  learning_rate, halve_every = settings["learning_rate"], settings["halve_every"]
  tf.random.set_seed(seed)
  sorter = build_sorter(kind, list_size=max_list_size, **hparams)
  schedule = _halving_schedule(learning_rate, halve_every)
  optimizer = keras.optimizers.Adam(schedule)
  dataset = synthetic.synthetic_dataset(batch_size, (min_list_size, max_list_size), seed=seed)
  step_var, best_var, manager = _restore_checkpoint(sorter, optimizer, model_dir)
  train_step, predict = _step_functions(
    sorter, optimizer, max_list_size if kind == "conv" else None
  )
  run = _Run(
    sorter=sorter,
    schedule=schedule,
    train_step=train_step,
    predict=predict,
    eval_sets=_held_out_sets(eval_lists, eval_list_sizes, min_list_size, max_list_size),
    step_var=step_var,
    best_var=best_var,
    manager=manager,
    writer=tf.summary.create_file_writer(os.path.join(model_dir, "tensorboard")),
    output=output,
    metadata=dict(settings),
  )
  return run, dataset


def _run_steps(run, dataset, steps, eval_every, max_minutes, verbose):
  """Trains from the restored step to ``steps`` (or ``max_minutes``), evaluating every
  ``eval_every`` steps; returns the evaluations as a list of dicts."""
  start = time.time()
  progbar = keras.utils.Progbar(steps, verbose=verbose, stateful_metrics=["lr", "eval"])
  iterator = iter(dataset.skip(int(run.step_var)))
  history = []
  while int(run.step_var) < steps:
    scores, ranks = next(iterator)
    loss = float(run.train_step(scores, ranks))
    run.step_var.assign_add(1)
    step = int(run.step_var)
    lr = float(run.schedule(step))
    values = [("loss", loss), ("lr", lr)]
    _write_scalars(run.writer, step, {"train/l1_normalised_rank": loss, "train/learning_rate": lr})
    out_of_time = max_minutes is not None and (time.time() - start) > 60 * max_minutes
    if step % eval_every == 0 or step == steps or out_of_time:
      errors = _evaluate(run.predict, run.eval_sets)
      values.append(("eval", sum(errors.values()) / len(errors)))
      history.append({"step": step, "eval": errors, "minutes": (time.time() - start) / 60})
      _record_evaluation(
        run.sorter, run.output, run.writer, run.best_var, errors, step, run.metadata, start
      )
      run.manager.save(checkpoint_number=step)
    progbar.update(step, values)
    if out_of_time:
      logging.info("Stopping after %.1f minutes (--max_minutes).", max_minutes)
      break
  return history


def train(
  kind,
  min_list_size,
  max_list_size,
  steps,
  batch_size,
  learning_rate,
  halve_every,
  output,
  model_dir=None,
  eval_every=250,
  eval_lists=512,
  eval_list_sizes=None,
  max_minutes=None,
  seed=0,
  verbose=1,
  **hparams,
):
  """Trains a sorter; returns ``(sorter, best_eval)``. See the module docstring.

  Raises:
    ValueError: a bad argument (``check_arguments``), before any step.
    DamagedFileError: ``model_dir`` holds a checkpoint that cannot be read.
  """
  arguments = dict(locals())
  check_arguments(**{k: v for k, v in arguments.items() if k != "hparams"}, **hparams)
  settings = {
    "min_list_size": min_list_size,
    "max_list_size": max_list_size,
    "batch_size": batch_size,
    "learning_rate": learning_rate,
    "halve_every": halve_every,
    "seed": seed,
  }
  model_dir = model_dir or output + "_run"
  os.makedirs(model_dir, exist_ok=True)
  run, dataset = _prepare_run(
    kind, settings, output, model_dir, eval_lists, eval_list_sizes, hparams
  )
  history = _run_steps(run, dataset, steps, eval_every, max_minutes, verbose)
  history_file = os.path.join(model_dir, "history.json")  # one line per run, rewritten whole
  before = pathlib.Path(history_file).read_text("utf-8") if os.path.exists(history_file) else ""
  atomic.write_text(history_file, before + json.dumps(history) + "\n")
  return run.sorter, float(run.best_var)


def _flag_arguments():
  """The arguments of :func:`train` the flags give."""
  try:
    eval_sizes = [int(x) for x in FLAGS.eval_list_sizes] if FLAGS.eval_list_sizes else None
  except ValueError:
    raise app.UsageError(
      f"--eval_list_sizes must be integers, got {FLAGS.eval_list_sizes}."
    ) from None
  names = ("min_list_size", "max_list_size", "steps", "batch_size", "learning_rate")
  names += ("halve_every", "output", "model_dir", "eval_every", "eval_lists", "max_minutes")
  names += ("seed", "units", "num_layers", "filters", "num_blocks", "kernel_size", "hidden_units")
  return dict(kind=FLAGS.sorter, eval_list_sizes=eval_sizes, **{n: FLAGS[n].value for n in names})


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
  if not FLAGS.output:
    raise app.UsageError("--output (path prefix of the exported weights) is required.")
  arguments = _flag_arguments()
  try:
    check_arguments(**arguments)
  except ValueError as e:
    raise app.UsageError(str(e)) from e
  tf.config.threading.set_intra_op_parallelism_threads(FLAGS.threads)
  tf.config.threading.set_inter_op_parallelism_threads(FLAGS.threads)
  _, best = train(**arguments)
  print(f"best held-out L1 (normalised ranks): {best:.6f}; weights: {FLAGS.output}.json/.npz")


def run():
  """Console-script entry point ``tfrank4class-pretrain-sorter``."""
  cli.run(main, "tfrank4class-pretrain-sorter", HELP_GROUPS)


if __name__ == "__main__":
  run()
