"""The recurrent sorter of SoDeep (Engilberge et al., CVPR 2019, Sec. 3.1.1), length-agnostic.

A stack of bidirectional LSTMs reads the (per-list standardised) scores in their given order and
a per-position dense layer outputs each item's normalised rank,

    rank_hat(s)_i = 1 + (n - 1) * sigmoid(W h_i + b),     h = BiLSTM^L((s - mean(s)) / std(s)),

trained on synthetic lists with the L1 loss of Eq. 1. The paper's sorter ends in an affine
projection of the whole sequence, tied to its list length (n = 100 in Sec. 4.1.3; the
authors' code projects the ``n x 2 units`` outputs to ``n`` ranks); our output is per position,
so one trained sorter runs at any length. The paper does not give the LSTM's size (the
authors' code: 2 layers of 128 units per direction); our defaults are 2 layers of 64, and the
shipped weights use 2 of 32 (docs/sodeep.md, "Shipped weights").
Output: ranks on the scale of :func:`tfrank4class.ranking.rank` (``[1, n]``, 1 = highest).
"""

from tfrank4class import checks
from tfrank4class.compat import keras, ops
from tfrank4class.ranking import sorter_base
from tfrank4class.registry import export


@export()
class LSTMSorter(sorter_base.Sorter):
  """Bidirectional-LSTM sorter with a per-position output (any list length ``n >= 2``).

  Args:
    units: LSTM units per direction (not given in the paper).
    num_layers: number of stacked bidirectional LSTM layers (not given in the paper).

  Example:
    >>> sorter = LSTMSorter.pretrained()
    >>> tuple(sorter(ops.convert_to_tensor([[0.1, 0.9, 0.5]])).shape)
    (1, 3)
  """

  KIND = "lstm"

  def __init__(self, units=64, num_layers=2, **kwargs):
    super().__init__(**kwargs)
    self.units = checks.check_int("units", units, minimum=1)
    self.num_layers = checks.check_int("num_layers", num_layers, minimum=1)
    self.rnns = [
      keras.layers.Bidirectional(
        keras.layers.LSTM(units, return_sequences=True, dtype=self.dtype_policy),
        name=f"bilstm_{i}",
        dtype=self.dtype_policy,
      )
      for i in range(num_layers)
    ]
    self.head = keras.layers.Dense(1, name="head", dtype=self.dtype_policy)

  def _build_sublayers(self, input_shape):
    channels = 1
    for rnn in self.rnns:
      sorter_base.build_sublayer(rnn, (input_shape[0], None, channels))
      channels = 2 * self.units
    sorter_base.build_sublayer(self.head, (input_shape[0], None, channels))

  def _weighted_layers(self):
    return (*self.rnns, self.head)

  def _normalised_ranks(self, scores, training=None):
    x = sorter_base.standardize(scores)[:, :, None]
    for rnn in self.rnns:
      x = rnn(x, training=training)
    return ops.sigmoid(self.head(x)[..., 0])

  def get_config(self):
    config = super().get_config()
    config.update({"units": self.units, "num_layers": self.num_layers})
    return config
