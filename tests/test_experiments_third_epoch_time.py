"""experiments/third/epoch_time.py: the interleaved timing of one cell with and without XLA on
tiny sizes, and the table's median, range and within-round ratio by hand."""

from experiments.third import epoch_time


def test_both_modes_are_timed_in_every_round():
  found = epoch_time.measure(["softmax"], 2, 256, 10, 1)
  assert set(found) == {"softmax"}
  assert all(len(found["softmax"][mode]) == 2 for mode in (False, True))
  assert all(t > 0 for mode in (False, True) for t in found["softmax"][mode])


def test_table_gives_median_range_and_the_ratio_within_each_round():
  lines = epoch_time.table_lines({"svm_k5": {False: [2.0, 4.0, 3.0], True: [1.0, 1.0, 2.0]}})
  # ratios per round: 2.0, 4.0, 1.5 -> median 2.0, range 1.5-4.0
  assert lines[-1] == "| svm_k5 | 3.00 (2.00-4.00) | 1.00 (1.00-2.00) | 2.00 (1.50-4.00) |"
