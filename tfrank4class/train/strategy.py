"""The tf.distribute strategy named by a flag.

default                 tf.distribute.get_strategy() (one device)
mirrored                MirroredStrategy over `devices` (default: every local GPU, else the CPU)
multi_worker_mirrored   MultiWorkerMirroredStrategy; the cluster comes from the TF_CONFIG
                        environment variable, as in the TensorFlow Model Garden
tpu                     TPUStrategy on the TPU named by `tpu` (a name, or grpc://host:port)
"""

import tensorflow as tf

from tfrank4class import checks

STRATEGIES = ("default", "mirrored", "multi_worker_mirrored", "tpu")


def tpu_resolver(tpu):
  """A ``TPUClusterResolver`` for ``tpu`` (raises if ``tpu`` is empty)."""
  if not tpu:
    raise ValueError(
      "`tpu` must name a TPU (a name, or grpc://host:port) when the strategy is "
      f"'tpu', got {tpu!r}."
    )
  return tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)


def make_strategy(name="default", tpu=None, devices=None):
  """Returns the strategy ``name`` (one of ``STRATEGIES``).

  Args:
    name: the strategy name.
    tpu: the TPU address, required for ``"tpu"``.
    devices: devices for ``"mirrored"``, e.g. ``["/cpu:0", "/cpu:1"]``; ``None``: all GPUs, else
      the CPU.
  """
  checks.check_choice("strategy", name, STRATEGIES)
  if name == "default":
    return tf.distribute.get_strategy()
  if name == "mirrored":
    # Without GPUs there is no NCCL to gain: reduce through one device. TensorFlow 2.15's default
    # collective all-reduce can reuse instance keys when several MirroredStrategy objects train
    # in one process, which aborts with "Shape mismatch in the collective instance".
    on_cpu = not tf.config.list_logical_devices("GPU")
    return tf.distribute.MirroredStrategy(
      devices, cross_device_ops=tf.distribute.ReductionToOneDevice() if on_cpu else None
    )
  if name == "multi_worker_mirrored":
    return tf.distribute.MultiWorkerMirroredStrategy()
  resolver = tpu_resolver(tpu)
  tf.config.experimental_connect_to_cluster(resolver)
  tf.tpu.experimental.initialize_tpu_system(resolver)
  return tf.distribute.TPUStrategy(resolver)


def is_chief(strategy):
  """Whether this process is the one that writes exports (the chief, or worker 0)."""
  resolver = getattr(strategy, "cluster_resolver", None)
  if resolver is None or not resolver.task_type:
    return True
  return resolver.task_type == "chief" or (
    resolver.task_type == "worker"
    and resolver.task_id == 0
    and "chief" not in resolver.cluster_spec().as_dict()
  )
