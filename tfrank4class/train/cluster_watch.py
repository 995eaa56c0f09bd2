"""The watcher of a cluster's start, run as a process of its own by ``cluster.watch_cluster_start``.

    python cluster_watch.py <pid> <timeout> <program> <cluster JSON> <task type> <task index>

Creating a ``MultiWorkerMirroredStrategy`` waits inside TensorFlow, holding Python's lock, until
every task of the cluster has started: no thread of the waiting process runs meanwhile. This
process (standard library only, so it starts at once) writes to the shared stderr every
``LOG_EVERY`` seconds which tasks do not answer on their port yet, and after ``timeout`` seconds
one line naming them, ``<program>: error: TF_CONFIG: the cluster did not start ...``; it then
ends the waiting process ``pid`` with SIGKILL (TensorFlow handles SIGTERM, and the wait ignores
it). It stops by itself when ``pid`` is gone; the waiting process ends it once the strategy
exists.

Example:
  >>> silent_tasks({"worker": ["127.0.0.1:1", "127.0.0.1:2"]}, ("worker", 0))
  ['worker 1 (127.0.0.1:2)']
"""

import json
import os
import signal
import socket
import sys
import time

#: Seconds between the lines that name the tasks not answering yet.
LOG_EVERY = 30


def _answers(address, timeout=1.0):
  host, _, port = address.rpartition(":")
  try:
    with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
      return True
  except OSError:
    return False


def silent_tasks(cluster, me):
  """``"<job> <index> (<address>)"`` of each task of ``cluster`` but ``me`` (``(job, index)``)
  that accepts no connection on its port."""
  return [
    f"{job} {i} ({address})"
    for job, addresses in cluster.items()
    for i, address in enumerate(addresses)
    if (job, i) != me and not _answers(address)
  ]


def _alive(pid):
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    pass
  return True


def watch(pid, timeout, program, cluster, me):
  """Logs and, after ``timeout`` seconds, ends ``pid`` as the module says."""
  start = time.monotonic()
  while True:
    waited = time.monotonic() - start
    time.sleep(max(0.0, min(LOG_EVERY - waited % LOG_EVERY, timeout - waited)))
    if not _alive(pid):
      return
    waited = time.monotonic() - start
    silent = silent_tasks(cluster, me)
    if waited >= timeout:
      missing = ", ".join(silent) or "tasks that answer but have not joined"
      print(
        f"{program}: error: TF_CONFIG: the cluster did not start within {timeout:g} s "
        f"(--cluster_timeout): no answer from {missing}. Start every task of TF_CONFIG's "
        "cluster, each with its own task index.",
        file=sys.stderr,
        flush=True,
      )
      os.kill(pid, signal.SIGKILL)
      return
    print(
      f"{program}: waiting for the cluster ({waited:.0f} s of {timeout:g} s): no answer yet "
      f"from {', '.join(silent) or 'none (they are connecting)'}.",
      file=sys.stderr,
      flush=True,
    )


def main(argv):
  pid, timeout, program, cluster, task_type, index = argv
  watch(int(pid), float(timeout), program, json.loads(cluster), (task_type, int(index)))


if __name__ == "__main__":
  main(sys.argv[1:])
