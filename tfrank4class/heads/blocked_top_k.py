"""Brute-force top-k over every class, in blocks: the serving side of sampled training.

A head trained on sampled lists still ranks every class at evaluation and serving. Scoring all
``C`` classes at once holds a ``[B, C]`` matrix (``[B, C, w]`` per hidden layer for the MLP
interactions); :func:`blocked_top_k` scans the class embeddings in blocks of ``n`` classes and
keeps a running top-k,

    T_0 = {},   T_j = top_k(T_{j-1} + scores of block j),   result T_{ceil(C / n)},

so that one ``[B, n]`` block and the ``[B, k]`` running top-k are alive at a time: memory
``O(B (n + k))`` beside the ``[C, e]`` class embeddings, not ``O(B C)``. The scan is a sequential
loop (:func:`tfrank4class.backend.sequential_fori_loop`: ``tf.while_loop(parallel_iterations=1)``
on TensorFlow, so it exports to a SavedModel; ``lax.fori_loop`` on JAX; a Python loop on
PyTorch). The result equals a full top-k's, ties included: equal scores come lower class id
first (:func:`tfrank4class.backend.top_k`), since the running top-k holds only lower ids than
the block it is merged with and sits before it. The last block is padded; its padded columns
score ``-inf`` and are never chosen (``k <= C``).
"""

import math

from tfrank4class import backend, checks
from tfrank4class.compat import ops


def blocked_top_k(score_block, queries, class_embeddings, k, block_size):
  """``(scores [B, k], class ids [B, k] int32)`` of the ``k`` best classes, best first.

  Args:
    score_block: ``f(queries, c) -> [B, n]``, the scores of the queries against a block of class
      embeddings ``c`` ``[n, e]`` (an interaction's ``score``, or a dot product).
    queries: ``[B, d]``; the batch size may be unknown when traced (a serving signature).
    class_embeddings: ``[C, e]`` with ``C`` known.
    k: ``1 <= k <= C``.
    block_size: ``n >= 1``, classes scored at a time; need not divide ``C``.

  Example:
    >>> import numpy as np
    >>> from keras import ops
    >>> h = np.array([[1.0, 0.0], [0.0, 1.0]], "float32")
    >>> table = np.array([[3, 0], [1, 5], [4, 4], [0, 2], [2, 1]], "float32")
    >>> dot = lambda q, c: ops.matmul(q, ops.transpose(c))
    >>> scores, ids = blocked_top_k(dot, h, table, k=2, block_size=2)
    >>> ops.convert_to_numpy(ids)
    array([[2, 0],
           [1, 2]], dtype=int32)
  """
  class_embeddings = ops.convert_to_tensor(class_embeddings)
  num_classes = class_embeddings.shape[0]
  if num_classes is None:
    raise ValueError("blocked_top_k needs a statically known number of classes.")
  checks.check_int("k", k, minimum=1)
  if k > num_classes:
    raise ValueError(f"`k` must be at most the {num_classes} classes, got {k}.")
  block_size = min(checks.check_int("block_size", block_size, minimum=1), num_classes)
  num_blocks = math.ceil(num_classes / block_size)
  width = class_embeddings.shape[-1]
  padded = ops.pad(class_embeddings, [[0, num_blocks * block_size - num_classes], [0, 0]])
  zeros = ops.zeros_like(queries[:, :1])  # [B, 1]: the batch size, known or not
  offsets = ops.arange(block_size, dtype="int32")

  def body(i, carry):
    best, best_ids = carry
    start = ops.cast(i, "int32") * block_size
    scores = score_block(queries, ops.slice(padded, [start, 0], [block_size, width]))
    ids = start + offsets
    scores = backend.where((ids < num_classes)[None, :], scores, float("-inf"))
    merged_ids = ops.concatenate([best_ids, ops.cast(zeros, "int32") + ids[None, :]], axis=1)
    best, index = backend.top_k(ops.concatenate([best, scores], axis=1), k)
    return best, backend.take_along_axis(merged_ids, index, axis=1)

  init = (
    zeros + ops.full((1, k), float("-inf"), zeros.dtype),
    ops.cast(zeros, "int32") + ops.full((1, k), -1, "int32"),
  )
  return backend.sequential_fori_loop(0, num_blocks, body, init)
