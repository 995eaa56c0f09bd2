"""TF-Ranking 0.5.5's loss cores on ``keras.ops``, one module per family.

Each core computes what TF-Ranking's ``losses_impl`` class of the same name computes, on every
Keras backend and in the scores' dtype, from relevance ``[B, n]`` (``< 0`` = padding) and scores
``[B, n]``: ``compute_unreduced_loss(labels, logits)`` -> ``(losses, loss_weights)``,
``normalize_weights(labels, weights)`` and ``get_logits(logits)`` (scores over the temperature);
the two softmax cores return one loss per list from ``compute_per_list``; the pairwise cores
return their pairs' weighted losses summed over each pair's second item ``[B, n]`` (with weights
of ones): TF-Ranking's ``[B, n, n]`` summed as its Keras layer sums it.
:class:`tfrank4class.losses.RankingLoss` reduces them (``tfrank4class/losses/tf_ranking.py``).

* :mod:`.pointwise`: ``sigmoid_cross_entropy_loss``, ``mean_squared_loss``, ``ordinal_loss``;
* :mod:`.pairwise`: ``pairwise_{hinge,logistic,soft_zero_one,mse}_loss``;
* :mod:`.yeti`: ``yeti_logistic_loss`` (the logistic pairs, on class ids without a sort);
* :mod:`.listwise`: ``softmax_loss``, ``calibrated_softmax_loss``, ``unique_softmax_loss``,
  ``list_mle_loss``, ``coupled_rankdistil_loss``;
* :mod:`.approx`: ``approx_ndcg_loss``, ``approx_mrr_loss``, ``gumbel_approx_ndcg_loss``;
* :mod:`.sampling`: ranks by score, sorting, TF-Ranking's Gumbel sampler.
"""
