"""The plumbing shared by the SoDeep losses: the rank operator, its fine-tuning, padding.

Every loss of :mod:`tfrank4class.losses.sodeep` takes a *rank operator* ``ranker`` mapping scores
``[B, n]`` to ranks ``[B, n]`` on the scale of :func:`tfrank4class.ranking.rank` (``1..n``,
1 = highest score):

* ``"attention"``, ``"lstm"``, ``"conv"``: the sorter shipped with the package
  (:class:`~tfrank4class.ranking.AttentionSorter` etc., ``.pretrained()``);
* ``"pairwise_sigmoid"``: the handcrafted sorter of Sec. 4.1.2, Eq. 11-12 (the paper's
  ``lambda = 10``);
* ``"exact"`` (or ``None``): :func:`~tfrank4class.ranking.rank`, exact and without gradient
  (useful for evaluation and hand-checked values);
* any Keras layer mapping ``[B, n] -> [B, n]`` ranks, e.g. a sorter instance or the blackbox
  ranker ``tfrank4class.ranking.BlackboxRanker``.

So sorters, the blackbox ranker and exact ranks are interchangeable.

Fine-tuning the sorter on real scores (SoDeep Sec. 3.2.1, "optionally, the block can be
fine-tuned"): with ``ranker_trainable=True`` each call of the loss also takes one Adam step
(``ranker_learning_rate``) that moves the sorter towards the exact ranks of the lists it is
currently fed (the L1 loss of Eq. 1, the scores held constant); with ``False`` (the default)
the sorter is frozen. Fine-tuning is TensorFlow by nature (a variable update inside the traced loss,
:mod:`~tfrank4class.losses.sodeep.tf_finetune`): it is available on the TensorFlow backend (and
tf-keras) but not under a distribution strategy, and refused on JAX and PyTorch (clear errors).

Padding: as everywhere in the package, relevance below 0 marks a padded item. Padded items are
excluded: before ranking they are moved below every valid item of their list (to
``lo - (hi - lo) - 1`` with ``lo`` / ``hi`` the smallest / largest valid score, a constant for
the gradient), so the valid items' ranks are their ranks among the valid items, and they take no
part in the loss.

Precision: scores in float16 / bfloat16 (e.g. under the ``mixed_float16`` policy) are cast to
float32 first, and ranks are float32 (float16 holds whole numbers exactly only up to 2,048).
float64 scores stay float64; a learned sorter (float32, its layer's dtype) ranks them in float32
and its ranks are cast to float64.

Serialization: ``get_config`` stores a named ranker by its name (the shipped weights are reloaded)
and a layer with ``keras.utils.serialize_keras_object``; a sorter layer's *learned weights* are
not part of a Keras loss config, so pass pretrained sorters by name when the model must be saved.
"""

from tfrank4class import backend, checks, compat
from tfrank4class.compat import keras, ops
from tfrank4class.losses.base import ListwiseLoss
from tfrank4class.ranking import sorter_base
from tfrank4class.ranking.exact import rank
from tfrank4class.ranking.pairwise_sigmoid_sorter import PairwiseSigmoidSorter
from tfrank4class.ranking.sorters import PRETRAINED_SORTERS

RANKER_NAMES = ("exact", "pairwise_sigmoid") + PRETRAINED_SORTERS.names()


def resolve_ranker(ranker, trainable=False):
  """Returns ``(config_value, callable)`` for a ranker given by name, config dict or layer."""
  if ranker is None or ranker == "exact":
    return "exact", rank
  if isinstance(ranker, str):
    if ranker in PRETRAINED_SORTERS:
      return ranker, PRETRAINED_SORTERS.get(ranker, trainable=trainable)
    if ranker == "pairwise_sigmoid":
      return ranker, PairwiseSigmoidSorter()
    raise ValueError(
      f"`ranker` must be one of {list(RANKER_NAMES)}, a rank layer or a callable, got {ranker!r}."
    )
  if isinstance(ranker, dict):
    layer = keras.utils.deserialize_keras_object(ranker)
    return ranker, layer
  if callable(ranker):
    return ranker, ranker
  raise ValueError(
    f"`ranker` must be one of {list(RANKER_NAMES)}, a rank layer or a callable, got {ranker!r}."
  )


class RankOperatorLoss(ListwiseLoss):
  """Base of the SoDeep losses: the rank operator, its optional fine-tuning, and serialization.

  A :class:`~tfrank4class.losses.base.ListwiseLoss`: subclasses implement
  ``loss_values(scores, relevance)``, rank with :meth:`ranks` the lists prepared by
  :func:`tfrank4class.ranking.exact.sink`,
  and pass the loss through :meth:`with_finetune` (one fine-tuning step of the sorter when
  ``ranker_trainable=True``, see the module docstring).

  Example (a loss on the summed ranks of the relevant items):
    >>> from tfrank4class.compat import ops
    >>> from tfrank4class.ranking.exact import sink
    >>> class RelevantRankLoss(RankOperatorLoss):
    ...   def loss_values(self, scores, relevance):
    ...     lists = sink(scores, relevance >= 0)
    ...     ranks = ops.where(relevance > 0, self.ranks(lists), 0.0)
    ...     return self.with_finetune(ops.sum(ranks, -1), lists)
    >>> loss = RelevantRankLoss(ranker="exact", reduction="none")
    >>> ops.convert_to_numpy(loss([2, 0], [[0.1, 0.2, 0.7], [0.1, 0.8, 0.3]]))  # ranks 1 and 3
    array([1., 3.], dtype=float32)
    >>> model = keras.Sequential([keras.layers.Dense(3)])
    >>> model.compile(optimizer="adam", loss=RelevantRankLoss(ranker="attention"))
  """

  min_list_size = 2

  def __init__(
    self,
    ranker="attention",
    ranker_trainable=False,
    ranker_learning_rate=1e-4,
    reduction=compat.DEFAULT_REDUCTION,
    name=None,
  ):
    super().__init__(reduction=reduction, name=name)
    if not isinstance(ranker_trainable, bool):
      raise ValueError(f"`ranker_trainable` must be a bool, got {ranker_trainable!r}.")
    self.ranker_trainable = ranker_trainable
    self.ranker_learning_rate = checks.check_float(
      "ranker_learning_rate", ranker_learning_rate, minimum=0.0, strict=True
    )
    self._ranker_config, self.ranker = resolve_ranker(ranker, trainable=ranker_trainable)
    self._ranker_optimizer = None
    if ranker_trainable:
      if compat.BACKEND != "tensorflow":
        raise ValueError(
          f"`ranker_trainable=True` (fine-tuning the sorter inside the loss) needs the TensorFlow "
          f"backend, got KERAS_BACKEND={compat.BACKEND!r}: pretrain or fine-tune the sorter "
          f"separately (tfrank4class.losses.sodeep.tf_finetune says why)."
        )
      if not isinstance(self.ranker, sorter_base.Sorter) or not self.ranker.trainable_weights:
        raise ValueError(
          f"`ranker_trainable=True` needs a learned sorter layer (e.g. 'attention', 'lstm', "
          f"'conv'), got ranker={ranker!r}."
        )
      self.ranker.trainable = True
      self._ranker_optimizer = keras.optimizers.Adam(self.ranker_learning_rate)
      self._ranker_optimizer.build(self.ranker.trainable_variables)

  def ranks(self, scores):
    """The ranks ``[B, n]`` of ``scores`` ``[B, n]`` by the rank operator (1 = highest score), in
    the scores' dtype (a learned sorter computes in its layer's dtype, float32 by default)."""
    if isinstance(self.ranker, keras.layers.Layer):
      return ops.cast(self.ranker(scores, training=False), scores.dtype)
    return self.ranker(scores)

  def ranks_at(self, scores, index):
    """The rank ``[B]`` of the one item ``index[b]`` of each list ``scores`` ``[B, n]`` by the rank
    operator, in the scores' dtype: a sorter's :meth:`~tfrank4class.ranking.sorter_base.Sorter.
    ranks_at` (``O(B * n)`` for the pairwise sorters), else :meth:`ranks` at those items."""
    if isinstance(self.ranker, sorter_base.Sorter):
      return ops.cast(self.ranker.ranks_at(scores, index), scores.dtype)
    index = ops.cast(index, "int32")[:, None]
    return backend.take_along_axis(self.ranks(scores), index, axis=-1)[:, 0]

  def with_finetune(self, loss, lists):
    """``loss``, after one fine-tuning step on ``lists`` if ``ranker_trainable`` (else as is)."""
    if not self.ranker_trainable:
      return loss
    # TensorFlow by nature, and only reachable on the TensorFlow backend (see __init__).
    from tfrank4class.losses.sodeep import tf_finetune  # noqa: PLC0415

    return tf_finetune.after_finetune_step(loss, self.ranker, self._ranker_optimizer, lists)

  def get_config(self):
    config = super().get_config()
    ranker = self._ranker_config
    kind = getattr(ranker, "pretrained_kind", None)
    if kind in PRETRAINED_SORTERS and not self.ranker_trainable:
      ranker = kind  # the shipped weights are reloaded by name
    if not isinstance(ranker, (str, dict)):
      if isinstance(ranker, keras.layers.Layer):
        ranker = keras.utils.serialize_keras_object(ranker)
      else:
        raise ValueError(
          f"{type(self).__name__} with ranker={ranker!r} cannot be serialized: pass a name "
          f"({list(RANKER_NAMES)}) or a Keras layer."
        )
    config.update(
      {
        "ranker": ranker,
        "ranker_trainable": self.ranker_trainable,
        "ranker_learning_rate": self.ranker_learning_rate,
      }
    )
    return config
