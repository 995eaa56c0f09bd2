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

The third edition (docs/evidence-third-edition.md), ``python -m experiments.third_edition
run|report``: :mod:`~experiments.third_protocol` (its pre-registered protocol),
:mod:`~experiments.text_data` (CLINC150, BANKING77 and GoEmotions as cached MiniLM features),
:mod:`~experiments.label_noise`, :mod:`~experiments.scaled_head` (the score-scale control),
:mod:`~experiments.third_training` (one run, checkpoints per endpoint),
:mod:`~experiments.true_ranks` (the stored ranks of the true class), :mod:`~experiments.third_plan`
(the schedule and the records), :mod:`~experiments.third_statistics`,
:mod:`~experiments.collapse` and :mod:`~experiments.third_report`.
"""
