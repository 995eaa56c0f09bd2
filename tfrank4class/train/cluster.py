"""A multi-worker run's cluster: its ``TF_CONFIG`` checked, its start watched, its losses named.

``MultiWorkerMirroredStrategy`` reads the cluster from the ``TF_CONFIG`` environment variable
(the TensorFlow Model Garden's convention) and, created, waits for every task to start. Alone it
fails late and at length: a malformed ``TF_CONFIG`` or a port in use end in a long traceback, a
worker that never starts leaves the others waiting without a word, and a worker lost mid-run
ends the others with an ``UnavailableError`` traceback. Here:

* ``read_tf_config`` checks ``TF_CONFIG`` before anything connects (valid JSON, a cluster of
  ``host:port`` addresses given once each, this task's type and index in it, its port free) and
  raises ``InvalidConfigError`` naming ``TF_CONFIG`` and what is wrong;
* ``watch_cluster_start`` logs, while the strategy waits, which tasks do not answer yet, and
  after ``timeout`` seconds ends the process with one line naming them (``cluster_watch``);
* ``lost_worker_error`` turns the error of a lost worker into ``WorkerLostError``, one line
  naming the lost task and how to resume (every worker again, with the same ``--model_dir``);
* ``check_shared_model_dir`` refuses workers that do not see the same ``model_dir``: the chief
  writes ``model_dir/cluster.json`` with a random token (``write_marker``) and every worker must
  read it back.

Example:
  >>> config = '{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 2}}'
  >>> read_tf_config({"TF_CONFIG": config}, check_port=False)
  Traceback (most recent call last):
  ...
  tfrank4class.errors.InvalidConfigError: TF_CONFIG: task index 2 is out of range: ...
"""

import json
import os
import re
import secrets
import socket
import subprocess
import sys

import tensorflow as tf

from tfrank4class import atomic, errors

#: The file the chief writes into ``model_dir`` for every worker to read back.
MARKER_FILE = "cluster.json"
#: The task name in TensorFlow's messages about a peer, ``/job:worker/replica:0/task:1``.
_PEER = re.compile(r"/job:(\w+)/replica:\d+/task:(\d+)")


class WorkerLostError(errors.UserError, RuntimeError):
  """A task of the cluster stopped answering during training; the message names it."""


def _invalid(what):
  return errors.InvalidConfigError(f"TF_CONFIG: {what}")


def read_tf_config(environ=None, check_port=True):
  """``(cluster, task_type, task_index)`` of ``TF_CONFIG``, or ``None`` when it is unset or
  empty (one local worker). ``cluster`` is ``{job: [address, ...]}``.

  Raises:
    InvalidConfigError: ``TF_CONFIG`` is not a JSON object with a ``cluster`` of ``host:port``
      lists (each address once) and a ``task`` whose type and index name one of them, or (with
      ``check_port``) this task's port is already in use on this machine.
  """
  text = (os.environ if environ is None else environ).get("TF_CONFIG", "").strip()
  if not text:
    return None
  try:
    tf_config = json.loads(text)
  except json.JSONDecodeError as e:
    raise _invalid(f"not valid JSON ({e}): {text[:200]!r}.") from None
  if not isinstance(tf_config, dict) or not isinstance(tf_config.get("cluster"), dict):
    raise _invalid(f'a JSON object with a "cluster" object is expected, got {text[:200]!r}.')
  cluster = tf_config["cluster"]
  _check_addresses(cluster)
  task = tf_config.get("task")
  if not isinstance(task, dict) or "type" not in task or "index" not in task:
    raise _invalid(f'"task" must be an object with "type" and "index", got {task!r}.')
  task_type, index = task["type"], task["index"]
  if task_type not in cluster:
    raise _invalid(f"task type {task_type!r} is not a job of the cluster {sorted(cluster)}.")
  count = len(cluster[task_type])
  if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < count:
    raise _invalid(
      f"task index {index!r} is out of range: the cluster has {count} {task_type!r} task(s), "
      f"index 0 to {count - 1}."
    )
  if check_port:
    _check_port_free(task_type, index, cluster[task_type][index])
  return cluster, task_type, index


def _check_addresses(cluster):
  seen = {}
  for job, addresses in cluster.items():
    if not isinstance(addresses, list) or not addresses:
      raise _invalid(f"job {job!r} must be a non-empty list of host:port, got {addresses!r}.")
    for index, address in enumerate(addresses):
      host, _, port = str(address).rpartition(":")
      if not host or not port.isdigit():
        raise _invalid(f"{job} {index}'s address {address!r} is not host:port.")
      if address in seen:
        raise _invalid(f"{job} {index} has the address {address!r} of {seen[address]}.")
      seen[address] = f"{job} {index}"


def _check_port_free(task_type, index, address):
  """TensorFlow's server listens on the port on every interface: it must be free here.

  Like gRPC, the probe reuses a port whose earlier connections linger (TIME_WAIT, after a
  restart); only a socket listening there makes it fail.
  """
  port = int(address.rpartition(":")[2])
  with socket.socket() as probe:
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
      probe.bind(("", port))
    except OSError as e:
      raise _invalid(
        f"this task is {task_type} {index} at {address}, and port {port} is in use on this "
        f"machine ({e.strerror}): another process listens there, e.g. a worker started twice "
        "with the same task index."
      ) from None


class watch_cluster_start:  # noqa: N801  (used as a function: `with watch_cluster_start(...)`)
  """While the ``with`` block runs (creating the strategy, which waits for every task of
  ``parsed``, ``read_tf_config``'s result), a process of its own (``cluster_watch``) logs every
  30 s the tasks that do not answer yet, and after ``timeout`` seconds prints one line naming
  them and ends this process. ``parsed=None`` watches nothing."""

  def __init__(self, parsed, timeout, program="tfrank4class-train"):
    self._parsed, self._timeout, self._program = parsed, timeout, program
    self._watcher = None

  def __enter__(self):
    if self._parsed is not None:
      cluster, task_type, index = self._parsed
      script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cluster_watch.py")
      self._watcher = subprocess.Popen(
        [sys.executable, script, str(os.getpid()), str(self._timeout), self._program]
        + [json.dumps(cluster), task_type, str(index)]
      )
    return self

  def __exit__(self, *exc):
    if self._watcher is not None:
      self._watcher.terminate()
      self._watcher.wait()


def lost_worker_error(error, parsed, model_dir):
  """The ``WorkerLostError`` for ``error`` (an ``UnavailableError`` or similar of a collective
  op), naming the lost task and saying how to resume."""
  me = None if parsed is None else (parsed[1], parsed[2])
  peers = [(job, int(i)) for job, i in _PEER.findall(str(error)) if (job, int(i)) != me]
  if peers and parsed is not None and peers[0][0] in parsed[0]:
    job, index = peers[0]
    lost = f"{job} {index} ({parsed[0][job][index]})"
  else:
    lost = f"{peers[0][0]} {peers[0][1]}" if peers else "a task of the cluster"
  return WorkerLostError(
    f"Lost {lost} during training ({type(error).__name__}). Every worker must restart: run each "
    f"again with its TF_CONFIG and the same flags ({' '.join(sys.argv[1:])}); training resumes "
    f"from the last backup in --model_dir={model_dir}."
  )


def write_marker(strategy, model_dir):
  """The chief's part of ``check_shared_model_dir``: writes ``model_dir/cluster.json``, the
  cluster and a new random token (before the barrier that lets the other workers read it)."""
  spec = strategy.cluster_resolver.cluster_spec().as_dict()
  token = secrets.randbelow(1 << 20) + 1
  atomic.write_text(
    os.path.join(model_dir, MARKER_FILE), json.dumps({"cluster": spec, "token": token})
  )


def check_shared_model_dir(strategy, model_dir):
  """Refuses workers that do not all see the same ``model_dir`` (each resumes from the backup
  there, so separate directories cannot resume together): every worker reads the token of
  ``write_marker`` (after the barrier that follows it) and raises ``InvalidConfigError`` unless
  all read the same one (the mean token over the replicas, squared, is the mean of its square).
  """
  try:
    with open(os.path.join(model_dir, MARKER_FILE), encoding="utf-8") as f:
      token = float(json.load(f)["token"])
  except (OSError, ValueError, KeyError, TypeError):
    token = 0.0

  def mean(value):
    per_replica = strategy.run(lambda: tf.constant(value, tf.float64))
    return float(strategy.reduce(tf.distribute.ReduceOp.MEAN, per_replica, axis=None))

  shared = mean(token) ** 2 == mean(token * token)  # every worker makes both calls
  if token == 0.0 or not shared:
    who = "this worker" if token == 0.0 else "another worker"
    raise errors.InvalidConfigError(
      f"TF_CONFIG: the workers do not share --model_dir={model_dir}: {who} does not see the "
      f"chief's {MARKER_FILE} there. Every worker needs the same --model_dir on storage they "
      "all share (a network file system, or gs://): a run resumes from the backup there."
    )
