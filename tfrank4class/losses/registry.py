"""One registry for every loss: all TF-Ranking 0.5.5 Keras losses by their keys, and ours.

``get(name, **kwargs)`` returns a ``keras.losses.Loss`` that accepts integer class ids
(``[B]`` / ``[B, 1]``) as well as dense relevance ``[B, C]`` (see :func:`to_relevance`), works in
``model.compile(loss=...)`` under any distribution strategy, and round-trips through
``model.save`` / ``keras.models.load_model``.

Our own losses register themselves with the :func:`register` decorator, which also makes them
Keras-serializable under the ``tfrank4class`` package name.

Every name is also a Keras loss identifier once the package is imported:
``model.compile(loss="approx_ndcg_loss")`` builds ``get("approx_ndcg_loss")``, under Keras 3 and
tf-keras (:func:`tfrank4class.compat.resolve_by_name`). Keras's own names (``"mse"``,
``"categorical_crossentropy"``...) keep their meaning: :func:`register` refuses them.
"""

import functools

from tfrank4class import compat
from tfrank4class.compat import keras
from tfrank4class.losses.tf_ranking import TFR_KEYS, RankingLoss
from tfrank4class.registry import Registry

#: Every loss by name: the TF-Ranking keys (``RankingLoss(key, **kwargs)``) and ours.
LOSSES = Registry("loss", message="Unknown loss name {value!r}; known losses are: {joined}.")
for _key in TFR_KEYS:
  LOSSES.add(_key, functools.partial(RankingLoss, _key))
del _key
compat.resolve_by_name("losses", LOSSES)


def register(name):
  """Class decorator: registers a loss class under ``name``.

  The class becomes Keras-serializable as ``tfrank4class>ClassName`` and reachable through
  :func:`get`. Subclass :class:`tfrank4class.losses.ListwiseLoss` and implement
  ``loss_values(scores, relevance)``, or :class:`tfrank4class.losses.Loss`, whose
  ``call(y_true, y_pred)`` receives the raw labels under both Keras flavours (Keras 3's own
  ``Loss.__call__`` casts them to float first); parse them with :func:`to_relevance` or
  :func:`class_ids`.

  Raises:
    ValueError: ``name`` is already registered (a TF-Ranking key or one of ours), or is one of
      Keras's own loss identifiers (``compile(loss=name)`` builds Keras's loss).
  """
  if compat.keras_resolves("losses", name):
    raise ValueError(
      f"Cannot register a loss named {name!r}: it is a Keras loss identifier, and "
      f"`compile(loss={name!r})` builds Keras's own. Choose another name."
    )

  def decorator(cls):
    LOSSES.add(name, cls)  # refuses a duplicate before Keras sees the class
    return compat.register_serializable(cls)

  return decorator


def names():
  """All names :func:`get` accepts, sorted."""
  return list(LOSSES.names())


def get(name, **kwargs):
  """Returns the loss registered as ``name``, constructed with ``kwargs``.

  Args:
    name: a TF-Ranking key such as ``"softmax_loss"`` or ``"approx_ndcg_loss"``, or the name of
      one of this package's losses (see :func:`names`). A ``keras.losses.Loss`` instance is
      returned unchanged.
    **kwargs: constructor arguments, e.g. ``temperature=0.1`` or ``lambda_weight=...`` for
      TF-Ranking losses.

  Raises:
    ValueError: for an unknown name, listing the known ones.
  """
  if isinstance(name, keras.losses.Loss):
    return name
  return LOSSES.get(name, **kwargs)
