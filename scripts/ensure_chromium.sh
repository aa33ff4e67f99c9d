#!/usr/bin/env bash
# The page's browser test (tests/e2e/test_pages_browser.py) and `make docs`' screenshot drive a
# real headless Chromium through its driver: Debian's `chromium` and `chromium-driver`
# packages (a browser download at run time is not possible where runwatch is tested).
# Installs them when missing and this user may (root with apt-get); otherwise says how.
# `make test` and `make docs` call this; RUNWATCH_CHROMIUM / RUNWATCH_CHROMEDRIVER name others.
set -euo pipefail
browser=${RUNWATCH_CHROMIUM:-$(command -v chromium || true)}
driver=${RUNWATCH_CHROMEDRIVER:-$(command -v chromedriver || true)}
if [[ -n $browser && -n $driver ]]; then
  exit 0
fi
if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
  echo "runwatch: installing chromium and chromium-driver (apt-get) for the page's browser test" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
  exit 0
fi
echo "runwatch: chromium / chromedriver not found; install them (Debian: apt-get install" \
  "chromium chromium-driver) or set RUNWATCH_CHROMIUM and RUNWATCH_CHROMEDRIVER" >&2
exit 1
