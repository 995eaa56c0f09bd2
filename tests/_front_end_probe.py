"""Run by ``tests/test_front_ends.py`` in a process of each Keras flavour: ``python
_front_end_probe.py OUT`` writes ``OUT.npz`` (values) and ``OUT.json`` (error messages).

On fixed inputs (integer class ids ``[B]``, the same ids as ``[B, 1]``, and graded dense
relevance ``[B, C]`` with a padded item), for every loss of the registry with its defaults:

* ``loss/NAME/LABELS``: the loss value;
* ``grad/NAME/LABELS``: its gradient with respect to ``y_pred``;
* ``weighted/NAME``: the value with per-list sample weights ``[B, 1]`` (TF-Ranking's losses take
  ``[B, 1]`` or ``[B, C]``);
* ``none/NAME``: the weighted values with ``reduction="none"`` (shape included).

For every metric class (several constructor arguments): ``metric/NAME/LABELS`` (``result()``
after one update, and after a second, sample-weighted one). Every random draw follows
``tf.random.set_seed(0)``, set right before each computation, and the seeded TF-Ranking losses get
``seed=3`` as well.

``OUT.json`` maps each entry of :data:`BAD_CALLS` (a bad constructor argument, name or input) to
``"ErrorType: message"``, or ``"no error"``; a computation that fails is recorded there too
(``"compute/..."``).
"""

import json
import sys

import numpy as np
import tensorflow as tf
from _loss_arguments import loss as short_list_loss

from tfrank4class import compat, losses, metrics

B, C = 6, 5
SEEDED = ("gumbel_approx_ndcg_loss", "yeti_logistic_loss")


def _inputs():
  rng = np.random.default_rng(7)
  scores = rng.normal(size=(B, C)).astype(np.float32)
  ids = np.array([0, 3, 1, 4, 3, 2], np.int64)  # two lists share a class (pairwise losses)
  dense = rng.integers(0, 3, size=(B, C)).astype(np.float32)
  dense[0] = [2, 0, 1, 0, -1]  # a padded item
  dense[np.arange(B), ids] = np.maximum(dense[np.arange(B), ids], 1)  # every list has a hit
  weights = rng.uniform(0.5, 2.0, size=(B, 1)).astype(np.float32)
  return scores, {"ids": ids, "ids_b1": ids[:, None], "dense": dense}, weights


def _loss(name):
  return short_list_loss(name, seed=3) if name in SEEDED else short_list_loss(name)


def _record_error(errors, key, fn):
  try:
    fn()
  except Exception as e:  # noqa: BLE001  (any error type is recorded and compared)
    message = e.message if isinstance(e, tf.errors.OpError) else str(e)
    errors[key] = f"{type(e).__name__}: {message}"
    return
  errors[key] = "no error"


def _losses(out, errors):
  scores, labels, weights = _inputs()
  for name in losses.names():
    for kind, y in labels.items():

      def compute(name=name, kind=kind, y=y):
        s = tf.constant(scores)
        tf.random.set_seed(0)
        loss = _loss(name)
        with tf.GradientTape() as tape:
          tape.watch(s)
          value = loss(y, s)
        out[f"loss/{name}/{kind}"] = value.numpy()
        out[f"grad/{name}/{kind}"] = tape.gradient(value, s).numpy()

      _record_error(errors, f"compute/{name}/{kind}", compute)

    def weighted(name=name):
      tf.random.set_seed(0)
      out[f"weighted/{name}"] = _loss(name)(labels["ids"], scores, weights).numpy()

    _record_error(errors, f"compute/weighted/{name}", weighted)

    def unreduced(name=name):
      tf.random.set_seed(0)
      kwargs = {"seed": 3} if name in SEEDED else {}
      loss = short_list_loss(name, reduction="none", **kwargs)
      out[f"none/{name}"] = loss(labels["ids"], scores, weights).numpy()

    _record_error(errors, f"compute/none/{name}", unreduced)


METRICS = {
  "top_2": lambda: metrics.TopKAccuracy(k=2),
  "ndcg": lambda: metrics.NDCG(),
  "ndcg_3_linear": lambda: metrics.NDCG(k=3, gain="linear"),
  "mrr": lambda: metrics.MRR(),
  "mrr_2": lambda: metrics.MRR(k=2),
  "map": lambda: metrics.MeanAveragePrecision(),
  "spearman": lambda: metrics.Spearman(),
  "recall_2": lambda: metrics.RecallAtK(k=2),
  "precision_2": lambda: metrics.PrecisionAtK(k=2),
}


def _metrics(out, errors):
  scores, labels, weights = _inputs()
  for name, make in METRICS.items():
    for kind, y in labels.items():

      def compute(name=name, make=make, kind=kind, y=y):
        metric = make()
        metric.update_state(y, scores)
        first = float(metric.result())
        metric.update_state(y, scores[::-1], sample_weight=weights[:, 0])
        out[f"metric/{name}/{kind}"] = np.array([first, float(metric.result())])

      _record_error(errors, f"compute/metric/{name}/{kind}", compute)


_SCORES = np.zeros((2, C), np.float32)

#: Bad calls whose error (type and message) must not depend on the Keras flavour.
BAD_CALLS = {
  "losses.get unknown": lambda: losses.get("softmax"),
  "RankingLoss bad key": lambda: losses.RankingLoss("softmax"),
  "RankingLoss bad kwarg": lambda: losses.get("approx_ndcg_loss", topn=3),
  "RankingLoss virtual_label": lambda: losses.get("calibrated_softmax_loss", virtual_label=-1),
  "BlackboxRankLoss lambda_": lambda: losses.get("average_precision_loss", lambda_=0.0),
  "BlackboxRankLoss margin": lambda: losses.get("blackbox_ndcg_loss", margin=-1.0),
  "BlackboxRankLoss memory type": lambda: losses.get("mean_average_precision_loss", memory=1.5),
  "BlackboxRankLoss memory unsupported": lambda: losses.BlackboxRankLoss(memory=2),
  "APCLoss memory": lambda: losses.get("apc_loss", memory=-1),
  "MapApcLoss lambda_": lambda: losses.get("map_apc_loss", lambda_="x"),
  "RecallLoss weighting": lambda: losses.get("recall_loss", weighting="linear"),
  "RecallLoss similarity": lambda: losses.get("recall_loss", similarity="l2"),
  "RecallLoss from_embeddings": lambda: losses.get("recall_loss", from_embeddings=1),
  "RecallLoss memory without embeddings": lambda: losses.get("recall_loss", memory=2),
  "ContrastiveLoss margin": lambda: losses.get("contrastive_loss", margin=-0.5),
  "ContrastiveLoss mining": lambda: losses.get("contrastive_loss", mining="hardest"),
  "TripletLoss mining": lambda: losses.get("triplet_loss", mining="semi"),
  "SmoothedCrossEntropy smoothing": lambda: losses.get("smoothed_cross_entropy", label_smoothing=1),
  "SmoothedCrossEntropy spread": lambda: losses.get("smoothed_cross_entropy", spread="none"),
  "SpearmanLoss ranker": lambda: losses.get("spearman_loss", ranker="bogus"),
  "SpearmanLoss l1_weight": lambda: losses.get("spearman_loss", l1_weight=-1.0),
  "SorterAPLoss ranker_trainable": lambda: losses.get("sorter_ap_loss", ranker_trainable="yes"),
  "TopKAccuracy k": lambda: metrics.TopKAccuracy(k=0),
  "NDCG gain": lambda: metrics.NDCG(gain="cubic"),
  "MRR k": lambda: metrics.MRR(k=1.5),
  "RecallAtK k": lambda: metrics.RecallAtK(k=None),
  "PrecisionAtK k": lambda: metrics.PrecisionAtK(k=-2),
  "metrics.get unknown": lambda: metrics.get("top"),
  "loss: ids out of range": lambda: losses.get("softmax_loss")([0, 7], _SCORES),
  "loss: negative ids": lambda: losses.get("average_precision_loss")([-1, 0], _SCORES),
  "loss: fractional float ids": lambda: losses.get("smoothed_cross_entropy")([0.5, 1.0], _SCORES),
  "loss: string labels": lambda: losses.get("softmax_loss")(np.array(["a", "b"]), _SCORES),
  "loss: labels of rank 3": lambda: losses.get("recall_loss")(np.zeros((2, C, 1)), _SCORES),
  "loss: dense width": lambda: losses.get("approx_ndcg_loss")(np.zeros((2, C + 1)), _SCORES),
  "loss: scores of rank 1": lambda: losses.get("softmax_loss")([0], np.zeros(C, np.float32)),
  "loss: NaN scores": lambda: losses.get("smoothed_cross_entropy")([0], [[np.nan] * C]),
  "loss: embeddings with dense labels": lambda: losses.get("triplet_loss")(
    np.eye(2, C), np.ones((2, 3), np.float32)
  ),
  "loss: batch sizes": lambda: losses.get("contrastive_loss")([0, 1, 1], np.ones((2, 3))),
  "metric: ids out of range": lambda: metrics.NDCG().update_state([0, 9], _SCORES),
  "metric: string labels": lambda: metrics.MRR().update_state(np.array(["a", "b"]), _SCORES),
  "metric: batch sizes": lambda: metrics.TopKAccuracy(1).update_state([0, 1, 2], _SCORES),
}


def main(out_path):
  out, errors = {}, {}
  _losses(out, errors)
  _metrics(out, errors)
  for key, call in BAD_CALLS.items():
    _record_error(errors, key, call)
  np.savez(out_path + ".npz", **out)
  with open(out_path + ".json", "w", encoding="utf-8") as f:
    json.dump({"keras": compat.KERAS_PACKAGE, "keras_3": compat.KERAS_3, "errors": errors}, f)


if __name__ == "__main__":
  main(sys.argv[1])
