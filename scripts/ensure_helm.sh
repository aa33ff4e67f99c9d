#!/usr/bin/env bash
# The chart checks (tests/integration/test_helm.py, `make test`) run the real `helm`.
# Builds a pinned Helm v3 into .cache/bin with the Go toolchain when it is not there yet.
# Prints the path of the helm binary on stdout. One build at a time (a lock): `make test`
# builds it before the suite, and a chart check started meanwhile waits for that build.
set -euo pipefail
HELM_VERSION="${RUNWATCH_HELM_VERSION:-v3.16.4}"
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/.cache/bin"
helm="$bin/helm"
stamp="$bin/.helm-version"
mkdir -p "$bin"
exec 9>"$bin/.helm.lock"
flock 9
if [[ -x "$helm" ]] && [[ "$(cat "$stamp" 2>/dev/null)" == "$HELM_VERSION" ]]; then
  echo "$helm"
  exit 0
fi
if ! command -v go >/dev/null 2>&1; then
  echo "runwatch: helm ${HELM_VERSION} is needed for the chart checks; install Go" \
    "(https://go.dev/dl) so that scripts/ensure_helm.sh can build it" >&2
  exit 1
fi
echo "runwatch: building helm ${HELM_VERSION} into .cache/bin (go install, once)" >&2
GOBIN="$bin" CGO_ENABLED=0 go install "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}" >&2
echo "$HELM_VERSION" >"$stamp"
echo "$helm"
