"""The tf.distribute strategy named by a flag.

default                 tf.distribute.get_strategy() (one device)
mirrored                MirroredStrategy over `devices` (default: every local GPU, else the CPU)
multi_worker_mirrored   MultiWorkerMirroredStrategy; the cluster comes from the TF_CONFIG
                        environment variable, as in the TensorFlow Model Garden
tpu                     TPUStrategy on the TPU named by `tpu` (a name, or grpc://host:port)

`devices` must exist: a device this machine does not have is refused, naming those it has
(TensorFlow would place its replica on the CPU without a word). CPU devices beyond the first are
made by splitting the CPU into logical devices when TensorFlow has not started yet (as the test
suite's conftest does), so `/cpu:0,/cpu:1` runs two replicas on one machine. TF_CONFIG is
checked, and the cluster's start watched, by `tfrank4class.train.cluster`.
"""

import os

import tensorflow as tf

from tfrank4class import checks, errors
from tfrank4class.train import cluster

STRATEGIES = ("default", "mirrored", "multi_worker_mirrored", "tpu")


def tpu_resolver(tpu):
  """A ``TPUClusterResolver`` for ``tpu`` (raises if ``tpu`` is empty)."""
  if not tpu:
    raise ValueError(
      "`tpu` must name a TPU (a name, or grpc://host:port) when the strategy is "
      f"'tpu', got {tpu!r}."
    )
  return tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)


def make_strategy(name="default", tpu=None, devices=None, cluster_timeout=600):
  """Returns the strategy ``name`` (one of ``STRATEGIES``).

  Args:
    name: the strategy name.
    tpu: the TPU address, required for ``"tpu"``.
    devices: devices for ``"mirrored"``, e.g. ``["/cpu:0", "/cpu:1"]``; ``None``: all GPUs, else
      the CPU.
    cluster_timeout: seconds a ``"multi_worker_mirrored"`` task waits for the others to start
      before it ends the process naming them (``cluster.watch_cluster_start``).

  Raises:
    InvalidConfigError: a device of ``devices`` does not exist, or ``TF_CONFIG`` is wrong
      (``cluster.read_tf_config``).
  """
  checks.check_choice("strategy", name, STRATEGIES)
  if name == "default":
    return tf.distribute.get_strategy()
  if name == "mirrored":
    # Without GPUs there is no NCCL to gain: reduce through one device. TensorFlow 2.15's default
    # collective all-reduce can reuse instance keys when several MirroredStrategy objects train
    # in one process, which aborts with "Shape mismatch in the collective instance".
    if devices:
      check_devices(devices)
    on_cpu = not tf.config.list_logical_devices("GPU")
    return tf.distribute.MirroredStrategy(
      devices, cross_device_ops=tf.distribute.ReductionToOneDevice() if on_cpu else None
    )
  if name == "multi_worker_mirrored":
    parsed = cluster.read_tf_config()
    if parsed is None:  # unset or blank: one local worker (TensorFlow cannot parse a blank one)
      os.environ.pop("TF_CONFIG", None)
    with cluster.watch_cluster_start(parsed, cluster_timeout):
      return tf.distribute.MultiWorkerMirroredStrategy()
  resolver = tpu_resolver(tpu)
  tf.config.experimental_connect_to_cluster(resolver)
  tf.tpu.experimental.initialize_tpu_system(resolver)
  return tf.distribute.TPUStrategy(resolver)


def _device_spec(device):
  try:
    spec = tf.DeviceSpec.from_string(device if device.startswith("/") else "/" + device)
  except ValueError:
    spec = None
  if spec is None or spec.device_type is None:
    raise errors.InvalidConfigError(
      f"`devices` must name devices such as /cpu:0 or /gpu:1, got {device!r}."
    )
  return spec.device_type.upper(), spec.device_index or 0


def check_devices(devices):
  """Refuses a device of ``devices`` this machine does not have, naming those it has.

  CPU devices ``/cpu:1`` and above are first made by splitting the one CPU into logical devices,
  possible only before TensorFlow starts its runtime (afterwards the devices are as they are).

  Raises:
    InvalidConfigError: a device is malformed or does not exist.
  """
  wanted = [_device_spec(d) for d in devices]
  cpus = 1 + max((i for kind, i in wanted if kind == "CPU"), default=0)
  physical = tf.config.list_physical_devices("CPU")
  if cpus > len(physical) == 1 and tf.config.get_logical_device_configuration(physical[0]) is None:
    try:
      tf.config.set_logical_device_configuration(
        physical[0], [tf.config.LogicalDeviceConfiguration()] * cpus
      )
    except RuntimeError:  # the runtime has started: the devices are those it has
      pass
  existing = [d.name for d in tf.config.list_logical_devices()]
  have = {_device_spec(name) for name in existing}
  missing = [d for d, spec in zip(devices, wanted, strict=True) if spec not in have]
  if missing:
    raise errors.InvalidConfigError(
      f"`devices` {list(devices)}: {', '.join(missing)} not on this machine, which has "
      f"{', '.join(existing)}."
    )


def worker_count(strategy):
  """The number of workers (the chief and the workers) of ``strategy``'s cluster; 1 without one.

  Keras reduces a step's logs over the workers only when there are more than one (TensorFlow's
  ``_in_multi_worker_mode``), so a one-worker cluster logs as a single machine does.
  """
  resolver = getattr(strategy, "cluster_resolver", None)
  if resolver is None:
    return 1
  spec = resolver.cluster_spec().as_dict()
  return max(1, sum(len(spec.get(job, ())) for job in ("chief", "worker")))


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
