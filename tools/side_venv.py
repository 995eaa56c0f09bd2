"""Builds (or reuses) the side virtual environment that runs the authors' reference code.

The reference implementations we compare against (difftopk, diffsort, fast-soft-sort, the
sentence-transformers reference of a BERT checkpoint) need PyTorch or JAX. They are never
dependencies of the package: a script in ``tools/`` runs them once in a side venv and commits
what they compute as test fixtures, so neither CI nor the project's venvs need them.

    python3 tools/side_venv.py /tmp/venv-torch torch==2.13.0 --no-deps difftopk==0.2.0

installs ``torch==2.13.0`` (a CPU wheel that lies on the development machines' disk for Python
3.11; any other torch version pulls a multi-GB CUDA build), then the packages after
``--no-deps`` without their dependencies (so that they cannot pull another torch). A venv that
exists already is reused; the packages are installed into it only if missing.
"""

import argparse
import os
import subprocess
import sys

PYTHON = "python3.11"  # the Python the on-disk torch 2.13.0 CPU wheel is built for


def ensure(path, packages=(), no_deps_packages=(), python=PYTHON):
  """Returns the interpreter of a venv at ``path`` holding ``packages``, creating it if needed."""
  interpreter = os.path.join(path, "bin", "python")
  if not os.path.exists(interpreter):
    subprocess.run([python, "-m", "venv", path], check=True)
  pip = [interpreter, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
  if packages:
    subprocess.run(pip + list(packages), check=True)
  if no_deps_packages:
    subprocess.run(pip + ["--no-deps"] + list(no_deps_packages), check=True)
  return interpreter


def main(argv):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("path", help="where the venv is (created if it does not exist)")
  parser.add_argument("packages", nargs="*", help="requirements installed with their deps")
  parser.add_argument("--no-deps", nargs="*", default=[], help="requirements installed without")
  parser.add_argument("--python", default=PYTHON, help="the interpreter that creates the venv")
  args = parser.parse_args(argv)
  print(ensure(args.path, args.packages, args.no_deps, args.python))


if __name__ == "__main__":
  main(sys.argv[1:])
