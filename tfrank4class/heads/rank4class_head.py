"""The Rank4Class head: a class encoder and an interaction in place of the final Dense layer.

    s_{b,i} = f(h_b, c_i),   c_i = ClassEncoder(i),   i = 0..C-1,

with ``f`` the dot product ``[h, 1] . c_i`` (Rank4Class, ICLR 2022 submission, Sec. 3.2: this is a
``Dense(C)`` layer), the latent cross ``MLP((1 + c_i) * h)`` or the concatenation ``MLP([h, c_i])``
(Sec. 4.2, Tables 5-6).
"""

import numpy as np

from tfrank4class import checks
from tfrank4class.compat import keras, ops
from tfrank4class.heads import interactions as interactions_lib
from tfrank4class.heads.class_encoder import ClassEncoder, check_class_features, check_units
from tfrank4class.registry import export


@export()
class Rank4ClassHead(keras.layers.Layer):
  """Scores every class for every instance: ``[B, d]`` instance embeddings to ``[B, C]`` scores.

  ``s_{b,i} = f(h_b, c_i)`` with ``c_i`` from a :class:`ClassEncoder` and ``f`` the interaction
  (Rank4Class, Sec. 3.2 and 4.2). The class embedding size is ``d + 1`` for ``"dot"`` with
  ``use_bias`` (``h' = [h, 1]``), ``d`` for ``"dot"`` without bias and for ``"latent_cross"``, and
  ``class_embedding_dim`` (default ``d``) for ``"concat"``.

  Memory: ``"dot"`` costs what ``Dense(C)`` costs. The MLP interactions evaluate the MLP on all
  ``B x C`` pairs: a training step holds about ``4 B C (d + sum(hidden_units))`` bytes of
  activations for ``"latent_cross"`` and ``4 B C sum(hidden_units)`` for ``"concat"``;
  ``class_chunk_size=k`` bounds that to ``k`` classes at a time for some extra step time
  (``benchmarks/heads.py`` measures both; figures in docs/heads-and-encoders.md,
  "Benchmark").

  Args:
    num_classes: number of classes ``C >= 2``.
    interaction: ``"dot"``, ``"latent_cross"`` or ``"concat"``.
    hidden_units: MLP hidden widths of the ``"latent_cross"`` / ``"concat"`` interactions (the
      paper, Sec. 5.3 and Appendix B: two equal layers tuned in {64, 128, 256, 512}); unused by
      ``"dot"``.
    class_features: optional ``[C, p]`` per-class features (e.g. class-name embeddings); the
      class encoder becomes ``MLP(f_i)`` instead of a lookup table.
    class_feature_units: hidden widths of that feature MLP.
    class_embedding_dim: class embedding size; only free for ``"concat"`` (must match otherwise).
    activation: hidden activation of both MLPs.
    use_bias: for ``"dot"``: whether ``h' = [h, 1]`` (a Dense layer's bias).
    class_chunk_size: compute the MLP interactions ``k`` classes at a time (memory, see
      :mod:`tfrank4class.heads.interactions`).
    train_class_features: whether the class feature matrix is trainable.
    embeddings_initializer: initializer of the class table / feature MLP. For ``"dot"`` with
      ``use_bias`` and a table, the kernel part ``[d, C]`` is drawn as ``Dense(C)`` draws its
      kernel (same shape, so the same values for a seeded initializer).
    bias_initializer: for ``"dot"`` with ``use_bias`` and a table: initializer of the bias column
      (``"zeros"``, as ``Dense``), so that the head equals ``Dense(C)`` from initialisation on,
      not only after :meth:`set_dense_weights`. Unused otherwise. Configs saved before this
      argument existed load with the default (their weights are restored from the file).
    class_feature_dim: set by ``get_config`` (features are restored from the saved weights).

  Example:
    >>> head = Rank4ClassHead(num_classes=4, interaction="latent_cross", hidden_units=(8, 8))
    >>> tuple(head(np.ones((2, 3), np.float32)).shape)
    (2, 4)
  """

  def __init__(
    self,
    num_classes,
    interaction="dot",
    hidden_units=(256, 256),
    class_features=None,
    class_feature_units=(),
    class_embedding_dim=None,
    activation="relu",
    use_bias=True,
    class_chunk_size=None,
    train_class_features=False,
    embeddings_initializer="glorot_uniform",
    class_feature_dim=None,
    bias_initializer="zeros",
    **kwargs,
  ):
    super().__init__(**kwargs)
    self.num_classes = checks.check_int("num_classes", num_classes, minimum=2)
    self.interaction_name = interactions_lib.INTERACTIONS.resolve(interaction).name
    self.hidden_units = check_units("hidden_units", hidden_units)
    self.class_feature_units = check_units("class_feature_units", class_feature_units)
    self.class_embedding_dim = checks.check_int(
      "class_embedding_dim", class_embedding_dim, minimum=1, allow_none=True
    )
    self.activation = keras.activations.serialize(keras.activations.get(activation))
    if not isinstance(use_bias, bool):
      raise ValueError(f"`use_bias` must be True or False, got {use_bias!r}.")
    self.use_bias = use_bias
    self.class_chunk_size = checks.check_int(
      "class_chunk_size", class_chunk_size, minimum=1, allow_none=True
    )
    self.train_class_features = bool(train_class_features)
    self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
    self.bias_initializer = keras.initializers.get(bias_initializer)
    self._class_features = None
    if class_features is not None:
      self._class_features = check_class_features(class_features, self.num_classes)
      class_feature_dim = self._class_features.shape[1]
    self.class_feature_dim = checks.check_int(
      "class_feature_dim", class_feature_dim, minimum=1, allow_none=True
    )
    self.interaction = interactions_lib.get(
      self.interaction_name,
      hidden_units=self.hidden_units,
      activation=self.activation,
      use_bias=self.use_bias,
      class_chunk_size=self.class_chunk_size,
      name="interaction",
    )
    self.class_encoder = None

  def _embedding_dim(self, d):
    if self.interaction_name == "concat":
      return self.class_embedding_dim or d
    want = d + 1 if (self.interaction_name == "dot" and self.use_bias) else d
    if self.class_embedding_dim is not None and self.class_embedding_dim != want:
      raise ValueError(
        f"Mismatched embedding sizes: interaction {self.interaction_name!r}"
        f"{' with use_bias=True' if self.interaction_name == 'dot' and self.use_bias else ''} "
        f"needs class_embedding_dim = {want} for instance embeddings of size d = {d}, got "
        f"class_embedding_dim={self.class_embedding_dim}."
      )
    return want

  def build(self, input_shape):
    input_shape = tuple(None if d is None else int(d) for d in input_shape)
    if len(input_shape) != 2 or input_shape[-1] is None:
      raise ValueError(
        f"Rank4ClassHead expects instance embeddings of shape [B, d] with a known "
        f"d, got shape {input_shape}."
      )
    d = input_shape[-1]
    e = self._embedding_dim(d)
    self._input_dim = d
    dense_like = self.interaction_name == "dot" and self.use_bias and self.class_feature_dim is None
    self.class_encoder = ClassEncoder(
      self.num_classes,
      e,
      class_features=self._class_features,
      hidden_units=self.class_feature_units,
      activation=self.activation,
      train_class_features=self.train_class_features,
      embeddings_initializer=self.embeddings_initializer,
      class_feature_dim=self.class_feature_dim,
      bias_initializer=self.bias_initializer if dense_like else None,
      name="class_encoder",
    )
    self.class_encoder.build(None)
    self.interaction.build([(None, d), (self.num_classes, e)])
    super().build(input_shape)

  def call(self, inputs):
    h = ops.convert_to_tensor(inputs)
    if len(h.shape) != 2:
      raise ValueError(
        f"Rank4ClassHead expects instance embeddings of shape [B, d], got shape {h.shape}."
      )
    c = self.class_encoder.all_embeddings()
    return self.interaction([h, ops.cast(c, ops.dtype(h))])

  def compute_output_shape(self, input_shape):
    return (input_shape[0], self.num_classes)

  def set_dense_weights(self, kernel, bias=None):
    """Makes a ``"dot"`` head compute ``h @ kernel + bias``, the scores of ``Dense(C)``.

    Sets the class table to ``c_i = [kernel[:, i]; bias[i]]`` (Rank4Class, Sec. 3.2). Needs a
    built head with a lookup table (no class features).

    Args:
      kernel: ``[d, C]`` array.
      bias: ``[C]`` array (required when ``use_bias``, refused otherwise).
    """
    if self.interaction_name != "dot":
      raise ValueError(f"set_dense_weights needs interaction='dot', got {self.interaction_name!r}.")
    if not self.built or self.class_encoder.uses_class_features:
      raise ValueError(
        "set_dense_weights needs a built head whose class encoder is a table "
        "(call the head once and pass no class_features)."
      )
    kernel = np.asarray(kernel, np.float32)
    d = self.interaction_input_dim
    if kernel.shape != (d, self.num_classes):
      raise ValueError(
        f"`kernel` must have shape [d, num_classes] = {(d, self.num_classes)}, got {kernel.shape}."
      )
    if self.use_bias:
      if bias is None:
        raise ValueError("`bias` is required when use_bias=True.")
      bias = np.asarray(bias, np.float32)
      if bias.shape != (self.num_classes,):
        raise ValueError(
          f"`bias` must have shape [num_classes] = ({self.num_classes},), got {bias.shape}."
        )
      table = np.concatenate([kernel, bias[np.newaxis, :]], axis=0).T
    else:
      if bias is not None:
        raise ValueError("`bias` must be None when use_bias=False.")
      table = kernel.T
    self.class_encoder.table.assign(table)

  @property
  def interaction_input_dim(self):
    """The instance embedding size ``d`` the head was built for."""
    if not self.built:
      raise ValueError("The head is not built yet; call it on a [B, d] tensor first.")
    return self._input_dim

  def get_config(self):
    config = super().get_config()
    config.update(
      {
        "num_classes": self.num_classes,
        "interaction": self.interaction_name,
        "hidden_units": list(self.hidden_units),
        "class_feature_units": list(self.class_feature_units),
        "class_embedding_dim": self.class_embedding_dim,
        "activation": self.activation,
        "use_bias": self.use_bias,
        "class_chunk_size": self.class_chunk_size,
        "train_class_features": self.train_class_features,
        "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
        "class_feature_dim": self.class_feature_dim,
        "bias_initializer": keras.initializers.serialize(self.bias_initializer),
      }
    )
    return config
