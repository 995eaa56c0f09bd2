"""Tests of the sorter pretraining binary (tfrank4class.train.pretrain_sorter)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tfrank4class import errors
from tfrank4class.ranking import AttentionSorter, ConvSorter, synthetic
from tfrank4class.train import pretrain_sorter


def test_normalised_l1_is_eq1():
  pred = tf.constant([[1.0, 3.0, 2.0]])
  exact = tf.constant([[1.0, 2.0, 3.0]])
  # |0 - 0| + |1 - .5| + |.5 - 1| over 3 items.
  np.testing.assert_allclose(
    pretrain_sorter.normalised_l1(pred, exact).numpy(), 1.0 / 3.0, rtol=1e-6
  )


def test_train_exports_best_weights_and_resumes(tmp_path):
  out = str(tmp_path / "att")
  sorter, best = pretrain_sorter.train(
    "attention",
    3,
    12,
    steps=4,
    batch_size=8,
    learning_rate=1e-2,
    halve_every=2,
    output=out,
    eval_every=2,
    eval_lists=16,
    verbose=0,
    hidden_units=4,
  )
  assert np.isfinite(best)
  record = json.load(open(out + ".json"))
  assert record["class_name"] == "AttentionSorter" and record["metadata"]["step"] in (2, 4)
  loaded = AttentionSorter.pretrained(path=out)
  s, r = synthetic.synthetic_batch(4, 12, seed=[1, 2])
  assert loaded(s).shape == (4, 12)
  # The tensorboard and checkpoint directories exist; a longer run resumes at step 4.
  assert os.listdir(out + "_run/tensorboard") and os.path.isdir(out + "_run")
  _, best2 = pretrain_sorter.train(
    "attention",
    3,
    12,
    steps=6,
    batch_size=8,
    learning_rate=1e-2,
    halve_every=2,
    output=out,
    eval_every=2,
    eval_lists=16,
    verbose=0,
    hidden_units=4,
  )
  assert best2 <= best


def test_conv_needs_one_length_and_bad_arguments(tmp_path):
  with pytest.raises(ValueError, match=r"min_list_size \(10\) must equal max_list_size \(20\)"):
    pretrain_sorter.train("conv", 10, 20, 1, 4, 1e-3, 1, output=str(tmp_path / "c"))
  with pytest.raises(ValueError, match="`sorter` must be one of"):
    pretrain_sorter.build_sorter("gru")
  with pytest.raises(ValueError, match=r"`max_list_size` must be an integer >= 10, got 5"):
    pretrain_sorter.train("lstm", 10, 5, 1, 4, 1e-3, 1, output=str(tmp_path / "l"))
  conv, _ = pretrain_sorter.train(
    "conv",
    6,
    6,
    2,
    4,
    1e-3,
    1,
    output=str(tmp_path / "c"),
    eval_every=1,
    eval_lists=4,
    verbose=0,
    filters=2,
    num_blocks=1,
  )
  assert isinstance(ConvSorter.pretrained(path=str(tmp_path / "c")), ConvSorter)


def test_build_sorter_keeps_only_the_hyper_parameters_of_its_kind():
  lstm = pretrain_sorter.build_sorter(
    "lstm", list_size=9, units=3, num_layers=1, filters=7, hidden_units=5
  )
  assert (lstm.units, lstm.num_layers) == (3, 1)
  conv = pretrain_sorter.build_sorter("conv", list_size=9, filters=2, num_blocks=1, units=3)
  assert isinstance(conv, ConvSorter) and (conv.list_size, conv.filters) == (9, 2)
  with pytest.raises(
    ValueError,
    match=r"^`sorter` must be one of \['attention', 'conv', 'lstm'\], "
    r"got 'gru'\.$",
  ):
    pretrain_sorter.build_sorter("gru")
  assert sorted(pretrain_sorter.FLAGS["sorter"].parser.enum_values) == ["attention", "conv", "lstm"]


def test_main_requires_output():
  from absl import app

  pretrain_sorter.FLAGS.unparse_flags()
  pretrain_sorter.FLAGS(["pretrain_sorter", "--steps=1"])
  with pytest.raises(app.UsageError, match="--output"):
    pretrain_sorter.main(["pretrain_sorter"])
  pretrain_sorter.FLAGS.unparse_flags()


@pytest.mark.parametrize(
  "args, message",
  [
    (["--eval_every=0"], "`eval_every` must be an integer >= 1, got 0."),
    (["--eval_lists=0"], "`eval_lists` must be an integer >= 1, got 0."),
    (["--eval_list_sizes=1,5"], "`eval_list_sizes` must be an integer >= 2, got 1."),
    (["--max_minutes=0"], "`max_minutes` must be a finite number > 0.0, got 0.0."),
    (["--seed=-1"], "`seed` must be an integer >= 0, got -1."),
    (["--sorter=lstm", "--units=0"], "`units` must be an integer >= 1, got 0."),
    (["--sorter=attention", "--hidden_units=0"], "`hidden_units` must be an integer >= 1"),
    (
      ["--sorter=conv", "--min_list_size=5", "--max_list_size=5", "--kernel_size=0"],
      "`kernel_size` must be an integer >= 1, got 0.",
    ),
    (
      ["--sorter=conv", "--min_list_size=5", "--max_list_size=5", "--eval_list_sizes=5,6"],
      "`eval_list_sizes` [5, 6] must all equal max_list_size (5).",
    ),
    (["--output={file}/weights"], "`output` '{file}' is a file, not a folder."),
    (["--model_dir={file}/run"], "`model_dir` '{file}/run' cannot be created: '{file}' is a file"),
  ],
)
def test_every_argument_is_checked_before_any_step(args, message, tmp_path, monkeypatch):
  from absl import app

  file = tmp_path / "a_file"
  file.write_text("")
  monkeypatch.setattr(pretrain_sorter, "train", lambda **kw: pytest.fail("training started"))
  args = [a.format(file=file) for a in args]
  pretrain_sorter.FLAGS.unparse_flags()
  pretrain_sorter.FLAGS(["pretrain_sorter", f"--output={tmp_path / 'w'}", *args])
  try:
    with pytest.raises(app.UsageError) as raised:
      pretrain_sorter.main(["pretrain_sorter"])
  finally:
    pretrain_sorter.FLAGS.unparse_flags()
  assert message.format(file=file) in str(raised.value)
  assert sorted(os.listdir(tmp_path)) == ["a_file"]  # nothing written


def test_a_damaged_checkpoint_is_named_with_what_to_do(tmp_path):
  out = str(tmp_path / "att")
  args = dict(output=out, eval_every=1, eval_lists=2, verbose=0, hidden_units=2)
  pretrain_sorter.train("attention", 3, 4, 1, 2, 1e-2, 1, **args)
  folder = tmp_path / "att_run" / "ckpt"
  for data in folder.glob("*.data-*"):
    data.write_bytes(data.read_bytes()[:8])
  with pytest.raises(errors.DamagedFileError) as raised:
    pretrain_sorter.train("attention", 3, 4, 2, 2, 1e-2, 1, **args)
  message = errors.user_error_message(raised.value)
  assert message.startswith(f"The pretraining checkpoint {folder} is damaged (")
  assert message.endswith(
    f"Delete {folder} to pretrain from step 0 (the weights exported to --output are kept), "
    "or pass another --model_dir."
  )


@pytest.mark.slow
def test_module_runs_as_binary(tmp_path):
  env = dict(os.environ, NO_GCE_CHECK="true", TF_CPP_MIN_LOG_LEVEL="2")
  cmd = [
    sys.executable,
    "-m",
    "tfrank4class.train.pretrain_sorter",
    "--sorter=lstm",
    "--units=2",
    "--num_layers=1",
    "--min_list_size=4",
    "--max_list_size=6",
    "--steps=2",
    "--batch_size=4",
    "--eval_every=1",
    "--eval_lists=4",
    f"--output={tmp_path}/l",
  ]
  result = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
  assert result.returncode == 0, result.stderr[-2000:]
  assert "best held-out L1" in result.stdout
  assert os.path.exists(f"{tmp_path}/l.npz")
  missing = subprocess.run(
    cmd[:3] + ["--steps=1"], capture_output=True, text=True, env=env, timeout=300
  )
  assert missing.returncode != 0 and "--output" in missing.stderr
