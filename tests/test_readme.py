"""The README's code runs as printed, each block on its own: the quick start trains, saves and
reloads on every backend and exports and serves on TensorFlow; the own loss and metric of
docs/extending.md train, save and reload with their values checked by hand; and the README's
statement of what the demo must print holds for every recorded demo run (docs/running.md)."""

import builtins
import os
import pathlib
import re
import subprocess
import symtable
import sys
import textwrap

import numpy as np
import pytest

from tfrank4class import compat

ROOT = pathlib.Path(__file__).resolve().parents[1]
ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "NO_GCE_CHECK": "true", "PYTHONPATH": str(ROOT)}


def _blocks(section=None, path="README.md"):
  """The ```python blocks of the section headed ``## section`` of ``path`` (a Markdown file of the
  repository; default: the README), or of the whole file."""
  text = (ROOT / path).read_text(encoding="utf-8")
  body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0] if section else text
  return re.findall(r"```python\n(.*?)```", body, re.DOTALL)


#: The Markdown files whose Python blocks are run: the README and the page its examples of an own
#: loss and metric moved to.
BLOCK_FILES = ("README.md", "docs/extending.md")


def _run(code, cwd):
  result = subprocess.run(
    [sys.executable, "-c", code], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=600
  )
  assert result.returncode == 0, result.stderr[-3000:]
  return result.stdout


def _backend_of(code):
  """The backend a block sets with ``os.environ["KERAS_BACKEND"]``; ``"tensorflow"`` for a block
  that says "TensorFlow backend only"; else ``"any"``."""
  found = re.search(r'os\.environ\["KERAS_BACKEND"\] = "(\w+)"', code)
  if found:
    return found[1]
  return "tensorflow" if "TensorFlow backend only" in code else "any"


def _legacy(code):
  """``code`` for the tf-keras leg: `import keras` is Keras 3 whatever tf.keras is, so the blocks
  that import it take tf.keras instead."""
  return (
    code if compat.KERAS_3 else code.replace("import keras\n", "from tensorflow import keras\n")
  )


_RELOAD_CHECK = textwrap.dedent("""
  np.save("features.npy", features)
  np.save("scores.npy", model.predict(features[:8], verbose=0))
  reloaded = keras.models.load_model("ranker.keras")
  np.testing.assert_allclose(reloaded.predict(features[:8], verbose=0), np.load("scores.npy"),
                             rtol=1e-5, atol=1e-6)
  """)


def test_the_jax_example_runs_on_its_leg(tmp_path):
  """The README's JAX example trains and saves on the JAX leg."""
  blocks = {_backend_of(code): code for code in _blocks("Which backend")}
  assert set(blocks) == {"jax"}
  if compat.BACKEND != "jax":
    pytest.skip(f"the example is for JAX; this leg runs {compat.BACKEND}")
  _run(blocks["jax"], tmp_path)
  assert (tmp_path / "ranker.keras").exists()


def test_the_blocks_for_any_backend_run_here(tmp_path):
  """Off TensorFlow, every block marked for no backend runs in one process: the quick start with
  its reload, the head, the own loss, metric and embedding loss, Top-K (TensorFlow's leg runs
  each on its own, with values by hand, below)."""
  if compat.BACKEND == "tensorflow":
    pytest.skip("the TensorFlow leg runs these blocks one by one below")
  quick_start, *rest = [
    code for path in BLOCK_FILES for code in _blocks(path=path) if _backend_of(code) == "any"
  ]
  _run(quick_start + _RELOAD_CHECK + "".join(rest), tmp_path)
  assert (tmp_path / "custom.keras").exists() and (tmp_path / "embedder.keras").exists()


@pytest.mark.tensorflow_only
def test_quick_start_trains_saves_reloads_and_serves(tmp_path):
  # Under tf-keras the same code runs with `tf.keras` for `keras`.
  quick_start, export, head = _blocks("Using the library")
  assert (_backend_of(quick_start), _backend_of(export)) == ("any", "tensorflow")
  _run(_legacy(quick_start) + _RELOAD_CHECK + head, tmp_path)
  _run(_legacy(export), tmp_path)
  served = _run(
    textwrap.dedent("""
      import sys, numpy as np, tensorflow as tf
      x = np.load("features.npy")[:8]
      loaded = tf.saved_model.load("ranker_savedmodel")  # kept: it owns the variables
      scores = loaded.serve(tf.constant(x)).numpy()
      np.save("served.npy", scores)
      print(sorted(m for m in sys.modules if m.startswith("tfrank4class")))
      """),
    tmp_path,
  )
  assert served.strip() == "[]"  # served without importing tfrank4class
  np.testing.assert_allclose(
    np.load(tmp_path / "served.npy"), np.load(tmp_path / "scores.npy"), rtol=1e-5, atol=1e-6
  )


@pytest.mark.tensorflow_only
def test_own_loss_and_metric_train_save_and_reload(tmp_path):
  """The own loss and metric of docs/extending.md: weighted fit, ``.keras`` round trip, values by
  hand."""
  (own,) = _blocks("A ranking loss and a metric", "docs/extending.md")
  check = textwrap.dedent("""
    np.save("labels.npy", labels)
    np.save("weights.npy", weights)
    scores = model.predict(features, verbose=0)
    np.testing.assert_allclose(reloaded.predict(features, verbose=0), scores, rtol=1e-6)
    results = reloaded.evaluate(features, labels, sample_weight=weights, batch_size=64,
                                verbose=0, return_dict=True)
    np.save("scores.npy", scores)
    np.save("results.npy", [results["loss"], results["hit_3"]])
    """)
  _run(own + check, tmp_path)
  scores = np.load(tmp_path / "scores.npy")
  labels, weights = np.load(tmp_path / "labels.npy"), np.load(tmp_path / "weights.npy")
  # By hand: softmax cross-entropy of the true class, weighted mean over the 64 examples; hit@3
  # = the true class among the three highest scores, weighted mean over the lists.
  log_p = scores - np.log(np.exp(scores).sum(1, keepdims=True))
  cross_entropy = -log_p[np.arange(64), labels]
  hits = (np.argsort(-scores, 1)[:, :3] == labels[:, None]).any(1)
  loss, hit_3 = np.load(tmp_path / "results.npy")
  np.testing.assert_allclose(loss, np.sum(weights * cross_entropy) / 64, rtol=1e-5)
  np.testing.assert_allclose(hit_3, np.sum(weights * hits) / np.sum(weights), rtol=1e-5)


@pytest.mark.tensorflow_only
def test_own_embedding_loss_trains_saves_and_reloads(tmp_path):
  """The own embedding loss of docs/extending.md: fit, ``.keras`` round trip, the loss by hand."""
  (embedding,) = _blocks("A metric-learning loss", "docs/extending.md")
  check = textwrap.dedent("""
    np.save("labels.npy", labels)
    embeddings = embedder.predict(features, verbose=0)
    np.testing.assert_allclose(reloaded_embedder.predict(features, verbose=0), embeddings,
                               rtol=1e-6)
    np.save("embeddings.npy", embeddings)
    np.save("loss.npy", reloaded_embedder.evaluate(features, labels, batch_size=32, verbose=0))
    """)
  _run(embedding + check, tmp_path)
  e, labels = np.load(tmp_path / "embeddings.npy"), np.load(tmp_path / "labels.npy")
  e = e / np.linalg.norm(e, axis=1, keepdims=True)
  d = np.sqrt(np.maximum(((e[:, None] - e[None]) ** 2).sum(-1), 1e-12))
  same = labels[:, None] == labels[None]
  want = []
  for i in range(32):
    pos = same[i] & (np.arange(32) != i)
    pull = (d[i, pos] ** 2).mean() if pos.any() else 0.0
    push = np.maximum(1.0 - d[i, ~same[i]], 0.0).mean() if (~same[i]).any() else 0.0
    want.append(pull + push)
  np.testing.assert_allclose(np.load(tmp_path / "loss.npy"), np.mean(want), rtol=1e-5)


@pytest.mark.tensorflow_only
def test_learning_top_k_trains(tmp_path):
  (code,) = _blocks("Learning Top-K")
  check = "assert np.isfinite(model.evaluate(features, labels, verbose=0)).all()\n"
  _run(code + check, tmp_path)


def _undefined_names(code):
  """Names ``code`` reads at module level (or as globals inside its functions and classes) that
  it neither assigns nor imports and that are not builtins: a NameError when it runs alone."""
  top = symtable.symtable(code, "<readme block>", "exec")
  defined = {sym.get_name() for sym in top.get_symbols() if sym.is_assigned() or sym.is_imported()}
  read = set()

  def walk(table):
    for sym in table.get_symbols():
      if sym.is_referenced() and (table is top or sym.is_global()):
        read.add(sym.get_name())
    for child in table.get_children():
      walk(child)

  walk(top)
  return sorted(read - defined - set(dir(builtins)))


def test_undefined_names_finds_what_a_block_does_not_define():
  code = (
    "import numpy as np\nx = np.ones(3)\ndef f(a):\n  return keras.ops.sum(a) + y\nlosses.get()\n"
  )
  assert _undefined_names(code) == ["keras", "losses", "y"]


def test_every_python_block_defines_what_it_uses():
  blocks = [code for path in BLOCK_FILES for code in _blocks(path=path)]
  assert len(blocks) >= 6
  for code in blocks:
    assert _undefined_names(code) == [], code


def test_no_block_imports_tensorflow_unless_it_says_so():
  """A block for any backend imports no TensorFlow (it would fail on JAX and PyTorch)."""
  for path in BLOCK_FILES:
    for code in _blocks(path=path):
      if _backend_of(code) != "tensorflow":
        assert not re.search(r"^(import|from) tensorflow\b", code, re.M), (path, code)


@pytest.mark.slow  # one process per block, each importing its backend: about a minute in all
def test_every_python_block_runs_alone(tmp_path):
  """Each block in a process of its own, in the order of its file (a block may read what the one
  before it wrote, as the export reads the quick start's model), on the legs it is for."""
  for path in BLOCK_FILES:
    folder = tmp_path / path.replace("/", "_")
    folder.mkdir()
    for code in _blocks(path=path):
      if _backend_of(code) not in ("any", compat.BACKEND):
        continue  # run on its own leg
      _run(_legacy(code), folder)


# The demo: its expected output in the README, the recorded runs in docs/running.md.
_LOSSES = ("softmax", "pairwise logistic", "ApproxNDCG")
_FIGURES = r"(\d\.\d{4}) (\d\.\d{4}) (\d\.\d{4}) (\d\.\d{4})"


def _readme_demo():
  """``({loss: [top_1, top_5, ndcg_5, mrr]}, first class served)`` of the README's output."""
  text = (ROOT / "README.md").read_text(encoding="utf-8")
  output = text.split("## What `make demo` does\n", 1)[1].split("```\n", 2)[1]
  names = dict(zip(("softmax_loss", "pairwise_logistic_loss", "approx_ndcg_loss"), _LOSSES))
  rows = {
    names[m[0]]: [float(x) for x in m[1:]]
    for m in re.findall(r"^(\w+_loss) +" + _FIGURES.replace(" ", " +"), output, re.MULTILINE)
  }
  served = re.search(r"top 5:\n +(\w+) ", output)[1]
  return rows, served


def _recorded_demo_runs():
  """``{run: ({loss: figures}, first class served)}`` of docs/running.md's table."""
  text = (ROOT / "docs" / "running.md").read_text(encoding="utf-8")
  runs = {}
  for line in text.split("## Demo figures across thread settings", 1)[1].splitlines():
    cells = [cell.strip() for cell in line.strip("|").split("|")]
    if len(cells) == 6 and re.fullmatch(_FIGURES, cells[2]):
      figures = [[float(x) for x in cell.split()] for cell in cells[2:5]]
      runs[cells[0]] = dict(zip(_LOSSES, figures)), cells[5].split()[0]
  return runs


def test_demo_statement_holds_for_every_recorded_run():
  readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
  assert (
    "the order of the three losses by test NDCG@5 (softmax, then pairwise logistic, then "
    "ApproxNDCG), the softmax export being the one served, and the emotion served first (`love`)"
  ) in readme
  bound = re.search(
    r"the figures, by up to about ([\d.]+) for softmax and pairwise logistic and ([\d.]+) for "
    r"ApproxNDCG",
    readme,
  )
  bounds = {"softmax": float(bound[1]), "pairwise logistic": float(bound[1])}
  bounds["ApproxNDCG"] = float(bound[2])
  runs = _recorded_demo_runs()
  assert sorted(runs) == [
    "approx-written-gradient",
    "default1",
    "keras-ops",
    "logistic-at-ties",
    "nodnn",
    "threads1",
    "threads4",
  ]
  runs["README"] = _readme_demo()
  for name, (rows, served) in runs.items():
    ndcg_5 = [rows[loss][2] for loss in _LOSSES]
    assert ndcg_5 == sorted(ndcg_5, reverse=True) and len(set(ndcg_5)) == 3, name
    assert served == "love", name
  # How far each figure moved across the recorded thread and oneDNN settings.
  for loss, limit in bounds.items():
    spread = np.ptp([runs[name][0][loss] for name in runs if name != "README"], axis=0)
    assert spread.max() <= limit, (loss, spread)
  # The run reported on another machine, default stack, against the README's table.
  running = " ".join((ROOT / "docs" / "running.md").read_text(encoding="utf-8").split())
  reported = re.search(r"printed softmax " + _FIGURES, running)
  moved = np.abs(np.array([float(x) for x in reported.groups()]) - runs["README"][0]["softmax"])
  assert moved.max() <= bounds["softmax"]
  assert f"at most {moved.max():.4f} apart" in running
