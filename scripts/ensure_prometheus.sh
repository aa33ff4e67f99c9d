#!/usr/bin/env bash
# The integration tests start a real Prometheus server (Debian's `prometheus` package).
# Installs it when missing and this user may (root with apt-get); otherwise says how, and
# the Prometheus tests skip with that reason. `make test` calls this; so does the fixture.
set -euo pipefail
if command -v prometheus >/dev/null 2>&1 || [[ -n "${RUNWATCH_PROMETHEUS:-}" ]]; then
  exit 0
fi
if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
  echo "runwatch: installing prometheus (apt-get) for the integration tests" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  # the package starts a system service; the tests run their own server
  (command -v systemctl >/dev/null && systemctl disable --now prometheus) >/dev/null 2>&1 || true
  exit 0
fi
echo "runwatch: prometheus not found; install it (Debian/Ubuntu: apt-get install prometheus)" \
  "or set RUNWATCH_PROMETHEUS=/path/to/prometheus" >&2
exit 1
