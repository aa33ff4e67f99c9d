#!/usr/bin/env bash
# A real verl for the agent-loop test (issue 32): verl 0.9.1 from PyPI in its own venv under
# .cache/verl-env, built once (verl wants transformers < 5.11, ray and hydra: not .venv's or
# the TRL env's). It is layered on the TRL env (scripts/trl_env.sh, built first) and, as
# that env is, on .venv: a .pth puts their site-packages after its own, in that order, so
# torch and its CUDA libraries (torch will not import without them; nothing here uses a
# GPU), ~4.5 GB, are installed and downloaded once for all three; what verl needs in other
# versions goes in this env's own site-packages, ahead of theirs, which pip leaves alone
# ("outside environment"). runwatch goes in from this checkout (editable). ~650 MB and
# about a minute on top of the TRL env.
set -euo pipefail
cd "$(dirname "$0")/.."
ENV=${VERL_ENV:-.cache/verl-env}
VERL=0.9.1
. scripts/env_once.sh  # one build at a time; none when built for this checkout
scripts/trl_env.sh
TORCH=$(.venv/bin/python -c "from importlib.metadata import version; print(version('torch'))")
rm -rf "$ENV"
echo "[verl] building $ENV (verl $VERL on .venv's torch $TORCH; first use only)" >&2
export PIP_CACHE_DIR="$PWD/.cache/pip" PIP_DISABLE_PIP_VERSION_CHECK=1
python3.11 -m venv "$ENV"
site=$("$ENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
# a path a .pth adds is not itself a site dir (its own .pth files are not read): both here
printf '%s\n' "$PWD/.cache/trl-env/lib/python3.11/site-packages" \
  "$PWD/.venv/lib/python3.11/site-packages" > "$site/zz-trl-env.pth"
echo "torch==$TORCH" > "$ENV/constraints.txt"
# what verl's rollout modules import and its metadata does not declare: cachetools,
# uvicorn, fastapi
"$ENV/bin/pip" install -q -c "$ENV/constraints.txt" "verl==$VERL" cachetools uvicorn fastapi
# the hub-kernels package this env's transformers declares (an extra it imports at start-up
# when the package is there): the trl env's newer one behind the .pth refuses its calls
# (kernels 0.19's LayerRepository wants a revision; transformers 5.10 declares kernels<0.13)
kernels=$("$ENV/bin/python" -c "import importlib.metadata as m; print(next((r.split(';')[0].replace(' ', '') for r in m.requires('transformers') or [] if r.startswith('kernels')), ''))")
if [ -n "$kernels" ]; then
  "$ENV/bin/pip" install -q -c "$ENV/constraints.txt" "$kernels"
fi
"$ENV/bin/pip" install -q -c "$ENV/constraints.txt" -e .
"$ENV/bin/python" -c "import verl, torch, transformers, ray; from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop; print('[verl]', verl.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__, 'ray', ray.__version__)" >&2
env_built
