"""Class encoders: class ids to class embeddings.

In the Rank4Class view ("Rank4Class: Examining Multiclass Classification through the Lens of
Learning to Rank", ICLR 2022 submission, Sec. 3.2) a classifier's final ``Dense(C)`` layer is a
ranking model whose class encoder is a one-hot lookup,

    c_i = W^T e_i,        W in R^{C x (d+1)} (row i: kernel column i, then bias b_i),
                          e_i in R^C the i-th unit vector,

and whose interaction is a dot product with h' = [h, 1] (Sec. 3.1 defines ``s = W h'``).
:class:`ClassEncoder` is that lookup (a trainable table, the default) or, when per-class metadata
is available (for example an embedding of each class name), an MLP over those features:

    c_i = MLP(f_i),        f_i in R^p the i-th row of ``class_features``.

The paper proposes class encoders over class metadata (Sec. 4, Figure 2 right) but leaves them to
future work; the feature MLP is our own design and has no published figures to compare with.
"""

import numpy as np

from tfrank4class import checks
from tfrank4class.compat import keras, ops
from tfrank4class.registry import export


def check_class_features(class_features, num_classes):
  """Validates per-class features and returns them as a float32 numpy array ``[C, p]``.

  Raises:
    ValueError: if the features are not a finite numeric matrix whose first dimension is
      ``num_classes``.
  """
  try:
    array = np.asarray(
      ops.convert_to_numpy(class_features) if ops.is_tensor(class_features) else class_features
    )
  except (TypeError, ValueError) as e:
    raise ValueError(
      f"`class_features` must be a numeric matrix [num_classes, p], got "
      f"{type(class_features).__name__}: {e}"
    ) from None
  if array.dtype.kind not in "fiu":
    raise ValueError(
      f"`class_features` must be a numeric matrix [num_classes, p], got dtype {array.dtype}."
    )
  if array.ndim != 2:
    raise ValueError(f"`class_features` must have shape [num_classes, p], got shape {array.shape}.")
  if array.shape[0] != num_classes:
    raise ValueError(
      f"`class_features` must have first dimension num_classes={num_classes} "
      f"(one row per class), got shape {array.shape}."
    )
  if array.shape[1] < 1:
    raise ValueError(
      f"`class_features` must have at least one feature column, got shape {array.shape}."
    )
  array = array.astype(np.float32)
  if not np.all(np.isfinite(array)):
    raise ValueError("`class_features` must be finite (no NaN or Inf).")
  return array


@export()
class ClassEncoder(keras.layers.Layer):
  """Maps class ids to class embeddings ``c_i`` (Rank4Class, Sec. 3.2).

  Without ``class_features`` this is the one-hot lookup of the paper, ``c_i = W^T e_i``: a
  trainable table ``W`` of shape ``[num_classes, embedding_dim]``. With ``class_features`` (a
  ``[num_classes, p]`` matrix, e.g. a text embedding of each class name) the embedding is
  ``c_i = MLP(f_i)``: ``hidden_units`` layers with ``activation`` and a final linear layer to
  ``embedding_dim``. The features are stored in a non-trainable weight (trainable with
  ``train_class_features=True``), so they travel with ``model.save``; the layer config only keeps
  their shape, and ``from_config`` creates a zero placeholder that loading the weights fills in.

  Args:
    num_classes: the number of classes ``C >= 2``.
    embedding_dim: the size ``e >= 1`` of each class embedding.
    class_features: optional ``[C, p]`` numeric array-like or tensor of per-class features.
    hidden_units: widths of the hidden layers of the feature MLP (ignored for the table).
    activation: activation of the hidden layers of the feature MLP.
    train_class_features: whether the feature matrix itself is trainable.
    embeddings_initializer: initializer of the table (or of the MLP kernels).
    bias_initializer: ``None`` (default): the whole table comes from ``embeddings_initializer``.
      Otherwise the table's last column is a ``Dense`` bias and the table starts where a
      ``Dense(num_classes)`` layer on ``embedding_dim - 1`` inputs starts: ``c_i = [k_i; b_i]``
      with the kernel ``K = embeddings_initializer([embedding_dim - 1, num_classes])`` (a Dense
      kernel's shape, so fan-in and fan-out match) and ``b = bias_initializer([num_classes])``.
      Only for the table (not with ``class_features``); needs ``embedding_dim >= 2``.
    class_feature_dim: set by ``get_config``; the feature width ``p`` when the values are restored
      from saved weights instead of ``class_features``.

  Call:
    ``class_ids``: an integer tensor of any shape with values in ``[0, C)``. Returns the
    embeddings, shape ``class_ids.shape + [embedding_dim]``. :meth:`all_embeddings` returns the
    full ``[C, e]`` matrix.

  Example:
    >>> enc = ClassEncoder(num_classes=3, embedding_dim=2)
    >>> tuple(enc(np.array([0, 2])).shape)
    (2, 2)
    >>> enc = ClassEncoder(3, 2, class_features=[[1.0], [2.0], [3.0]])
    >>> tuple(enc.all_embeddings().shape)
    (3, 2)
  """

  def __init__(
    self,
    num_classes,
    embedding_dim,
    class_features=None,
    hidden_units=(),
    activation="relu",
    train_class_features=False,
    embeddings_initializer="glorot_uniform",
    class_feature_dim=None,
    bias_initializer=None,
    **kwargs,
  ):
    super().__init__(**kwargs)
    self.num_classes = checks.check_int("num_classes", num_classes, minimum=2)
    self.embedding_dim = checks.check_int("embedding_dim", embedding_dim, minimum=1)
    self.hidden_units = check_units("hidden_units", hidden_units)
    self.activation = keras.activations.get(activation)
    self.train_class_features = bool(train_class_features)
    self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
    self._feature_values = None
    if class_features is not None:
      self._feature_values = check_class_features(class_features, self.num_classes)
      if class_feature_dim is not None and class_feature_dim != self._feature_values.shape[1]:
        raise ValueError(
          f"`class_feature_dim` must match class_features.shape[1]="
          f"{self._feature_values.shape[1]}, got {class_feature_dim!r}."
        )
      class_feature_dim = self._feature_values.shape[1]
    self.class_feature_dim = checks.check_int(
      "class_feature_dim", class_feature_dim, minimum=1, allow_none=True
    )
    self.bias_initializer = self._checked_bias_initializer(bias_initializer)
    self._mlp = []
    if self.class_feature_dim is not None:
      for i, units in enumerate(self.hidden_units):
        self._mlp.append(
          keras.layers.Dense(
            units,
            activation=self.activation,
            kernel_initializer=self._new_initializer(),
            name=f"feature_mlp_{i}",
          )
        )
      self._mlp.append(
        keras.layers.Dense(
          self.embedding_dim, kernel_initializer=self._new_initializer(), name="feature_projection"
        )
      )

  def _checked_bias_initializer(self, bias_initializer):
    """``bias_initializer`` as a Keras initializer (``None`` stays ``None``), refused where the
    layer has no bias row: with class features, or with ``embedding_dim < 2``."""
    if bias_initializer is None:
      return None
    if self.class_feature_dim is not None:
      raise ValueError(
        f"`bias_initializer` applies to the class table only, got "
        f"{bias_initializer!r} together with class features."
      )
    if self.embedding_dim < 2:
      raise ValueError(
        f"`bias_initializer` needs embedding_dim >= 2 (kernel rows plus the "
        f"bias), got embedding_dim={self.embedding_dim}."
      )
    return keras.initializers.get(bias_initializer)

  def _new_initializer(self):
    return fresh_initializer(self.embeddings_initializer)

  def _table_initializer(self):
    """The table's initializer: ``embeddings_initializer``, or ``Dense``-like with a bias column."""
    if self.bias_initializer is None:
      return self._new_initializer()
    kernel_initializer = self._new_initializer()
    bias_initializer = fresh_initializer(self.bias_initializer)

    def dense_like(shape, dtype=None, **kwargs):
      del kwargs  # e.g. partition information: the table is one variable
      num_classes, width = shape
      kernel = kernel_initializer((width - 1, num_classes), dtype=dtype)  # [d, C], as Dense's
      bias = bias_initializer((num_classes,), dtype=dtype)
      return ops.transpose(ops.concatenate([kernel, bias[None, :]], axis=0))

    return dense_like

  @property
  def uses_class_features(self):
    return self.class_feature_dim is not None

  def build(self, input_shape=None):
    if self.uses_class_features:
      values = self._feature_values
      initializer = keras.initializers.Constant(values) if values is not None else "zeros"
      self.class_features = self.add_weight(
        name="class_features",
        shape=(self.num_classes, self.class_feature_dim),
        initializer=initializer,
        trainable=self.train_class_features,
      )
      width = self.class_feature_dim
      for layer in self._mlp:
        layer.build((None, width))
        width = layer.units
    else:
      self.table = self.add_weight(
        name="table",
        shape=(self.num_classes, self.embedding_dim),
        initializer=self._table_initializer(),
        trainable=True,
      )
    super().build(input_shape)

  def all_embeddings(self):
    """The ``[num_classes, embedding_dim]`` matrix of every class embedding."""
    if not self.built:
      self.build(None)
    if not self.uses_class_features:
      return ops.convert_to_tensor(self.table)
    x = ops.convert_to_tensor(self.class_features)
    for layer in self._mlp:
      x = layer(x)
    return x

  def call(self, class_ids):
    class_ids = ops.convert_to_tensor(class_ids)
    dtype = ops.dtype(class_ids)
    if "int" not in dtype:
      raise TypeError(f"`class_ids` must be an integer tensor, got dtype {dtype}.")
    return ops.take(self.all_embeddings(), class_ids, axis=0)

  def compute_output_shape(self, input_shape):
    return (*input_shape, self.embedding_dim)

  def get_config(self):
    config = super().get_config()
    config.update(
      {
        "num_classes": self.num_classes,
        "embedding_dim": self.embedding_dim,
        "hidden_units": list(self.hidden_units),
        "activation": keras.activations.serialize(self.activation),
        "train_class_features": self.train_class_features,
        "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
        "class_feature_dim": self.class_feature_dim,
        "bias_initializer": (
          None
          if self.bias_initializer is None
          else keras.initializers.serialize(self.bias_initializer)
        ),
      }
    )
    return config


def fresh_initializer(initializer):
  """A new instance of a Keras ``initializer`` with the same configuration.

  One instance per weight: Keras warns when one unseeded initializer is reused. Layers keep the
  initializer object itself as an attribute and serialize it in ``get_config`` (the Keras
  convention); keeping its serialized dict instead lets Keras' saving code write into that tracked
  dict, which breaks SavedModel export on Python 3.13 (docs/stacks.md, "Python 3.13").
  """
  return keras.initializers.get(keras.initializers.serialize(initializer))


def check_units(name, units):
  """Returns ``units`` (an int or a sequence of ints) as a tuple of positive ints.

  Raises:
    ValueError: naming ``name``, if an entry is not a positive integer.

  Example:
    >>> check_units("hidden_units", 8), check_units("hidden_units", [4, 4])
    ((8,), (4, 4))
  """
  if isinstance(units, (int, np.integer)) and not isinstance(units, bool):
    units = (units,)
  try:
    units = tuple(units)
  except TypeError:
    raise ValueError(f"`{name}` must be a sequence of positive integers, got {units!r}.") from None
  for u in units:
    if isinstance(u, bool) or not isinstance(u, (int, np.integer)) or u < 1:
      raise ValueError(f"`{name}` must be a sequence of positive integers, got {units!r}.")
  return tuple(int(u) for u in units)
