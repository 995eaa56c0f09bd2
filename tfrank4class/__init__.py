"""tfrank4class: classification as ranking for Keras and TensorFlow-Ranking.

``import tfrank4class`` registers every loss, metric and layer of the package with the Keras
that ``tf.keras`` is in the process (:mod:`tfrank4class.compat`), so a ``.keras`` file that holds
them loads with ``keras.models.load_model`` and no ``custom_objects``. That includes the data
pipelines' one layer, ``WordPieceVectorizer``: the BERT checkpoint encoder of
:mod:`tfrank4class.encoders` tokenises with it, so :mod:`tfrank4class.data` (and TensorFlow
Datasets) load with the package.
"""

__version__ = "0.1.0"

from tfrank4class import compat  # noqa: E402

if compat.BACKEND == "tensorflow":  # being ported: the core imports on every backend soon
  from tfrank4class import encoders, heads, losses, metrics, ranking  # noqa: E402

__all__ = ["encoders", "heads", "losses", "metrics", "ranking"]
