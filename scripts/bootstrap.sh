#!/usr/bin/env bash
# Creates (or refreshes) the project's virtual environment in .venv, with every extra the
# suite, the demo and the benchmarks need. Re-runs only when pyproject.toml changed, so the
# second `make` on a machine is fast; pip's own cache lives under .cache/pip.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
STAMP=.venv/.runwatch-stamp
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [[ -f $STAMP && "$(cat "$STAMP")" == "$want" && -x .venv/bin/runwatch ]]; then
  exit 0
fi
echo "runwatch: setting up .venv (first run takes a minute)" >&2
[[ -x .venv/bin/python ]] || "$PY" -m venv .venv
export PIP_CACHE_DIR="$PWD/.cache/pip" PIP_DISABLE_PIP_VERSION_CHECK=1
.venv/bin/python -m pip install -q --upgrade "pip>=24" "setuptools>=68" wheel
.venv/bin/python -m pip install -q -e ".[dev]"
echo "$want" > "$STAMP"
