"""The convolutional sorter of SoDeep (Engilberge et al., CVPR 2019, Sec. 3.1.1).

The per-list standardised scores ``z = (s - mean) / std`` are lifted to ``filters`` channels by a
1x1 convolution and go through ``num_blocks`` blocks of batch normalisation, ReLU and 1-D
convolution, each added back to its input (pre-activation residual blocks); dilations double
from block to block (1, 2, 4, ..., 32, cycling), so the receptive field is
``1 + (kernel_size - 1) * sum(dilations)`` positions wide (133 with the defaults: 66 either side
of each position), and the dense head mixes what it does not reach. A final BN-ReLU and a dense
layer over the flattened features output the ``n`` normalised ranks,

    x_0 = Conv1x1(z),   x_l = x_{l-1} + Conv_l(ReLU(BN_l(x_{l-1}))),   l = 1..num_blocks,
    rank_hat(s) = 1 + (n - 1) * sigmoid(W flatten(ReLU(BN(x_L))) + b).

The paper's sorter stacks plain Conv-BN-ReLU blocks; the identity skips (with 64 channels
and width-3 kernels where our first plain version had 32 and 5) are our change: they pretrain
much faster, to a lower held-out error (the learning curves of both, and the shipped weights'
error beside the paper's: docs/sodeep.md, "Shipped weights" and "Benchmark").

The dense layer ties the sorter to one list length ``list_size`` (the paper's sorter was built for
n = 100); calling it on another length raises a ``ValueError`` naming both lengths.
Output: ranks on the scale of :func:`tfrank4class.ranking.rank` (``[1, n]``, 1 = highest).
"""

from tfrank4class import checks
from tfrank4class.compat import keras, ops
from tfrank4class.ranking import sorter_base
from tfrank4class.registry import export


@export()
class ConvSorter(sorter_base.Sorter):
  """CNN sorter for lists of exactly ``list_size`` items.

  Args:
    list_size: the one list length this sorter handles (``>= 2``).
    filters: channels of every convolution.
    num_blocks: number of BatchNorm-ReLU-Conv1D residual blocks (8 in the paper).
    kernel_size: width of every convolution.

  Example:
    >>> sorter = ConvSorter.pretrained()
    >>> sorter.list_size
    100
  """

  KIND = "conv"

  def __init__(self, list_size=100, filters=64, num_blocks=8, kernel_size=3, **kwargs):
    super().__init__(**kwargs)
    self.list_size = checks.check_int("list_size", list_size, minimum=2)
    self.filters = checks.check_int("filters", filters, minimum=1)
    self.num_blocks = checks.check_int("num_blocks", num_blocks, minimum=1)
    self.kernel_size = checks.check_int("kernel_size", kernel_size, minimum=1)
    self.stem = keras.layers.Conv1D(filters, 1, name="stem", dtype=self.dtype_policy)
    self.convs, self.norms = [], []
    for i in range(num_blocks):
      dilation = 2 ** (i % 6)
      self.convs.append(
        keras.layers.Conv1D(
          filters,
          kernel_size,
          dilation_rate=dilation,
          padding="same",
          use_bias=False,
          name=f"conv_{i}",
          dtype=self.dtype_policy,
        )
      )
      self.norms.append(keras.layers.BatchNormalization(name=f"bn_{i}", dtype=self.dtype_policy))
    self.final_norm = keras.layers.BatchNormalization(name="bn_final", dtype=self.dtype_policy)
    self.flatten = keras.layers.Flatten(dtype=self.dtype_policy)
    self.head = keras.layers.Dense(list_size, name="head", dtype=self.dtype_policy)

  def _build_sublayers(self, input_shape):
    features = (input_shape[0], self.list_size, self.filters)
    sorter_base.build_sublayer(self.stem, (input_shape[0], self.list_size, 1))
    for conv, norm in zip(self.convs, self.norms):
      sorter_base.build_sublayer(norm, features)
      sorter_base.build_sublayer(conv, features)
    sorter_base.build_sublayer(self.final_norm, features)
    sorter_base.build_sublayer(self.head, (input_shape[0], self.list_size * self.filters))

  def _weighted_layers(self):
    return (self.stem, *self.convs, *self.norms, self.final_norm, self.head)

  def _check_length(self, scores):
    n = scores.shape[-1]
    if n is not None and n != self.list_size:
      raise ValueError(
        f"This ConvSorter was built for lists of list_size={self.list_size} items and cannot "
        f"rank lists of {n}; use LSTMSorter or AttentionSorter (any length) or train a "
        f"ConvSorter with --min_list_size={n} --max_list_size={n}."
      )
    if n is None:
      raise ValueError(
        f"ConvSorter needs a static list length (list_size={self.list_size}); got shape "
        f"{scores.shape}."
      )

  def _normalised_ranks(self, scores, training=None):
    x = self.stem(sorter_base.standardize(scores)[:, :, None])
    for conv, norm in zip(self.convs, self.norms):
      x = x + conv(ops.relu(norm(x, training=training)))
    x = ops.relu(self.final_norm(x, training=training))
    return ops.sigmoid(self.head(self.flatten(x)))

  def get_config(self):
    config = super().get_config()
    config.update(
      {
        "list_size": self.list_size,
        "filters": self.filters,
        "num_blocks": self.num_blocks,
        "kernel_size": self.kernel_size,
      }
    )
    return config
