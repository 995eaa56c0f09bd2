"""A multi-worker run on localhost: a bad TF_CONFIG, a one-worker cluster, a missing, lost or
separately stored worker, the validation split in full, and devices that do not exist.

The process tests start real ``tfrank4class-train`` processes on free localhost ports (the
launcher of ``tests/test_flavour.py``'s two-worker run). Each one imports TensorFlow and most
train a tiny model, which takes 10-60 s on two cores, so they are ``slow`` but one: a malformed
``TF_CONFIG`` refused before TensorFlow connects (``test_a_malformed_tf_config_is_one_line``),
the fast representative of the default suite, beside the in-process checks of ``read_tf_config``,
``worker_count`` and ``check_devices``.
"""

import json
import re
import signal
import socket
import subprocess
import sys
import time

import pytest
import tensorflow as tf
from _training import env, tiny, train_cmd
from test_flavour import _free_ports

from tfrank4class import data, errors
from tfrank4class.train import cluster, cluster_watch, experiment
from tfrank4class.train import strategy as strategy_lib

PROGRAM = "tfrank4class-train: error: "


def _tf_config(workers, index, job="worker"):
  return json.dumps({"cluster": {job: workers}, "task": {"type": job, "index": index}})


def _start(model_dir, tf_config, *extra):
  """A training process of the tiny run in ``model_dir`` with ``tf_config`` (None: unset)."""
  environ = env()
  environ.pop("TF_CONFIG", None)
  if tf_config is not None:
    environ["TF_CONFIG"] = tf_config
  return subprocess.Popen(
    train_cmd(model_dir, "--strategy=multi_worker_mirrored", "--epochs=1", *extra),
    env=environ,
    stdout=subprocess.PIPE,
    stderr=subprocess.STDOUT,
    text=True,
  )


def _cluster(model_dirs, *extra, workers=None):
  """Starts one worker per ``model_dirs`` entry; returns the processes and the addresses."""
  workers = workers or [f"127.0.0.1:{p}" for p in _free_ports(len(model_dirs))]
  procs = [_start(d, _tf_config(workers, i), *extra) for i, d in enumerate(model_dirs)]
  return procs, workers


def _finish(procs, timeout=600):
  return [p.communicate(timeout=timeout)[0] for p in procs]


def _error_lines(output):
  return [line for line in output.splitlines() if line.startswith(PROGRAM)]


# ----------------------------------------------------------------- TF_CONFIG, checked in process


@pytest.mark.parametrize(
  "tf_config, message",
  [
    ("{'cluster': ", r"TF_CONFIG: not valid JSON \(Expecting property name"),
    ('["a:1"]', r'TF_CONFIG: a JSON object with a "cluster" object is expected'),
    (_tf_config(["a:1", "b:2"], 2), r"TF_CONFIG: task index 2 is out of range: the cluster has 2"),
    (
      _tf_config(["a:1"], 0, job="chief").replace('"type": "chief"', '"type": "ps"'),
      r"'ps' is not",
    ),
    (_tf_config(["a:1", "a:1"], 0), r"TF_CONFIG: worker 1 has the address 'a:1' of worker 0"),
    (_tf_config(["a"], 0), r"TF_CONFIG: worker 0's address 'a' is not host:port"),
    ('{"cluster": {"worker": ["a:1"]}}', r'TF_CONFIG: "task" must be an object'),
  ],
)
def test_read_tf_config_names_what_is_wrong(tf_config, message):
  with pytest.raises(errors.InvalidConfigError, match=message):
    cluster.read_tf_config({"TF_CONFIG": tf_config}, check_port=False)


def test_read_tf_config_refuses_a_port_in_use_and_reads_a_good_one():
  with socket.socket() as taken:
    taken.bind(("", 0))
    taken.listen()
    port = taken.getsockname()[1]
    config = _tf_config([f"127.0.0.1:{port}", "127.0.0.1:1"], 0)
    with pytest.raises(errors.InvalidConfigError, match=rf"worker 0 at 127.0.0.1:{port}.*in use"):
      cluster.read_tf_config({"TF_CONFIG": config})
  assert cluster.read_tf_config({"TF_CONFIG": config}) == (
    {"worker": [f"127.0.0.1:{port}", "127.0.0.1:1"]},
    "worker",
    0,
  )
  assert cluster.read_tf_config({"TF_CONFIG": " "}) is None


def test_a_lost_worker_is_named_with_how_to_resume():
  parsed = ({"worker": ["h:1", "h:2"]}, "worker", 0)
  lost = tf.errors.UnavailableError(
    None, None, "cluster check alive failed, /job:worker/replica:0/task:1 is down"
  )
  message = str(cluster.lost_worker_error(lost, parsed, "runs/x"))
  assert message.startswith("Lost worker 1 (h:2) during training (UnavailableError).")
  assert message.endswith("training resumes from the last backup in --model_dir=runs/x.")


class _Resolved:
  def __init__(self, spec):
    self.cluster_resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
      tf.train.ClusterSpec(spec)
    )


def test_worker_count_counts_the_chief_and_the_workers():
  assert strategy_lib.worker_count(tf.distribute.get_strategy()) == 1
  assert strategy_lib.worker_count(_Resolved({})) == 1
  assert strategy_lib.worker_count(_Resolved({"worker": ["a:1"]})) == 1
  assert strategy_lib.worker_count(_Resolved({"chief": ["a:1"], "worker": ["b:1", "c:1"]})) == 3


def test_devices_that_do_not_exist_are_refused_naming_those_that_do():
  # The conftest split the CPU in two: /cpu:0 and /cpu:1 exist, nothing else.
  strategy_lib.check_devices(["/cpu:0", "/cpu:1"])
  mirrored = strategy_lib.make_strategy("mirrored", devices=["/cpu:0", "/cpu:1"])
  assert sorted(mirrored.extended.worker_devices) == [
    "/job:localhost/replica:0/task:0/device:CPU:0",
    "/job:localhost/replica:0/task:0/device:CPU:1",
  ]
  for devices, missing in [
    (["/gpu:0", "/gpu:1"], "/gpu:0, /gpu:1"),
    (["/cpu:0", "/cpu:7"], "/cpu:7"),
  ]:
    with pytest.raises(
      errors.InvalidConfigError,
      match=rf"`devices` .*: {re.escape(missing)} not on this machine, which has "
      r"/device:CPU:0, /device:CPU:1\.",
    ):
      strategy_lib.make_strategy("mirrored", devices=devices)
  with pytest.raises(errors.InvalidConfigError, match=r"must name devices .* got 'tpu-ish'"):
    strategy_lib.check_devices(["tpu-ish"])


def test_the_watcher_logs_the_silent_tasks_then_names_them_and_ends_the_waiting_process(
  monkeypatch, capsys
):
  monkeypatch.setattr(cluster_watch, "LOG_EVERY", 1)
  waiting = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
  silent = f"127.0.0.1:{_free_ports(1)[0]}"
  cluster_watch.watch(waiting.pid, 2.5, "prog", {"worker": ["me:1", silent]}, ("worker", 0))
  assert waiting.wait(timeout=10) == -signal.SIGKILL
  lines = capsys.readouterr().err.splitlines()
  assert lines == [
    f"prog: waiting for the cluster (1 s of 2.5 s): no answer yet from worker 1 ({silent}).",
    f"prog: waiting for the cluster (2 s of 2.5 s): no answer yet from worker 1 ({silent}).",
    "prog: error: TF_CONFIG: the cluster did not start within 2.5 s (--cluster_timeout): no "
    f"answer from worker 1 ({silent}). Start every task of TF_CONFIG's cluster, each with its "
    "own task index.",
  ]


def test_each_worker_gets_the_same_full_batches_and_every_row_once_with_weight_one():
  config = tiny(batch_size=32)
  rows = experiment._count_rows(config, "validation")  # noqa: SLF001
  steps, make = experiment._padded_validation(config, "validation", rows)  # noqa: SLF001
  assert rows == 1247 and steps == 39  # 1,216 rows in full global batches
  weights, texts = [], []
  for index in range(2):
    context = tf.distribute.InputContext(2, index, num_replicas_in_sync=2)
    batches = list(make(context))
    assert len(batches) == steps and {int(tf.shape(b[2])[0]) for b in batches} == {16}
    for features, _, weight in batches:
      weights += weight.numpy().tolist()
      texts += [t for t, w in zip(features.numpy().tolist(), weight.numpy()) if w == 1]
  assert sum(weights) == rows and len(weights) == steps * 32 and set(weights) == {0.0, 1.0}
  every_row = [
    t
    for features, _ in data.load("goemotions_sample", "validation", batch_size=512)
    for t in features.numpy().tolist()
  ]
  assert sorted(texts) == sorted(every_row)


def test_the_cluster_timeout_must_be_positive():
  with pytest.raises(ValueError, match=r"`cluster_timeout` must be .*got 0"):
    tiny(cluster_timeout=0).validate()
  assert tiny(cluster_timeout=2.5).validate().cluster_timeout == 2.5


# ----------------------------------------------------------------- processes on localhost


def test_a_malformed_tf_config_is_one_line(tmp_path):
  (output,) = _finish([_start(tmp_path / "run", "{'cluster': ")])
  assert _error_lines(output) == [
    PROGRAM + "TF_CONFIG: not valid JSON (Expecting property name enclosed in double quotes: "
    "line 1 column 2 (char 1)): \"{'cluster':\"."
  ], output
  assert "Traceback" not in output


@pytest.mark.slow
def test_each_bad_tf_config_is_one_line_before_connecting(tmp_path):
  port = _free_ports(1)[0]
  with socket.socket() as taken:
    taken.bind(("", port))
    taken.listen()
    cases = {
      "out of range": (_tf_config(["127.0.0.1:1", "127.0.0.1:2"], 2), "task index 2 is out"),
      "port in use": (_tf_config([f"127.0.0.1:{port}", "127.0.0.1:1"], 0), f"port {port} is in"),
    }
    procs = {k: _start(tmp_path / k, c) for k, (c, _) in cases.items()}
    outputs = dict(zip(procs, _finish(list(procs.values())), strict=True))
  for name, (_, expected) in cases.items():
    assert procs[name].returncode == 1, outputs[name][-2000:]
    (line,) = _error_lines(outputs[name])
    assert line.startswith(PROGRAM + "TF_CONFIG: ") and expected in line, line
    assert "Traceback" not in outputs[name]


@pytest.mark.slow
def test_two_workers_with_the_same_index_the_second_is_refused(tmp_path):
  workers = [f"127.0.0.1:{p}" for p in _free_ports(2)]
  first = _start(tmp_path / "run", _tf_config(workers, 0), "--cluster_timeout=60")
  time.sleep(10)  # the first has started its server
  (output,) = _finish([_start(tmp_path / "run", _tf_config(workers, 0))])
  first.kill()
  first.communicate()
  (line,) = _error_lines(output)
  assert f"worker 0 at {workers[0]}, and port" in line and "the same task index" in line


@pytest.mark.slow
def test_a_worker_that_never_starts_is_named_after_the_timeout(tmp_path):
  workers = [f"127.0.0.1:{p}" for p in _free_ports(2)]
  proc = _start(tmp_path / "run", _tf_config(workers, 0), "--cluster_timeout=8")
  (output,) = _finish([proc], timeout=300)
  assert proc.returncode == -signal.SIGKILL
  assert _error_lines(output) == [
    PROGRAM + "TF_CONFIG: the cluster did not start within 8 s (--cluster_timeout): no answer "
    f"from worker 1 ({workers[1]}). Start every task of TF_CONFIG's cluster, each with its own "
    "task index."
  ], output[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("tf_config", ["one worker", None])
def test_a_one_worker_cluster_trains(tmp_path, tf_config):
  if tf_config:
    tf_config = _tf_config([f"127.0.0.1:{_free_ports(1)[0]}"], 0)
  proc = _start(tmp_path / "run", tf_config, "--steps=2")
  (output,) = _finish([proc])
  assert proc.returncode == 0, output[-3000:]
  assert json.loads((tmp_path / "run" / "results.json").read_text())["test"]["top_5"] > 0


@pytest.mark.slow
def test_workers_without_a_shared_model_dir_are_refused(tmp_path):
  procs, _ = _cluster([tmp_path / "chief_dir", tmp_path / "worker_dir"], "--steps=2")
  outputs = _finish(procs)
  assert [p.returncode for p in procs] == [1, 1], outputs[0][-2000:] + outputs[1][-2000:]
  for output, who in zip(outputs, ("another worker", "this worker"), strict=True):
    (line,) = _error_lines(output)
    assert line.startswith(PROGRAM + "TF_CONFIG: the workers do not share --model_dir=") and (
      f"{who} does not see the chief's cluster.json" in line
    ), line


def _validation_scalars(model_dir):
  """``{tag: value}`` of the epoch scalars TensorBoard holds for validation (one epoch)."""
  values = {}
  for path in sorted((model_dir / "logs" / "validation").glob("events.out.tfevents.*")):
    for record in tf.data.TFRecordDataset(str(path)):
      for value in tf.compat.v1.Event.FromString(record.numpy()).summary.value:
        values[value.tag] = float(tf.make_ndarray(value.tensor))
  return values


@pytest.mark.slow
def test_two_workers_choose_on_every_validation_row(tmp_path):
  """The validation metric logged for the only epoch (best.keras's) counts every row of the
  split (1,247; 1,216 in full global batches of 32) once: Top-1 times the row count is a whole
  number of rows, and it is results.json's, up to near-ties that the batch size decides (the
  replicas score batches of 16, the chief's evaluation batches of 256)."""
  run = tmp_path / "run"
  procs, _ = _cluster([run, run], "--steps=3")
  outputs = _finish(procs)
  assert [p.returncode for p in procs] == [0, 0], outputs[0][-3000:] + outputs[1][-3000:]
  rows = sum(
    int(tf.shape(y)[0]) for _, y in data.load("goemotions_sample", "validation", batch_size=512)
  )
  logged = _validation_scalars(run)
  correct = logged["epoch_top_1_accuracy"] * rows
  assert correct == pytest.approx(round(correct), abs=1e-3) and round(correct) > 0
  validation = json.loads((run / "results.json").read_text())["validation"]
  for metric, tag in (("top_1", "epoch_top_1_accuracy"), ("ndcg_5", "epoch_ndcg_5")):
    assert logged[tag] == pytest.approx(validation[metric], abs=2 / rows), metric


def _wait_for(path_glob, procs, timeout=300):
  start = time.monotonic()
  while not list(path_glob()):
    assert time.monotonic() - start < timeout and all(p.poll() is None for p in procs)
    time.sleep(0.5)


@pytest.mark.slow
@pytest.mark.parametrize("killed", [1, 0], ids=["worker", "chief"])
def test_a_lost_task_ends_the_others_in_one_line_and_all_resume(tmp_path, killed):
  run = tmp_path / "run"
  extra = ("--steps=40", "--backup_every=5")
  procs, workers = _cluster([run, run], *extra)
  _wait_for(lambda: (run / "backup").glob("step_*.weights.h5"), procs)
  procs[killed].send_signal(signal.SIGKILL)
  survivor = procs[1 - killed]
  (output,) = _finish([survivor], timeout=300)
  procs[killed].communicate()
  assert survivor.returncode == 1, output[-3000:]
  (line,) = _error_lines(output)
  assert line.startswith(f"{PROGRAM}Lost worker {killed} ({workers[killed]}) during training")
  assert f"--model_dir={run}" in line and "Traceback" not in output
  procs, _ = _cluster([run, run], *extra, workers=workers)  # the same TF_CONFIG, as a user would
  outputs = _finish(procs)
  assert [p.returncode for p in procs] == [0, 0], outputs[0][-3000:] + outputs[1][-3000:]
  assert "Resuming the run in" in outputs[0]
  assert json.loads((run / "results.json").read_text())["test"]["top_5"] > 0


@pytest.mark.slow
def test_cpu_devices_are_made_by_splitting_the_cpu_before_tensorflow_starts():
  """What the training binary does with --devices=/cpu:0,/cpu:1 (no conftest split there)."""
  script = (
    "from tfrank4class.train import strategy\n"
    "s = strategy.make_strategy('mirrored', devices=['/cpu:0', '/cpu:1'])\n"
    "print(sorted(s.extended.worker_devices))\n"
  )
  done = subprocess.run(
    [sys.executable, "-c", script], env=env(), capture_output=True, text=True, timeout=300
  )
  assert done.returncode == 0, done.stderr[-2000:]
  assert done.stdout.splitlines()[-1] == str(
    [f"/job:localhost/replica:0/task:0/device:CPU:{i}" for i in range(2)]
  )
