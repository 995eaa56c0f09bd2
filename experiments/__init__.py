"""The evidence behind the docs' advice: the loss-and-head grid and its checks.

Not part of the installed package: these modules run from a checkout's root, as
``python -m experiments.<name> run|report`` (:mod:`experiments.grid`, :mod:`experiments.patience`;
``python -m experiments.epoch_time run``), and keep their records in ``experiments/records/``.
The grid's pieces, one job per module: :mod:`~experiments.protocol` (the pre-registered
protocol), :mod:`~experiments.plan` (settings, record schema, schedule),
:mod:`~experiments.store` (the records file), :mod:`~experiments.features` (what the runs train
on), :mod:`~experiments.training` (one run), :mod:`~experiments.statistics`,
:mod:`~experiments.bounds`, :mod:`~experiments.summary`, :mod:`~experiments.deviations` and
:mod:`~experiments.report` (the verdicts and the report), :mod:`~experiments.blocks` (the docs'
tables generated from the records).
"""
