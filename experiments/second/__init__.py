"""The evidence's second edition: the loss-and-head grid (docs/evidence-grid.md).

``python -m experiments.second.grid run|report`` (and :mod:`~experiments.second.patience`,
``python -m experiments.second.epoch_time run``). One job per module:
:mod:`~experiments.second.protocol` (the pre-registered protocol as constants),
:mod:`~experiments.second.plan` (settings, record schema, schedule),
:mod:`~experiments.second.grid` (the runner), :mod:`~experiments.second.summary`,
:mod:`~experiments.second.deviations` and :mod:`~experiments.second.report` (the verdicts and
the report), :mod:`~experiments.second.epoch_time` (the wall-time estimates' measurement) and
:mod:`~experiments.second.patience` (an exploratory check of the early stopping). Records:
``experiments/records/grid.json``.
"""
