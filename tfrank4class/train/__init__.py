"""Thin absl binaries: training, evaluation, sorter pretraining, export.

TensorFlow by nature (tf.data input, tf.distribute strategies, SavedModel export): the package is
fenced, and refuses Keras's JAX and PyTorch backends when imported, naming the setting.
"""

from tfrank4class import compat

compat.require_tensorflow_backend("tfrank4class.train")
