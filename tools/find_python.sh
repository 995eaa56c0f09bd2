#!/usr/bin/env sh
# Prints the path of a Python interpreter whose version is one of the arguments (e.g. 3.12 3.13),
# looking on PATH (python3.X, python3) and under pyenv's versions; exits 1 with a message if none.
# Used by the Makefile: `make PYTHON=/path/to/python` skips the search.
for version in "$@"; do
  for candidate in "python$version" python3 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$version".*/bin/python; do
    path=$(command -v "$candidate" 2>/dev/null) || continue
    if "$path" -c "import sys; sys.exit(0 if '%d.%d' % sys.version_info[:2] == '$version' else 1)" 2>/dev/null; then
      echo "$path"
      exit 0
    fi
  done
done
echo "No Python $* found on PATH or under pyenv (${PYENV_ROOT:-$HOME/.pyenv}/versions)." >&2
echo "Install one (e.g. 'pyenv install 3.12') or name it: make PYTHON=/path/to/python3.12 ..." >&2
exit 1
