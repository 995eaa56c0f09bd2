"""Tests of tfrank4class/data/__init__.py: load/info/names/serving_preprocess and distribution."""

import json
import os
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

import tfrank4class.data as data
from tfrank4class.data import goemotions


def _texts(ds):
  out = []
  for x, _ in ds:
    out += x.numpy().tolist()
  return out


def test_names_and_unknown_name_lists_them():
  assert data.names() == (
    "cifar10",
    "cifar100",
    "goemotions",
    "goemotions_sample",
    "imagenet2012",
    "mind",
  )
  with pytest.raises(
    ValueError,
    match=r"Unknown dataset `name` 'cifar11'; the known datasets "
    r"are \['cifar10', 'cifar100', 'goemotions', 'goemotions_sample'",
  ):
    data.load("cifar11", "train")
  with pytest.raises(ValueError, match="Unknown dataset"):
    data.info("svhn")


def test_dataset_registry_folds_case_and_resolves_aliases():
  from tfrank4class.registry import Registry

  assert isinstance(data.DATASETS, Registry) and data.DATASETS.names() == data.names()
  assert data.DATASETS.aliases() == {"imagenet": "imagenet2012"}
  assert data.DATASETS.resolve("ImageNet").name == "imagenet2012"
  assert data.modality("CIFAR10") == "image" and data.modality("imagenet") == "image"
  assert data.modality("GoEmotions_Sample") == "text"
  assert data.info("GOEMOTIONS_SAMPLE").class_names[27] == "neutral"
  with pytest.raises(
    ValueError,
    match=r"Unknown dataset `name` 'CIFAR11'; the known datasets are "
    r"\['cifar10', .*\] \(aliases: \{'imagenet': 'imagenet2012'\}\)",
  ):
    data.load("CIFAR11", "train")
  for bad in (None, 10, ["cifar10"]):
    with pytest.raises(ValueError, match=r"Unknown dataset `name`"):
      data.info(bad)


def test_unknown_and_misplaced_arguments_are_rejected():
  with pytest.raises(
    ValueError,
    match=r"Unknown argument\(s\) \['multi_label'\] for dataset "
    r"'cifar10'",
  ):
    data.load("cifar10", "train", "/nonexistent", multi_label=True)
  with pytest.raises(ValueError, match="`batch_size` must be an integer >= 1"):
    data.load("goemotions_sample", "train", batch_size=0)


def test_goemotions_sample_defaults_to_the_embedded_files():
  info = data.info("goemotions_sample")
  assert info.num_classes == 28 and info.class_names[27] == "neutral"
  assert info.data_dir == str(goemotions.sample_dir())
  texts, labels = next(
    iter(data.load("goemotions_sample", "dev", batch_size=5, deterministic=True))
  )
  assert texts.dtype == tf.string and labels.dtype == tf.int64 and labels.shape == (5,)
  _, rel = next(iter(data.load("goemotions_sample", "dev", batch_size=5, multi_label=True)))
  assert rel.shape == (5, 28) and rel.dtype == tf.float32
  with pytest.raises(ValueError, match="`source` of 'goemotions_sample' must be 'tsv'"):
    data.load("goemotions_sample", "dev", source="tfds")


def test_goemotions_never_falls_back_to_the_sample(tmp_path):
  with pytest.raises(data.DataNotFoundError, match="goemotions") as e:
    data.load("goemotions", "train")  # TFDS default dir: not prepared on this machine
  assert "Download the official GoEmotions" in str(e.value)
  with pytest.raises(data.DataNotFoundError) as e:
    data.load("goemotions", "train", tmp_path / "missing")
  assert str(tmp_path / "missing") in str(e.value)


def test_on_corrupt_reaches_the_text_readers(tmp_path, capsys):
  (tmp_path / "emotions.txt").write_text("\n".join(goemotions.EMOTIONS) + "\n")
  (tmp_path / "train.tsv").write_bytes(b"kept\t1\tid1\nbad \xff\t2\tid2\n")
  (tmp_path / "mind").mkdir()
  (tmp_path / "mind" / "news.tsv").write_bytes(b"N1\tnews\tx\tT\tA\nN2\tnews\n")
  assert data.ON_CORRUPT == ("error", "skip")
  texts = _texts(data.load("goemotions", "train", tmp_path, on_corrupt="skip"))
  mind_texts = []
  for split in ("train", "validation", "test"):
    try:  # the one row is in one split; the others are empty, which load refuses
      mind_texts += _texts(data.load("mind", split, tmp_path / "mind", on_corrupt="skip"))
    except data.EmptySplitError:
      pass
  assert texts == [b"kept"] and mind_texts == [b"T [SEP] A"]
  assert capsys.readouterr().err.count("Skipped 1 malformed line(s)") == 2
  with pytest.raises(data.MalformedRowError, match=r"train.tsv, line 2: not valid UTF-8"):
    data.load("goemotions", "train", tmp_path)


def test_cifar10_from_the_shared_image_folder(datasets_dir):
  folder = datasets_dir / "cifar10_jpeg"
  images, labels = next(iter(data.load("cifar10", "test", folder, batch_size=4)))
  assert images.shape == (4, 32, 32, 3) and images.dtype == tf.float32
  assert labels.dtype == tf.int64
  assert data.info("cifar10", folder).num_classes == 10
  assert data.info("imagenet", folder).source == "folder"  # alias; any image folder works


def test_options_object_and_overrides():
  opts = data.InputOptions(batch_size=3, deterministic=True)
  texts, _ = next(iter(data.load("goemotions_sample", "test", options=opts)))
  assert texts.shape == (3,)
  texts, _ = next(iter(data.load("goemotions_sample", "test", batch_size=6, options=opts)))
  assert texts.shape == (6,)


def test_two_input_contexts_see_every_example_once(datasets_dir, tmp_path):
  # Text from memory, and an image folder whose pixel value is the image's index.
  for i in range(11):
    path = tmp_path / "train" / f"c{i % 2}" / f"{i:02d}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(tf.io.encode_png(np.full((32, 32, 3), 10 * i, np.uint8)).numpy())
  cases = [
    ("mind", datasets_dir / "mind_sample", _texts),
    ("goemotions_sample", None, _texts),
    (
      "cifar10",
      tmp_path,
      lambda ds: [
        int(round(v)) for x, _ in ds for v in (x[:, 0, 0, 0].numpy() * 0.2470 + 0.4914) * 255
      ],
    ),
  ]
  for name, folder, values in cases:
    full = values(data.load(name, "train", folder, batch_size=64, training=False))
    parts = []
    for worker in range(2):
      ctx = tf.distribute.InputContext(
        num_input_pipelines=2, input_pipeline_id=worker, num_replicas_in_sync=2
      )
      parts.append(
        values(data.load(name, "train", folder, batch_size=64, input_context=ctx, training=False))
      )
    assert sorted(parts[0] + parts[1]) == sorted(full), name
    assert len(set(parts[0]) & set(parts[1])) <= len(full) - len(set(full)), name
    assert abs(len(parts[0]) - len(parts[1])) <= 1, name
  held = values(data.load("cifar10", "validation", tmp_path, batch_size=64))
  assert sorted(full + held) == [10 * i for i in range(11)]  # train is all but the hold-out


def test_distribute_datasets_from_function_mirrored(mirrored_strategy, datasets_dir):
  folder = datasets_dir / "mind_sample"
  dist = mirrored_strategy.distribute_datasets_from_function(
    lambda ctx: data.load(
      "mind", "validation", folder, batch_size=8, input_context=ctx, deterministic=True
    )
  )
  seen = []
  for texts, _ in dist:
    for local in mirrored_strategy.experimental_local_results(texts):
      assert local.shape[0] <= 4  # per-replica batch = 8 / 2
      seen += local.numpy().tolist()
  assert sorted(seen) == sorted(_texts(data.load("mind", "validation", folder, batch_size=64)))


_WORKER = textwrap.dedent("""
    import json, os, sys
    os.environ["TF_CONFIG"] = sys.argv[1]
    import tensorflow as tf
    import tfrank4class.data as data
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    dist = strategy.distribute_datasets_from_function(
        lambda ctx: data.load("mind", "train", sys.argv[2], batch_size=16, input_context=ctx,
                              deterministic=True))
    seen = []
    for texts, _ in dist:
      for local in strategy.experimental_local_results(texts):
        seen += [t.decode() for t in local.numpy()]
    print("SEEN" + json.dumps(seen))
""")


def _free_port():
  with socket.socket() as s:
    s.bind(("localhost", 0))
    return s.getsockname()[1]


# Slow (two worker processes, about 20 s): the default suite trains the binary with two local
# workers (tests/test_flavour.py) and checks per-worker sharding in-process above.
@pytest.mark.slow
def test_multi_worker_mirrored_strategy_two_processes(datasets_dir):
  folder = str(datasets_dir / "mind_sample")
  workers = [f"localhost:{_free_port()}" for _ in range(2)]
  env = dict(os.environ, NO_GCE_CHECK="true", TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
  procs = []
  for index in range(2):
    tf_config = json.dumps(
      {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
    )
    procs.append(
      subprocess.Popen(
        [sys.executable, "-c", _WORKER, tf_config, folder],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
      )
    )
  outs = []
  for p in procs:
    out, err = p.communicate(timeout=240)
    assert p.returncode == 0, err[-3000:]
    outs.append(json.loads(out.split("SEEN", 1)[1]))
  full = [t.decode() for t in _texts(data.load("mind", "train", folder, batch_size=512))]
  assert sorted(outs[0] + outs[1]) == sorted(full)
  assert not set(outs[0]) & set(outs[1])
  assert min(len(o) for o in outs) > 0.4 * len(full)


def test_serving_preprocess_dispatch():
  png = tf.io.encode_png(np.full((40, 50, 3), 128, np.uint8))
  assert data.serving_preprocess("cifar10")(tf.stack([png])).shape == (1, 32, 32, 3)
  out = data.serving_preprocess("imagenet")(tf.stack([png, png]))
  assert out.shape == (2, 224, 224, 3)
  mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
  np.testing.assert_allclose(out.numpy()[0, 100, 100], (128 / 255 - mean) / std, atol=1e-5)
  assert data.serving_preprocess("goemotions")(tf.constant(["x"])).numpy().tolist() == [b"x"]
  with pytest.raises(ValueError, match="Unknown dataset"):
    data.serving_preprocess("mnist")
