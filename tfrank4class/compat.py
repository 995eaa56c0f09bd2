"""The one place that decides which Keras the package is bound to, and how a loss reduces.

**Keras.** Every Keras object of tfrank4class (losses, metrics, layers) is written once, against
``keras`` below:

* Keras 3 (``import keras``) on any of its backends, TensorFlow, JAX or PyTorch (the
  ``KERAS_BACKEND`` variable or ``keras.json``, Keras's own rule; :data:`BACKEND`);
* Keras 2 from the ``tf-keras`` package when ``TF_USE_LEGACY_KERAS=1`` is set before TensorFlow
  is imported (TensorFlow 2.16-2.21), the Keras ``tf.keras`` then is (the rule TensorFlow itself
  follows). The package never sets the variable.

The maths of the core is written on Keras 3's ``keras.ops`` (:data:`ops`), whatever the bound
Keras: on the TensorFlow backend it takes and returns ``tf.Tensor``\\ s, so the same core serves
tf-keras models (inside them, under ``jit_compile``, with gradients). What ``keras.ops`` lacks is
in :mod:`tfrank4class.backend`. One process cannot mix the two Keras flavours: a model of the
other Keras that is handed one of our objects fails at once with :class:`KerasFlavourError`
naming the fix (see :func:`register_serializable`), instead of training with untracked weights
or averaging running means.

**TensorFlow by nature.** The tf.data pipelines (:mod:`tfrank4class.data`), the absl binaries
(:mod:`tfrank4class.train`), SavedModel export and the SavedModel text encoder need TensorFlow
and Keras's TensorFlow backend; they call :func:`require_tensorflow_backend` when imported, which
names what selected another backend. Only they, and :mod:`tfrank4class.backend` on the
TensorFlow backend, import ``tensorflow``: the core imports on a machine without it.

**Reduction.** Where the flavours differ in spelling, this module holds the one switch
(:data:`DEFAULT_REDUCTION`, :func:`loss_reduction`, :func:`reduce_loss`).
"""

import functools
import json
import math
import os
import sys
import weakref

#: The oldest TensorFlow the package supports (for tf-keras and the TensorFlow-by-nature parts).
MIN_TENSORFLOW = (2, 16)


class KerasFlavourError(TypeError):
  """A model or training loop of the other Keras was handed one of the package's objects."""

  # AutoGraph (which tf-keras runs over the losses it wraps) re-raises what it does not know
  # as a StagingError; this attribute makes it pass the error through unchanged.
  ag_pass_through = True


def tensorflow_version(version=None):
  """``(major, minor)`` of ``version`` (default: the installed TensorFlow's).

  Example:
    >>> tensorflow_version("2.21.0rc1")
    (2, 21)
  """
  if version is None:
    import tensorflow as tf  # noqa: PLC0415  (only asked for on the TensorFlow side)

    version = tf.__version__
  major, minor = version.split(".")[:2]
  return int(major), int(minor)


def check_tensorflow_version(version=None):
  """Raises ``ImportError`` naming the fix if ``version`` (default: installed) is too old.

  Example:
    >>> check_tensorflow_version("2.21.0")
    >>> check_tensorflow_version("2.15.1")
    Traceback (most recent call last):
    ...
    ImportError: tfrank4class needs TensorFlow >= 2.16, found 2.15.1. ...
  """
  if tensorflow_version(version) < MIN_TENSORFLOW:
    raise ImportError(
      f"tfrank4class needs TensorFlow >= {MIN_TENSORFLOW[0]}.{MIN_TENSORFLOW[1]}, found "
      f'{version}. Install the current stack: python -m pip install "tensorflow==2.21.0" '
      '"tf-keras==2.21.0" (or run `make test` in the repository, which sets up .venv).'
    )


def legacy_keras_requested(environ=None):
  """Whether ``TF_USE_LEGACY_KERAS`` asks for tf-keras, read as TensorFlow's ``tf.keras`` reads it.

  Example:
    >>> legacy_keras_requested({"TF_USE_LEGACY_KERAS": "1"}), legacy_keras_requested({})
    (True, False)
  """
  environ = os.environ if environ is None else environ
  return environ.get("TF_USE_LEGACY_KERAS") in ("true", "True", "1")


def keras_backend_setting(environ=None):
  """``(backend, source)``: the Keras 3 backend the environment selects, and what selects it.

  Keras 3's own rule, read without importing Keras: ``KERAS_BACKEND`` when it is set and not
  empty, else the ``"backend"`` of ``keras.json`` in ``KERAS_HOME`` (default ``~/.keras``, or
  ``/tmp/.keras`` when the home directory is not writable), else ``"tensorflow"``. ``source`` is
  ``"KERAS_BACKEND"``, the path of that ``keras.json``, or ``None`` for the default.

  Example:
    >>> keras_backend_setting({"KERAS_BACKEND": "jax"})
    ('jax', 'KERAS_BACKEND')
    >>> keras_backend_setting({"KERAS_BACKEND": "", "KERAS_HOME": "/nonexistent"})
    ('tensorflow', None)
  """
  environ = os.environ if environ is None else environ
  if environ.get("KERAS_BACKEND"):
    return environ["KERAS_BACKEND"], "KERAS_BACKEND"
  if "KERAS_HOME" in environ:
    home = environ["KERAS_HOME"]
  else:
    base = os.path.expanduser("~")
    home = os.path.join(base if os.access(base, os.W_OK) else "/tmp", ".keras")
  path = os.path.expanduser(os.path.join(home, "keras.json"))
  try:
    with open(path, encoding="utf-8") as f:
      config = json.load(f)
  except (OSError, ValueError):  # Keras too reads an unreadable file as no setting
    return "tensorflow", None
  if isinstance(config, dict) and "backend" in config:
    return config["backend"], path
  return "tensorflow", None


#: The modules (and packages) of tfrank4class that are TensorFlow by nature: tf.data pipelines,
#: the absl binaries, SavedModel export and the SavedModel text encoder, and fine-tuning a sorter
#: inside a loss (a variable update inside a traced loss). Each calls
#: :func:`require_tensorflow_backend` first (tfrank4class.losses.sodeep.tf_finetune: imported
#: only on TensorFlow); no other module imports TensorFlow at module level (tests/test_layout.py).
TENSORFLOW_MODULES = (
  "tfrank4class.data",
  "tfrank4class.train",
  "tfrank4class.encoders.saved_model_text",
  "tfrank4class.losses.sodeep.tf_finetune",
  "tfrank4class.retrieval.export",
)


def require_tensorflow_backend(what):
  """Raises ``ImportError`` unless the package runs on TensorFlow (Keras 3's TensorFlow backend
  or tf-keras); ``what`` names the part that needs it. The fence of the TensorFlow-by-nature
  modules (tf.data pipelines, binaries, SavedModel): each calls this when imported.

  Example:
    >>> require_tensorflow_backend("tfrank4class.data") if BACKEND == "tensorflow" else None
  """
  if BACKEND == "tensorflow":
    return
  backend, source = keras_backend_setting()
  if source == "KERAS_BACKEND":
    found, fix = f"KERAS_BACKEND is {backend!r}", "set KERAS_BACKEND=tensorflow"
  elif source is None:
    found, fix = f"Keras runs on {BACKEND!r}", "set KERAS_BACKEND=tensorflow"
  else:
    found = f'the Keras config file {source} sets "backend": {json.dumps(backend)}'
    fix = 'set "backend": "tensorflow" there (or KERAS_BACKEND=tensorflow)'
  raise ImportError(
    f"{what} is TensorFlow by nature (tf.data, tf.distribute, SavedModel) and needs Keras's "
    f"TensorFlow backend, but {found}: {fix} before Keras is imported. The losses, metrics, "
    "rank operators and heads run on every backend without it."
  )


def _bind_keras():
  """``(bound Keras, backend name)``."""
  if legacy_keras_requested():
    import tensorflow as tf  # noqa: PLC0415  (tf-keras is TensorFlow's Keras 2)

    check_tensorflow_version(tf.__version__)
    try:
      import tf_keras  # noqa: PLC0415
    except ImportError:
      version = tensorflow_version(tf.__version__)
      raise ImportError(
        "TF_USE_LEGACY_KERAS=1 asks for Keras 2, which TensorFlow "
        f"{tf.__version__} gets from the tf-keras package, and it is not installed. Run: "
        f'python -m pip install "tf-keras~={version[0]}.{version[1]}.0"'
      ) from None
    return tf_keras, "tensorflow"
  import keras  # noqa: PLC0415

  backend = keras.backend.backend()
  if backend == "tensorflow":
    import tensorflow as tf  # noqa: PLC0415

    check_tensorflow_version(tf.__version__)
  elif backend not in ("jax", "torch"):
    raise ImportError(
      f"tfrank4class runs on Keras 3's tensorflow, jax and torch backends, but Keras runs on "
      f"{backend!r}. Set KERAS_BACKEND to one of them before Keras is imported."
    )
  return keras, backend


#: The Keras every object of the package is built on: Keras 3 (``keras``), or tf-keras when
#: ``TF_USE_LEGACY_KERAS=1``.
keras, BACKEND = _bind_keras()

import keras as _keras_3  # noqa: E402  (Keras 3, whose ops the core is written on)

#: Keras 3's ``keras.ops``: the core's maths on every backend (with tf-keras: its TensorFlow one).
ops = _keras_3.ops
#: Keras 3's ``keras.tree`` (nested structures, on every backend).
tree = _keras_3.tree

#: Top-level package of the bound Keras: "keras" (Keras 3) or "tf_keras".
KERAS_PACKAGE = keras.__name__.split(".")[0]
#: Whether the bound Keras is Keras 3.
KERAS_3 = KERAS_PACKAGE == "keras"
#: The top-level package of each Keras flavour, and its name in messages.
_FLAVOURS = {"keras": "Keras 3", "tf_keras": "Keras 2 (tf-keras)"}
#: How many frames above a call of our objects are searched for the other Keras.
_STACK_DEPTH = 40

#: The default ``reduction`` of every loss of the package: the mean over the batch. Keras 2 calls
#: it ``"auto"`` (which is ``"sum_over_batch_size"`` inside ``fit``); Keras 3 has no ``"auto"``.
DEFAULT_REDUCTION = "sum_over_batch_size" if KERAS_3 else "auto"


def loss_reduction(reduction):
  """``reduction`` as the bound Keras spells it: Keras 2's ``"auto"`` is Keras 3's default.

  Lets a loss saved by Keras 2 (``"reduction": "auto"``) load under Keras 3.

  Example:
    >>> loss_reduction("sum")
    'sum'
  """
  if KERAS_3 and reduction == "auto":
    return DEFAULT_REDUCTION
  return reduction


def _tensorflow():
  """TensorFlow, on the TensorFlow side only (tf-keras, or Keras 3's TensorFlow backend)."""
  import tensorflow as tf  # noqa: PLC0415

  return tf


def _refuse_mean_under_strategy(loss, reduction):
  """Keras 2's refusal of a mean under a strategy outside ``compile`` (its private
  ``Loss._get_reduction``, which our ``__call__`` bypasses). ``_allow_sum_over_batch_size``, the
  permission ``compile`` sets, is private too; tf-keras 2.21 has no public way to read it."""
  if (
    reduction in ("auto", "sum_over_batch_size")
    and _tensorflow().distribute.has_strategy()
    and not getattr(loss, "_allow_sum_over_batch_size", False)
  ):
    raise ValueError(
      "Please use `tf.keras.losses.Reduction.SUM` or `tf.keras.losses.Reduction.NONE` for loss "
      "reduction when losses are used with `tf.distribute.Strategy`, except for specifying "
      "losses in `Model.compile()` for use by the built-in training loop `Model.fit()`."
    )


def reduce_loss(loss, values):
  """Reduces a loss's (already weighted) values as the bound Keras's ``Loss.__call__`` does.

  With ``v`` the values (any shape) and ``n`` their number of elements:

      "none":                                  v
      "sum":                                   sum(v)
      "sum_over_batch_size" (Keras 2 "auto",   sum(v) / n            (0 if n = 0)
        Keras 3 also "mean")
      "mean_with_sample_weight" (Keras 3):     sum(v) / n            (the weights are already in v)

  then, as each flavour does it under a ``tf.distribute`` strategy (TensorFlow only):

  * Keras 3 divides a mean (not a sum) by the number of replicas in sync, since it sums the
    replicas' gradients; it returns a scalar ``v`` unreduced and unscaled, as its
    ``reduce_values`` does;
  * Keras 2 refuses ``"auto"`` and ``"sum_over_batch_size"`` under a strategy unless ``compile``
    allowed it (``Model.compile`` sets that permission on the loss it is given, and scales the
    replicas' losses itself), with its own message.

  Values are in the loss's dtype under Keras 3 (``loss.dtype``), in their own under Keras 2.

  Example:
    >>> class Halves(keras.losses.Loss):
    ...   def call(self, y_true, y_pred):
    ...     return y_pred / 2.0
    >>> float(reduce_loss(Halves(reduction="sum"), ops.convert_to_tensor([1.0, 2.0, 3.0])))
    6.0
    >>> float(reduce_loss(Halves(), ops.convert_to_tensor([[1.0, 2.0], [3.0, 6.0]])))
    3.0
  """
  reduction = loss.reduction
  values = ops.convert_to_tensor(values)
  if KERAS_3:
    values = ops.cast(values, loss.dtype)
    if reduction in (None, "none") or len(values.shape) == 0 or tuple(values.shape) == (0,):
      return values
  else:
    _refuse_mean_under_strategy(loss, reduction)
    if reduction == "none":
      return values
  total = ops.sum(values)
  if reduction == "sum":
    return total
  if KERAS_3 and None not in values.shape:  # the count as a Python int: no op (eager calls)
    mean = total / max(math.prod(values.shape), 1)
  else:
    mean = total / ops.cast(ops.maximum(ops.size(values), 1), total.dtype)  # 0 for no values
  if KERAS_3 and BACKEND == "tensorflow":
    replicas = _tensorflow().distribute.get_strategy().num_replicas_in_sync
    if replicas > 1:
      mean = mean * ops.cast(1.0 / replicas, mean.dtype)
  return mean


def _is_foreign_keras(module_name):
  """Whether ``module_name`` belongs to a Keras other than the bound one."""
  top = module_name.split(".")[0]
  return top in _FLAVOURS and top != KERAS_PACKAGE


def _mix_up(obj, what, other):
  if KERAS_PACKAGE == "tf_keras":
    fix = (
      "This process bound tfrank4class to tf-keras because TF_USE_LEGACY_KERAS=1: build the "
      "model with `import tf_keras as keras` (or `tf.keras`, or `from tfrank4class.compat "
      "import keras`), or unset TF_USE_LEGACY_KERAS before TensorFlow is imported to use Keras 3."
    )
  else:
    fix = (
      "tfrank4class binds to the Keras that `tf.keras` is in this process: build the model "
      "with `import keras` (or `tf.keras`, or `from tfrank4class.compat import keras`), or set "
      "TF_USE_LEGACY_KERAS=1 before TensorFlow is imported to use tf-keras throughout."
    )
  return KerasFlavourError(
    f"{type(obj).__name__} is a tfrank4class object built on {_FLAVOURS[KERAS_PACKAGE]}, "
    f"but {what} {_FLAVOURS[other]}. {fix}"
  )


def check_keras_flavour(obj, args=(), kwargs=None, caller_modules=()):
  """Raises :class:`KerasFlavourError` if another Keras is calling ``obj`` or feeding it tensors.

  Args:
    obj: the package's loss, metric or layer being called.
    args, kwargs: its call arguments; a symbolic tensor of the other Keras is refused.
    caller_modules: ``__name__`` of the modules on the call stack; a module of the other Keras
      is refused (either Keras wraps the other's losses and metrics as plain functions, which
      would silently average a metric's running means or misapply sample weights, and would
      not track the other's layer weights).
  """
  for module in caller_modules:
    if _is_foreign_keras(module):
      raise _mix_up(obj, "it is being used by", module.split(".")[0])
  leaves = (*args, *(kwargs or {}).values())
  if any(isinstance(leaf, (list, tuple, dict)) for leaf in leaves):
    leaves = tree.flatten(leaves)  # the arguments' structure (a flat one costs ~25 us a call)
  for leaf in leaves:
    module = type(leaf).__module__
    if _is_foreign_keras(module):
      raise _mix_up(obj, f"it was given a {type(leaf).__name__} from", module.split(".")[0])


def _calling_modules(depth=_STACK_DEPTH):
  """``__name__`` of the modules of the ``depth`` frames above the caller of the caller.

  The whole stretch, not just the direct caller: AutoGraph converts a function before calling
  it (tf-keras does that to the losses it wraps), which puts its own frames in between.
  """
  frame = sys._getframe(2)  # pylint: disable=protected-access
  modules = []
  while frame is not None and len(modules) < depth:
    modules.append(frame.f_globals.get("__name__", ""))
    frame = frame.f_back
  return modules


def _check_caller(obj, args=(), kwargs=None):
  """:func:`check_keras_flavour` for a call of ``obj``, walking the call stack only when needed.

  The arguments are checked on every call (a ``tree.flatten``). The callers' modules are read
  from the stack once per trace (a call inside a ``tf.function`` being traced: Keras's train,
  test and predict steps) and, eagerly, on the object's first call only, not on every step.
  """
  check_keras_flavour(obj, args, kwargs)
  if BACKEND != "tensorflow":
    return  # one Keras only: tf-keras needs TensorFlow's backend
  if _tensorflow().executing_eagerly():
    if obj in _CHECKED_EAGERLY:
      return
    check_keras_flavour(obj, caller_modules=_calling_modules(depth=_STACK_DEPTH + 1))
    _CHECKED_EAGERLY.add(obj)
  else:
    check_keras_flavour(obj, caller_modules=_calling_modules(depth=_STACK_DEPTH + 1))


#: The objects whose eager callers were checked (see :func:`_check_caller`).
_CHECKED_EAGERLY = weakref.WeakSet()


def _guard_call(cls):
  """Makes ``cls.__call__`` and ``cls.variables`` run :func:`check_keras_flavour` first.

  ``variables`` too, because tf-keras reads a metric's variables in ``compile``, before any
  call, and fails deep inside TensorFlow on a Keras 3 variable.
  """
  call = cls.__call__
  if not getattr(call, "_checks_keras_flavour", False):

    @functools.wraps(call)
    def guarded(self, *args, **kwargs):
      _check_caller(self, args, kwargs)
      return call(self, *args, **kwargs)

    guarded._checks_keras_flavour = True  # pylint: disable=protected-access
    cls.__call__ = guarded
  variables = getattr(cls, "variables", None)
  if isinstance(variables, property) and not getattr(
    variables.fget, "_checks_keras_flavour", False
  ):

    def guarded_variables(self):
      _check_caller(self)
      return variables.fget(self)

    guarded_variables._checks_keras_flavour = True  # pylint: disable=protected-access
    cls.variables = property(guarded_variables, variables.fset, variables.fdel, variables.__doc__)


PACKAGE = "tfrank4class"


def register_serializable(cls):
  """Class decorator for every Keras object of the package.

  Registers ``cls`` with the bound Keras as ``tfrank4class>ClassName`` (so ``.keras`` files and
  SavedModels reload it without ``custom_objects``) and makes its ``__call__`` refuse Keras 3
  callers and Keras 3 tensors with a :class:`KerasFlavourError` naming the fix.
  """
  cls = keras.utils.register_keras_serializable(package=PACKAGE)(cls)
  _guard_call(cls)
  return cls


#: The kinds of Keras identifier :func:`resolve_by_name` hooks a registry into.
NAME_KINDS = ("losses", "metrics")


def _name_modules(kind):
  """The modules whose ``get`` resolves the bound Keras's string identifiers of ``kind``: the
  one ``compile`` calls (``keras.src.losses`` / ``tf_keras.src.losses``, where ``get`` is
  defined) and the public ones (``keras.losses``, and ``tf.keras.losses`` where it differs)."""
  public = getattr(keras, kind)
  modules = [sys.modules[public.get.__module__], public]
  if BACKEND == "tensorflow":
    modules.append(getattr(_tensorflow().keras, kind, public))
  return list({id(m): m for m in modules}.values())


def keras_resolves(kind, name):
  """Whether the bound Keras's own ``keras.<kind>.get(name)`` builds something for ``name``."""
  get = getattr(keras, kind).get
  get = getattr(get, "keras_get", get)  # Keras's own, not the hook of resolve_by_name
  try:
    return not isinstance(get(name), str)  # tf-keras's metrics.get returns a name it lacks
  except ValueError:
    return False


def resolve_by_name(kind, registry):
  """Makes ``compile(loss="name")`` / ``compile(metrics=["name"])`` build ``registry``'s entries.

  Both flavours turn a string identifier into an object with their module function ``get``
  (``keras.losses.get`` / ``keras.metrics.get``): Keras 3 looks the string up in its own names
  only (no custom objects), tf-keras in custom objects first, then its own names (its
  ``metrics.get`` returns a name it does not know unchanged). So neither reaches a registry by
  itself. This wraps that ``get`` where ``compile`` and the public API call it: Keras's own
  ``get`` first, and only a string it cannot interpret is looked up in ``registry``
  (``registry.get(name)``: a fresh object, parameterised names such as ``ndcg_5`` included).
  Keras's names therefore always win; :func:`keras_resolves` lets a registry refuse a name Keras
  already has. Idempotent (a second call replaces the first's registry for ``kind``); ``kind``
  is one of :data:`NAME_KINDS`.
  """
  if kind not in NAME_KINDS:
    raise ValueError(f"`kind` must be one of {list(NAME_KINDS)}, got {kind!r}.")
  for module in _name_modules(kind):
    keras_get = getattr(module.get, "keras_get", module.get)

    def get(identifier, keras_get=keras_get):
      try:
        found = keras_get(identifier)
      except ValueError:
        if not (isinstance(identifier, str) and identifier in registry):
          raise
        return registry.get(identifier)
      if isinstance(found, str) and identifier in registry:  # tf-keras's metrics.get
        return registry.get(identifier)
      return found

    functools.update_wrapper(get, keras_get)
    get.keras_get = keras_get
    module.get = get
