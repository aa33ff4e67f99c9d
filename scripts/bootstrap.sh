#!/usr/bin/env bash
# Creates (or refreshes) the project's virtual environment in .venv. `bootstrap.sh demo`
# installs what `make demo` needs (the `all` extra: no torch, no test tools), so a first demo
# is quick; `bootstrap.sh` (or `dev`) adds what the suite and the benchmarks need. Re-runs
# only when pyproject.toml or a native part (setup.py) changed or more is asked for than is
# there, so the second `make` on a machine is fast; pip's own cache lives under .cache/pip.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
want=${1:-dev}
case $want in
  demo) extra=all ;;
  dev) extra=dev ;;
  *) echo "usage: scripts/bootstrap.sh [demo|dev]" >&2; exit 2 ;;
esac
STAMP=.venv/.runwatch-stamp
# The dev environment imports the harness (harness/: tests, benches, `make docs`; never
# shipped) from the repository root: a path file in the venv says where that is.
harness_path() {
  [[ $want == dev ]] || return 0
  local site
  site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
  echo "$PWD" > "$site/runwatch-harness.pth"
}
# Our own modules' bytecode, as a wheel's install writes it: the editable install does not,
# and where PYTHONDONTWRITEBYTECODE is set nothing would, so every command would compile its
# modules again at start (a quarter of `runwatch replay`'s start-up). Stale files are rewritten.
compile_sources() {
  .venv/bin/python -m compileall -q runwatch emitters stream store >/dev/null
}
# (the native parts' sources too: the editable install builds them, in place, only when it runs)
hash=$(cat pyproject.toml setup.py $(find stream -name '*.c' | sort) | sha256sum | cut -d' ' -f1)
if [[ -f $STAMP && -x .venv/bin/runwatch ]]; then
  read -r had_hash had <"$STAMP" || true
  # a dev environment holds everything the demo needs
  if [[ $had_hash == "$hash" && ( $had == "$want" || $had == dev ) ]]; then
    harness_path
    compile_sources
    exit 0
  fi
fi
if [[ $want == demo ]]; then
  echo "runwatch: setting up .venv for the demo (first run: a minute or two)" >&2
else
  echo "runwatch: setting up .venv with the test tools and torch (first run: a few minutes)" >&2
fi
[[ -x .venv/bin/python ]] || "$PY" -m venv .venv
export PIP_CACHE_DIR="$PWD/.cache/pip" PIP_DISABLE_PIP_VERSION_CHECK=1
.venv/bin/python -m pip install -q --upgrade "pip>=24" "setuptools>=68" wheel
# setuptools warns, at every editable install, that a folder named like the package could
# shadow it ("Editable installation. ... Please be careful ..."): ten lines of alarm in a
# new user's first `make demo`, about a layout that is ours on purpose.
PYTHONWARNINGS="ignore:Editable installation" .venv/bin/python -m pip install -q -e ".[$extra]"
harness_path
compile_sources
echo "$hash $want" > "$STAMP"
