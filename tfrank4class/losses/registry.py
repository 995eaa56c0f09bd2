"""One registry for every loss: all TF-Ranking 0.5.5 Keras losses by their keys, and ours.

``get(name, **kwargs)`` returns a ``keras.losses.Loss`` that accepts integer class ids
(``[B]`` / ``[B, 1]``) as well as dense relevance ``[B, C]`` (see :func:`to_relevance`), works in
``model.compile(loss=...)`` under any distribution strategy, and round-trips through
``model.save`` / ``keras.models.load_model``.

Our own losses register themselves with the :func:`register` decorator, which is the package's
one export decorator (:func:`tfrank4class.registry.export`) bound to this registry: it makes a
class Keras-serializable under the ``tfrank4class`` package name, reachable by name here and
listed in the public API (:data:`tfrank4class.registry.PUBLIC`). A new loss is one module with
its class under ``@register("name")`` and one test file (``CONTRIBUTING.md``).

Every name is also a Keras loss identifier once the package is imported:
``model.compile(loss="approx_ndcg_loss")`` builds ``get("approx_ndcg_loss")``, under Keras 3 and
tf-keras (:func:`tfrank4class.compat.resolve_by_name`). Keras's own names (``"mse"``,
``"categorical_crossentropy"``...) keep their meaning: :func:`register` refuses them.
"""

import functools

from tfrank4class import compat
from tfrank4class.compat import keras
from tfrank4class.losses.tf_ranking import TFR_KEYS, RankingLoss
from tfrank4class.registry import Registry, export

#: Every loss by name: the TF-Ranking keys (``RankingLoss(key, **kwargs)``) and ours.
LOSSES = Registry("loss", message="Unknown loss name {value!r}; known losses are: {joined}.")
for _key in TFR_KEYS:
  LOSSES.add(_key, functools.partial(RankingLoss, _key))
del _key
compat.resolve_by_name("losses", LOSSES)


def register(name):
  """Class decorator: exports a loss class under ``name``.

  :func:`tfrank4class.registry.export` with :data:`LOSSES`: the class becomes Keras-serializable
  as ``tfrank4class>ClassName``, reachable through :func:`get` and listed in
  :data:`tfrank4class.registry.PUBLIC`. Subclass :class:`tfrank4class.losses.ListwiseLoss` and
  implement ``loss_values(scores, relevance)``, or :class:`tfrank4class.losses.Loss`, whose
  ``call(y_true, y_pred)`` receives the raw labels under both Keras flavours (Keras 3's own
  ``Loss.__call__`` casts them to float first); parse them with :func:`to_relevance` or
  :func:`class_ids`.

  Raises:
    ValueError: ``name`` is already registered (a TF-Ranking key or one of ours), or is one of
      Keras's own loss identifiers (``compile(loss=name)`` builds Keras's loss).
  """
  return export(LOSSES, name)


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
