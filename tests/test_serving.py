"""The serving SavedModel: fresh process without tfrank4class, saved_model_cli show and run."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from _serving import serve_in_a_fresh_process

from tfrank4class import data as data_lib
from tfrank4class import errors
from tfrank4class.train import config as config_lib
from tfrank4class.train import experiment, flavour, results, serving

TEXTS = ["Thank you so much, this is wonderful!", "I am so angry about this."]
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}


@pytest.fixture(scope="module")
def text_export(tmp_path_factory):
  root = tmp_path_factory.mktemp("serving")
  config = config_lib.ExperimentConfig(
    encoder_kwargs={
      "max_tokens": 2000,
      "sequence_length": 16,
      "embedding_dim": 16,
      "num_heads": 1,
      "ff_dim": 16,
    },
    hidden_units=(16,),
    batch_size=32,
    epochs=1,
    steps=3,
    verbose=0,
    model_dir=str(root / "run"),
  )
  result = experiment.train(config)
  export_dir = str(root / "export")
  serving.export_saved_model(
    result.model, config.dataset, result.info.class_names, export_dir, top_k=3
  )
  return result.model, result.info.class_names, export_dir


def test_fresh_process_without_tfrank4class(text_export):
  model, class_names, export_dir = text_export
  out, imported = serve_in_a_fresh_process(export_dir, "text", TEXTS, "string")
  assert imported is False
  expected = model(tf.constant(TEXTS)[:, None]).numpy()
  np.testing.assert_allclose(out["scores"], expected, rtol=1e-4, atol=1e-5)
  want_ids = np.argsort(-expected, axis=1)[:, :3]
  np.testing.assert_array_equal(out["top_k_ids"], want_ids)
  assert out["top_k_classes"] == [[class_names[i] for i in row] for row in want_ids]
  np.testing.assert_allclose(
    out["top_k_scores"], np.take_along_axis(expected, want_ids, 1), rtol=1e-4, atol=1e-5
  )


def test_saved_model_cli_show_and_run(text_export):
  _, class_names, export_dir = text_export
  cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
  shown = subprocess.run(
    [cli, "show", "--dir", export_dir, "--all"], env=ENV, check=True, capture_output=True, text=True
  ).stdout
  assert "signature_def['serving_default']" in shown and "inputs['text']" in shown
  for output in ("top_k_ids", "top_k_classes", "top_k_scores", "scores"):
    assert f"outputs['{output}']" in shown
  ran = subprocess.run(
    [
      cli,
      "run",
      "--dir",
      export_dir,
      "--tag_set",
      "serve",
      "--signature_def",
      "serving_default",
      "--input_exprs",
      f"text={TEXTS[:1]!r}",
    ],
    env=ENV,
    check=True,
    capture_output=True,
    text=True,
  ).stdout
  assert "top_k_classes" in ran
  assert any(name in ran for name in class_names)


def test_scores_signature_evaluates_like_the_model(text_export):
  model, _, export_dir = text_export
  scorer = serving.saved_model_scorer(export_dir)
  features = tf.constant(TEXTS)
  np.testing.assert_allclose(
    scorer(features).numpy(), model(features[:, None]).numpy(), rtol=1e-4, atol=1e-5
  )


def test_image_export_takes_encoded_bytes(datasets_dir, tmp_path):
  data_dir = str(datasets_dir / "cifar10_jpeg")
  info = data_lib.info("cifar10", data_dir)
  config = config_lib.ExperimentConfig(
    dataset="cifar10",
    data_dir=data_dir,
    hidden_units=(8,),
    encoder_kwargs={"filters": [4], "embedding_dim": 8},
  )
  model = experiment.build_model(config, info)
  export_dir = str(tmp_path / "export")
  serving.export_saved_model(model, "cifar10", info.class_names, export_dir)
  files = [datasets_dir / "cifar10_jpeg" / "test" / c / "0000.jpg" for c in ("cat", "ship")]
  raw = tf.constant([f.read_bytes() for f in files])
  loaded = tf.saved_model.load(export_dir)
  out = loaded.signatures["serving_default"](image_bytes=raw)
  assert out["top_k_classes"].shape == (2, 5)
  want = model(data_lib.serving_preprocess("cifar10")(raw)).numpy()
  np.testing.assert_allclose(out["scores"].numpy(), want, rtol=1e-4, atol=1e-5)


def test_bad_export_arguments(text_export, tmp_path):
  model, class_names, _ = text_export
  with pytest.raises(ValueError, match=r"`class_names` has 3 names for a model with 28 scores"):
    serving.export_saved_model(model, "goemotions_sample", class_names[:3], str(tmp_path / "a"))
  with pytest.raises(ValueError, match=r"`top_k` must be an integer >= 1, got 0"):
    serving.export_saved_model(
      model, "goemotions_sample", class_names, str(tmp_path / "b"), top_k=0
    )


def test_a_missing_damaged_or_foreign_saved_model_is_a_user_error(tmp_path):
  with pytest.raises(errors.NotFoundError, match=r"No SavedModel at `saved_model` '.*nowhere'"):
    serving.saved_model_scorer(str(tmp_path / "nowhere"))
  module = tf.Module()
  module.f = tf.function(lambda x: x, input_signature=[tf.TensorSpec([None], tf.float32)])
  tf.saved_model.save(module, str(tmp_path / "foreign"))
  with pytest.raises(
    errors.InvalidConfigError,
    match=r"'.*foreign' has no 'scores' signature \(it has \['serving_default'\]\): it was not "
    "written by tfrank4class-export",
  ):
    serving.saved_model_scorer(str(tmp_path / "foreign"))
  (tmp_path / "foreign" / "saved_model.pb").write_bytes(b"garbled")
  with pytest.raises(errors.DamagedFileError, match=r"The SavedModel .*foreign is damaged"):
    serving.saved_model_scorer(str(tmp_path / "foreign"))


class Killed(BaseException):
  """Stands for the process being killed."""


def test_an_export_killed_halfway_leaves_the_previous_one(text_export, tmp_path, monkeypatch):
  model, class_names, _ = text_export
  export_dir = tmp_path / "export"
  export_dir.mkdir()
  (export_dir / "saved_model.pb").write_text("the previous export")

  def write_killed_halfway(model, path, endpoints):
    os.makedirs(path)
    with open(os.path.join(path, "saved_model.pb"), "w") as f:
      f.write("half")
    raise Killed()

  monkeypatch.setattr(flavour.TRAINING, "write_saved_model", write_killed_halfway)
  with pytest.raises(Killed):
    serving.export_saved_model(model, "goemotions_sample", class_names, str(export_dir))
  assert (export_dir / "saved_model.pb").read_text() == "the previous export"
  assert os.listdir(tmp_path) == ["export"]


def test_export_and_evaluate_binaries(text_export, tmp_path):
  model, _, export_dir = text_export
  run_dir = os.path.join(os.path.dirname(export_dir), "run")
  env = {**ENV, "NO_GCE_CHECK": "true"}
  new_export = str(tmp_path / "exported")
  subprocess.run(
    [
      sys.executable,
      "-m",
      "tfrank4class.train.export",
      f"--model_dir={run_dir}",
      f"--export_dir={new_export}",
    ],
    env=env,
    check=True,
    capture_output=True,
  )
  serve = tf.saved_model.load(new_export).signatures["serving_default"]
  scores = serve(text=tf.constant(TEXTS))["scores"]
  np.testing.assert_allclose(
    scores.numpy(), model(tf.constant(TEXTS)[:, None]).numpy(), rtol=1e-4, atol=1e-5
  )
  out = subprocess.run(
    [
      sys.executable,
      "-m",
      "tfrank4class.train.evaluate",
      f"--checkpoint={run_dir}/best.keras",
      "--dataset=goemotions_sample",
      "--split=test",
    ],
    env=env,
    check=True,
    capture_output=True,
    text=True,
  ).stdout
  row = [line for line in out.splitlines() if line.startswith("test")][0].split()
  want = results.evaluate(model, "goemotions_sample", "test")
  assert [float(v) for v in row[1:]] == pytest.approx(
    [want[m] for m in ("top_1", "top_5", "ndcg_5", "mrr")], abs=1e-4
  )
  missing = subprocess.run(
    [
      sys.executable,
      "-m",
      "tfrank4class.train.export",
      f"--model_dir={tmp_path}",
      f"--export_dir={tmp_path / 'x'}",
    ],
    env=env,
    capture_output=True,
    text=True,
  )
  assert missing.returncode != 0 and "config.json is missing" in missing.stderr


def _export_binary(*args):
  return subprocess.run(
    [sys.executable, "-m", "tfrank4class.train.export", *args],
    env={**ENV, "NO_GCE_CHECK": "true"},
    capture_output=True,
    text=True,
  )


def test_export_binary_replaces_an_export_only_with_overwrite(text_export, tmp_path):
  _, _, export_dir = text_export
  model_dir = f"--model_dir={os.path.join(os.path.dirname(export_dir), 'run')}"
  target = tmp_path / "export"
  shutil.copytree(export_dir, target)
  (target / "stale.txt").write_text("from an older export")
  before = (target / "saved_model.pb").read_bytes()
  refused = _export_binary(model_dir, f"--export_dir={target}")
  assert refused.returncode == 1 and "Traceback" not in refused.stderr
  assert refused.stderr.splitlines()[-1] == (
    f"tfrank4class-export: error: `export_dir` '{target}' already holds an export; pass "
    "--overwrite to replace it."
  )
  assert (target / "saved_model.pb").read_bytes() == before
  # --overwrite replaces only an export: a folder of something else stays refused
  other = tmp_path / "notes"
  other.mkdir()
  (other / "notes.txt").write_text("mine")
  refused = _export_binary(model_dir, f"--export_dir={other}", "--overwrite")
  assert refused.returncode == 1
  assert refused.stderr.splitlines()[-1] == (
    f"tfrank4class-export: error: `export_dir` '{other}' exists and is not an export (no "
    "saved_model.pb); pick another `export_dir`."
  )
  assert sorted(p.name for p in other.iterdir()) == ["notes.txt"]
  replaced = _export_binary(model_dir, f"--export_dir={target}", "--overwrite")
  assert replaced.returncode == 0, replaced.stderr[-3000:]
  assert not (target / "stale.txt").exists()  # the old export is gone, not written over
  serve = tf.saved_model.load(str(target)).signatures["serving_default"]
  assert serve(text=tf.constant(TEXTS))["scores"].shape == (2, 28)
