"""Thin absl binaries: training, evaluation, sorter pretraining, export."""
