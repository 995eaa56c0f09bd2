"""The house rules of the layout of the package and of ``experiments/``: no function over 60
lines, no module over 500.

Counted as ``end_lineno - lineno + 1`` of the ``def`` (docstrings and signatures count) and as
the number of lines of a module. A function or module may exceed its limit only if it is on the
allowlist below with the reason, and carries a comment saying why: at the function, a comment
with "over 60 lines"; in the module, one with "500 lines" (either case). An entry that no longer
exceeds its limit fails too, so that the list stays exact.
"""

import ast
import configparser
import pathlib

import pytest
import setuptools

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tfrank4class"
#: Where the rules apply: ``{label prefix: folder}``; a module's label is the prefix and its path
#: under the folder (``checks.py`` for tfrank4class/checks.py, ``experiments/second/grid.py``).
FOLDERS = {"": PACKAGE, "experiments/": ROOT / "experiments"}
MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 500

#: ``(module label, qualified name)``: why the function is better whole.
LONG_FUNCTIONS = {
  # The one score check: its docstring documents every option and what the value check costs.
  ("checks.py", "check_scores"): "docstring",
  # The one sample-weight check: its docstring gives the shapes and rules of every flavour.
  ("checks.py", "check_sample_weight"): "docstring",
  # The one label parser: its docstring states the parsing rules in order.
  ("labels.py", "parse_labels"): "docstring",
  # The paper's loss: one documented argument per option; the body is short.
  ("losses/topk/cross_entropy.py", "topk_cross_entropy"): "signature and docstring",
  # One argument per option of the recipe, each documented; the body is short.
  ("retrieval/evaluation.py", "retrieval_metrics"): "signature and docstring",
  ("retrieval/model.py", "build_retrieval_model"): "signature and docstring",
}

#: Module label: why it is longer than 500 lines.
LONG_MODULES = {
  "backend.py": "the one module of the core that calls a backend's own library",
  "metrics/functional.py": "every metric's closed form beside the shared tie expectation",
}


def _modules():
  """``(label, path)`` of every module the rules apply to."""
  return sorted(
    (prefix + path.relative_to(folder).as_posix(), path)
    for prefix, folder in FOLDERS.items()
    for path in folder.rglob("*.py")
  )


def _functions(tree):
  """``(qualified name, node)`` of every function and method, nested ones included."""
  found = []

  def visit(node, prefix):
    for child in ast.iter_child_nodes(node):
      if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
        found.append((prefix + child.name, child))
        visit(child, prefix + child.name + ".")
      elif isinstance(child, ast.ClassDef):
        visit(child, prefix + child.name + ".")
      else:
        visit(child, prefix)

  visit(tree, "")
  return found


def _long_functions():
  long = {}
  for label, path in _modules():
    text = path.read_text(encoding="utf-8")
    for name, node in _functions(ast.parse(text)):
      lines = node.end_lineno - node.lineno + 1
      if lines > MAX_FUNCTION_LINES:
        source = "\n".join(text.splitlines()[node.lineno - 1 : node.end_lineno])
        long[(label, name)] = (lines, source)
  return long


def test_no_function_over_60_lines_unless_allowed_with_a_comment():
  long = _long_functions()
  unexpected = {key: lines for key, (lines, _) in long.items() if key not in LONG_FUNCTIONS}
  assert not unexpected, f"functions over {MAX_FUNCTION_LINES} lines (split them): {unexpected}"
  stale = sorted(set(LONG_FUNCTIONS) - set(long))
  assert not stale, f"allowlisted functions now within {MAX_FUNCTION_LINES} lines: {stale}"
  uncommented = [key for key, (_, source) in long.items() if "over 60 lines" not in source.lower()]
  assert not uncommented, f"long functions without an 'over 60 lines' comment: {uncommented}"


def test_no_module_over_500_lines_unless_allowed_with_a_comment():
  long = {}
  for label, path in _modules():
    text = path.read_text(encoding="utf-8")
    if len(text.splitlines()) > MAX_MODULE_LINES:
      long[label] = text
  unexpected = sorted(set(long) - set(LONG_MODULES))
  assert not unexpected, f"modules over {MAX_MODULE_LINES} lines (split them): {unexpected}"
  stale = sorted(set(LONG_MODULES) - set(long))
  assert not stale, f"allowlisted modules now within {MAX_MODULE_LINES} lines: {stale}"
  uncommented = [name for name, text in long.items() if "500 lines" not in text.lower()]
  assert not uncommented, f"long modules without a '500 lines' comment: {uncommented}"


def test_the_rules_reach_the_experiments():
  labels = [label for label, _ in _modules()]
  assert "checks.py" in labels and "experiments/second/grid.py" in labels


def test_the_experiments_are_not_shipped():
  """setup.cfg's package discovery finds the package and leaves ``experiments`` out."""
  config = configparser.ConfigParser()
  config.read(ROOT / "setup.cfg")
  find = config["options.packages.find"]
  include, exclude = (find.get(key, "").replace(",", " ").split() for key in ("include", "exclude"))
  assert config["options"]["packages"] == "find_namespace:"
  found = setuptools.find_namespace_packages(where=str(ROOT), include=include, exclude=exclude)
  assert "tfrank4class" in found and "tfrank4class.train" in found
  assert not [name for name in found if name.split(".")[0] == "experiments"]


@pytest.mark.parametrize(
  "source, expected",
  [
    ("def f():\n" + "  x = 1\n" * 60, {"f": 61}),
    ("class A:\n  def m(self):\n" + "    x = 1\n" * 59, {"A.m": 60}),
    ("def f():\n  def g():\n" + "    x = 1\n" * 61, {"f": 63, "f.g": 62}),
  ],
)
def test_the_counter_sees_methods_and_nested_functions(source, expected):
  tree = ast.parse(source)
  got = {name: node.end_lineno - node.lineno + 1 for name, node in _functions(tree)}
  assert got == expected


#: Package modules outside the TensorFlow fence that import TensorFlow inside a function, and why:
#: each import runs on the TensorFlow backend only.
TENSORFLOW_INSIDE = {
  "backend.py": "the one module of the core that calls each backend's own library",
  "compat.py": "binds tf-keras, and reads tf.distribute for the reduction on TensorFlow",
  "ranking/synthetic.py": "synthetic_dataset wraps the numpy generator in tf.data",
  "losses/rambo/score_memory.py": "the score memory's variables on the TensorFlow backend",
  "encoders/text_transformer.py": "raw-string input under tf-keras (string tensors)",
}


def _tensorflow_imports(tree):
  """``(module level, inside a function)``: whether ``tree`` imports tensorflow or tf_keras."""

  def imports_tf(node):
    names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
    return any(n.split(".")[0] in ("tensorflow", "tf_keras") for n in names)

  top = any(isinstance(n, (ast.Import, ast.ImportFrom)) and imports_tf(n) for n in tree.body)
  nested = any(
    isinstance(n, (ast.Import, ast.ImportFrom)) and imports_tf(n) for n in ast.walk(tree)
  )
  return top, nested and not top


def test_the_core_imports_tensorflow_only_behind_the_fence():
  """The core runs on Keras 3's JAX and PyTorch backends without TensorFlow installed: outside
  compat.TENSORFLOW_MODULES (each of which calls compat.require_tensorflow_backend, or is
  imported only on TensorFlow) no module imports TensorFlow when imported."""
  from tfrank4class import compat  # noqa: PLC0415

  fenced = tuple(
    m.removeprefix("tfrank4class.").replace(".", "/") for m in compat.TENSORFLOW_MODULES
  )
  inside = set()
  for label, path in _modules():
    if not label or label.startswith("experiments/"):
      continue
    if label.removesuffix(".py").startswith(fenced):
      continue
    top, nested = _tensorflow_imports(ast.parse(path.read_text(encoding="utf-8")))
    assert not top, f"{label} imports TensorFlow at module level but is not fenced"
    if nested:
      inside.add(label)
  assert inside == set(TENSORFLOW_INSIDE)
  for module in compat.TENSORFLOW_MODULES:
    path = PACKAGE.parent / (module.replace(".", "/") + ".py")
    path = path if path.exists() else path.with_suffix("") / "__init__.py"
    text = path.read_text(encoding="utf-8")
    assert "require_tensorflow_backend" in text or "imported only on the TensorFlow" in text, module


def test_every_where_and_divide_no_nan_of_the_core_goes_through_backend():
  """``keras.ops.where`` is TensorFlow's broadcasting ``SelectV2``, slower than the ``Select``
  that ``tfrank4class.backend.where`` takes where it can, and ``keras.ops.divide_no_nan`` returns
  float32 for float64 inputs on PyTorch: no module of the package but backend.py calls either
  from ``ops`` (docstring examples, written for users, may)."""
  calls = []
  for label, path in _modules():
    if not label or label.startswith("experiments/") or label == "backend.py":
      continue
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
      func = getattr(node, "func", None)
      if isinstance(node, ast.Call) and isinstance(func, ast.Attribute):
        if func.attr in ("where", "divide_no_nan") and getattr(func.value, "id", None) == "ops":
          calls.append(f"{label}:{node.lineno}")
  assert calls == []


def test_the_core_asks_for_int64_only_where_int32_cannot_hold_the_value():
  """JAX without x64 warns for every int64 request and truncates it to int32: the core's indices
  and class ids are int32 (lists hold fewer than 2^31 items). The exceptions, each needing 64 bits:
  ``ranking/exact.py`` (the index dtype of a list over 2^31 items) and ``backend.py``
  (``argsort_pairs``' two-key int64 sort, not on JAX)."""
  allowed = {"backend.py", "ranking/exact.py"}
  found = []
  for label, path in _modules():
    if not label or label.startswith("experiments/") or label in allowed:
      continue
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
      if isinstance(node, ast.Call):
        arguments = list(node.args) + [keyword.value for keyword in node.keywords]
        if any(getattr(a, "value", None) == "int64" for a in arguments):
          found.append(f"{label}:{node.lineno}")
  assert found == []
