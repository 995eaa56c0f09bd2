"""The learned SoDeep sorters by name (Engilberge et al., CVPR 2019, Sec. 3.1).

Two registries (:class:`tfrank4class.registry.Registry`), both keyed by a sorter's ``KIND``:

* :data:`SORTERS`: the untrained sorter classes, ``SORTERS.get("lstm", units=32)`` is
  ``LSTMSorter(units=32)`` (what ``tfrank4class-pretrain-sorter --sorter`` builds);
* :data:`PRETRAINED_SORTERS`: the weights shipped in ``tfrank4class/resources/sorters/``,
  ``PRETRAINED_SORTERS.get("attention", trainable=False)`` is
  ``AttentionSorter.pretrained(trainable=False)`` (what a SoDeep loss's ``ranker="attention"``
  loads).

Example:
  >>> SORTERS.names()
  ('attention', 'conv', 'lstm')
  >>> type(PRETRAINED_SORTERS.get("lstm")).__name__
  'LSTMSorter'
"""

from tfrank4class.ranking.attention_sorter import AttentionSorter
from tfrank4class.ranking.conv_sorter import ConvSorter
from tfrank4class.ranking.lstm_sorter import LSTMSorter
from tfrank4class.registry import Registry

#: Untrained learned sorters by kind: ``SORTERS.get(kind, **hyper_parameters)``.
SORTERS = Registry("sorter", argument="sorter")
#: Sorters with the shipped weights by kind: ``PRETRAINED_SORTERS.get(kind, trainable=False)``.
PRETRAINED_SORTERS = Registry("pretrained sorter", argument="kind")

for _cls in (AttentionSorter, ConvSorter, LSTMSorter):
  SORTERS.add(_cls.KIND, _cls)
  PRETRAINED_SORTERS.add(_cls.KIND, _cls.pretrained)
del _cls
