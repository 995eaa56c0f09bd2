"""Fine-tuning a learned sorter inside a SoDeep loss (SoDeep Sec. 3.2.1): TensorFlow by nature.

With ``ranker_trainable=True`` (:class:`~tfrank4class.losses.sodeep.base.RankOperatorLoss`),
each call of the loss also takes one Adam step that moves the sorter towards the exact ranks of
the lists it is fed (the L1 loss of Eq. 1 on normalised ranks, the scores held constant). That
step is a side effect of the loss: it updates the sorter's variables from inside the model's own
(traced) training step, ordered before the loss value by a control dependency. TensorFlow has
both (``tf.GradientTape`` and ``tf.control_dependencies``, under ``tf.function`` and XLA); JAX's
compiled training step is a pure function of the variables, where no variable can change inside
a loss, so the losses refuse ``ranker_trainable=True`` on the JAX and PyTorch backends (fine-tune
there by training the sorter as a model of its own, e.g. ``tfrank4class-pretrain-sorter``).
This module is imported only on the TensorFlow backend, by a loss made with
``ranker_trainable=True``.
"""

import tensorflow as tf

from tfrank4class.ranking.exact import rank


def finetune_step(sorter, optimizer, scores):
  """One ``optimizer`` step of ``sorter`` towards the exact ranks of ``scores`` ``[B, n]``
  (Eq. 1, on normalised ranks); returns the update op.

  Raises:
    ValueError: under a ``tf.distribute`` strategy (the sorter's variables would be updated once
      per replica by a step built for one).
  """
  if tf.distribute.has_strategy():
    raise ValueError(
      "`ranker_trainable=True` (fine-tuning the sorter inside the loss) is not supported "
      "under a tf.distribute strategy; pretrain or fine-tune the sorter separately."
    )
  scores = tf.stop_gradient(scores)
  target = rank(scores)
  n = tf.cast(tf.shape(scores)[-1], scores.dtype)
  with tf.GradientTape() as tape:
    ranks = tf.cast(sorter(scores, training=True), scores.dtype)  # the sorter's dtype: float32
    fit = tf.reduce_mean(tf.abs(ranks - target)) / (n - 1.0)
  variables = sorter.trainable_variables
  grads = tape.gradient(fit, variables)
  return optimizer.apply_gradients(zip(grads, variables))


def after_finetune_step(loss, sorter, optimizer, scores):
  """``loss``, computed after one :func:`finetune_step` of ``sorter`` on ``scores``."""
  op = finetune_step(sorter, optimizer, scores)
  with tf.control_dependencies([op] if op is not None else []):
    return tf.identity(loss)
