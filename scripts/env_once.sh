# Sourced by the trainer env scripts (trl_env.sh, verl_env.sh, vllm_env.sh) once ENV is set:
# one build of ENV at a time -- `make test` starts the builds beside the suite
# (scripts/with_trainer_envs.sh), and a test that needs the env waits here for the build under
# way -- and none when ENV was built for this checkout: its .pth and editable install name
# this checkout's paths, so another's (a moved checkout, a copied cache) is rebuilt. A
# script marks its env built with `env_built` as its last step.
mkdir -p "$(dirname "$ENV")"
exec 9>"$ENV.lock"
flock 9
if [ "$(cat "$ENV/.complete" 2>/dev/null)" = "$PWD" ]; then exit 0; fi
env_built() { echo "$PWD" > "$ENV/.complete"; }
