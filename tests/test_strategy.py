"""Strategies by flag name; the TPU path up to connecting (no TPU here)."""

import pytest
import tensorflow as tf

from tfrank4class.train import strategy as strategy_lib


def test_default_and_mirrored():
  assert strategy_lib.make_strategy("default") is tf.distribute.get_strategy()
  mirrored = strategy_lib.make_strategy("mirrored", devices=["/cpu:0", "/cpu:1"])
  assert isinstance(mirrored, tf.distribute.MirroredStrategy)
  assert mirrored.num_replicas_in_sync == 2
  assert strategy_lib.is_chief(mirrored)


def test_unknown_strategy_lists_allowed():
  with pytest.raises(
    ValueError,
    match=r"`strategy` must be one of \['default', 'mirrored', "
    r"'multi_worker_mirrored', 'tpu'\], got 'gpu'",
  ):
    strategy_lib.make_strategy("gpu")


def test_tpu_needs_an_address():
  with pytest.raises(ValueError, match=r"`tpu` must name a TPU.*got ''"):
    strategy_lib.make_strategy("tpu", tpu="")


def test_tpu_path_builds_its_resolver_from_the_flag(monkeypatch):
  calls = []
  monkeypatch.setattr(
    tf.config, "experimental_connect_to_cluster", lambda r: calls.append(("connect", r))
  )
  monkeypatch.setattr(
    tf.tpu.experimental, "initialize_tpu_system", lambda r: calls.append(("init", r))
  )
  monkeypatch.setattr(tf.distribute, "TPUStrategy", lambda r: ("tpu-strategy", r))
  result = strategy_lib.make_strategy("tpu", tpu="grpc://127.0.0.1:8470")
  resolver = result[1]
  assert isinstance(resolver, tf.distribute.cluster_resolver.TPUClusterResolver)
  assert resolver.master() == "grpc://127.0.0.1:8470"
  assert [c[0] for c in calls] == ["connect", "init"] and all(c[1] is resolver for c in calls)
