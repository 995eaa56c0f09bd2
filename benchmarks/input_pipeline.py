"""Input pipeline throughput beside the training-step rate of a small model: which one limits?

For each pipeline of ``tfrank4class.data`` this measures, in one process and under the same
thread budget:
  * input: examples per second of iterating the batched pipeline alone (after a warm-up batch);
  * compute: examples per second of ``train_on_batch`` of a small model on one batch held in
    memory (no input cost);
  * ratio input / compute: below 1 the input pipeline is the bottleneck of training that model.
Input and compute are measured alternately in 3 rounds and the medians are reported, so both see
the same machine load; each input round starts a fresh iterator, so nothing prefetched during a
compute round is counted.

Pipelines: CIFAR-10 from the shared JPEG folder (training with augmentation; the decode check of
``on_corrupt="error"`` vs ``"unchecked"``; a second epoch from ``cache=True``; evaluation),
GoEmotions and MIND from their TSV files, and ImageNet-style preprocessing on a synthetic folder
of 375x500 JPEGs (random pixels; there is no ImageNet on this machine). Models: a 3-conv CNN for
CIFAR, a 2-conv strided CNN at 224x224 for ImageNet, TextVectorization + embedding bag + Dense for
text.

``--quick`` is a smoke run of every code path, not a measurement: one pipeline per model (CIFAR-10
training, its cached second epoch, GoEmotions, ImageNet-style training) on a small copy of the data
(8 images per CIFAR-10 class, the first 200 rows of each GoEmotions file), batches of 32 and one
round.

Usage:
  nice -n 10 .venv/bin/python benchmarks/input_pipeline.py [--threads 1] [--data DIR] [--quick]
``--data`` defaults to $TFRANK4CLASS_DATA or ../shared/datasets. Writes
benchmarks/out/input_pipeline.png and benchmarks/out/input_pipeline.json.
"""

import argparse
import json
import os
import pathlib
import tempfile
import time

from _common import OUT, ROOT, setup_tensorflow  # noqa: E402

from tfrank4class.compat import keras


def _limit(tf, ds, threads):
  opts = tf.data.Options()
  opts.threading.private_threadpool_size = threads
  return ds.with_options(opts)


def input_rate(tf, it, max_examples):
  """Examples per second of drawing ``max_examples`` from the iterator ``it``."""
  n, start = 0, time.perf_counter()
  for x, _ in it:
    n += int(x.shape[0])
    if n >= max_examples:
      break
  return n / (time.perf_counter() - start), n


def compute_rate(tf, model, batch, steps):
  """Examples per second of ``train_on_batch`` on one in-memory batch."""
  x, y = batch
  start = time.perf_counter()
  for _ in range(steps):
    model.train_on_batch(x, y)
  return steps * int(x.shape[0]) / (time.perf_counter() - start)


def measure(tf, ds, model, max_examples, steps, threads, rounds=3, skip_first_epoch=False):
  """Medians over ``rounds`` of alternating input and compute measurements (same load).

  Each input round uses a fresh iterator (one untimed warm-up batch, then timed batches back to
  back), deleted before the compute round, so batches prefetched in the background while the
  model trains are never counted as input throughput.
  """
  import gc  # pylint: disable=g-import-not-at-top

  import numpy as np  # pylint: disable=g-import-not-at-top

  ds = _limit(tf, ds, threads)
  if skip_first_epoch:
    for _ in ds:
      pass
  ds = ds.repeat()
  batch = next(iter(ds))
  model.train_on_batch(*batch)  # warm-up: builds and traces the model
  ins, outs, total = [], [], 0
  for _ in range(rounds):
    it = iter(ds)
    next(it)
    rate, n = input_rate(tf, it, max_examples // rounds)
    del it
    gc.collect()
    ins.append(rate)
    total += n
    outs.append(compute_rate(tf, model, batch, max(1, steps // rounds)))
  return float(np.median(ins)), float(np.median(outs)), total, int(batch[0].shape[0])


def cifar_model(tf):
  layers = keras.layers
  model = keras.Sequential(
    [
      keras.Input((32, 32, 3)),
      layers.Conv2D(32, 3, padding="same", activation="relu"),
      layers.Conv2D(32, 3, padding="same", activation="relu"),
      layers.MaxPooling2D(),
      layers.Conv2D(64, 3, padding="same", activation="relu"),
      layers.GlobalAveragePooling2D(),
      layers.Dense(10),
    ]
  )
  model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  return model


def imagenet_model(tf):
  layers = keras.layers
  model = keras.Sequential(
    [
      keras.Input((224, 224, 3)),
      layers.Conv2D(16, 7, strides=4, padding="same", activation="relu"),
      layers.Conv2D(32, 3, strides=2, padding="same", activation="relu"),
      layers.GlobalAveragePooling2D(),
      layers.Dense(1000),
    ]
  )
  model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  return model


def text_model(tf, data, name, data_dir, num_classes):
  vectorizer = data.adapt_text_vectorization(
    name, data_dir=data_dir, max_tokens=20_000, output_sequence_length=64
  )
  inputs = keras.Input(shape=(), dtype=tf.string)
  x = keras.layers.Embedding(20_000, 64)(vectorizer(inputs))
  x = keras.layers.GlobalAveragePooling1D()(x)
  model = keras.Model(inputs, keras.layers.Dense(num_classes)(x))
  model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
  return model


def synthetic_imagenet(tf, root, per_class, classes=4):
  import numpy as np  # pylint: disable=g-import-not-at-top

  rng = np.random.default_rng(0)
  for split in ("train", "val"):
    for c in range(classes):
      folder = pathlib.Path(root) / split / f"n{c:08d}"
      folder.mkdir(parents=True, exist_ok=True)
      for i in range(per_class):
        img = rng.integers(0, 256, size=(375, 500, 3), dtype=np.uint8)
        (folder / f"{i:04d}.JPEG").write_bytes(tf.io.encode_jpeg(img, quality=90).numpy())


def small_copy(data_dir, root, images_per_class=8, rows=200):
  """A small copy of the CIFAR-10 folder and the GoEmotions files of ``data_dir`` in ``root``."""
  data_dir, root = pathlib.Path(data_dir), pathlib.Path(root)
  for class_dir in sorted((data_dir / "cifar10_jpeg").glob("*/*")):
    target = root / "cifar10_jpeg" / class_dir.relative_to(data_dir / "cifar10_jpeg")
    target.mkdir(parents=True)
    for image in sorted(class_dir.iterdir())[:images_per_class]:
      (target / image.name).write_bytes(image.read_bytes())
  (root / "goemotions").mkdir()
  for path in (data_dir / "goemotions").iterdir():
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    keep = lines if path.suffix == ".txt" else lines[:rows]
    (root / "goemotions" / path.name).write_text("".join(keep), encoding="utf-8")


def pipeline_rows(tf, data, d, imagenet_dir, threads, quick):
  """Measures every pipeline (``--quick``: one per model, small batches, one round) and prints a
  line per pipeline; the rows of the JSON output."""
  batch_size, rounds = (32, 1) if quick else (128, 3)
  n_img, n_text, n_big = (64, 64, 32) if quick else (4096, 16384, 256)
  steps = 2 if quick else 30
  cifar_dir, ge_dir, mind_dir = d / "cifar10_jpeg", d / "goemotions", d / "mind_sample"
  rows = []

  def row(label, ds, model, max_examples, note="", skip_first_epoch=False):
    rate_in, rate_c, n, batch = measure(
      tf, ds, model, max_examples, steps, threads, rounds, skip_first_epoch=skip_first_epoch
    )
    rows.append(
      {
        "pipeline": label,
        "batch": batch,
        "examples": n,
        "input_ex_per_s": rate_in,
        "compute_ex_per_s": rate_c,
        "ratio": rate_in / rate_c,
        "note": note,
      }
    )
    r = rows[-1]
    print(
      f"{label:<34} {batch:>5} {rate_in:>12.0f} {rate_c:>12.0f} {r['ratio']:>8.2f}  "
      f"{'input' if r['ratio'] < 1 else 'compute'}",
      flush=True,
    )

  print(f"threads={threads}  data={d}")
  print(
    f"{'pipeline':<34} {'batch':>5} {'input ex/s':>12} {'train ex/s':>12} {'in/train':>8}  "
    "bottleneck"
  )
  cm = cifar_model(tf)
  row(
    "cifar10 folder train (augment)",
    data.load("cifar10", "train", cifar_dir, batch_size=batch_size, shuffle_buffer=2048),
    cm,
    n_img,
  )
  if not quick:
    row(
      "cifar10 folder train unchecked",
      data.load(
        "cifar10", "train", cifar_dir, batch_size=128, shuffle_buffer=2048, on_corrupt="unchecked"
      ),
      cm,
      n_img,
    )
    row("cifar10 test eval", data.load("cifar10", "test", cifar_dir, batch_size=128), cm, n_img)
  cached = data.load(
    "cifar10",
    "test",
    cifar_dir,
    batch_size=batch_size,
    cache=True,
    training=True,
    shuffle_buffer=2048,
  )
  row("cifar10 test, epoch 2 from cache", cached, cm, n_img, skip_first_epoch=True)

  info_ge = data.info("goemotions", ge_dir)
  row(
    "goemotions train (tsv)",
    data.load("goemotions", "train", ge_dir, batch_size=batch_size),
    text_model(tf, data, "goemotions", ge_dir, info_ge.num_classes),
    n_text,
  )
  if not quick:
    info_mind = data.info("mind", mind_dir)
    row(
      "mind train (tsv)",
      data.load("mind", "train", mind_dir, batch_size=128),
      text_model(tf, data, "mind", mind_dir, info_mind.num_classes),
      n_text,
    )

  synthetic_imagenet(tf, imagenet_dir, per_class=max(8, n_big // 4))
  im = imagenet_model(tf)
  row(
    "imagenet-style train (synthetic)",
    data.load("imagenet2012", "train", imagenet_dir, batch_size=32),
    im,
    n_big,
    note="synthetic 375x500 JPEGs",
  )
  if not quick:
    row(
      "imagenet-style eval (synthetic)",
      data.load("imagenet2012", "test", imagenet_dir, batch_size=32, training=False),
      im,
      n_big,
      note="synthetic 375x500 JPEGs",
    )
  return rows


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--threads", type=int, default=1)
  parser.add_argument(
    "--data", default=os.environ.get("TFRANK4CLASS_DATA", str(ROOT.parent / "shared" / "datasets"))
  )
  parser.add_argument(
    "--quick", action="store_true", help="a smoke run on a small copy of the data"
  )
  args = parser.parse_args()
  tf = setup_tensorflow(args.threads)
  import tfrank4class.data as data  # pylint: disable=g-import-not-at-top

  with tempfile.TemporaryDirectory() as tmp:
    d = pathlib.Path(args.data)
    if args.quick:
      small_copy(d, pathlib.Path(tmp) / "data")
      d = pathlib.Path(tmp) / "data"
    rows = pipeline_rows(tf, data, d, pathlib.Path(tmp) / "imagenet", args.threads, args.quick)

  OUT.mkdir(parents=True, exist_ok=True)
  (OUT / "input_pipeline.json").write_text(
    json.dumps({"threads": args.threads, "rows": rows}, indent=1)
  )
  try:
    import matplotlib  # pylint: disable=g-import-not-at-top

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
    import numpy as np  # pylint: disable=g-import-not-at-top

    fig, ax = plt.subplots(figsize=(10, 4.5))
    pos = np.arange(len(rows))
    ax.barh(pos - 0.2, [r["input_ex_per_s"] for r in rows], 0.4, label="input pipeline")
    ax.barh(pos + 0.2, [r["compute_ex_per_s"] for r in rows], 0.4, label="train step (small model)")
    ax.set_yticks(pos, [r["pipeline"] for r in rows])
    ax.set_xscale("log")
    ax.set_xlabel(f"examples / second ({args.threads} thread(s))")
    ax.invert_yaxis()
    ax.legend()
    fig.tight_layout()
    fig.savefig(OUT / "input_pipeline.png", dpi=120)
    print(f"wrote {OUT / 'input_pipeline.png'}")
  except ImportError:
    print("matplotlib not installed: no plot")


if __name__ == "__main__":
  main()
