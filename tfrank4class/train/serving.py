"""SavedModel export for serving.

The export holds two signatures:

``serving_default``
    raw inputs -> predictions. Input ``image_bytes`` (encoded JPEG/PNG, ``tf.string [B]``) for
    image datasets or ``text`` (``tf.string [B]``) for text datasets; the dataset's evaluation
    preprocessing runs inside the graph. Outputs ``top_k_ids`` (int32 ``[B, k]``),
    ``top_k_classes`` (string ``[B, k]``), ``top_k_scores`` (``[B, k]``) and ``scores``
    (``[B, C]``), best first.
``scores``
    preprocessed features (what ``tfrank4class.data.load`` yields) -> ``scores`` ``[B, C]``; used
    by ``tfrank4class-evaluate`` to score a split exactly as in training.

The SavedModel needs TensorFlow only: a process that never imports ``tfrank4class`` loads and
serves it with ``tf.saved_model.load`` or ``saved_model_cli run``.

An existing ``export_dir`` is replaced only when it holds an export (``saved_model.pb``) or
nothing; the binaries replace one only when asked (``check_export_dir``).
"""

import os

import tensorflow as tf

from tfrank4class import atomic, checks, errors
from tfrank4class import data as data_lib
from tfrank4class import heads as heads_lib
from tfrank4class.compat import keras
from tfrank4class.train import flavour

INPUT_KEYS = {"image": "image_bytes", "text": "text"}


class ExportDirError(errors.UserError, FileExistsError):
  """``export_dir`` exists: an export not to be replaced unasked, or not an export at all."""


def check_export_dir(export_dir, overwrite=False, flag="--overwrite"):
  """Returns ``export_dir`` if an export may be written there: it does not exist, is an empty
  directory, or holds an export (``saved_model.pb``) and ``overwrite`` is set.

  Raises:
    ExportDirError: naming ``export_dir`` and ``flag`` (the option that sets ``overwrite``)
      when it holds an export and ``overwrite`` is not set, or naming what it is otherwise.
  """
  if not os.path.lexists(export_dir):
    return export_dir
  if os.path.isdir(export_dir) and not os.listdir(export_dir):
    return export_dir
  if not os.path.isfile(os.path.join(export_dir, "saved_model.pb")):
    raise ExportDirError(
      f"`export_dir` {export_dir!r} exists and is not an export (no saved_model.pb); pick "
      "another `export_dir`."
    )
  if not overwrite:
    raise ExportDirError(
      f"`export_dir` {export_dir!r} already holds an export; pass {flag} to replace it."
    )
  return export_dir


def export_saved_model(model, dataset, class_names, export_dir, top_k=5):
  """Writes ``model`` (inputs -> scores) as a serving SavedModel to ``export_dir``.

  Args:
    model: a Keras model from preprocessed features to scores ``[B, C]``; a
      :class:`~tfrank4class.heads.SampledClassifier` is exported as its encoder then every class's
      score (what it returns outside training).
    dataset: the dataset name, which fixes the raw input and its preprocessing.
    class_names: the ``C`` class names, in class-id order.
    export_dir: the directory to write; an export already there is replaced whole once the new
      one is written (no file of it stays), anything else there is refused (``ExportDirError``).
    top_k: how many classes ``serving_default`` returns (capped at ``C``).

  Returns:
    ``export_dir``.
  """
  check_export_dir(export_dir, overwrite=True)
  top_k = checks.check_int("top_k", top_k, minimum=1)
  if isinstance(model, heads_lib.SampledClassifier):  # subclassed: its every-class scoring
    model = keras.Model(model.encoder.inputs, model.head(model.encoder.outputs[0]))
  class_names = [str(c) for c in class_names]
  num_classes = int(model.output_shape[-1])
  if len(class_names) != num_classes:
    raise ValueError(
      f"`class_names` has {len(class_names)} names for a model with {num_classes} scores."
    )
  input_dtype = tf.as_dtype(model.inputs[0].dtype)  # Keras 3 names it by a string
  input_shape = tuple(model.inputs[0].shape)  # Keras 3: a tuple; Keras 2: a TensorShape
  modality = "text" if input_dtype == tf.string else "image"
  key = INPUT_KEYS[modality]
  preprocess = data_lib.serving_preprocess(dataset)
  names = tf.constant(class_names)
  k = min(top_k, num_classes)
  feature_spec = tf.TensorSpec(input_shape, input_dtype, name="features")

  raw_spec = tf.TensorSpec([None], tf.string, name=key)

  def serve(raw):
    features = preprocess(raw)
    if modality == "text" and len(input_shape) == 2:
      features = features[:, None]
    scores = model(features, training=False)
    top = tf.math.top_k(scores, k=k)
    return {
      "top_k_ids": top.indices,
      "top_k_classes": tf.gather(names, top.indices),
      "top_k_scores": top.values,
      "scores": scores,
    }

  def scores_of(features):
    return {"scores": model(features, training=False)}

  with atomic.writing(export_dir) as partial:  # an earlier export stays whole until this one is
    flavour.TRAINING.write_saved_model(
      model,
      partial,
      {"serving_default": (serve, raw_spec), "scores": (scores_of, feature_spec)},
    )
  return export_dir


def check_saved_model(export_dir):
  """Raises ``NotFoundError`` unless ``export_dir`` is a folder holding a ``saved_model.pb``
  (a cheap check before any data is read; ``saved_model_scorer`` loads it)."""
  if not os.path.isfile(os.path.join(export_dir, "saved_model.pb")):
    raise errors.NotFoundError(
      f"No SavedModel at `saved_model` {export_dir!r} (no saved_model.pb there): pass the "
      "`export_dir` of tfrank4class-train or tfrank4class-export."
    )
  return export_dir


def saved_model_scorer(export_dir):
  """A callable ``scorer(features, training=False) -> scores`` over an export's ``scores``
  signature, to evaluate an exported model with :func:`tfrank4class.train.results.evaluate`."""
  check_saved_model(export_dir)
  try:
    loaded = tf.saved_model.load(export_dir)
  except (OSError, ValueError, tf.errors.OpError) as e:
    raise errors.DamagedFileError(
      export_dir, "SavedModel", e, "Export it again with tfrank4class-export."
    ) from None
  if "scores" not in loaded.signatures:
    raise errors.InvalidConfigError(
      f"`saved_model` {export_dir!r} has no 'scores' signature (it has "
      f"{sorted(loaded.signatures)}): it was not written by tfrank4class-export "
      "(tfrank4class.train.serving.export_saved_model). Pass an export of tfrank4class, or "
      "evaluate the Keras model with --checkpoint."
    )
  signature = loaded.signatures["scores"]

  def scorer(features, training=False):
    del training
    if features.dtype == tf.string and features.shape.rank == 1:
      features = features[:, None]
    return signature(features=features)["scores"]

  scorer.loaded = loaded  # keeps the SavedModel alive as long as the scorer
  return scorer
