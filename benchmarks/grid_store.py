"""A grid of training runs (losses x heads x seeds) with resumable records and per-cell statistics.

The library behind ``benchmarks/rank4class_grid.py``. One *run* trains one model and is
identified by its :class:`Cell` ``(dataset, protocol, loss, interaction, seed)``:

* ``protocol="frozen"``: a head (:func:`head_model`) trained on cached instance embeddings
  (``benchmarks/feature_cache.py``);
* ``protocol="end_to_end"``: the whole encoder + head model trained.

Every finished run becomes one JSON object (a *record*, :func:`check_record` lists its required
keys) appended to a JSON list by :class:`RecordStore`, which rewrites the file atomically (a
temporary file, ``fsync``, ``os.replace``) after each run: a grid killed at any moment leaves a
valid file holding every run finished so far, and a restarted grid skips the cells it finds
there.

Training (:func:`fit_and_evaluate`): Adam on in-memory arrays, shuffled with the run's seed;
after every epoch the model scores the validation split and :class:`KeepBest` keeps the weights
of the epoch with the best validation ``monitor`` (NDCG@5 by default), which are restored at the
end and scored on the test split. ``train_seconds`` is the wall time of ``fit`` (validation
scoring included).

Statistics (:func:`summarize`): per cell, the mean of each metric over its seeds with a 95 %
t interval, and the paired difference against the baseline cell (softmax loss, dot head) over the
seeds both have (``benchmarks/confidence_intervals.py``).
"""

import collections
import contextlib
import fcntl
import hashlib
import json
import math
import os
import time

import confidence_intervals as intervals_lib
import numpy as np
import softmax_bounds as bounds_lib
import tensorflow as tf

from tfrank4class import checks
from tfrank4class import heads as heads_lib
from tfrank4class import losses as losses_lib
from tfrank4class import metrics as metrics_lib
from tfrank4class.compat import keras

#: Test-split metrics every record holds (``tfrank4class.metrics.get`` names), each in [0, 1].
METRICS = ("top_1", "top_5", "ndcg_5", "mrr")
PROTOCOLS = ("frozen", "end_to_end")
INTERACTIONS = ("dot", "latent_cross", "concat")
KEY_FIELDS = ("dataset", "protocol", "loss", "interaction", "seed")
REQUIRED_FIELDS = KEY_FIELDS + METRICS + ("train_seconds",)
#: The configuration every other cell is compared with: a classical classifier.
BASELINE = ("softmax_loss", "dot")

Cell = collections.namedtuple("Cell", KEY_FIELDS)


def record_key(record):
  """The :class:`Cell` of a record."""
  return Cell(*(record[k] for k in KEY_FIELDS))


def check_record(record):
  """Returns ``record`` if it has every ``REQUIRED_FIELDS`` key with a valid value, else raises.

  ``dataset`` and ``loss`` are non-empty strings, ``protocol`` one of ``PROTOCOLS``,
  ``interaction`` one of ``INTERACTIONS``, ``seed`` an integer ``>= 0``, each of ``METRICS`` a
  number in ``[0, 1]``, ``train_seconds`` a number ``>= 0``.

  Raises:
    ValueError: naming the key, the value and what is allowed.
  """
  if not isinstance(record, dict):
    raise ValueError(f"A grid record must be a JSON object (dict), got {record!r}.")
  missing = [k for k in REQUIRED_FIELDS if k not in record]
  if missing:
    raise ValueError(
      f"The grid record {record!r} lacks the key(s) {missing}; every record "
      f"needs {list(REQUIRED_FIELDS)}."
    )
  for k in ("dataset", "loss"):
    if not isinstance(record[k], str) or not record[k]:
      raise ValueError(f"Record key `{k}` must be a non-empty string, got {record[k]!r}.")
  checks.check_choice("protocol", record["protocol"], PROTOCOLS)
  checks.check_choice("interaction", record["interaction"], INTERACTIONS)
  checks.check_int("seed", record["seed"], minimum=0)
  for k in METRICS:
    value = checks.check_float(k, record[k])
    if not 0.0 <= value <= 1.0:
      raise ValueError(f"Record key `{k}` must be a test-split metric in [0, 1], got {value!r}.")
  checks.check_float("train_seconds", record["train_seconds"], minimum=0.0)
  return record


class RecordStore:
  """The grid's records: a JSON list in ``path``, one object per finished run.

  Loading checks every record (``check``) and refuses two records of the same run (the same
  values of ``key_fields``). :meth:`add` appends one record and rewrites the file atomically,
  under an exclusive lock on ``<path>.lock`` and after taking in the records other processes
  added to the file meanwhile: several grid processes may share one file. :meth:`claim` holds a
  run for one process while it trains, so processes working through the same runs never train
  one twice.

  Args:
    path: the JSON file; it need not exist yet.
    key_fields: the record keys that identify a run (default: a :class:`Cell`).
    check: returns a valid record or raises ``ValueError`` (default :func:`check_record`).

  Raises:
    ValueError: the file is not a JSON list of valid records, or holds a cell twice (naming
      the file and the cell).
  """

  def __init__(self, path, key_fields=KEY_FIELDS, check=check_record):
    self.path = str(path)
    self.key_fields, self._check = tuple(key_fields), check
    self._records = []
    self._keys = set()
    for record in self._read():
      self._append(record)

  def _read(self):
    """The records in ``path`` now (``[]`` when it does not exist)."""
    if not os.path.exists(self.path):
      return []
    with open(self.path, encoding="utf-8") as f:
      try:
        loaded = json.load(f)
      except ValueError as e:
        raise ValueError(
          f"The grid records file {self.path} is not valid JSON ({e}); "
          "restore it or move it away to start afresh."
        ) from None
    if not isinstance(loaded, list):
      raise ValueError(
        f"The grid records file {self.path} must hold a JSON list, got {type(loaded).__name__}."
      )
    return loaded

  def _key(self, record):
    return tuple(record[k] for k in self.key_fields)

  def _append(self, record):
    self._check(record)
    key = self._key(record)
    if key in self._keys:
      raise ValueError(
        f"{self.path} already holds a record of {dict(zip(self.key_fields, key))}: a run is "
        "recorded once."
      )
    self._records.append(record)
    self._keys.add(key)

  @property
  def records(self):
    """A copy of the list of records, in the order they were added."""
    return list(self._records)

  def __len__(self):
    return len(self._records)

  def __contains__(self, key):
    return tuple(key) in self._keys

  @contextlib.contextmanager
  def _locked(self):
    """Holds the exclusive lock on ``<path>.lock`` (released when the lock file closes)."""
    directory = os.path.dirname(os.path.abspath(self.path))
    os.makedirs(directory, exist_ok=True)
    with open(f"{self.path}.lock", "a", encoding="utf-8") as lock:
      fcntl.flock(lock, fcntl.LOCK_EX)
      yield

  def _take_in_others(self):
    """Appends the records other processes added to the file since this store last read it."""
    for found in self._read():
      if self._key(found) not in self._keys:
        self._append(found)

  def refresh(self):
    """Takes in, under the lock, the records other processes added to the file since this
    store last read it."""
    with self._locked():
      self._take_in_others()

  @contextlib.contextmanager
  def claim(self, key):
    """Holds the run ``key`` (its ``key_fields`` values) for this process while the block runs.

    Yields True when this process now holds the run and the file has no record of it (the caller
    trains it and :meth:`add` s the record inside the block), False when another process holds
    it or has recorded it meanwhile. The hold is a non-blocking exclusive ``flock`` on a file of
    ``<path>.claims/`` named by the SHA-1 of the key, released when the block ends or the process
    dies, so a killed process leaves no stale claim. Processes that share the records file and
    claim each run before training it never train the same run.
    """
    directory = f"{self.path}.claims"
    os.makedirs(directory, exist_ok=True)
    name = hashlib.sha1(json.dumps(list(key)).encode("utf-8")).hexdigest()
    with open(os.path.join(directory, name), "a", encoding="utf-8") as hold:
      try:
        fcntl.flock(hold, fcntl.LOCK_EX | fcntl.LOCK_NB)
      except BlockingIOError:
        yield False
        return
      self.refresh()  # a holder that just finished added its record before letting go
      yield tuple(key) not in self._keys

  def add(self, record):
    """Appends ``record`` (checked) to the records, with those other processes added to the
    file since this store last read it, and rewrites the file atomically, all under the lock."""
    with self._locked():
      self._take_in_others()
      self._append(dict(record))
      self.write()

  def write(self):
    """Writes every record to ``path`` through a temporary file, ``fsync`` and ``os.replace``."""
    directory = os.path.dirname(os.path.abspath(self.path))
    os.makedirs(directory, exist_ok=True)
    tmp = f"{self.path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
      json.dump(self._records, f, indent=1, sort_keys=True)
      f.write("\n")
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, self.path)


def grid_cells(datasets, protocol, losses, interactions, seeds):
  """The cells of one protocol, ordered dataset, seed, loss, interaction.

  Seeds vary slower than losses and heads, so a grid stopped part-way has the same seeds for
  every configuration of a dataset, which is what the paired comparison needs.
  """
  checks.check_choice("protocol", protocol, PROTOCOLS)
  for interaction in interactions:
    checks.check_choice("interactions", interaction, INTERACTIONS)
  return [
    Cell(d, protocol, loss, inter, int(seed))
    for d in datasets
    for seed in seeds
    for loss in losses
    for inter in interactions
  ]


def arrays_dataset(features, labels, batch_size, shuffle_seed=None):
  """A batched ``tf.data.Dataset`` of in-memory ``(features, labels)``, reshuffled every epoch
  with ``shuffle_seed`` (not shuffled when ``None``)."""
  batch_size = checks.check_int("batch_size", batch_size, minimum=1)
  dataset = tf.data.Dataset.from_tensor_slices((features, labels))
  if shuffle_seed is not None:
    dataset = dataset.shuffle(len(labels), seed=shuffle_seed, reshuffle_each_iteration=True)
  return dataset.batch(batch_size).prefetch(tf.data.AUTOTUNE)


def predict(model, features, batch_size=512):
  """``model(features, training=False)`` in batches, as a float32 numpy array ``[N, C]``."""
  batch_size = checks.check_int("batch_size", batch_size, minimum=1)
  outputs = [
    np.asarray(model(x, training=False), np.float32)
    for x in tf.data.Dataset.from_tensor_slices(features).batch(batch_size)
  ]
  return np.concatenate(outputs)


def evaluate_scores(labels, scores, metric_names=METRICS, batch_size=4096):
  """``{name: value}`` of the metrics ``metric_names`` (``tfrank4class.metrics.get`` names) of
  ``scores`` ``[N, C]`` against ``labels``, accumulated over batches as Keras does."""
  metric_objects = [metrics_lib.get(name) for name in metric_names]
  for start in range(0, len(labels), batch_size):
    y = labels[start : start + batch_size]
    s = scores[start : start + batch_size]
    for metric in metric_objects:
      metric.update_state(y, s)
  return {name: float(m.result()) for name, m in zip(metric_names, metric_objects)}


class KeepBest(keras.callbacks.Callback):
  """Scores the validation split after every epoch; keeps and finally restores the best weights.

  Works the same on every Keras 2 version (``EarlyStopping(restore_best_weights=True)`` restores
  at the end of training only from tf-keras 2.16 on, and only when it stopped early before that).

  Args:
    features, labels: the validation split (numpy).
    monitor: the metric name (``tfrank4class.metrics.get``) to maximise.
    batch_size: batch size of the scoring.

  Attributes:
    best_epoch: 0-based epoch of the best value; ``best``: that value; ``curve``: the value after
      every epoch.
  """

  def __init__(self, features, labels, monitor="ndcg_5", batch_size=512):
    super().__init__()
    metrics_lib.get(monitor)  # an unknown name fails here, naming the known ones
    self.features, self.labels = features, labels
    self.monitor, self.batch_size = monitor, batch_size
    self.best, self.best_epoch, self.curve, self._weights = -math.inf, None, [], None

  def on_epoch_end(self, epoch, logs=None):
    scores = predict(self.model, self.features, self.batch_size)
    value = evaluate_scores(self.labels, scores, (self.monitor,))[self.monitor]
    self.curve.append(value)
    if value > self.best:
      self.best, self.best_epoch, self._weights = value, epoch, self.model.get_weights()

  def on_train_end(self, logs=None):
    if self._weights is not None:
      self.model.set_weights(self._weights)


def head_model(feature_dim, num_classes, interaction="dot", hidden_units=()):
  """A model from instance embeddings ``[B, feature_dim]`` to scores ``[B, C]``: one
  :class:`tfrank4class.heads.Rank4ClassHead` (for the frozen-features protocol)."""
  feature_dim = checks.check_int("feature_dim", feature_dim, minimum=1)
  inputs = keras.Input(shape=(feature_dim,), dtype=tf.float32, name="embeddings")
  head = heads_lib.Rank4ClassHead(
    num_classes, interaction=interaction, hidden_units=tuple(hidden_units), name="rank4class_head"
  )
  return keras.Model(inputs, head(inputs), name="frozen_head")


def build_loss(loss, loss_kwargs=None):
  """The registry loss ``loss`` as the grids' records were made: TF-Ranking's keys with their
  own normalisation, ``normalization="tf_ranking"`` (the only one before the package's per-list
  default; docs/evidence-grid.md), unless ``loss_kwargs`` names one."""
  kwargs = dict(loss_kwargs or {})
  if loss in losses_lib.registry.TFR_KEYS:
    kwargs.setdefault("normalization", "tf_ranking")
  return losses_lib.get(loss, **kwargs)


def recorded_loss_config(loss, loss_kwargs=None):
  """``get_config()`` of :func:`build_loss`, JSON-normalised, as the records store it: without
  ``normalization="tf_ranking"``, which records made before the argument existed lack and a
  config without it loads as."""
  config = json.loads(json.dumps(build_loss(loss, loss_kwargs).get_config(), default=str))
  if config.get("normalization") == "tf_ranking":
    del config["normalization"]
  return config


def compile_model(model, loss, loss_kwargs=None, learning_rate=1e-3):
  """Compiles ``model`` with Adam(``learning_rate``) and the registry loss ``loss``
  (:func:`build_loss`)."""
  learning_rate = checks.check_float("learning_rate", learning_rate, minimum=0.0, strict=True)
  model.compile(optimizer=keras.optimizers.Adam(learning_rate), loss=build_loss(loss, loss_kwargs))
  return model


def fit_and_evaluate(model, train, validation, test, *, epochs, batch_size, seed, monitor="ndcg_5"):
  """Trains a compiled ``model``, restores its best validation epoch, scores the test split.

  Args:
    model: a compiled Keras model from features to scores ``[B, C]``.
    train, validation, test: ``(features, labels)`` numpy pairs.
    epochs: passes over ``train``.
    batch_size: training batch size.
    seed: the shuffle seed of the training input.
    monitor: validation metric that picks the epoch.

  Returns:
    ``(result, test_scores)``: ``result`` holds ``METRICS`` on the test split, ``validation``
    (``{monitor: best value}``), ``best_epoch`` (1-based), ``epochs``, ``validation_curve`` and
    ``train_seconds``; ``test_scores`` is the float32 ``[N, C]`` numpy array.
  """
  epochs = checks.check_int("epochs", epochs, minimum=1)
  keep = KeepBest(*validation, monitor=monitor)
  start = time.perf_counter()
  model.fit(
    arrays_dataset(*train, batch_size=batch_size, shuffle_seed=seed),
    epochs=epochs,
    callbacks=[keep],
    verbose=0,
  )
  train_seconds = time.perf_counter() - start
  test_scores = predict(model, test[0])
  result = evaluate_scores(test[1], test_scores)
  result.update(
    {
      "validation": {monitor: keep.best},
      "best_epoch": keep.best_epoch + 1,
      "epochs": epochs,
      "validation_curve": [round(v, 6) for v in keep.curve],
      "train_seconds": train_seconds,
    }
  )
  return result, test_scores


def make_record(cell, result, test_labels, test_scores, **extra):
  """The JSON record of a finished run: the cell, ``result`` (:func:`fit_and_evaluate`), the
  Bruch et al. bound check of the test scores (``bound``, ``benchmarks/softmax_bounds.py``)
  and ``extra`` fields."""
  record = dict(Cell(*cell)._asdict())
  record.update(result)
  record["bound"] = bounds_lib.softmax_rank_bound(test_labels, test_scores).summary()
  record.update(extra)
  return check_record(record)


def _group(records):
  groups = collections.defaultdict(dict)
  for record in records:
    key = record_key(record)
    groups[(key.dataset, key.protocol, key.loss, key.interaction)][key.seed] = record
  return groups


def summarize(records, metric_names=METRICS, confidence=0.95, baseline=BASELINE):
  """Per-cell statistics of grid records.

  Returns one dict per ``(dataset, protocol, loss, interaction)`` with at least 2 seeds, in
  first-seen order, holding ``dataset``, ``protocol``, ``loss``, ``interaction``, ``seeds``
  (sorted), ``intervals`` (``{metric: Interval}`` of the mean over seeds) and ``paired``
  (``{metric: Interval}`` of the per-seed difference to the ``baseline`` ``(loss,
  interaction)`` cell of the same dataset and protocol over the seeds both have, when they
  share at least 2; empty for the baseline itself or without enough shared seeds) and
  ``paired_seeds``.
  """
  groups = _group(records)
  rows = []
  for (dataset, protocol, loss, interaction), by_seed in groups.items():
    seeds = sorted(by_seed)
    if len(seeds) < 2:
      continue
    row = {
      "dataset": dataset,
      "protocol": protocol,
      "loss": loss,
      "interaction": interaction,
      "seeds": seeds,
      "paired": {},
      "paired_seeds": [],
      "intervals": {
        m: intervals_lib.mean_interval([by_seed[s][m] for s in seeds], confidence)
        for m in metric_names
      },
    }
    base = groups.get((dataset, protocol) + tuple(baseline), {})
    shared = sorted(set(seeds) & set(base))
    if (loss, interaction) != tuple(baseline) and len(shared) >= 2:
      row["paired_seeds"] = shared
      row["paired"] = {
        m: intervals_lib.paired_difference(
          [by_seed[s][m] for s in shared], [base[s][m] for s in shared], confidence
        )
        for m in metric_names
      }
    rows.append(row)
  return rows


def best_other_head(
  records, dataset, metric="ndcg_5", protocol="frozen", candidates=("latent_cross", "concat")
):
  """The head among ``candidates`` with the highest mean ``metric`` over every loss and seed of
  ``dataset`` under ``protocol``; returns ``(head, {head: mean})``.

  Raises:
    ValueError: a candidate has no record for ``dataset`` under ``protocol``.
  """
  candidates = list(candidates)
  if not candidates:
    raise ValueError("`candidates` must name at least one head besides dot, got none.")
  means = {}
  for head in candidates:
    values = [
      r[metric]
      for r in records
      if r["dataset"] == dataset and r["protocol"] == protocol and r["interaction"] == head
    ]
    if not values:
      raise ValueError(
        f"No {protocol} record of head {head!r} on dataset {dataset!r}: the best "
        "other head is chosen from those records; run that protocol first or "
        "name the head."
      )
    means[head] = float(np.mean(values))
  return max(candidates, key=lambda h: means[h]), means


def estimate_seconds(cell, records):
  """The expected wall time of ``cell``: the mean ``wall_seconds`` of the records most like it
  (same dataset, protocol, loss and head; else same head; else same dataset and protocol), or
  ``None`` when there is none."""
  cell = Cell(*cell)
  tests = (
    lambda r: (r["dataset"], r["protocol"], r["loss"], r["interaction"]) == cell[:4],
    lambda r: (
      (r["dataset"], r["protocol"], r["interaction"])
      == (cell.dataset, cell.protocol, cell.interaction)
    ),
    lambda r: (r["dataset"], r["protocol"]) == (cell.dataset, cell.protocol),
  )
  for test in tests:
    times = [r["wall_seconds"] for r in records if "wall_seconds" in r and test(r)]
    if times:
      return float(np.mean(times))
  return None


def format_duration(seconds):
  """``"1h02m"``, ``"3m05s"`` or ``"42s"``."""
  seconds = int(round(seconds))
  if seconds >= 3600:
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
  if seconds >= 60:
    return f"{seconds // 60}m{seconds % 60:02d}s"
  return f"{seconds}s"


def progress_line(done, total, elapsed, remaining_cells, records, width=30):
  """A one-line progress bar with the estimated time left.

  The estimate adds :func:`estimate_seconds` over ``remaining_cells``; a cell with no similar
  record yet takes the mean of all records' ``wall_seconds``, and "estimating" is shown before
  any record exists.
  """
  filled = int(width * done / total) if total else width
  bar = "#" * filled + "-" * (width - filled)
  estimates = [estimate_seconds(c, records) for c in remaining_cells]
  walls = [r["wall_seconds"] for r in records if "wall_seconds" in r]
  fallback = float(np.mean(walls)) if walls else None
  if remaining_cells and fallback is None:
    left = "estimating"
  else:
    left = "~" + format_duration(sum(e if e is not None else fallback for e in estimates)) + " left"
  return f"[{bar}] {done}/{total} runs, {format_duration(elapsed)} elapsed, {left}"


def settings_differences(records, dataset, protocol, settings):
  """``{field: (recorded value, value now)}`` between ``settings`` and the ``settings`` of the
  records of ``dataset`` under ``protocol`` (empty when they agree or there is none).

  A grid resumed with other sizes (epochs, encoder, ...) would mix two experiments in one
  table; the caller refuses to continue when this is not empty.
  """
  now = json.loads(json.dumps(settings))
  for record in records:
    if (record["dataset"], record["protocol"]) != (dataset, protocol):
      continue
    old = record.get("settings", {})
    fields = sorted(set(old) | set(now))
    diff = {k: (old.get(k), now.get(k)) for k in fields if old.get(k) != now.get(k)}
    if diff:
      return diff
  return {}
