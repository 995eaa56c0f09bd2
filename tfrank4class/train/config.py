"""The configuration of a training run: ``ExperimentConfig`` and the choices it names.

``ExperimentConfig`` holds every choice of a run (the training binary's flags map onto it one to
one) and is validated before any data is read; a run stores it as ``model_dir/config.json``
(``tfrank4class.train.run_dir``), where evaluate and export read it back.

Example:
  >>> ExperimentConfig(interaction="dot").validate().hidden_units
  ()
"""

import dataclasses
import json
import os

import numpy as np

from tfrank4class import checks, errors
from tfrank4class import data as data_lib
from tfrank4class import encoders as encoders_lib
from tfrank4class import heads as heads_lib
from tfrank4class import losses as losses_lib
from tfrank4class import metrics as metrics_lib
from tfrank4class.compat import keras
from tfrank4class.heads import sampled
from tfrank4class.registry import Registry
from tfrank4class.train import flavour
from tfrank4class.train import strategy as strategy_lib

#: The optimizers by name: ``OPTIMIZERS.get(name, learning_rate=...)``.
OPTIMIZERS = Registry("optimizer", argument="optimizer")
OPTIMIZERS.add("adam", keras.optimizers.Adam)
OPTIMIZERS.add("adagrad", keras.optimizers.Adagrad)
#: The interaction names (of the one interaction registry, ``heads.INTERACTIONS``).
INTERACTIONS = heads_lib.INTERACTIONS.names()
#: MLP widths of the latent_cross and concat interactions when ``hidden_units`` is not given.
DEFAULT_HIDDEN_UNITS = (128, 128)
#: Encoders chosen by ``encoder="auto"``, per modality.
AUTO_ENCODERS = {"text": "transformer", "image": "small_cnn"}
#: Defaults of the auto text encoder: small enough to train from scratch on a CPU in minutes.
TEXT_DEFAULTS = {
  "max_tokens": 20_000,
  "sequence_length": 48,
  "embedding_dim": 64,
  "num_heads": 2,
  "num_layers": 1,
  "ff_dim": 128,
  "dropout": 0.0,
}


@dataclasses.dataclass
class ExperimentConfig:
  """Everything a training run needs; see ``tfrank4class-train --help`` for each field.

  ``hidden_units=None`` means ``DEFAULT_HIDDEN_UNITS`` for the MLP interactions (latent_cross,
  concat) and ``()`` for ``dot``, which has no MLP (explicit units with ``dot`` are refused).

  ``sampled_negatives=S`` trains on sampled lists (the true class and ``S`` negatives drawn from
  ``sampler``, :class:`tfrank4class.heads.SampledClassifier`; docs/sampled.md) instead of every
  class's score, with any ``interaction`` (the MLP ones run on the sampled candidates only); it
  needs Keras 3 and runs under every ``strategy``. ``None``: every class.
  """

  dataset: str = "goemotions_sample"
  data_dir: str = None
  on_corrupt: str = "error"
  encoder: str = "auto"
  encoder_kwargs: dict = dataclasses.field(default_factory=dict)
  interaction: str = "latent_cross"
  hidden_units: tuple = None
  loss: str = "softmax_loss"
  loss_kwargs: dict = dataclasses.field(default_factory=dict)
  sampled_negatives: int = None
  sampler: str = "uniform"
  metrics: tuple = metrics_lib.registry.DEFAULT_NAMES
  batch_size: int = 64
  epochs: int = 3
  early_stopping_patience: int = None
  steps: int = None
  optimizer: str = "adam"
  learning_rate: float = 1e-3
  strategy: str = "default"
  tpu: str = None
  devices: tuple = None
  cluster_timeout: float = 600.0
  model_dir: str = None
  export_dir: str = None
  seed: int = 0
  best_metric: str = "ndcg_5"
  select_on_test: bool = False
  backup_every: int = 100
  start_over: bool = False
  verbose: int = 1

  def __post_init__(self):
    if self.hidden_units is None:
      self.hidden_units = () if self.interaction == "dot" else DEFAULT_HIDDEN_UNITS

  def validate(self):
    """Checks every field; raises ``ValueError`` naming the field, the value and what is allowed.

    Pure Python: it creates no TensorFlow object, so it may run before a multi-worker strategy
    (which must be created before TensorFlow's runtime starts). Loss arguments are checked when
    ``train`` first builds the loss, right after the strategy and still before any data is read.
    """
    checks.check_choice("dataset", self.dataset, data_lib.names())
    checks.check_choice("on_corrupt", self.on_corrupt, data_lib.ON_CORRUPT)
    if self.encoder != "auto":
      checks.check_choice("encoder", self.encoder, ["auto"] + list(encoders_lib.names()))
    checks.check_choice("interaction", self.interaction, INTERACTIONS)
    checks.check_choice("loss", self.loss, losses_lib.names())
    self._check_sampling()
    for name in self.metrics:
      metrics_lib.registry.parse(name)
    metrics_lib.registry.parse(self.best_metric)
    if self.best_metric not in self.metrics:
      raise ValueError(
        f"`best_metric` {self.best_metric!r} must be one of `metrics` {list(self.metrics)}."
      )
    for units in self.hidden_units:
      checks.check_int("hidden_units", units, minimum=1)
    if self.interaction == "dot" and len(self.hidden_units):
      raise ValueError(
        f"`hidden_units` {tuple(self.hidden_units)} is not used by `interaction` "
        "'dot' (a dot product has no MLP); only 'latent_cross' and 'concat' take "
        "it. Leave `hidden_units` unset with 'dot'."
      )
    checks.check_int("batch_size", self.batch_size, minimum=1)
    checks.check_int("epochs", self.epochs, minimum=1)
    checks.check_int(
      "early_stopping_patience", self.early_stopping_patience, minimum=1, allow_none=True
    )
    checks.check_int("steps", self.steps, minimum=1, allow_none=True)
    checks.check_choice("optimizer", self.optimizer, OPTIMIZERS)
    checks.check_float("learning_rate", self.learning_rate, minimum=0.0, strict=True)
    checks.check_choice("strategy", self.strategy, strategy_lib.STRATEGIES)
    if self.strategy == "tpu" and not self.tpu:
      raise ValueError(
        "`tpu` must name a TPU (a name, or grpc://host:port) when `strategy` is 'tpu'."
      )
    checks.check_float("cluster_timeout", self.cluster_timeout, minimum=0.0, strict=True)
    if self.strategy == "multi_worker_mirrored" and not self.model_dir:
      raise ValueError(
        "`model_dir` is required when `strategy` is 'multi_worker_mirrored': the "
        "chief evaluates and exports the best.keras it writes there."
      )
    checks.check_int("seed", self.seed, minimum=0)
    checks.check_int("backup_every", self.backup_every, minimum=1)
    for flag in ("select_on_test", "start_over"):
      if not isinstance(getattr(self, flag), bool):
        raise ValueError(f"`{flag}` must be True or False, got {getattr(self, flag)!r}.")
    return self

  def _check_sampling(self):
    checks.check_int("sampled_negatives", self.sampled_negatives, minimum=1, allow_none=True)
    checks.check_choice("sampler", self.sampler, sampled.DISTRIBUTIONS)
    if self.sampled_negatives is None:
      if self.sampler != "uniform":
        raise ValueError(
          f"`sampler` {self.sampler!r} draws the negatives of `sampled_negatives`, which is not "
          "set; set `sampled_negatives` or leave `sampler` unset."
        )
      return
    if not flavour.TRAINING.SAMPLED_TRAINING:
      raise ValueError(
        "`sampled_negatives` needs Keras 3 (its sampler draws with keras.random); this "
        "process runs tf-keras (TF_USE_LEGACY_KERAS)."
      )

  def check_paths(self):
    """Checks that ``model_dir`` and ``export_dir`` (where given) are folders this process can
    write in or create; raises ``ValueError`` naming the field. The training run calls it with
    the other checks, before any data is read (``validate`` also checks the stored config of
    a run that another user may only read)."""
    checks.check_writable_dir("model_dir", self.model_dir, allow_none=True)
    checks.check_writable_dir("export_dir", self.export_dir, allow_none=True)
    return self

  def to_json(self):
    return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

  @classmethod
  def from_model_dir(cls, model_dir):
    """The config a run wrote to ``model_dir/config.json``, validated.

    Raises:
      NotFoundError: there is no ``config.json``.
      DamagedFileError: it is not a JSON object of valid ``ExperimentConfig`` fields (truncated,
        or edited by hand); the message names the file and what to do.
    """
    path = os.path.join(model_dir, "config.json")
    if not os.path.exists(path):
      raise errors.NotFoundError(
        f"No training run in `model_dir` {model_dir!r}: {path} is missing."
      )
    what = "run configuration"
    fix = (
      "Restore it, or start the run again with tfrank4class-train --start_over on this "
      "`model_dir` (deletes the run's files)."
    )
    fields = read_json_object(path, what, fix)
    try:
      return cls(**fields).validate()
    except (ValueError, TypeError) as e:
      raise errors.DamagedFileError(path, what, e, fix) from None


def check_loss_classes(config, num_classes):
  """Raises ``InvalidConfigError`` naming ``loss_kwargs`` when the loss refuses lists of
  ``num_classes`` scores (a Top-K loss's ``k`` or ``p_k`` beyond the classes of the dataset), or,
  with ``sampled_negatives``, the training lists of ``1 + sampled_negatives`` scores.

  A fresh loss of ``config`` (thrown away: a score memory or a seed generator of the run's own
  loss is left as it is) is called once on a placeholder batch of one list, eagerly, so the
  mistake is reported when the dataset's number of classes is known, before any example is read.

  Example:
    >>> config = ExperimentConfig(loss="smooth_topk_svm_loss", loss_kwargs={"k": 40})
    >>> check_loss_classes(config, 28)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tfrank4class.errors.InvalidConfigError: `loss_kwargs` of 'smooth_topk_svm_loss' on ... `k`...
  """
  lists = {num_classes: f"{num_classes} classes"}
  if config.sampled_negatives is not None:  # training lists: the true class and the negatives
    size = 1 + config.sampled_negatives
    lists[size] = f"training lists of {size} with `sampled_negatives` {config.sampled_negatives}"
  loss = losses_lib.get(config.loss, **config.loss_kwargs)
  for size, what in lists.items():
    try:
      loss(np.zeros([1], "int32"), np.zeros([1, size], "float32"))
    except ValueError as e:
      raise errors.InvalidConfigError(
        f"`loss_kwargs` of {config.loss!r} on {config.dataset!r} ({what}): {e}"
      ) from e


def metrics_for_classes(config, num_classes):
  """``config.metrics`` on ``num_classes`` classes (``metrics.registry.for_classes``: the default
  metrics leave out a ``top_K`` beyond the classes, a named one is refused); raises
  ``InvalidConfigError`` naming ``metrics`` or ``best_metric`` before any example is read.

  Example:
    >>> metrics_for_classes(ExperimentConfig(), 4)
    ('top_1', 'ndcg_5', 'mrr')
    >>> config = ExperimentConfig(metrics=("top_1", "top_5", "ndcg_5"), best_metric="ndcg_5")
    >>> metrics_for_classes(config, 3)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tfrank4class.errors.InvalidConfigError: ... 3 classes: `metrics` names 'top_5', Top-5...
  """
  try:
    names = metrics_lib.registry.for_classes(config.metrics, num_classes)
    if config.best_metric not in names:
      raise ValueError(
        f"`best_metric` {config.best_metric!r} is left out of the default metrics (it is 1 for "
        f"every list); choose one of {list(names)}."
      )
  except ValueError as e:
    raise errors.InvalidConfigError(f"{config.dataset!r} has {num_classes} classes: {e}") from e
  return names


def read_json_object(path, what, fix):
  """The JSON object (a dict) in the run file ``path``, read as editors save it (with or without
  a UTF-8 byte order mark).

  Raises:
    DamagedFileError: ``path`` is not a JSON object (truncated, garbled, not UTF-8); the message
      names the file as ``what`` and says ``fix``.
  """
  try:
    with open(path, encoding="utf-8-sig") as f:
      value = json.load(f)
    if not isinstance(value, dict):
      raise ValueError(f"a JSON object is expected, got {type(value).__name__}")
  except ValueError as e:  # JSONDecodeError and UnicodeDecodeError included
    raise errors.DamagedFileError(path, what, e, fix) from None
  return value
