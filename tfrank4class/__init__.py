"""tfrank4class: classification as ranking for Keras and TensorFlow-Ranking.

``import tfrank4class`` registers every loss, metric and layer of the package with the Keras
that ``tf.keras`` is in the process (:mod:`tfrank4class.compat`), so a ``.keras`` file that holds
them loads with ``keras.models.load_model`` and no ``custom_objects``. The data pipelines
(:mod:`tfrank4class.data`, which imports TensorFlow Datasets) load on first import; the one
layer they define, ``WordPieceVectorizer``, registers then.
"""

__version__ = "0.1.0"

from tfrank4class import encoders, heads, losses, metrics, ranking  # noqa: E402

__all__ = ["encoders", "heads", "losses", "metrics", "ranking"]
