"""tfrank4class: classification as ranking for Keras and TensorFlow-Ranking.

``import tfrank4class`` registers every loss, metric and layer of the package with the bound
Keras (:mod:`tfrank4class.compat`: Keras 3 on its TensorFlow, JAX or PyTorch backend, or tf-keras),
so a ``.keras`` file that holds them loads with ``keras.models.load_model`` and no
``custom_objects``.

Backends. The core (:mod:`~tfrank4class.losses`, :mod:`~tfrank4class.metrics`,
:mod:`~tfrank4class.ranking`, :mod:`~tfrank4class.heads`, the encoders' layers, ``labels``,
``checks``) is written on ``keras.ops`` and imports without TensorFlow. TensorFlow's by nature, and
imported only where TensorFlow is (never by ``import tfrank4class`` on JAX or PyTorch):
:mod:`tfrank4class.data` (``tf.data``, TensorFlow Datasets, ``WordPieceVectorizer``),
:mod:`tfrank4class.train` (absl binaries, ``tf.distribute``), :mod:`tfrank4class.retrieval.inputs`
(``tf.data``), :mod:`tfrank4class.encoders.saved_model_text` (SavedModels), and the raw-string
encoders of :mod:`tfrank4class.encoders` (they raise ``ImportError`` elsewhere,
:func:`tfrank4class.compat.require_tensorflow_backend`). On the
TensorFlow backend the package also imports :mod:`tfrank4class.data`, whose ``WordPieceVectorizer``
layer the BERT checkpoint encoder tokenises with, so saved models that hold it load as before.
"""

__version__ = "0.2.0"

from tfrank4class import compat, encoders, heads, losses, metrics, ranking, saving  # noqa: E402

if compat.BACKEND == "tensorflow":
  from tfrank4class import data  # noqa: E402,F401  (registers WordPieceVectorizer)

__all__ = ["encoders", "heads", "losses", "metrics", "ranking", "saving"]
