"""The evidence's third edition: losses under label noise on frozen text features
(docs/evidence-third-edition.md).

``python -m experiments.third.edition run|report``. One job per module:
:mod:`~experiments.third.protocol` (the pre-registered protocol as constants),
:mod:`~experiments.third.text_data` (CLINC150, BANKING77 and GoEmotions as cached MiniLM
features), :mod:`~experiments.third.label_noise`, :mod:`~experiments.third.scaled_head` (the
score-scale control), :mod:`~experiments.third.training` (one run, checkpoints per endpoint),
:mod:`~experiments.third.plan` (the schedule and the records), :mod:`~experiments.third.collapse`
(how hard each loss pushes down a dominant wrong class), :mod:`~experiments.third.epoch_time`
(the cost behind the XLA deviation), :mod:`~experiments.third.deviations` (what the records show
was not declared) and :mod:`~experiments.third.report`. Records:
``experiments/records/third.json``.
"""
