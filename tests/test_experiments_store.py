"""experiments/store.py: the resumable records file shared by processes, and what ran a record."""

import json
import os
import pathlib
import platform
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from experiments import store

ROOT = pathlib.Path(__file__).resolve().parents[1]
KEY_FIELDS = ("dataset", "protocol", "loss", "interaction", "seed")


def _check(record):
  """A record of these tests: every ``KEY_FIELDS`` key, an integer seed >= 0."""
  missing = [k for k in KEY_FIELDS if k not in record]
  if missing or not isinstance(record["seed"], int) or record["seed"] < 0:
    raise ValueError(f"A test record needs {KEY_FIELDS} and a seed >= 0, got {record!r}.")
  return record


def _store(path):
  return store.RecordStore(path, KEY_FIELDS, _check)


def _record(
  dataset="d", protocol="frozen", loss="softmax_loss", interaction="dot", seed=0, **metrics
):
  values = {"top_1": 0.5, "top_5": 0.9, "ndcg_5": 0.7, "mrr": 0.6}
  values.update(metrics)
  return {
    "dataset": dataset,
    "protocol": protocol,
    "loss": loss,
    "interaction": interaction,
    "seed": seed,
    "train_seconds": 1.5,
    **values,
  }


def test_store_appends_atomically_and_reloads(tmp_path):
  path = tmp_path / "out" / "grid.json"
  records = _store(path)
  assert len(records) == 0 and not path.exists()
  records.add(_record(seed=0))
  records.add(_record(seed=1, ndcg_5=0.75))
  with open(path) as f:
    on_disk = json.load(f)
  assert isinstance(on_disk, list) and [r["seed"] for r in on_disk] == [0, 1]
  again = _store(path)
  assert again.records == on_disk
  assert ("d", "frozen", "softmax_loss", "dot", 1) in again
  assert ("d", "frozen", "softmax_loss", "dot", 2) not in again
  assert not [n for n in os.listdir(path.parent) if ".tmp" in n]
  with pytest.raises(ValueError, match="already holds a record"):
    again.add(_record(seed=1))
  assert len(_store(path)) == 2  # the refused record was not written


def test_two_stores_on_one_file_keep_each_others_records(tmp_path):
  path = tmp_path / "grid.json"
  first, second = _store(path), _store(path)  # two processes' views
  second.add(_record(seed=1))
  first.add(_record(seed=0))  # must not overwrite the record the other store wrote
  assert sorted(r["seed"] for r in _store(path).records) == [0, 1]
  assert ("d", "frozen", "softmax_loss", "dot", 1) in first  # taken in when it wrote
  with pytest.raises(ValueError, match="already holds a record"):
    second.add(_record(seed=0))  # the other store's run, seen on disk: recorded once
  assert len(_store(path)) == 2


def test_refresh_takes_in_the_other_stores_records_without_writing(tmp_path):
  path = tmp_path / "grid.json"
  first, second = _store(path), _store(path)
  second.add(_record(seed=1))
  written = path.read_bytes()
  assert ("d", "frozen", "softmax_loss", "dot", 1) not in first
  first.refresh()
  assert ("d", "frozen", "softmax_loss", "dot", 1) in first and len(first) == 1
  assert path.read_bytes() == written
  first.refresh()  # nothing new: nothing twice
  assert len(first) == 1
  _store(tmp_path / "none.json").refresh()  # no file yet: nothing to take in


_WRITER = """
import os, sys, time
sys.path.insert(0, {root!r})
from experiments import store as store_lib
store = store_lib.RecordStore({path!r}, key_fields=("writer", "seed"), check=lambda r: r)
open({path!r} + ".ready{writer}", "w").close()
while not os.path.exists({path!r} + ".go"):  # both writers start adding at once
  time.sleep(0.01)
for seed in range(100):
  store.add({{"writer": {writer}, "seed": seed}})
"""


def test_concurrent_processes_lose_no_record(tmp_path):

  path = str(tmp_path / "grid.json")
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
  writers = [
    subprocess.Popen(
      [sys.executable, "-c", _WRITER.format(root=str(ROOT), path=path, writer=w)], env=env
    )
    for w in (0, 1)
  ]
  deadline = time.monotonic() + 300
  while not all(os.path.exists(f"{path}.ready{w}") for w in (0, 1)):
    assert time.monotonic() < deadline and all(w.poll() is None for w in writers)
    time.sleep(0.05)
  open(f"{path}.go", "w").close()
  assert [w.wait(timeout=300) for w in writers] == [0, 0]
  with open(path) as f:
    found = sorted((r["writer"], r["seed"]) for r in json.load(f))
  assert found == [(w, s) for w in (0, 1) for s in range(100)]


def test_store_refuses_bad_files(tmp_path):
  bad = tmp_path / "bad.json"
  bad.write_text("{not json")
  with pytest.raises(ValueError, match="is not valid JSON"):
    _store(bad)
  bad.write_text(json.dumps({"a": 1}))
  with pytest.raises(ValueError, match="must hold a JSON list, got dict"):
    _store(bad)
  bad.write_text(json.dumps([_record(), _record()]))
  with pytest.raises(ValueError, match="already holds a record"):
    _store(bad)


def test_store_with_other_key_fields_and_check(tmp_path):
  # The grid keys a run by more fields (learning rate, stage); the store takes any.
  def check(record):
    if record.get("lr", 0) <= 0:
      raise ValueError(f"`lr` must be > 0, got {record.get('lr')!r}.")
    return record

  path = tmp_path / "grid.json"
  records = store.RecordStore(path, key_fields=("loss", "lr", "seed"), check=check)
  records.add({"loss": "a", "lr": 1e-3, "seed": 0})
  records.add({"loss": "a", "lr": 1e-2, "seed": 0})  # same seed, other rate: another run
  assert ("a", 1e-2, 0) in records and ("a", 1e-4, 0) not in records
  with pytest.raises(ValueError, match="already holds a record of \\{'loss': 'a', 'lr': 0.001"):
    records.add({"loss": "a", "lr": 1e-3, "seed": 0})
  with pytest.raises(ValueError, match="`lr` must be > 0"):
    records.add({"loss": "a", "lr": 0.0, "seed": 1})
  assert len(store.RecordStore(path, key_fields=("loss", "lr", "seed"), check=check)) == 2


def test_claim_holds_a_run_for_one_holder_until_it_lets_go(tmp_path):
  path = tmp_path / "grid.json"
  first = store.RecordStore(path, key_fields=("seed",), check=lambda r: r)
  second = store.RecordStore(path, key_fields=("seed",), check=lambda r: r)
  with first.claim((1,)) as mine:
    assert mine
    with second.claim((1,)) as theirs, second.claim((2,)) as other:
      assert not theirs and other  # held by another holder; another run is free
  with second.claim((1,)) as theirs:
    assert theirs  # let go without a record: free again


def test_claim_of_a_run_recorded_meanwhile_is_refused(tmp_path):
  """A holder records its run before letting go; a store that had not read that record yet
  refuses the run when it gets the claim, so no run is trained twice."""
  path = tmp_path / "grid.json"
  first = store.RecordStore(path, key_fields=("seed",), check=lambda r: r)
  stale = store.RecordStore(path, key_fields=("seed",), check=lambda r: r)
  with first.claim((1,)) as mine:
    assert mine
    first.add({"seed": 1})
  with stale.claim((1,)) as theirs:
    assert not theirs and (1,) in stale


_HOLDER = """
import sys, time
sys.path.insert(0, {root!r})
from experiments import store as store_lib
store = store_lib.RecordStore({path!r}, key_fields=("seed",), check=lambda r: r)
with store.claim((1,)) as mine:
  assert mine
  open({path!r} + ".held", "w").close()
  time.sleep(600)
"""


def test_a_killed_holders_claim_is_free_at_once(tmp_path):

  path = str(tmp_path / "grid.json")
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
  holder = subprocess.Popen(
    [sys.executable, "-c", _HOLDER.format(root=str(ROOT), path=path)], env=env
  )
  deadline = time.monotonic() + 300
  while not os.path.exists(f"{path}.held"):
    assert time.monotonic() < deadline and holder.poll() is None
    time.sleep(0.05)
  records = store.RecordStore(path, key_fields=("seed",), check=lambda r: r)
  with records.claim((1,)) as mine:
    assert not mine
  holder.send_signal(signal.SIGKILL)
  holder.wait(timeout=60)
  with records.claim((1,)) as mine:
    assert mine


def test_software_versions_name_what_ran(tmp_path):

  found = store.software_versions()
  assert found["python"] == platform.python_version() and found["tensorflow"] == tf.__version__
  assert found["numpy"] == np.__version__
  assert found["keras"].split()[0] in ("keras", "tf_keras")
  head = subprocess.run(
    ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=False
  )
  if head.returncode == 0:  # a git checkout: its commit, "+modified" when tracked files differ
    assert found["commit"].split("+")[0] == head.stdout.strip()
  else:
    assert found["commit"] is None
