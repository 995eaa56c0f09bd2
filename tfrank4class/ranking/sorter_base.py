"""Shared machinery of the SoDeep sorters (Engilberge et al., CVPR 2019).

A *sorter* is a differentiable stand-in for :func:`tfrank4class.ranking.rank`: it maps scores
``[B, n]`` to estimated ranks ``[B, n]`` on the same scale as ``rank()``,

    rank(s)_i = 1 + |{j : s_j > s_i}|   in [1, n],   1 = highest score,

so any sorter, the blackbox ranker and the exact ``rank`` are interchangeable in a loss. Learned
sorters predict the *normalised* rank ``(rank - 1) / (n - 1)`` in ``[0, 1]`` internally and return
``1 + (n - 1) * normalised`` so that their output has the same scale as ``rank()``.

This module holds:

* :class:`Sorter`, the base Keras layer (input checks, ``pretrained()`` loading of the weights
  shipped in ``tfrank4class/resources/sorters/``, weight export). A weights file is
  ``<name>.json`` (class, config, metadata) plus ``<name>.npz`` holding one array per key of
  :meth:`Sorter.weight_table` (``"<sub-layer>/<role>"``, e.g. ``"bn_0/moving_mean"``), so the
  same files load under Keras 3 and tf-keras;
* :func:`standardize` and :func:`standard_scale`, the per-list standardisation used by every
  learned sorter.

The memory-bounded sums of sigmoid comparisons of the pairwise sorters are in
:mod:`tfrank4class.ranking.sigmoid_comparisons`.
"""

import json
import os
import pathlib

import numpy as np

from tfrank4class import atomic, backend, checks, compat
from tfrank4class.compat import keras, ops

#: Directory of the shipped sorter weights (``<kind>.json`` + ``<kind>.npz``).
RESOURCE_DIR = pathlib.Path(__file__).resolve().parents[1] / "resources" / "sorters"


def standardize(scores, epsilon=1e-12):
  """Per-list standardisation ``z = (s - mean(s)) / sqrt(var(s) + epsilon)``.

  Ranks are invariant to this map (it is strictly increasing), and it puts lists of any scale and
  offset on a common footing for a learned sorter. A constant list maps to zeros (no NaN).

  Gradient of 2-item lists: a list of ``n = 2`` items always standardises to ``(-1, 1)`` or
  ``(1, -1)``, whatever its scores, so the exact derivative is 0 and no loss could train a
  2-class problem through a sorter. For ``n = 2`` (only) the scale ``1 / sqrt(var + epsilon)`` is
  therefore a constant in the backward pass (``stop_gradient``; the value is unchanged), and
  the gradient moves the two scores apart or together. For ``n >= 3`` the exact derivative is
  kept: holding the scale there too adds a component along the list's spread, which the learned
  sorters never saw in pretraining (their inputs always have unit variance), and it made
  training worse (docs/sodeep.md, "2-class lists train").

  Example:
    >>> ops.convert_to_numpy(standardize([[1.0, 3.0]])).round(3)
    array([[-1.,  1.]], dtype=float32)
  """
  scores = ops.convert_to_tensor(scores)
  return _centred(scores) * standard_scale(scores, epsilon)


def _centred(scores):
  # Means as sums over n: Keras's PyTorch `mean` computes float64 in float32.
  n = ops.cast(ops.shape(scores)[-1], scores.dtype)
  return scores - ops.sum(scores, axis=-1, keepdims=True) / n


def standard_scale(scores, epsilon=1e-12):
  """The factor ``1 / sqrt(var(s) + epsilon)`` ``[B, 1]`` of :func:`standardize` (a constant in
  the backward pass for 2-item lists), so that ``z_j - z_i = (s_j - s_i) * scale``: a
  difference of scores that tie exactly is exactly 0 however a compiler fuses the
  standardisation (XLA may recompute ``z`` differently for ``z_i`` and ``z_j``).

  Example:
    >>> ops.convert_to_numpy(standard_scale([[1.0, 3.0]]))
    array([[1.]], dtype=float32)
  """
  scores = ops.convert_to_tensor(scores)
  n = ops.cast(ops.shape(scores)[-1], scores.dtype)
  var = ops.sum(ops.square(_centred(scores)), axis=-1, keepdims=True) / n
  scale = ops.rsqrt(var + ops.cast(epsilon, scores.dtype))
  two_items = ops.cast(ops.equal(ops.shape(scores)[-1], 2), scores.dtype)
  return two_items * ops.stop_gradient(scale) + (1.0 - two_items) * scale


def check_scores(scores, min_length=2):
  """Validates sorter input: a float ``[B, n]`` tensor with ``n >= min_length``.

  The package's one score check, :func:`tfrank4class.checks.check_scores`, with the
  sorters' settings: integer, float16 and bfloat16 scores (e.g. under the ``mixed_float16``
  policy) become float32 (the rank arithmetic needs its precision: float16 holds whole numbers
  exactly only up to 2,048); the values are not checked here (a loss sinks padded items to a
  finite score before ranking).

  Example:
    >>> import numpy as np
    >>> from tfrank4class.compat import ops
    >>> ops.convert_to_numpy(check_scores(np.array([[0.5, 1.5]], np.float16))).dtype
    dtype('float32')
  """
  return checks.check_scores("scores", scores, min_length=min_length, finite=False)


def to_ranks(normalised, n):
  """``1 + (n - 1) * normalised``: normalised ranks in [0, 1] to ranks in [1, n]."""
  return 1.0 + ops.cast(n - 1, normalised.dtype) * normalised


#: The attributes that hold a Keras layer's variables under both Keras 2 and Keras 3.
_VARIABLE_ROLES = (
  "kernel",
  "recurrent_kernel",
  "bias",
  "gamma",
  "beta",
  "moving_mean",
  "moving_variance",
)


def _layer_variables(prefix, layer):
  """``{"<prefix>/<role>": variable}`` of one built Keras layer (see ``Sorter.weight_table``)."""
  if isinstance(layer, keras.layers.Bidirectional):
    return {
      **_layer_variables(f"{prefix}/forward", layer.forward_layer),
      **_layer_variables(f"{prefix}/backward", layer.backward_layer),
    }
  if isinstance(layer, keras.layers.RNN):
    layer = layer.cell
  found = {}
  for role in _VARIABLE_ROLES:
    variable = getattr(layer, role, None)
    if variable is not None:
      found[f"{prefix}/{role}"] = variable
  return found


def build_sublayer(layer, input_shape):
  """Builds ``layer`` for inputs of ``input_shape`` inside its own name scope.

  Keras 3 opens the scope itself (on every backend); Keras 2 (tf-keras) names a variable by the
  scopes open when it is created, and only opens the layer's own scope when it is called, so
  there this gives the variables the names (``<sorter>/<layer>/kernel``) that a first call would
  give them.
  """
  if compat.KERAS_3:
    layer.build(input_shape)
    return
  with keras.backend.name_scope(layer.name):
    layer.build(input_shape)


class Sorter(keras.layers.Layer):
  """Base class of the sorter layers: scores ``[B, n]`` -> estimated ranks ``[B, n]`` in [1, n].

  Subclasses implement ``_normalised_ranks(scores, training)`` (learned sorters) or override
  ``call``. ``KIND`` names the shipped weights ``resources/sorters/<KIND>.{json,npz}``.

  Precision: a sorter's dtype policy is ``"float32"`` unless ``dtype=`` is given, whatever the
  global policy, so under ``mixed_float16`` it takes float16 scores and computes and returns
  float32 ranks; subclasses build their sub-layers with ``dtype=self.dtype_policy``. Even with
  an explicit low-precision policy, the rank arithmetic (standardisation, comparisons, output
  ranks) is done in float32.

  Example (a sorter that returns exact normalised ranks):
    >>> class CountingSorter(Sorter):
    ...   def _normalised_ranks(self, scores, training=None):
    ...     above = ops.sum(ops.cast(scores[:, None, :] > scores[:, :, None], "float32"), -1)
    ...     return above / ops.cast(ops.shape(scores)[-1] - 1, "float32")
    >>> ops.convert_to_numpy(CountingSorter()(np.array([[0.3, 0.9, 0.1]], np.float32)))
    array([[2., 1., 3.]], dtype=float32)
  """

  KIND = None

  def __init__(self, **kwargs):
    kwargs.setdefault("dtype", "float32")
    super().__init__(**kwargs)

  def call(self, scores, training=None):
    scores = check_scores(scores)
    self._check_length(scores)
    n = ops.shape(scores)[-1]
    normalised = ops.cast(self._normalised_ranks(scores, training=training), "float32")
    return to_ranks(normalised, n)

  def ranks_at(self, scores, index):
    """The estimated ranks ``[B]`` (float32) of the one item ``index[b]`` of each list
    ``scores[b]``: ``self(scores)`` at those items. Here by computing every rank; a sorter
    whose rank of one item needs only that item's comparisons overrides it with an ``O(n)``
    form (:class:`~tfrank4class.ranking.AttentionSorter`,
    :class:`~tfrank4class.ranking.PairwiseSigmoidSorter`).

    Args:
      scores: float ``[B, n]``.
      index: integer ``[B]``.
    """
    ranks = self(scores, training=False)
    index = ops.cast(ops.convert_to_tensor(index), "int32")[:, None]
    return backend.take_along_axis(ranks, index, axis=-1)[:, 0]

  def _row_inputs(self, scores):
    """``scores`` checked and in the compute dtype, the layer built: the inputs of an
    ``O(n)`` :meth:`ranks_at`, which does not go through ``__call__``."""
    scores = check_scores(scores)
    self._check_length(scores)
    if not self.built:
      build_sublayer(self, tuple(scores.shape))
    return ops.cast(scores, self.compute_dtype)

  def _check_length(self, scores):
    """Raises if this sorter cannot handle the list length of ``scores`` (default: any)."""
    del scores

  def _normalised_ranks(self, scores, training=None):
    raise NotImplementedError

  def compute_output_shape(self, input_shape):
    return input_shape

  def build(self, input_shape):
    """Creates every weight for scores of shape ``input_shape`` (``[B, n]``).

    Keras 3 restores a ``.keras`` file by calling ``build`` with the saved input shape and then
    loading the variables, so every sub-layer with weights is built here (by
    :meth:`_build_sublayers`), not on the first call.
    """
    self._build_sublayers(tuple(input_shape))
    # The sub-layers are made after `Layer.__init__` took `trainable=`; under Keras 3 a sorter
    # made with `trainable=False` (e.g. restored from a .keras file) would otherwise leave them
    # trainable, and fit would update its frozen weights.
    for layer in self._weighted_layers():
      layer.trainable = self.trainable
    super().build(input_shape)

  def _build_sublayers(self, input_shape):
    """Builds the sub-layers for scores of shape ``input_shape`` (default: none to build)."""
    del input_shape

  def _weighted_layers(self):
    """The sub-layers that hold this sorter's weights (default: none)."""
    return ()

  # --- shipped weights -----------------------------------------------------------------------
  def build_for_export(self):
    """Builds the layer (for a ``[2, n]`` batch) so that all its weights exist."""
    if not self.built:
      build_sublayer(self, (2, getattr(self, "list_size", None) or 8))

  def weight_table(self):
    """Every weight of the sorter by a key that is the same under every Keras flavour.

    The key is ``"<sub-layer name>/<role>"``, the role being the attribute that holds the
    variable in both Keras 2 and Keras 3 (``kernel``, ``bias``, ``gamma``, ``moving_mean``, ...;
    a bidirectional RNN's are under ``<name>/forward/`` and ``<name>/backward/``), e.g.
    ``"bn_0/moving_variance"``. Neither the order of :attr:`weights` (Keras 2 lists trainable
    weights first, Keras 3 in creation order) nor variable names (Keras 2 names include the
    enclosing scopes and auto-numbered layer names) are used. Builds the layer if needed.

    Returns:
      ``{key: variable}``.
    """
    self.build_for_export()
    table = {}
    for layer in self._weighted_layers():
      table.update(_layer_variables(layer.name, layer))
    held = {id(v) for v in table.values()}
    if len(held) != len(table) or held != {id(w) for w in self.weights}:
      raise RuntimeError(
        f"{type(self).__name__}.weight_table() does not hold every weight exactly once "
        f"(keys {sorted(table)}, {len(self.weights)} weights): _weighted_layers() and the roles "
        f"{_VARIABLE_ROLES} must cover them."
      )
    return table

  def export_weights(self, path_prefix, metadata=None):
    """Writes ``<path_prefix>.json`` (class, config, metadata, weight keys) and
    ``<path_prefix>.npz`` (one array per key of :meth:`weight_table`), each atomically
    (``tfrank4class.atomic``): a kill during the write leaves the previous file whole."""
    path_prefix = str(path_prefix)
    table = self.weight_table()
    os.makedirs(os.path.dirname(os.path.abspath(path_prefix)), exist_ok=True)
    with atomic.writing(path_prefix + ".npz") as partial, open(partial, "wb") as f:
      np.savez(f, **{key: np.asarray(ops.convert_to_numpy(v)) for key, v in table.items()})
    config = self.get_config()
    config.pop("trainable", None)
    record = {
      "class_name": type(self).__name__,
      "config": config,
      "weight_keys": sorted(table),
      "metadata": metadata or {},
    }
    atomic.write_text(
      path_prefix + ".json", json.dumps(record, indent=1, sort_keys=True, default=str)
    )

  @classmethod
  def load_weights_file(cls, path_prefix, trainable=False, **overrides):
    """Builds a sorter from ``<path_prefix>.json`` / ``.npz`` written by :meth:`export_weights`.

    Each array is assigned to the weight with the same key of :meth:`weight_table`, so the same
    files load under Keras 2 and Keras 3.

    Raises:
      FileNotFoundError: naming the missing file.
      ValueError: if the file holds a different sorter class, or arrays whose keys or shapes do
        not match the weights.
    """
    path_prefix = str(path_prefix)
    for suffix in (".json", ".npz"):
      if not os.path.exists(path_prefix + suffix):
        raise FileNotFoundError(
          f"Sorter weights file {path_prefix + suffix!r} does not exist; for the shipped "
          f"weights reinstall tfrank4class, or train one with tfrank4class-pretrain-sorter."
        )
    with open(path_prefix + ".json") as f:
      record = json.load(f)
    if record.get("class_name") != cls.__name__:
      raise ValueError(
        f"{path_prefix + '.json'!r} holds a {record.get('class_name')!r}, not a {cls.__name__}."
      )
    config = dict(record["config"])
    config.update(overrides)
    layer = cls.from_config(config)
    table = layer.weight_table()
    with np.load(path_prefix + ".npz") as data:
      arrays = {key: data[key] for key in data.files}
    wrong = sorted(
      key
      for key in set(arrays) | set(table)
      if key not in arrays or key not in table or arrays[key].shape != tuple(table[key].shape)
    )
    if wrong:
      raise ValueError(
        f"{path_prefix + '.npz'!r} does not match the weights of {cls.__name__}({config}): "
        f"missing, unexpected or differently shaped: {wrong}."
      )
    for key, variable in table.items():
      variable.assign(arrays[key])
    layer.trainable = trainable
    layer.pretrained_metadata = record.get("metadata", {})
    layer.pretrained_kind = None
    return layer

  @classmethod
  def pretrained(cls, trainable=False, path=None):
    """The sorter with the weights shipped in the package (no network needed).

    Args:
      trainable: whether the returned layer's weights are trainable (fine-tuning) or frozen.
      path: optional path prefix of other weights (``<path>.json`` / ``<path>.npz``) written by
        ``tfrank4class-pretrain-sorter``.

    Raises:
      FileNotFoundError: if the weights file is missing.
    """
    if cls.KIND is None:
      raise ValueError(f"{cls.__name__} has no pretrained weights.")
    layer = cls.load_weights_file(path or RESOURCE_DIR / cls.KIND, trainable=trainable)
    layer.pretrained_kind = None if path else cls.KIND
    return layer
