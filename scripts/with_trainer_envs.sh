#!/usr/bin/env bash
# with_trainer_envs.sh CMD...: runs CMD while the trainer envs the integration tests need
# (.cache/trl-env, then verl-env on it; vllm-env beside them) are built in the background, so
# that on a fresh machine their downloads (minutes: CI builds them every run) overlap the
# suite instead of stalling the one test that needs each. Each env script takes its own lock,
# so a test that needs an env waits for the build under way; an env already built for this
# checkout costs nothing. A build that fails here says so in .cache/trainer-envs.log, and the
# test that needs the env runs its script again and reports why. Ends with CMD's status,
# after the builds (stopped if CMD is interrupted).
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p .cache
log=.cache/trainer-envs.log
: > "$log"
# each build in its own process group, so that stopping it stops its pip too
setsid bash -c 'scripts/trl_env.sh && scripts/verl_env.sh' >> "$log" 2>&1 &
chain=$!
setsid scripts/vllm_env.sh >> "$log" 2>&1 &
vllm=$!
stop() { kill -- -"$chain" -"$vllm" 2>/dev/null; wait; }
trap 'stop; exit 130' INT TERM
"$@"
rc=$?
trap - INT TERM
if [ "$rc" -ge 128 ]; then stop; exit "$rc"; fi  # CMD killed: the builds are not waited for
wait "$chain" || echo "runwatch: building .cache/trl-env or verl-env failed (see $log)" >&2
wait "$vllm" || echo "runwatch: building .cache/vllm-env failed (see $log)" >&2
exit "$rc"
