"""The evidence behind the docs' advice: one subpackage per edition over shared pieces.

Not part of the installed package: these modules run from a checkout's root, as
``python -m experiments.<edition>.<module> run|report``, and keep their records in
``experiments/records/``. What every edition uses sits here:

* :mod:`~experiments.store`: the records file (a JSON list of finished runs, resumable and
  shared by processes);
* :mod:`~experiments.blocks`: the tables of README.md and docs/ generated from records;
* :mod:`~experiments.features`: what the runs train on (cached all-MiniLM-L6-v2 embeddings,
  in-memory splits, CIFAR-10 images);
* :mod:`~experiments.training`: one run's pieces (the loss built by name, the input pipeline,
  prediction and the metrics of scores);
* :mod:`~experiments.true_ranks`: the rank of the true class per example and the metrics
  recomputed from it;
* :mod:`~experiments.statistics` (t intervals, paired t tests, Holm, power) and
  :mod:`~experiments.bootstrap` (paired over seeds, and the two-stage bootstrap over seeds and
  test examples); :mod:`~experiments.bounds` (Bruch et al.'s bounds checked on real outputs).

Each edition is a subpackage with its own protocol, plan, training and report:
:mod:`experiments.second` (the loss-and-head grid, docs/evidence-grid.md) and
:mod:`experiments.third` (docs/evidence-third-edition.md). A fourth edition is a new folder.
"""
