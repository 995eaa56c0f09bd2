"""Instance-class interactions: score every class for every instance at once.

An interaction takes instance embeddings ``h`` of shape ``[B, d]`` and class embeddings ``c`` of
shape ``[C, e]`` and returns scores ``s`` of shape ``[B, C]``, ``s_{b,i} = f(h_b, c_i)``
(Rank4Class, ICLR 2022 submission, Sec. 3.2 and Sec. 4.2):

* :class:`DotProductInteraction`: ``s = [h, 1] . c_i`` (the final Dense layer of a classifier).
* :class:`LatentCrossInteraction`: ``s = MLP((1 + c_i) * h)``, the latent cross of Beutel et al.
  (WSDM 2018).
* :class:`ConcatInteraction`: ``s = MLP([h, c_i])``.

Memory. The dot product needs only the ``[B, C]`` scores. The MLP interactions evaluate the MLP on
all ``B x C`` pairs, so each hidden layer of width ``w`` holds a ``[B, C, w]`` float tensor, and
training keeps these activations for the backward pass: about ``4 * B * C * (sum of widths)``
bytes (plus ``4 * B * C * d`` for the latent cross, whose crossed input ``(1 + c_i) * h`` is
``[B, C, d]``). At ``B = 64, C = 1000, w = 512`` one layer is 131 MB. The concat interaction never
builds the ``[B, C, d + e]`` concatenation: its first layer is ``W [h, c_i] + b =
W_h h + W_c c_i + b``, computed as a ``[B, w]`` and a ``[C, w]`` product broadcast-added.
``class_chunk_size=k`` evaluates the interaction on ``ceil(C / k)`` chunks of ``k`` classes, each
under a recompute-in-backward custom gradient (like ``tf.recompute_grad``;
:func:`tfrank4class.backend.custom_gradient`) inside a sequential loop
(:func:`tfrank4class.backend.sequential_map`: ``tf.map_fn(parallel_iterations=1)``,
``jax.lax.map``, a Python loop on PyTorch), so that forward and backward peak memory scale with
``B x k x w`` instead of ``B x C x w``, at the cost of recomputing the MLP forward pass once in the
backward pass. ``benchmarks/heads.py`` measures both (on TensorFlow; the other backends' memory
is not measured). The recomputation in the backward pass uses the backend's own autodiff
(:func:`tfrank4class.backend.vector_jacobian`).
"""

import math

from tfrank4class import backend, checks, compat
from tfrank4class.compat import keras, ops
from tfrank4class.heads.class_encoder import check_units, fresh_initializer
from tfrank4class.registry import Registry, export

#: The interactions by name (``INTERACTIONS["dot"]`` is the class; :func:`get` builds one).
INTERACTIONS = Registry("interaction", argument="interaction")


class Interaction(keras.layers.Layer):
  """Base class: ``call([h, c])`` with ``h: [B, d]``, ``c: [C, e]`` returns scores ``[B, C]``.

  Subclasses implement :meth:`score_with` on (a chunk of) the classes, list its variables in
  :meth:`chunk_weights` and may override :meth:`check_dims`. The base class validates shapes
  and handles ``class_chunk_size``.

  Args:
    class_chunk_size: ``None`` (all classes at once) or a positive int ``k``: compute the scores
      ``k`` classes at a time, recomputing each chunk in the backward pass, to bound memory (see
      the module doc).

  Example (a variable-free interaction, ``s_{b,i} = -|h_b - c_i|``):
    >>> class NegativeDistance(Interaction):
    ...   def score_with(self, h, c, weights):
    ...     return -ops.norm(h[:, None, :] - c[None, :, :], axis=-1)
    >>> h = ops.convert_to_tensor([[0.0, 0.0]])
    >>> c = ops.convert_to_tensor([[3.0, 4.0], [0.0, 1.0], [1.0, 0.0]])
    >>> ops.convert_to_numpy(NegativeDistance(class_chunk_size=2)([h, c]))  # chunks: 2 + 1
    array([[-5., -1., -1.]], dtype=float32)
  """

  def __init__(self, class_chunk_size=None, **kwargs):
    super().__init__(**kwargs)
    self.class_chunk_size = checks.check_int(
      "class_chunk_size", class_chunk_size, minimum=1, allow_none=True
    )

  def check_dims(self, d, e):
    """Raises ``ValueError`` if instance size ``d`` and class size ``e`` do not fit."""
    del d, e  # any sizes fit by default

  def chunk_weights(self):
    """The variables :meth:`score_with` takes, in order (none by default)."""
    return []

  def score_with(self, h, c, weights):
    """Scores ``[B, k]`` of ``h: [B, d]`` against ``c: [k, e]`` (classes shared by the batch) or
    ``c: [B, k, e]`` (each example's own candidates, as sampled training scores them), given the
    values of :meth:`chunk_weights` as tensors (no variable is read inside)."""
    raise NotImplementedError

  def score(self, h, c):
    """Scores ``[B, k]`` of instances ``h: [B, d]`` against classes ``c: [k, e]`` or each
    example's own ``c: [B, k, e]``."""
    return self.score_with(h, c, self._weight_values(h.dtype))

  def _weight_values(self, dtype):
    return [ops.cast(w, dtype) for w in self.chunk_weights()]

  def _recomputed_score(self, h, c, weights):
    """:meth:`score_with` that keeps only its inputs for the backward pass and recomputes the
    rest there: what ``tf.recompute_grad`` does, written out with the weight values as explicit
    inputs, so no variable is read inside the custom gradient and the weight gradients flow back
    through the ordinary variable reads (tested against finite differences on every backend;
    on TensorFlow also under ``tf.function``, XLA and MirroredStrategy)."""

    def chunk(h, c, *weights):
      def grad(upstream):
        return backend.vector_jacobian(
          lambda *args: self.score_with(args[0], args[1], list(args[2:])),
          [h, c, *weights],
          upstream,
        )

      return self.score_with(h, c, list(weights)), grad

    return backend.custom_gradient(chunk)(h, c, *weights)

  def _dims(self, input_shape):
    # Keras 3 gives a single tensor's shape as a tuple of ints: not a pair of shapes.
    if (
      not isinstance(input_shape, (list, tuple))
      or len(input_shape) != 2
      or any(s is None or isinstance(s, int) for s in input_shape)
    ):
      raise ValueError(
        f"{type(self).__name__} expects inputs [instance_embeddings [B, d], "
        f"class_embeddings [C, e]], got input shapes {input_shape!r}."
      )
    h_shape, c_shape = (_shape_tuple(s) for s in input_shape)
    if len(h_shape) != 2:
      raise ValueError(f"instance embeddings must have shape [B, d], got shape {h_shape}.")
    if len(c_shape) != 2:
      raise ValueError(f"class embeddings must have shape [C, e], got shape {c_shape}.")
    d, e = h_shape[-1], c_shape[-1]
    if d is None or e is None:
      raise ValueError(
        f"the embedding sizes must be known, got instance shape {h_shape} and "
        f"class shape {c_shape}."
      )
    self.check_dims(d, e)
    return d, e

  def build(self, input_shape):
    self._dims(input_shape)
    super().build(input_shape)

  def call(self, inputs):
    h, c = _cast_pair(inputs)
    self._dims([h.shape, c.shape])
    num_classes = c.shape[0]
    k = self.class_chunk_size
    if k is None or (num_classes is not None and k >= num_classes):
      return self.score(h, c)
    if num_classes is None:
      raise ValueError("class_chunk_size needs a statically known number of classes.")
    weights = self._weight_values(ops.dtype(h))
    num_chunks = self.num_chunks(num_classes)
    # Pad the classes to whole chunks; the padded scores are sliced off (zero gradient).
    padded = ops.pad(c, [[0, num_chunks * k - num_classes], [0, 0]])
    chunks = ops.reshape(padded, (num_chunks, k, c.shape[-1]))
    # A sequential loop: one chunk's [B, k, w] activations are alive at a time, forward and
    # backward; a Python loop would let TensorFlow's executor run all chunks at once.
    scores = backend.sequential_map(
      lambda c_k: self._recomputed_score(h, c_k, weights), chunks
    )  # [num_chunks, B, k]
    scores = ops.reshape(ops.transpose(scores, (1, 0, 2)), (-1, num_chunks * k))
    return scores[:, :num_classes]

  def compute_output_shape(self, input_shape):
    return (input_shape[0][0], input_shape[1][0])

  def num_chunks(self, num_classes):
    """How many class chunks a call over ``num_classes`` classes uses."""
    if self.class_chunk_size is None:
      return 1
    return math.ceil(num_classes / self.class_chunk_size)

  def get_config(self):
    config = super().get_config()
    config["class_chunk_size"] = self.class_chunk_size
    return config


@export(INTERACTIONS, "dot")
class DotProductInteraction(Interaction):
  """Dot product with a bias term: ``s_{b,i} = [h_b, 1] . c_i`` (Rank4Class, Sec. 3.2).

  With ``use_bias=True`` (the default) the class embedding has size ``d + 1`` and its last entry
  is the class bias, so that ``s = h W + b`` for ``c_i = [W_{:, i}; b_i]`` -- exactly a
  ``Dense(C)`` layer. With ``use_bias=False``, ``e = d`` and ``s_{b,i} = h_b . c_i``.

  Args:
    use_bias: whether ``h`` is extended to ``h' = [h, 1]``.
    class_chunk_size: accepted for a uniform interface; the dot product never needs chunking
      (it only forms the ``[B, C]`` output).

  Example:
    >>> dot = DotProductInteraction()
    >>> h = ops.convert_to_tensor([[1.0, 2.0]])
    >>> c = ops.convert_to_tensor([[1.0, 0.0, 0.5], [0.0, 1.0, -1.0]])
    >>> ops.convert_to_numpy(dot([h, c]))
    array([[1.5, 1. ]], dtype=float32)
  """

  def __init__(self, use_bias=True, class_chunk_size=None, **kwargs):
    super().__init__(class_chunk_size=class_chunk_size, **kwargs)
    if not isinstance(use_bias, bool):
      raise ValueError(f"`use_bias` must be True or False, got {use_bias!r}.")
    self.use_bias = use_bias

  def check_dims(self, d, e):
    want = d + 1 if self.use_bias else d
    if e != want:
      raise ValueError(
        f"Mismatched embedding sizes: DotProductInteraction(use_bias={self.use_bias}) needs "
        f"class embeddings of size {'d + 1' if self.use_bias else 'd'} = {want} for instance "
        f"embeddings of size d = {d}, got class embedding size {e}."
      )

  def call(self, inputs):
    # The dot product only forms the [B, C] output: chunking would not save anything.
    h, c = _cast_pair(inputs)
    self._dims([h.shape, c.shape])
    return self.score(h, c)

  def score_with(self, h, c, weights):
    del weights  # no variables
    if self.use_bias:
      # h' = [h, 1] (one matmul; slicing c into kernel and bias instead made a training step at
      # C = 1000 about 1.8x slower on TensorFlow, from the gradient of the slices).
      h = ops.concatenate([h, ops.ones_like(h[:, :1])], axis=1)
    if len(c.shape) == 3:
      return ops.einsum("bd,bkd->bk", h, c)
    return ops.matmul(h, ops.transpose(c))

  def get_config(self):
    config = super().get_config()
    config["use_bias"] = self.use_bias
    return config


class _MLPInteraction(Interaction):
  """Shared arguments of the MLP interactions; a subclass makes its layers in ``_make_layers``."""

  def __init__(
    self,
    hidden_units=(256, 256),
    activation="relu",
    class_chunk_size=None,
    kernel_initializer="glorot_uniform",
    **kwargs,
  ):
    super().__init__(class_chunk_size=class_chunk_size, **kwargs)
    self.hidden_units = check_units("hidden_units", hidden_units)
    self.activation = keras.activations.get(activation)
    self.kernel_initializer = keras.initializers.get(kernel_initializer)
    self._make_layers()

  if not compat.KERAS_3:
    # Keras 2 ``.keras`` files store sublayer weights under the attribute path: the MLP layers
    # were written as ``interaction/_layers/<name>``. Keras 3 keeps ``_layers`` for its own
    # tracking (and skips it when saving), so the list lives in ``_dense_layers``; under Keras 2
    # this alias is walked first (Keras 2 walks attributes in reverse order), so old and new
    # Keras 2 files share the old path.
    _layers = property(lambda self: self._dense_layers)

  def _new_initializer(self):
    return fresh_initializer(self.kernel_initializer)

  def _dense(self, units, activation, name):
    return keras.layers.Dense(
      units, activation=activation, name=name, kernel_initializer=self._new_initializer()
    )

  def _apply_layers(self, x, weights):
    """Applies ``self._dense_layers`` to ``x [B, k, w]`` with weights ``[W_1, b_1, W_2, ...]``."""
    for layer, kernel, bias in zip(self._dense_layers, weights[0::2], weights[1::2]):
      x = ops.einsum("bkw,wu->bku", x, kernel) + bias
      if layer.activation is not None:
        x = layer.activation(x)
    return x

  def get_config(self):
    config = super().get_config()
    config.update(
      {
        "hidden_units": list(self.hidden_units),
        "activation": keras.activations.serialize(self.activation),
        "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
      }
    )
    return config


@export(INTERACTIONS, "latent_cross")
class LatentCrossInteraction(_MLPInteraction):
  """Latent cross then an MLP: ``s_{b,i} = MLP((1 + c_i) * h_b)`` (Rank4Class, Sec. 4.2).

  Rank4Class (Sec. 4.2) names the latent cross of Beutel et al. (Latent Cross: Making Use of
  Context in Recurrent Recommender Systems, WSDM 2018) without writing it out; we use Beutel et
  al.'s form, which gates the instance embedding elementwise by ``1 + c_i``. The MLP has
  ``len(hidden_units)`` hidden layers with ``activation`` and a linear output of width 1. Class
  and instance embeddings must have the same size ``d``. Memory: ``[B, C, d]`` for the cross
  plus ``[B, C, w]`` per hidden layer (see the module doc and ``class_chunk_size``).

  Args:
    hidden_units: hidden layer widths (the paper, Sec. 5.3 and Appendix B: 2 equal layers
      tuned in {64, 128, 256, 512}; our default 256 is one point of that grid).
    activation: hidden activation.
    class_chunk_size: classes per chunk, or ``None``.
    kernel_initializer: initializer of the MLP kernels.

  Example:
    >>> lc = LatentCrossInteraction(hidden_units=(8,))
    >>> tuple(lc([ops.ones((4, 3)), ops.zeros((5, 3))]).shape)
    (4, 5)
  """

  def _make_layers(self):
    self._dense_layers = [
      self._dense(u, self.activation, f"hidden_{i}") for i, u in enumerate(self.hidden_units)
    ]
    self._dense_layers.append(self._dense(1, None, "output"))

  def check_dims(self, d, e):
    if e != d:
      raise ValueError(
        f"Mismatched embedding sizes: LatentCrossInteraction needs class embeddings of the "
        f"instance size d = {d}, got class embedding size {e}."
      )

  def build(self, input_shape):
    d, _ = self._dims(input_shape)
    width = d
    for layer in self._dense_layers:
      layer.build((None, None, width))
      width = layer.units
    super().build(input_shape)

  def chunk_weights(self):
    return [w for layer in self._dense_layers for w in (layer.kernel, layer.bias)]

  def score_with(self, h, c, weights):
    x = h[:, None, :] * (1.0 + per_example(c))  # [B, k, d]
    return ops.squeeze(self._apply_layers(x, weights), axis=-1)


@export(INTERACTIONS, "concat")
class ConcatInteraction(_MLPInteraction):
  """Concatenation then an MLP: ``s_{b,i} = MLP([h_b, c_i])`` (Rank4Class, Sec. 4.2).

  The first layer ``W [h, c_i] + b`` is computed as ``h W_h + c_i W_c + b`` (``W = [W_h; W_c]``),
  which is the same number but never forms the ``[B, C, d + e]`` concatenation; the rest is an MLP
  of ``hidden_units`` with ``activation`` and a linear output of width 1. ``d`` and ``e`` may
  differ. Memory: ``[B, C, w]`` per hidden layer (see the module doc and ``class_chunk_size``).

  Args:
    hidden_units: hidden layer widths (the paper, Sec. 5.3 and Appendix B: 2 equal layers
      tuned in {64, 128, 256, 512}; our default 256 is one point of that grid); ``()`` gives the
      linear model ``w . [h, c_i] + b``.
    activation: hidden activation.
    class_chunk_size: classes per chunk, or ``None``.
    kernel_initializer: initializer of the MLP kernels.

  Example:
    >>> cat = ConcatInteraction(hidden_units=(8, 8))
    >>> tuple(cat([ops.ones((4, 3)), ops.zeros((5, 2))]).shape)
    (4, 5)
  """

  def _make_layers(self):
    units = self.hidden_units + (1,)
    self._first_units = units[0]
    self._first_activation = self.activation if self.hidden_units else None
    self._dense_layers = [
      self._dense(u, self.activation, f"hidden_{i + 1}") for i, u in enumerate(units[1:-1])
    ]
    if len(units) > 1:
      self._dense_layers.append(self._dense(1, None, "output"))

  def build(self, input_shape):
    d, e = self._dims(input_shape)
    self._d = d
    # One kernel over [h, c_i], exactly as a Dense layer on the concatenation would hold it.
    self.first_kernel = self.add_weight(
      name="first_kernel",
      shape=(d + e, self._first_units),
      initializer=self._new_initializer(),
      trainable=True,
    )
    self.first_bias = self.add_weight(
      name="first_bias", shape=(self._first_units,), initializer="zeros", trainable=True
    )
    width = self._first_units
    for layer in self._dense_layers:
      layer.build((None, None, width))
      width = layer.units
    super().build(input_shape)

  def chunk_weights(self):
    return [self.first_kernel, self.first_bias] + [
      w for layer in self._dense_layers for w in (layer.kernel, layer.bias)
    ]

  def score_with(self, h, c, weights):
    kernel, bias = weights[0], weights[1]
    from_h = ops.matmul(h, kernel[: self._d])  # [B, u]
    from_c = ops.matmul(c, kernel[self._d :])  # [k, u] or [B, k, u]
    x = from_h[:, None, :] + per_example(from_c) + bias
    if self._first_activation is not None:
      x = self._first_activation(x)
    return ops.squeeze(self._apply_layers(x, weights[2:]), axis=-1)


def per_example(c):
  """Class embeddings ``c`` ``[k, e]`` (shared by the batch) as ``[1, k, e]``; ``[B, k, e]`` as
  they are: what broadcasts against ``h[:, None, :]``."""
  return c if len(c.shape) == 3 else c[None, :, :]


def _shape_tuple(shape):
  """A static shape (a tuple, list or ``tf.TensorShape``) as a tuple of ints and ``None``."""
  return tuple(None if d is None else int(d) for d in shape)


def _cast_pair(inputs):
  """``[h, c]`` as tensors, ``c`` in the dtype of ``h``."""
  h, c = inputs
  h = ops.convert_to_tensor(h)
  return h, ops.cast(c, ops.dtype(h))


def get(interaction, **kwargs):
  """Returns the interaction ``interaction`` (``"dot"``, ``"latent_cross"`` or ``"concat"``).

  ``hidden_units``/``activation``/``kernel_initializer`` are dropped for ``"dot"``; ``use_bias``
  is dropped for the MLP interactions.

  Example:
    >>> type(get("concat", hidden_units=(16,))).__name__
    'ConcatInteraction'
  """
  name, cls, _ = INTERACTIONS.resolve(interaction)
  if name == "dot":
    for key in ("hidden_units", "activation", "kernel_initializer"):
      kwargs.pop(key, None)
  else:
    kwargs.pop("use_bias", None)
  return cls(**kwargs)
