"""Atomic writes: a file or folder appears under its name whole, or not at all.

Every file the package writes into a run (``config.json``, ``results.json``, ``best.keras``, the
backup, the exported SavedModel, pretrained sorter weights) is written to a *partial* path beside
it, ``.partial-<name>`` in the same folder (same file system, so the rename is atomic; the name
keeps its ending, which Keras checks), flushed to disk (``fsync``) and then renamed over the
final name with ``os.replace``. A process killed during the write (or a full disk) leaves the
previous file untouched and at most a ``.partial-*`` file, which the next write replaces.

``writing(path)`` is the one way to do it: it yields the partial path to write (with ``open``,
``model.save``, ``tf.saved_model.save``...), then commits it, or removes it if the block raised.
``write_text(path, text)`` writes a text file through it. Code that cannot call ``writing``
around a write (a Keras callback saving a checkpoint) writes to ``partial_path(path)`` and calls
``commit`` itself.

Example:
  >>> import tempfile
  >>> path = os.path.join(tempfile.mkdtemp(), "results.json")
  >>> write_text(path, "{}")
  >>> try:
  ...   with writing(path) as partial:
  ...     with open(partial, "w") as f:
  ...       _ = f.write('{"top_1": 0.')
  ...     raise OSError("No space left on device")
  ... except OSError:
  ...   pass
  >>> open(path).read(), sorted(os.listdir(os.path.dirname(path)))
  ('{}', ['results.json'])
"""

import contextlib
import os
import shutil

#: The prefix of the partial path of a file or folder being written.
PARTIAL_PREFIX = ".partial-"


def partial_path(path):
  """The temporary path that ``path`` is written to before ``commit``: ``.partial-<name>`` in
  the same folder."""
  path = os.fspath(path)
  folder, name = os.path.split(os.path.normpath(path))
  return os.path.join(folder, PARTIAL_PREFIX + name)


def _fsync(path):
  """Flushes a file, or every file of a folder and the folders themselves, to disk."""
  if os.path.isdir(path):
    for root, _, files in os.walk(path):
      for name in files:
        _fsync(os.path.join(root, name))
      _fsync_dir(root)
    return
  fd = os.open(path, os.O_RDONLY)
  try:
    os.fsync(fd)
  finally:
    os.close(fd)


def _fsync_dir(path):
  """Flushes a folder's entries (a rename in it) to disk, where the platform allows it."""
  try:
    fd = os.open(path, os.O_RDONLY)
  except OSError:
    return
  try:
    os.fsync(fd)
  except OSError:
    pass  # some file systems refuse fsync on a folder
  finally:
    os.close(fd)


def commit(partial, path):
  """Flushes ``partial`` to disk and renames it to ``path``, replacing what was there.

  A folder replaces a folder: the old one is first renamed aside to ``partial_path(path) +
  ".old"`` and deleted once the new one is in place.
  """
  path = os.path.normpath(os.fspath(path))
  _fsync(partial)
  if os.path.isdir(partial) and os.path.isdir(path):
    old = partial_path(path) + ".old"
    shutil.rmtree(old, ignore_errors=True)
    os.replace(path, old)
    os.replace(partial, path)
    shutil.rmtree(old, ignore_errors=True)
  else:
    os.replace(partial, path)
  _fsync_dir(os.path.dirname(path) or ".")


def _remove(path):
  if os.path.isdir(path) and not os.path.islink(path):
    shutil.rmtree(path, ignore_errors=True)
  elif os.path.lexists(path):
    os.remove(path)


@contextlib.contextmanager
def writing(path):
  """Yields the partial path to write ``path``'s new content to; commits it after the block.

  If the block raises, the partial file or folder is removed and ``path`` is left as it was.
  """
  partial = partial_path(path)
  _remove(partial)  # a partial write of a killed process
  try:
    yield partial
  except BaseException:
    _remove(partial)
    raise
  commit(partial, path)


def write_text(path, text):
  """Writes the string ``text`` to the file ``path`` (UTF-8) atomically."""
  with writing(path) as partial:
    with open(partial, "w", encoding="utf-8") as f:
      f.write(text)
