"""``python -m tfrank4class.train``: the training binary."""

from tfrank4class.train.train import run

run()
