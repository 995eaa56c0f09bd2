"""The result tables of a trained model: its ranking metrics per split, as a table.

Example:
  >>> print(format_table([("test", {"top_1": 0.5, "mrr": 0.625})], ["top_1", "mrr"]))
  run      top_1       mrr
  ------------------------
  test    0.5000    0.6250
"""

from tfrank4class import data as data_lib
from tfrank4class import errors
from tfrank4class import metrics as metrics_lib


def selection_split(info, select_on_test=False):
  """The split that picks the best checkpoint: ``validation``, never ``test`` unless asked.

  Args:
    info: the ``DatasetInfo`` of the dataset (its ``validation`` says what that split is).
    select_on_test: choose on the test split instead (``--select_on_test``): the protocol of
      papers without a validation split, whose test numbers are then optimistic.

  Raises:
    InvalidConfigError: the dataset has no validation split and ``select_on_test`` is False.
  """
  if select_on_test:
    return "test"
  if info.validation is None:
    raise errors.InvalidConfigError(
      f"Dataset {info.name!r} has no validation split to choose the best checkpoint on; "
      "choosing it on the test split needs `select_on_test` (--select_on_test)."
    )
  return "validation"


def evaluate_splits(model, config, info):
  """``[(split, {metric: value})]`` on the validation split (where there is one) and the test
  split, for the metrics of ``config.metrics`` (which hold its ``best_metric``), in their order;
  ``info`` is the dataset's ``DatasetInfo``."""
  splits = ["validation", "test"] if info.validation is not None else ["test"]
  return [
    (
      split,
      evaluate(
        model,
        config.dataset,
        split,
        config.data_dir,
        metric_names=tuple(config.metrics),
        on_corrupt=config.on_corrupt,
      ),
    )
    for split in splits
  ]


def evaluate(
  model, dataset, split, data_dir=None, batch_size=256, metric_names=None, on_corrupt="error"
):
  """``{metric name: value}`` of a scores model on a split (Top-1, Top-5, NDCG@5, MRR by default).

  ``on_corrupt`` (``"error"`` or ``"skip"``) is passed to ``tfrank4class.data.load``.
  """
  batches = evaluation_batches(dataset, split, data_dir, batch_size, on_corrupt)
  return evaluate_batches(model, batches, metric_names)


def evaluation_batches(dataset, split, data_dir=None, batch_size=256, on_corrupt="error"):
  """The ``(features, labels)`` batches of a split in their order, without training
  augmentation: ``tfrank4class.data.load``, which checks the dataset, the split and the data
  when called, before any batch is read."""
  return data_lib.load(
    dataset,
    split,
    data_dir,
    batch_size=batch_size,
    training=False,
    shuffle=False,
    on_corrupt=on_corrupt,
  )


def evaluate_batches(model, batches, metric_names=None):
  """``{metric name: value}`` of a scores model over ``(features, labels)`` batches.

  ``metric_names`` defaults to :data:`tfrank4class.metrics.registry.DEFAULT_NAMES`, of which a
  ``top_K`` beyond the model's classes is left out (``metrics.registry.for_classes``).
  """
  metric_names = metric_names or metrics_lib.registry.DEFAULT_NAMES
  metric_objects = None
  for features, labels in batches:
    scores = model(features, training=False)
    if metric_objects is None:  # the number of classes is known from the first scores
      try:
        metric_names = metrics_lib.registry.for_classes(metric_names, scores.shape[-1])
      except ValueError as e:  # a user's error, reported on one line by the binaries
        raise errors.InvalidConfigError(str(e)) from None
      metric_objects = [metrics_lib.get(m) for m in metric_names]
    for metric in metric_objects:
      metric.update_state(labels, scores)
  if metric_objects is None:  # no batch: every metric's empty result, as before any batch
    metric_objects = [metrics_lib.get(m) for m in metric_names]
  return {name: float(m.result()) for name, m in zip(metric_names, metric_objects)}


def format_table(rows, columns):
  """A plain-text table: ``rows`` is a list of (label, {column: value})."""
  width = max([len("run")] + [len(label) for label, _ in rows])
  head = f"{'run':<{width}}  " + "  ".join(f"{c:>8}" for c in columns)
  lines = [head, "-" * len(head)]
  for label, values in rows:
    lines.append(f"{label:<{width}}  " + "  ".join(f"{values[c]:>8.4f}" for c in columns))
  return "\n".join(lines)
