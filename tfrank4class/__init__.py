"""tfrank4class: classification as ranking for Keras and TensorFlow-Ranking."""

__version__ = "0.1.0"
