"""benchmarks/grid_store.py: records, resumable store, training helpers, statistics."""

import json
import os
import pathlib

import grid_store as grid
import numpy as np
import pytest
import tensorflow as tf
from scipy import stats


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


def test_check_record_accepts_a_valid_record():
  record = _record()
  assert grid.check_record(record) is record
  assert grid.record_key(record) == grid.Cell("d", "frozen", "softmax_loss", "dot", 0)


@pytest.mark.parametrize(
  "change, match",
  [
    ({"ndcg_5": None}, "`ndcg_5` must be a finite number"),
    ({"top_1": 1.2}, "`top_1` must be a test-split metric in \\[0, 1\\]"),
    ({"protocol": "fine_tune"}, "`protocol` must be one of"),
    ({"interaction": "mlp"}, "`interaction` must be one of"),
    ({"seed": -1}, "`seed` must be an integer >= 0"),
    ({"loss": ""}, "`loss` must be a non-empty string"),
    ({"train_seconds": -1.0}, "`train_seconds` must be a finite number >= 0.0"),
  ],
)
def test_check_record_names_the_bad_key(change, match):
  with pytest.raises(ValueError, match=match):
    grid.check_record({**_record(), **change})


def test_check_record_names_missing_keys():
  record = _record()
  del record["mrr"], record["train_seconds"]
  with pytest.raises(ValueError, match=r"lacks the key\(s\) \['mrr', 'train_seconds'\]"):
    grid.check_record(record)


def test_store_appends_atomically_and_reloads(tmp_path):
  path = tmp_path / "out" / "grid.json"
  store = grid.RecordStore(path)
  assert len(store) == 0 and not path.exists()
  store.add(_record(seed=0))
  store.add(_record(seed=1, ndcg_5=0.75))
  with open(path) as f:
    on_disk = json.load(f)
  assert isinstance(on_disk, list) and [r["seed"] for r in on_disk] == [0, 1]
  again = grid.RecordStore(path)
  assert again.records == on_disk
  assert ("d", "frozen", "softmax_loss", "dot", 1) in again
  assert ("d", "frozen", "softmax_loss", "dot", 2) not in again
  assert not [n for n in os.listdir(path.parent) if ".tmp" in n]
  with pytest.raises(ValueError, match="already holds a record"):
    again.add(_record(seed=1))
  assert len(grid.RecordStore(path)) == 2  # the refused record was not written


def test_two_stores_on_one_file_keep_each_others_records(tmp_path):
  path = tmp_path / "grid.json"
  first, second = grid.RecordStore(path), grid.RecordStore(path)  # two processes' views
  second.add(_record(seed=1))
  first.add(_record(seed=0))  # must not overwrite the record the other store wrote
  assert sorted(r["seed"] for r in grid.RecordStore(path).records) == [0, 1]
  assert ("d", "frozen", "softmax_loss", "dot", 1) in first  # taken in when it wrote
  with pytest.raises(ValueError, match="already holds a record"):
    second.add(_record(seed=0))  # the other store's run, seen on disk: recorded once
  assert len(grid.RecordStore(path)) == 2


def test_refresh_takes_in_the_other_stores_records_without_writing(tmp_path):
  path = tmp_path / "grid.json"
  first, second = grid.RecordStore(path), grid.RecordStore(path)
  second.add(_record(seed=1))
  written = path.read_bytes()
  assert ("d", "frozen", "softmax_loss", "dot", 1) not in first
  first.refresh()
  assert ("d", "frozen", "softmax_loss", "dot", 1) in first and len(first) == 1
  assert path.read_bytes() == written
  first.refresh()  # nothing new: nothing twice
  assert len(first) == 1
  grid.RecordStore(tmp_path / "none.json").refresh()  # no file yet: nothing to take in


_WRITER = """
import os, sys, time
sys.path.insert(0, {benchmarks!r})
import grid_store
store = grid_store.RecordStore({path!r}, key_fields=("writer", "seed"), check=lambda r: r)
open({path!r} + ".ready{writer}", "w").close()
while not os.path.exists({path!r} + ".go"):  # both writers start adding at once
  time.sleep(0.01)
for seed in range(100):
  store.add({{"writer": {writer}, "seed": seed}})
"""


def test_concurrent_processes_lose_no_record(tmp_path):
  import subprocess
  import sys
  import time

  path = str(tmp_path / "grid.json")
  benchmarks = str(pathlib.Path(grid.__file__).parent)
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
  writers = [
    subprocess.Popen(
      [sys.executable, "-c", _WRITER.format(benchmarks=benchmarks, path=path, writer=w)], env=env
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
    grid.RecordStore(bad)
  bad.write_text(json.dumps({"a": 1}))
  with pytest.raises(ValueError, match="must hold a JSON list, got dict"):
    grid.RecordStore(bad)
  bad.write_text(json.dumps([_record(), _record()]))
  with pytest.raises(ValueError, match="already holds a record"):
    grid.RecordStore(bad)


def test_grid_cells_order_and_validation():
  cells = grid.grid_cells(["a", "b"], "frozen", ["l1", "l2"], ["dot", "concat"], range(2))
  assert len(cells) == 16
  assert cells[:5] == [
    grid.Cell("a", "frozen", "l1", "dot", 0),
    grid.Cell("a", "frozen", "l1", "concat", 0),
    grid.Cell("a", "frozen", "l2", "dot", 0),
    grid.Cell("a", "frozen", "l2", "concat", 0),
    grid.Cell("a", "frozen", "l1", "dot", 1),
  ]
  with pytest.raises(ValueError, match="`interactions` must be one of"):
    grid.grid_cells(["a"], "frozen", ["l1"], ["bilinear"], [0])
  with pytest.raises(ValueError, match="`protocol` must be one of"):
    grid.grid_cells(["a"], "e2e", ["l1"], ["dot"], [0])


def test_summarize_matches_scipy():
  rng = np.random.default_rng(0)
  base = rng.normal(0.70, 0.01, 5)
  other = base + rng.normal(0.003, 0.002, 5)
  records = [_record(seed=s, ndcg_5=float(base[s])) for s in range(5)]
  records += [_record(seed=s, loss="approx_ndcg_loss", ndcg_5=float(other[s])) for s in range(5)]
  records += [_record(seed=0, loss="mean_squared_loss")]  # one seed: no interval
  records += [_record(seed=s, dataset="e", loss="approx_ndcg_loss") for s in range(3)]
  rows = grid.summarize(records)
  assert [(r["dataset"], r["loss"]) for r in rows] == [
    ("d", "softmax_loss"),
    ("d", "approx_ndcg_loss"),
    ("e", "approx_ndcg_loss"),
  ]
  b, o, e = rows
  low, high = stats.t.interval(0.95, 4, loc=np.mean(base), scale=stats.sem(base))
  assert b["intervals"]["ndcg_5"].low == pytest.approx(low, abs=1e-12)
  assert b["intervals"]["ndcg_5"].high == pytest.approx(high, abs=1e-12)
  assert b["paired"] == {}
  ci = stats.ttest_rel(other, base).confidence_interval(0.95)
  assert o["paired"]["ndcg_5"].low == pytest.approx(ci.low, abs=1e-12)
  assert o["paired"]["ndcg_5"].high == pytest.approx(ci.high, abs=1e-12)
  assert o["paired_seeds"] == [0, 1, 2, 3, 4]
  assert o["paired"]["top_1"].sd == 0.0 and not o["paired"]["top_1"].difference_detected
  assert e["paired"] == {}  # no baseline on dataset "e"


def test_summarize_pairs_only_shared_seeds():
  records = [_record(seed=s, ndcg_5=0.70 + 0.01 * s) for s in (0, 1, 2)]
  records += [_record(seed=s, loss="x", ndcg_5=0.72 + 0.01 * s) for s in (1, 2, 3)]
  row = [r for r in grid.summarize(records) if r["loss"] == "x"][0]
  assert row["paired_seeds"] == [1, 2]
  assert row["paired"]["ndcg_5"].mean == pytest.approx(0.02)


def test_best_other_head():
  records = [_record(interaction="latent_cross", ndcg_5=0.71, seed=s) for s in range(2)]
  records += [_record(interaction="concat", ndcg_5=0.72, seed=s) for s in range(2)]
  records += [_record(interaction="concat", ndcg_5=0.10, seed=0, protocol="end_to_end")]
  head, means = grid.best_other_head(records, "d")
  assert head == "concat" and means == pytest.approx({"latent_cross": 0.71, "concat": 0.72})
  with pytest.raises(ValueError, match="No frozen record of head 'latent_cross' on dataset 'x'"):
    grid.best_other_head(records, "x")
  assert grid.best_other_head(records, "d", candidates=["latent_cross"])[0] == "latent_cross"
  with pytest.raises(ValueError, match="`candidates` must name at least one head"):
    grid.best_other_head(records, "d", candidates=[])


def test_estimates_and_progress_line():
  records = [dict(_record(loss="a", seed=s), wall_seconds=10.0 + s) for s in range(2)]
  records += [dict(_record(loss="b", interaction="concat"), wall_seconds=100.0)]
  assert grid.estimate_seconds(("d", "frozen", "a", "dot", 5), records) == 10.5
  assert grid.estimate_seconds(("d", "frozen", "c", "concat", 0), records) == 100.0
  assert grid.estimate_seconds(("d", "frozen", "c", "latent_cross", 0), records) == pytest.approx(
    121.0 / 3
  )
  assert grid.estimate_seconds(("x", "frozen", "a", "dot", 0), records) is None
  line = grid.progress_line(
    3, 6, 75.0, [("d", "frozen", "a", "dot", 5), ("x", "frozen", "a", "dot", 0)], records
  )
  # 10.5 s for the first; the second has no similar record: the mean of all (40.33 s).
  assert line == "[###############---------------] 3/6 runs, 1m15s elapsed, ~51s left"
  assert grid.progress_line(0, 4, 0.0, [("d", "frozen", "a", "dot", 0)], []).endswith("estimating")
  assert grid.format_duration(3725) == "1h02m"


def test_settings_differences():
  records = [
    dict(_record(), settings={"epochs": 3, "lr": 0.1}),
    dict(_record(protocol="end_to_end"), settings={"epochs": 9}),
  ]
  assert grid.settings_differences(records, "d", "frozen", {"epochs": 3, "lr": 0.1}) == {}
  assert grid.settings_differences(records, "d", "frozen", {"epochs": 4, "lr": 0.1}) == {
    "epochs": (3, 4)
  }
  assert grid.settings_differences(records, "z", "frozen", {"epochs": 4}) == {}


def _blobs(n, seed):
  rng = np.random.default_rng(seed)
  centers = np.random.default_rng(99).normal(size=(4, 6)) * 2.0
  y = rng.integers(0, 4, n)
  return (centers[y] + rng.normal(size=(n, 6))).astype("float32"), y


def test_evaluate_scores_matches_numpy():
  rng = np.random.default_rng(5)
  scores = rng.normal(size=(300, 7)).astype("float32")  # continuous: no ties
  labels = rng.integers(0, 7, 300)
  got = grid.evaluate_scores(labels, scores, batch_size=64)
  ranks = 1 + np.sum(scores > scores[np.arange(300), labels][:, None], axis=1)
  assert got["top_1"] == pytest.approx(np.mean(ranks == 1), abs=1e-6)
  assert got["top_5"] == pytest.approx(np.mean(ranks <= 5), abs=1e-6)
  assert got["mrr"] == pytest.approx(np.mean(1.0 / ranks), abs=1e-6)
  assert got["ndcg_5"] == pytest.approx(
    np.mean(np.where(ranks <= 5, 1 / np.log2(1 + ranks), 0)), abs=1e-6
  )


def test_fit_and_evaluate_restores_the_best_validation_epoch():
  train, val, test = _blobs(400, 0), _blobs(200, 1), _blobs(200, 2)
  tf.keras.utils.set_random_seed(0)
  model = grid.compile_model(
    grid.head_model(6, 4, "latent_cross", (8,)), "softmax_loss", learning_rate=0.02
  )
  result, scores = grid.fit_and_evaluate(model, train, val, test, epochs=4, batch_size=64, seed=0)
  curve = result["validation_curve"]
  assert len(curve) == 4 and result["epochs"] == 4
  assert result["best_epoch"] == int(np.argmax(curve)) + 1
  assert result["validation"]["ndcg_5"] == pytest.approx(max(curve), abs=1e-6)
  # The model now holds the best epoch's weights: scoring validation again gives that value.
  again = grid.evaluate_scores(val[1], grid.predict(model, val[0]), ("ndcg_5",))["ndcg_5"]
  assert again == pytest.approx(max(curve), abs=1e-6)
  assert scores.shape == (200, 4)
  assert result["top_1"] == pytest.approx(np.mean(np.argmax(scores, 1) == test[1]), abs=1e-6)
  assert result["top_1"] > 0.8 and result["train_seconds"] > 0
  record = grid.make_record(
    ("blobs", "frozen", "softmax_loss", "latent_cross", 0), result, test[1], scores, note="x"
  )
  assert record["note"] == "x" and record["bound"]["violations"] == 0
  assert record["bound"]["ce_gap"] >= 0


def test_keep_best_refuses_an_unknown_monitor():
  with pytest.raises(ValueError, match="Unknown metric name 'auc'"):
    grid.KeepBest(np.zeros((2, 3)), np.zeros(2), monitor="auc")


def test_compile_model_checks_the_learning_rate():
  with pytest.raises(ValueError, match="`learning_rate` must be a finite number > 0.0"):
    grid.compile_model(grid.head_model(3, 2), "softmax_loss", learning_rate=0.0)


def test_the_grids_losses_keep_tf_rankings_normalisation():
  """The records were made with TF-Ranking's own normalisation: the pairwise logistic loss of a
  list of C = 4 classes is the sum of its per-item losses over B * C, not over B; their configs
  are recorded without the argument (what configs saved before it hold)."""
  model = grid.compile_model(grid.head_model(3, 4), "pairwise_logistic_loss")
  assert model.loss.normalization == "tf_ranking"
  labels = np.array([0, 2])
  scores = np.array([[1.0, 0.0, 2.0, 0.0], [0.0, 1.0, 3.0, 2.0]], np.float32)
  # pairs (true class above each other class): log(1 + exp(-(s_y - s_j))) summed over j != y.
  pairs = [np.log1p(np.exp(-(s[y] - np.delete(s, y)))).sum() for y, s in zip(labels, scores)]
  assert float(model.loss(labels, scores)) == pytest.approx(sum(pairs) / 8, rel=1e-5)
  assert grid.build_loss("softmax_loss", {"normalization": "lists"}).normalization == "lists"
  config = grid.recorded_loss_config("approx_ndcg_loss")
  assert "normalization" not in config and config["key"] == "approx_ndcg_loss"
  assert "normalization" not in grid.recorded_loss_config("blackbox_ndcg_loss", {"lambda_": 4.0})


def test_store_with_other_key_fields_and_check(tmp_path):
  # The second edition keys a run by more fields (learning rate, stage); the store takes them.
  def check(record):
    if record.get("lr", 0) <= 0:
      raise ValueError(f"`lr` must be > 0, got {record.get('lr')!r}.")
    return record

  path = tmp_path / "grid.json"
  store = grid.RecordStore(path, key_fields=("loss", "lr", "seed"), check=check)
  store.add({"loss": "a", "lr": 1e-3, "seed": 0})
  store.add({"loss": "a", "lr": 1e-2, "seed": 0})  # same seed, other rate: another run
  assert ("a", 1e-2, 0) in store and ("a", 1e-4, 0) not in store
  with pytest.raises(ValueError, match="already holds a record of \\{'loss': 'a', 'lr': 0.001"):
    store.add({"loss": "a", "lr": 1e-3, "seed": 0})
  with pytest.raises(ValueError, match="`lr` must be > 0"):
    store.add({"loss": "a", "lr": 0.0, "seed": 1})
  assert len(grid.RecordStore(path, key_fields=("loss", "lr", "seed"), check=check)) == 2


def test_claim_holds_a_run_for_one_holder_until_it_lets_go(tmp_path):
  path = tmp_path / "grid.json"
  first = grid.RecordStore(path, key_fields=("seed",), check=lambda r: r)
  second = grid.RecordStore(path, key_fields=("seed",), check=lambda r: r)
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
  first = grid.RecordStore(path, key_fields=("seed",), check=lambda r: r)
  stale = grid.RecordStore(path, key_fields=("seed",), check=lambda r: r)
  with first.claim((1,)) as mine:
    assert mine
    first.add({"seed": 1})
  with stale.claim((1,)) as theirs:
    assert not theirs and (1,) in stale


_HOLDER = """
import sys, time
sys.path.insert(0, {benchmarks!r})
import grid_store
store = grid_store.RecordStore({path!r}, key_fields=("seed",), check=lambda r: r)
with store.claim((1,)) as mine:
  assert mine
  open({path!r} + ".held", "w").close()
  time.sleep(600)
"""


def test_a_killed_holders_claim_is_free_at_once(tmp_path):
  import signal
  import subprocess
  import sys
  import time

  path = str(tmp_path / "grid.json")
  benchmarks = str(pathlib.Path(grid.__file__).parent)
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
  holder = subprocess.Popen(
    [sys.executable, "-c", _HOLDER.format(benchmarks=benchmarks, path=path)], env=env
  )
  deadline = time.monotonic() + 300
  while not os.path.exists(f"{path}.held"):
    assert time.monotonic() < deadline and holder.poll() is None
    time.sleep(0.05)
  store = grid.RecordStore(path, key_fields=("seed",), check=lambda r: r)
  with store.claim((1,)) as mine:
    assert not mine
  holder.send_signal(signal.SIGKILL)
  holder.wait(timeout=60)
  with store.claim((1,)) as mine:
    assert mine
