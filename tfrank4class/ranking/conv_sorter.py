"""The convolutional sorter of SoDeep (Engilberge et al., CVPR 2019, Sec. 3.1.1).

``num_blocks`` blocks of 1-D convolution, batch normalisation and ReLU read the per-list
standardised scores as a 1-channel signal; dilations double from block to block (1, 2, 4, ...,
cycling) so that the receptive field covers the list. A final dense layer over the flattened
features outputs the ``n`` normalised ranks,

    rank_hat(s) = 1 + (n - 1) * sigmoid(W flatten(Conv-BN-ReLU^8((s - mean) / std)) + b).

The dense layer ties the sorter to one list length ``list_size`` (the paper's sorter was built for
n = 100); calling it on another length raises a ``ValueError`` naming both lengths.
Output: ranks on the scale of :func:`tfrank4class.ranking.rank` (``[1, n]``, 1 = highest).
"""
import tensorflow as tf

from tfrank4class import _validation
from tfrank4class.ranking import sorter_base


@tf.keras.utils.register_keras_serializable(package="tfrank4class")
class ConvSorter(sorter_base.Sorter):
  """CNN sorter for lists of exactly ``list_size`` items.

  Args:
    list_size: the one list length this sorter handles (``>= 2``).
    filters: channels of every convolution.
    num_blocks: number of Conv1D-BatchNorm-ReLU blocks (8 in the paper).
    kernel_size: width of every convolution.

  Example:
    >>> sorter = ConvSorter.pretrained()
    >>> sorter.list_size
    100
  """

  KIND = "conv"

  def __init__(self, list_size=100, filters=32, num_blocks=8, kernel_size=5, **kwargs):
    super().__init__(**kwargs)
    self.list_size = _validation.check_int("list_size", list_size, minimum=2)
    self.filters = _validation.check_int("filters", filters, minimum=1)
    self.num_blocks = _validation.check_int("num_blocks", num_blocks, minimum=1)
    self.kernel_size = _validation.check_int("kernel_size", kernel_size, minimum=1)
    self.convs, self.norms = [], []
    for i in range(num_blocks):
      dilation = 2 ** (i % 6)
      self.convs.append(tf.keras.layers.Conv1D(
          filters, kernel_size, dilation_rate=dilation, padding="same", use_bias=False,
          name=f"conv_{i}"))
      self.norms.append(tf.keras.layers.BatchNormalization(name=f"bn_{i}"))
    self.flatten = tf.keras.layers.Flatten()
    self.head = tf.keras.layers.Dense(list_size, name="head")

  def _check_length(self, scores):
    n = scores.shape[-1]
    if n is not None and n != self.list_size:
      raise ValueError(
          f"This ConvSorter was built for lists of list_size={self.list_size} items and cannot "
          f"rank lists of {n}; use LSTMSorter or AttentionSorter (any length) or train a "
          f"ConvSorter with --list_size={n}.")
    if n is None:
      raise ValueError(
          f"ConvSorter needs a static list length (list_size={self.list_size}); got shape "
          f"{scores.shape}.")

  def _normalised_ranks(self, scores, training=None):
    x = sorter_base.standardize(scores)[:, :, None]
    for conv, norm in zip(self.convs, self.norms):
      x = tf.nn.relu(norm(conv(x), training=training))
    return tf.sigmoid(self.head(self.flatten(x)))

  def get_config(self):
    config = super().get_config()
    config.update({"list_size": self.list_size, "filters": self.filters,
                   "num_blocks": self.num_blocks, "kernel_size": self.kernel_size})
    return config
