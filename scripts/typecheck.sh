#!/usr/bin/env bash
# mypy cannot follow setuptools' package-dir mapping, so give it a tree of links that has
# the installed import names (runwatch.emitters -> emitters/, ...) and check that, with the
# harness (harness/, never shipped) beside it.
set -euo pipefail
cd "$(dirname "$0")/.."
root=build/typecheck/runwatch
rm -rf build/typecheck && mkdir -p "$root"
for f in runwatch/*; do ln -s "$PWD/$f" "$root/$(basename "$f")"; done
for d in emitters stream store; do ln -s "$PWD/$d" "$root/$d"; done
ln -s "$PWD/harness" build/typecheck/harness
exec .venv/bin/mypy -p runwatch -p harness "$@"
