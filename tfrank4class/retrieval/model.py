"""Embedding models for metric learning and retrieval: the cross-entropy recipe and pairwise /
RaMBO losses on one trunk.

    inputs -> encoder -> feature norm -> [Dense remap] -> [L2 normalisation] = embedding
    cross-entropy:    embedding -> Dropout -> Dense(num_classes, zero init) = logits
                      trained with label-smoothed softmax cross-entropy (eps = 0.1, target
                      1 - eps on the class and eps / (C - 1) on each other class)
    embedding losses: the loss sees the embedding itself (recall, triplet, contrastive)

The cross-entropy branch is the recipe of Boudiaf et al., "A unifying mutual information view of
metric learning: cross-entropy vs. pairwise losses" (ECCV 2020), as their released code
(``jeromerony/dml_cross_entropy``: ``models/base_model.py``, ``models/ingredient.py``,
``experiment.py``, ``README.md``) runs it: a feature normalisation without learned affine
parameters (``"batch"`` for Cars196 / SOP / In-Shop, none for CUB-200), a linear remapping to the
embedding size, dropout before a zero-initialised linear classifier over the training classes,
label smoothing 0.1 with their target (:class:`SmoothedCrossEntropy`'s default ``spread``). At
test time the classifier is dropped and retrieval uses cosine similarity between embeddings, so the
same
:func:`tfrank4class.retrieval.retrieval_recall_at_k` measures every loss.

:func:`build_retrieval_model` returns the model to ``fit`` and the ``embedding_model`` (sharing
its layers) to evaluate and export; :func:`tfrank4class.retrieval.export.export_embedding_model`
(TensorFlow only: a SavedModel) writes one whose ``serving_default`` signature returns
``{"embedding": [B, D]}``. This module builds Keras models only, so it runs on every backend.

The recipe composes an encoder, Keras layers and a loss, so it sits above the losses in the
package's one-way flow (data -> encoder -> head -> scores -> rank op -> loss / metrics); nothing
below imports it.
"""

import typing

from tfrank4class import checks
from tfrank4class.compat import keras
from tfrank4class.losses import registry
from tfrank4class.losses.metric_learning import SmoothedCrossEntropy

CROSS_ENTROPY = ("cross_entropy", "smoothed_cross_entropy")
EMBEDDING_LOSSES = ("recall_loss", "triplet_loss", "contrastive_loss")
FEATURE_NORMS = ("batch", "layer", "none")


class RetrievalModel(typing.NamedTuple):
  """What :func:`build_retrieval_model` returns.

  Attributes:
    model: the model to ``fit``: logits ``[B, num_classes]`` for cross-entropy, embeddings
      ``[B, D]`` for embedding losses. Compiled if an optimizer was given.
    embedding_model: ``inputs -> embeddings [B, D]``, sharing the weights of ``model``.
    loss: the loss ``model`` is (to be) compiled with.
  """

  model: keras.Model
  embedding_model: keras.Model
  loss: keras.losses.Loss


def _make_loss(loss, label_smoothing, loss_kwargs):
  kwargs = dict(loss_kwargs or {})
  if isinstance(loss, SmoothedCrossEntropy):
    return loss, True
  if isinstance(loss, keras.losses.Loss):
    return loss, False
  if not isinstance(loss, str):
    raise ValueError(
      f"`loss` must be one of {list(CROSS_ENTROPY + EMBEDDING_LOSSES)}, another registered loss "
      f"name that takes (class ids, embeddings), or a keras.losses.Loss; got {loss!r}."
    )
  if loss in CROSS_ENTROPY:
    return SmoothedCrossEntropy(label_smoothing=label_smoothing, **kwargs), True
  if loss == "recall_loss":
    kwargs.setdefault("from_embeddings", True)
    if not kwargs["from_embeddings"]:
      raise ValueError(
        "`loss_kwargs` must not set from_embeddings=False: the retrieval model "
        "trains the recall loss on in-batch similarities of embeddings."
      )
  if loss not in registry.names():
    raise ValueError(
      f"`loss` must be one of {list(CROSS_ENTROPY + EMBEDDING_LOSSES)} or a registered loss "
      f"name, got {loss!r}."
    )
  return registry.get(loss, **kwargs), False


def build_retrieval_model(
  encoder,
  loss="cross_entropy",
  num_classes=None,
  embedding_dim=None,
  feature_norm="batch",
  dropout=0.0,
  label_smoothing=0.1,
  l2_normalize=False,
  loss_kwargs=None,
  input_shape=None,
  optimizer=None,
  name="retrieval",
):
  """Builds an embedding model trained with cross-entropy (Boudiaf et al.) or an embedding loss.

  Args:
    encoder: any Keras model or layer mapping inputs to features ``[B, F]``, e.g.
      ``tfrank4class.encoders.get("small_cnn", ...)`` or ``get("resnet50", ...)``.
    loss: ``"cross_entropy"`` (the recipe: label-smoothed softmax cross-entropy over
      ``num_classes`` training classes), ``"recall_loss"`` (RaMBO, in-batch similarities;
      ``from_embeddings=True`` is set for you), ``"triplet_loss"``, ``"contrastive_loss"``, another
      registered loss name taking ``(class ids, embeddings)``, or a ``keras.losses.Loss``
      instance (a :class:`SmoothedCrossEntropy` instance selects the classifier branch).
    num_classes: number of training classes; required for cross-entropy.
    embedding_dim: size of the linear remapping (``None``: keep the encoder's features).
    feature_norm: ``"batch"`` (BatchNormalization without scale/offset), ``"layer"``
      (LayerNormalization without scale/offset) or ``"none"``, applied to the encoder features.
    dropout: dropout rate in ``[0, 1)`` before the classifier (cross-entropy only; their code
      uses 0.5 with ResNet-50).
    label_smoothing: ``eps`` of the cross-entropy (their code: 0.1). Other
      :class:`SmoothedCrossEntropy` arguments (``spread``) go in ``loss_kwargs``.
    l2_normalize: end the embedding with a unit-normalisation layer.
    loss_kwargs: keyword arguments for the loss, e.g. ``{"weighting": "loglog", "margin": 0.1,
      "memory": 2}`` for ``"recall_loss"``.
    input_shape: the input shape (without batch) if ``encoder`` is a layer without a defined input.
    optimizer: if given, ``model`` is compiled with it and the loss.
    name: model name prefix.

  Returns:
    A :class:`RetrievalModel` ``(model, embedding_model, loss)``.

  Example:
    >>> from tfrank4class import encoders
    >>> enc = encoders.get("small_cnn", input_shape=(16, 16, 3), filters=(4,), embedding_dim=8)
    >>> built = build_retrieval_model(enc, "cross_entropy", num_classes=5, embedding_dim=6)
    >>> built.model.output_shape, built.embedding_model.output_shape
    ((None, 5), (None, 6))
  """
  # Over 60 lines by its signature and docstring: one documented argument per option.
  checks.check_choice("feature_norm", feature_norm, FEATURE_NORMS)
  dropout = checks.check_float("dropout", dropout, minimum=0.0)
  if dropout >= 1.0:
    raise ValueError(f"`dropout` must be a finite number in [0, 1), got {dropout!r}.")
  checks.check_int("embedding_dim", embedding_dim, minimum=1, allow_none=True)
  if not callable(encoder):
    raise ValueError(f"`encoder` must be a Keras model or layer, got {encoder!r}.")
  loss_obj, classifier = _make_loss(loss, label_smoothing, loss_kwargs)
  if classifier or num_classes is not None:
    checks.check_int("num_classes", num_classes, minimum=2)
  inputs = keras.Input(shape=_input_shape(encoder, input_shape), name="inputs")
  embedding = _embedding(encoder(inputs), feature_norm, embedding_dim, l2_normalize)
  embedding_model = keras.Model(inputs, embedding, name=f"{name}_embedding")
  if classifier:
    model = keras.Model(
      inputs, _classifier(embedding, num_classes, dropout), name=f"{name}_classifier"
    )
  else:
    model = embedding_model
  if optimizer is not None:
    model.compile(optimizer=optimizer, loss=loss_obj)
  return RetrievalModel(model, embedding_model, loss_obj)


def _input_shape(encoder, input_shape):
  """``input_shape``, or the encoder's own input shape (without the batch axis)."""
  if input_shape is not None:
    return input_shape
  try:
    return tuple(encoder.input_shape[1:])
  except (AttributeError, ValueError, TypeError):
    raise ValueError(
      "`input_shape` is required when `encoder` is a layer without a defined input, got None."
    ) from None


def _embedding(features, feature_norm, embedding_dim, l2_normalize):
  """features -> [feature norm] -> [Dense remap] -> [unit normalisation] = the embedding."""
  x = features
  if len(x.shape) != 2:
    raise ValueError(f"`encoder` must output features [B, F], got shape {x.shape}.")
  if feature_norm == "batch":
    x = keras.layers.BatchNormalization(center=False, scale=False, name="feature_norm")(x)
  elif feature_norm == "layer":
    x = keras.layers.LayerNormalization(center=False, scale=False, name="feature_norm")(x)
  if embedding_dim is not None:
    x = keras.layers.Dense(embedding_dim, bias_initializer="zeros", name="remap")(x)
  if l2_normalize:
    x = keras.layers.UnitNormalization(name="l2_normalize")(x)
  return keras.layers.Activation("linear", name="embedding")(x)


def _classifier(embedding, num_classes, dropout):
  """embedding -> [Dropout] -> zero-initialised Dense(num_classes) = the logits of the recipe."""
  h = keras.layers.Dropout(dropout, name="dropout")(embedding) if dropout else embedding
  return keras.layers.Dense(
    num_classes, kernel_initializer="zeros", bias_initializer="zeros", name="classifier"
  )(h)
