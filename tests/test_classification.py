"""Keras metric classes: batch accumulation, sample weights, compile/fit, save/load, on every
backend (TensorFlow, JAX, PyTorch, and tf-keras); strategies and graph checks on TensorFlow."""

import contextlib

import numpy as np
import pytest
from backend_testing import compile_modes, compiled, numpy
from sklearn.metrics import ndcg_score, top_k_accuracy_score

from tfrank4class import compat, metrics
from tfrank4class.compat import keras, ops
from tfrank4class.metrics import reference

C = 6
RNG = np.random.default_rng(7)


def _float(x):
  return float(numpy(x))


def _exact(fn, labels, scores, **kwargs):
  """The float64 reference's values (JAX: with ``jax_enable_x64`` on)."""
  context = contextlib.nullcontext()
  if compat.BACKEND == "jax":
    import jax  # noqa: PLC0415

    context = jax.enable_x64(True)
  with context:
    return numpy(fn(labels, scores.astype(np.float64), **kwargs))


def _case(n=48):
  scores = RNG.normal(size=(n, C)).astype(np.float32)
  labels = RNG.integers(0, C, n)
  return labels, scores


def test_accumulates_over_batches_like_sklearn():
  labels, scores = _case()
  top3, ndcg = metrics.TopKAccuracy(3), metrics.NDCG(5, gain="linear")
  for i in range(0, len(labels), 16):
    top3.update_state(labels[i : i + 16], scores[i : i + 16])
    ndcg.update_state(labels[i : i + 16], scores[i : i + 16])
  assert _float(top3.result()) == pytest.approx(
    top_k_accuracy_score(labels, scores, k=3, labels=range(C))
  )
  assert _float(ndcg.result()) == pytest.approx(
    ndcg_score(np.eye(C)[labels], scores, k=5), abs=1e-6
  )


def test_sample_weight_is_per_list():
  labels, scores = np.array([0, 1]), np.array([[1.0, 0.0], [1.0, 0.0]], np.float32)
  m = metrics.TopKAccuracy(1)
  m.update_state(labels, scores, sample_weight=[3.0, 1.0])
  assert _float(m.result()) == pytest.approx(0.75)
  m.reset_state()
  m.update_state(labels, scores, sample_weight=[[1.0], [3.0]])
  assert _float(m.result()) == pytest.approx(0.25)


def test_names_and_config_round_trip():
  for metric, name in [
    (metrics.TopKAccuracy(5), "top_5_accuracy"),
    (metrics.NDCG(5), "ndcg_5"),
    (metrics.NDCG(), "ndcg"),
    (metrics.MRR(), "mrr"),
    (metrics.MeanAveragePrecision(), "map"),
    (metrics.Spearman(), "spearman"),
    (metrics.RecallAtK(3), "recall_3"),
    (metrics.PrecisionAtK(2), "precision_2"),
  ]:
    assert metric.name == name
    restored = keras.utils.deserialize_keras_object(keras.utils.serialize_keras_object(metric))
    assert type(restored) is type(metric) and restored.get_config() == metric.get_config()


# Every metric class with the labels it accepts (Spearman wants graded labels).
ALL_METRICS = [
  (lambda: metrics.TopKAccuracy(5), True),
  (lambda: metrics.NDCG(5), True),
  (lambda: metrics.NDCG(), True),
  (lambda: metrics.MRR(), True),
  (lambda: metrics.MRR(3), True),
  (lambda: metrics.MeanAveragePrecision(), True),
  (lambda: metrics.RecallAtK(3), True),
  (lambda: metrics.PrecisionAtK(3), True),
  (lambda: metrics.Spearman(), False),
]


def _identity_model():
  """Dense(C) initialised to the identity: its outputs are its inputs, the scores."""
  inputs = keras.Input((C,))
  outputs = keras.layers.Dense(C, kernel_initializer="identity", bias_initializer="zeros")(inputs)
  return keras.Model(inputs, outputs)


def test_every_metric_in_compile_fit_evaluate_save_load(tmp_path):
  """A tiny model with every metric (objects and registry names) through compile, evaluate
  (against scikit-learn and the float64 reference), fit, save and load, on the active backend."""
  labels, scores = _case(64)
  dense = RNG.integers(-1, 3, (64, C)).astype(np.float32)
  model = _identity_model()
  model.compile(
    optimizer="sgd",
    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    metrics=[make() for make, takes_ids in ALL_METRICS if takes_ids]
    + ["top_1", "recall_2", "precision_2", "mrr_2"],
  )
  result = model.evaluate(scores, labels, batch_size=16, verbose=0, return_dict=True)
  assert result["top_5_accuracy"] == pytest.approx(
    top_k_accuracy_score(labels, scores, k=5, labels=range(C)), abs=1e-6
  )
  # Keras 3 names a metric given by name after the name, tf-keras after the metric object.
  top_1 = result["top_1" if "top_1" in result else "top_1_accuracy"]
  assert top_1 == pytest.approx(
    top_k_accuracy_score(labels, scores, k=1, labels=range(C)), abs=1e-6
  )
  assert result["ndcg_5"] == pytest.approx(
    np.mean(_exact(reference.ndcg, labels, scores, k=5)), abs=1e-6
  )
  assert result["mrr_3"] == pytest.approx(
    np.mean(_exact(reference.reciprocal_rank, labels, scores, k=3)), abs=1e-6
  )
  assert result["map"] == pytest.approx(
    np.mean(_exact(reference.average_precision, labels, scores)), abs=1e-6
  )
  model.fit(scores, labels, batch_size=16, epochs=1, verbose=0)
  path = str(tmp_path / "m.keras")
  model.save(path)
  loaded = keras.models.load_model(path)
  again = loaded.evaluate(scores, labels, batch_size=16, verbose=0, return_dict=True)
  expected = model.evaluate(scores, labels, batch_size=16, verbose=0, return_dict=True)
  assert set(again) == set(expected)
  for key in expected:
    assert again[key] == pytest.approx(expected[key], rel=1e-5, abs=1e-6), key
  # Spearman takes graded labels: its own model, dense relevance, MSE as the loss.
  model = _identity_model()
  model.compile(optimizer="sgd", loss="mse", metrics=[metrics.Spearman(), metrics.NDCG(3)])
  result = model.evaluate(scores, dense, batch_size=16, verbose=0, return_dict=True)
  assert result["spearman"] == pytest.approx(
    np.mean(_exact(reference.spearman, dense, scores)), abs=1e-5
  )
  model.fit(scores, dense, batch_size=16, epochs=1, verbose=0)
  model.save(path)
  again = keras.models.load_model(path).evaluate(scores, dense, verbose=0, return_dict=True)
  expected = model.evaluate(scores, dense, verbose=0, return_dict=True)
  for key in expected:
    assert again[key] == pytest.approx(expected[key], rel=1e-5, abs=1e-6), key


@pytest.mark.tensorflow_only
def test_aggregates_across_replicas(mirrored_strategy):
  labels, scores = _case(32)
  with mirrored_strategy.scope():
    model = _identity_model()
    model.compile(
      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
      metrics=[metrics.NDCG(5, gain="linear"), metrics.MRR()],
    )
  result = model.evaluate(scores, labels, batch_size=8, verbose=0, return_dict=True)
  assert result["ndcg_5"] == pytest.approx(ndcg_score(np.eye(C)[labels], scores, k=5), abs=1e-5)


def test_bad_arguments():
  for k in (0, -1, 2.5):
    with pytest.raises(ValueError, match=r"`k` must be an integer >= 1"):
      metrics.TopKAccuracy(k)
  with pytest.raises(ValueError, match=r"`k` must be an integer >= 1 or None, got 0"):
    metrics.NDCG(0)
  with pytest.raises(ValueError, match=r"`gain` must be one of \['exp2', 'linear'\], got 'log'"):
    metrics.NDCG(5, gain="log")
  with pytest.raises(ValueError, match=r"labels.*\[0, num_classes=6\)"):
    metrics.MRR().update_state([6], np.zeros((1, C), np.float32))


def test_get_by_name():
  from tfrank4class.metrics import get

  assert isinstance(get("top_5"), metrics.TopKAccuracy) and get("top_5").k == 5
  assert get("ndcg_10").k == 10 and get("ndcg").k is None
  assert get("mrr").name == "mrr" and get("mrr_3").k == 3
  assert isinstance(get("map"), metrics.MeanAveragePrecision)
  assert isinstance(get("spearman"), metrics.Spearman)
  assert isinstance(get("recall_5"), metrics.RecallAtK) and get("recall_5").k == 5
  assert isinstance(get("precision_3"), metrics.PrecisionAtK)
  assert get("precision_3").name == "precision_3"
  for bad in ("top_0", "top5", "ndcg_x", "accuracy", "recall_0", "precision"):
    with pytest.raises(ValueError, match=rf"Unknown metric name '{bad}'; known metrics are: top_K"):
      get(bad)


def _dtypes_in(graph_def):
  """Every dtype named in the attributes of the graph's nodes and of its library functions."""
  import tensorflow as tf  # noqa: PLC0415

  nodes = list(graph_def.node)
  for function in graph_def.library.function:
    nodes.extend(function.node_def)
  found = set()
  for node in nodes:
    for value in node.attr.values():
      if value.type:
        found.add(tf.dtypes.as_dtype(value.type))
      found.update(tf.dtypes.as_dtype(t) for t in value.list.type)
  return found


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("make,takes_ids", ALL_METRICS)
def test_update_graph_has_no_float64(make, takes_ids):
  import tensorflow as tf  # noqa: PLC0415  (graph inspection: TensorFlow only)

  metric = make()
  label_specs = [tf.TensorSpec([16, C], tf.float32)]
  label_specs += [tf.TensorSpec([16], tf.int64)] if takes_ids else []
  for spec in label_specs:
    update = tf.function(lambda y, s: [metric.update_state(y, s), None][1])
    graph = update.get_concrete_function(spec, tf.TensorSpec([16, C], tf.float32)).graph
    assert tf.float64 not in {
      t.dtype for op in graph.get_operations() for t in list(op.outputs) + list(op.inputs)
    }
    dtypes = _dtypes_in(graph.as_graph_def())
    assert tf.float32 in dtypes and tf.float64 not in dtypes
  # The check can fail: the exact reference builds float64 ops.
  exact = (
    tf.function(lambda y, s: reference.ndcg(y, s))
    .get_concrete_function(tf.TensorSpec([16], tf.int64), tf.TensorSpec([16, C], tf.float32))
    .graph
  )
  assert tf.float64 in _dtypes_in(exact.as_graph_def())


def _compiled_update(metric, mode, y, scores, weights):
  """``metric.update_state(y, scores, weights)`` compiled as ``mode`` (TensorFlow: in a
  ``tf.function``; JAX: ``jax.jit`` of the stateless update, whose variables are written back)."""
  args = [ops.convert_to_tensor(a) for a in (y, scores, weights)]
  if compat.BACKEND == "jax":
    update = compiled(
      lambda v, a, b, w: metric.stateless_update_state(v, a, b, sample_weight=w), mode
    )
    values = update([variable.value for variable in metric.variables], *args)
    for variable, value in zip(metric.variables, values):
      variable.assign(value)
    return
  compiled(lambda a, b, w: [metric.update_state(a, b, sample_weight=w), None][1], mode)(*args)


def test_every_metric_compiled_and_weighted():
  """Every metric compiled on the backend (tf.function and XLA; jax.jit) equals eager, and eager
  the weighted mean of the float64 reference's values."""
  labels, scores = _case(64)
  scores = np.round(scores).astype(np.float32)  # many ties
  weights = RNG.random(64).astype(np.float32)
  dense = RNG.integers(-1, 3, (64, C)).astype(np.float32)
  references = [
    reference.top_k_accuracy,
    reference.ndcg,
    reference.ndcg,
    reference.reciprocal_rank,
    reference.reciprocal_rank,
    reference.average_precision,
    None,
    None,
    reference.spearman,
  ]
  kwargs = [{"k": 5}, {"k": 5}, {}, {}, {"k": 3}, {}, {}, {}, {}]
  for (make, takes_ids), fn, kw in zip(ALL_METRICS, references, kwargs):
    for y in [labels, dense] if takes_ids else [dense]:
      eager = make()
      eager.update_state(y, scores, sample_weight=weights)
      for mode in compile_modes()[1:]:
        metric = make()
        _compiled_update(metric, mode, y, scores, weights)
        assert _float(metric.result()) == pytest.approx(_float(eager.result()), abs=1e-6)
      if fn is not None:
        values = _exact(fn, y, scores, **kw)
        assert _float(eager.result()) == pytest.approx(
          np.sum(weights * values) / np.sum(weights), abs=2e-6
        )


def test_bad_labels_inside_compiled_code_make_the_metric_nan():
  """Where no check can raise (XLA, jax.jit) a bad class id makes the metric NaN."""
  scores = np.array([[0.1, 0.2, 0.9], [0.3, 0.2, 0.1]], np.float32)
  for mode in compile_modes()[1:]:
    if mode == "function":
      continue  # tf.function: the label assertion fails the call (test_functional.py)
    metric = metrics.MRR()
    _compiled_update(metric, mode, np.array([5, 0]), scores, np.ones(2, np.float32))
    assert np.isnan(_float(metric.result()))


class _FirstScore(metrics.PerListMetric):
  """The true class's score: a metric whose ``list_values`` checks nothing itself."""

  def list_values(self, y_true, y_pred):
    ids = ops.reshape(ops.cast(y_true, "int32"), (-1, 1))
    return ops.take_along_axis(y_pred, ids, axis=-1)[:, 0]


def test_a_nonfinite_score_with_class_ids_is_refused_by_every_metric():
  """With class ids the built-in metrics check the scores in their counting pass, a subclass's
  ``list_values`` gets them checked by the base: either way a NaN or +-inf score raises naming
  `scores` and the value eagerly, fails a tf.function, and makes the metric NaN where no check
  can raise (XLA, jax.jit; timed for two metrics). A padded item's non-finite score (dense
  relevance) is no error."""
  labels, weights = np.array([0, 1, 2, 3]), np.ones(4, np.float32)
  makers = [make for make, _ in ALL_METRICS] + [lambda: _FirstScore(name="first_score")]
  for i, make in enumerate(makers):
    bad = (np.nan, np.inf, -np.inf)[i % 3]
    scores = RNG.normal(size=(4, C)).astype(np.float32)
    scores[2, 4] = bad
    message = rf"^`scores` must be finite \(no NaN or Inf\), got \[{bad}\]\.$"
    with pytest.raises(ValueError, match=message):
      make().update_state(labels, scores)
    for mode in compile_modes()[1:] if i in (0, len(makers) - 1) else []:
      metric = make()
      if mode == "function":
        with pytest.raises(Exception, match=r"`scores` must be finite \(no NaN or Inf\)"):
          _compiled_update(metric, mode, labels, scores, weights)
        continue
      _compiled_update(metric, mode, labels, scores, weights)
      assert np.isnan(_float(metric.result()))
  padded = np.where(np.arange(C) == 4, -1.0, np.eye(C)[labels]).astype(np.float32)
  metric = metrics.TopKAccuracy(1)
  metric.update_state(padded, scores)
  assert _float(metric.result()) == pytest.approx(
    np.mean(np.argmax(np.where(padded >= 0, scores, -np.inf), 1) == labels)
  )


def test_recall_and_precision_on_multi_label():
  scores = RNG.normal(size=(40, C)).astype(np.float32)
  multi_hot = (RNG.random((40, C)) < 0.4).astype(np.float32)
  multi_hot[:, 0] = 1.0
  recall, precision = metrics.RecallAtK(2), metrics.PrecisionAtK(2)
  recall.update_state(multi_hot, scores)
  precision.update_state(multi_hot, scores)
  top2 = np.argsort(-scores, axis=1)[:, :2]
  hits = np.take_along_axis(multi_hot, top2, axis=1).sum(1)
  assert _float(recall.result()) == pytest.approx(np.mean(hits / multi_hot.sum(1)), abs=1e-6)
  assert _float(precision.result()) == pytest.approx(np.mean(hits / 2), abs=1e-6)


@pytest.mark.tensorflow_only
def test_every_metric_in_a_mirrored_strategy_step(mirrored_strategy):
  import tensorflow as tf  # noqa: PLC0415  (tf.distribute: TensorFlow only)

  labels, scores = _case(32)
  with mirrored_strategy.scope():
    objects = [make() for make, takes_ids in ALL_METRICS if takes_ids]

  @tf.function
  def step(y, s):
    def replica_fn(y, s):
      for m in objects:
        m.update_state(y, s)

    mirrored_strategy.run(replica_fn, args=(y, s))

  dataset = tf.data.Dataset.from_tensor_slices((labels, scores)).batch(8)
  for y, s in mirrored_strategy.experimental_distribute_dataset(dataset):
    step(y, s)
  want = top_k_accuracy_score(labels, scores, k=5, labels=range(C))
  assert _float(objects[0].result()) == pytest.approx(want, abs=1e-6)
  want = np.mean(_exact(reference.reciprocal_rank, labels, scores))
  assert _float(objects[3].result()) == pytest.approx(want, abs=1e-6)


def test_metric_names_are_one_registry():
  from tfrank4class.metrics import registry
  from tfrank4class.registry import Registry

  assert isinstance(registry.METRICS, Registry)
  assert set(registry.METRICS.names()) == set(registry.PATTERNS)
  # parse: (class, constructor args) without building; K converted to int (leading zeros too).
  assert registry.parse("ndcg") == (metrics.NDCG, ())
  assert registry.parse("ndcg_10") == (metrics.NDCG, (10,))
  assert registry.parse("top_05") == (metrics.TopKAccuracy, (5,))
  assert registry.parse("precision_12") == (metrics.PrecisionAtK, (12,))
  for bad in ("top_K", "top_00", "top_-1", "TOP_5", None, 5):
    with pytest.raises(
      ValueError,
      match=r"Unknown metric name .*; known metrics are: top_K, ndcg, "
      r"ndcg_K, dcg, dcg_K, mrr, mrr_K, map, spearman, recall_K, "
      r"precision_K \(K a positive integer",
    ):
      registry.parse(bad)


def _registry_names():
  """One name per entry of the metric registry (``K`` = 2), read at collection time."""
  from tfrank4class.metrics import registry

  return [pattern.replace("K", "2") for pattern in registry.PATTERNS]


@pytest.mark.parametrize("name", _registry_names())
def test_every_registered_metric_is_the_weighted_mean_of_its_per_list_values(name):
  """Weights ``[B]`` / ``[B, 1]``, over two updates: ``sum_i w_i v_i / sum_i w_i``, with ``v_i``
  the unweighted metric of list ``i`` alone; a weight of 0 removes the list."""
  labels, scores = _case(10)
  dense = RNG.integers(-1, 3, (10, C)).astype(np.float32)
  weights = RNG.uniform(0.0, 2.0, 10).astype(np.float32)
  weights[3] = 0.0
  for y in (labels, dense):
    alone = []
    for i in range(len(y)):
      metric = metrics.get(name)
      metric.update_state(y[i : i + 1], scores[i : i + 1])
      alone.append(_float(metric.result()))
    want = np.sum(weights * np.array(alone)) / np.sum(weights)
    for w in (weights, weights[:, None]):
      metric = metrics.get(name)
      metric.update_state(y[:6], scores[:6], sample_weight=w[:6])
      metric.update_state(y[6:], scores[6:], sample_weight=w[6:])
      assert _float(metric.result()) == pytest.approx(want, abs=1e-6)


@pytest.mark.parametrize(
  "weights, error, message",
  [
    (
      np.ones([4, C + 1], np.float32),
      ValueError,
      r"\[batch_size\], \[batch_size, 1\] .* or \[batch_size, list_size\] .*\(4, 7\)",
    ),
    (np.ones([5], np.float32), ValueError, r"with batch_size 4 and list_size 6, got shape \(5,\)"),
    (np.array([1.0, np.nan, 1.0, 1.0], np.float32), ValueError, "finite"),
    (np.array([1.0, -1.0, 1.0, 1.0], np.float32), ValueError, ">= 0"),
  ],
)
def test_bad_metric_weights_name_sample_weight(weights, error, message):
  labels, scores = _case(4)
  with pytest.raises(error, match="`sample_weight` must .*" + message):
    metrics.NDCG().update_state(labels, scores, sample_weight=weights)


def test_names_lists_the_registry():
  from tfrank4class.metrics import registry

  assert metrics.names() == sorted(registry.PATTERNS)
  for name in metrics.names():
    assert isinstance(metrics.get(name.replace("K", "3")), metrics.PerListMetric)


# TF-Ranking's metric core (Keras-free): (our registry name, its class, its topn).
_TFR_METRICS = [
  ("ndcg_3", "NDCGMetric", 3),
  ("mrr", "MRRMetric", None),
  ("map", "MeanAveragePrecisionMetric", None),
  ("precision_2", "PrecisionMetric", 2),
  ("recall_2", "RecallMetric", 2),
  ("top_2", "HitsMetric", 2),
]


def _tf_rankings(cls, topn, relevance, scores, item_weights):
  """TF-Ranking's weighted mean: its per-list values and the list weights it folds."""
  import _tf_ranking_reference  # noqa: PLC0415  (TF-Ranking: TensorFlow only)
  import tensorflow as tf  # noqa: PLC0415

  metric = getattr(_tf_ranking_reference.module("metrics_impl"), cls)("m", topn=topn)
  values, weights = metric.compute(relevance, scores, item_weights)
  return float(tf.reduce_sum(values * weights) / tf.reduce_sum(weights))


@pytest.mark.tensorflow_only
@pytest.mark.parametrize("name, cls, topn", _TFR_METRICS)
def test_item_weights_fold_as_tf_rankings_metrics(name, cls, topn):
  """Positive item weights ``[B, C]``: with class ids every metric equals TF-Ranking's weighted
  metric; with graded relevance (each list with a relevant item) every one whose value TF-Ranking
  does not weigh per item (all but NDCG and MAP, whose gains and precisions it weighs)."""
  labels, scores = _case(16)
  item_weights = RNG.uniform(0.5, 2.0, scores.shape).astype(np.float32)
  graded = RNG.integers(0, 3, scores.shape).astype(np.float32)
  graded[graded.sum(1) == 0, 0] = 1.0
  cases = [(labels, np.eye(C, dtype=np.float32)[labels])]
  if cls not in ("NDCGMetric", "MeanAveragePrecisionMetric"):
    cases.append((graded, graded))
  for y, relevance in cases:
    metric = metrics.get(name)
    metric.update_state(y, scores, sample_weight=item_weights)
    want = _tf_rankings(cls, topn, relevance, scores, item_weights)
    assert _float(metric.result()) == pytest.approx(want, rel=1e-5)


def test_item_weights_by_hand():
  """NDCG weighs by gain; a list without relevant items takes its own mean item weight; uniform
  item weights per list are list weights."""
  scores = np.array([[0.9, 0.5, 0.1], [0.2, 0.8, 0.4]], np.float32)
  relevance = np.array([[1.0, 2.0, 0.0], [0.0, 0.0, -1.0]], np.float32)
  item_weights = np.array([[2.0, 1.0, 5.0], [1.0, 3.0, 7.0]], np.float32)
  ndcg = metrics.NDCG()
  ndcg.update_state(relevance, scores, sample_weight=item_weights)
  # list 0: gains 1, 3, 0 -> weight (2 * 1 + 1 * 3) / 4; list 1: no relevant item, NDCG 0,
  # weight the mean over its two valid items (1 + 3) / 2.
  dcg = 1.0 + 3.0 / np.log2(3.0)
  idcg = 3.0 + 1.0 / np.log2(3.0)
  w0, w1 = 5.0 / 4.0, 2.0
  assert _float(ndcg.result()) == pytest.approx(w0 * dcg / idcg / (w0 + w1), rel=1e-6)
  mrr, per_list = metrics.MRR(), metrics.MRR()
  mrr.update_state([1, 2], scores, sample_weight=[[3.0] * 3, [0.5] * 3])
  per_list.update_state([1, 2], scores, sample_weight=[3.0, 0.5])
  assert _float(mrr.result()) == pytest.approx(_float(per_list.result()), rel=1e-6)
