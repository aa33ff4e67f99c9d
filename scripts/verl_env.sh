#!/usr/bin/env bash
# A real verl for the agent-loop test (issue 32): verl 0.9.1 from PyPI in its own venv under
# .cache/verl-env, built once (verl wants transformers < 5.11, ray and hydra: not .venv's or
# the TRL env's). torch is PyPI's wheel (its CUDA libraries come along: torch will not import
# without them; nothing here uses a GPU). runwatch goes in from this checkout (editable).
# About 6 GB and a few minutes, once; the pip cache under .cache/pip makes a rebuild quick.
set -euo pipefail
cd "$(dirname "$0")/.."
ENV=${VERL_ENV:-.cache/verl-env}
VERL=0.9.1
TORCH=2.15.0
if [ -f "$ENV/.complete" ]; then exit 0; fi
rm -rf "$ENV"
echo "[verl] building $ENV (verl $VERL, torch $TORCH on the CPU; first use only)" >&2
export PIP_CACHE_DIR="$PWD/.cache/pip" PIP_DISABLE_PIP_VERSION_CHECK=1
python3.11 -m venv "$ENV"
"$ENV/bin/pip" install -q --upgrade pip
echo "torch==$TORCH" > "$ENV/constraints.txt"
"$ENV/bin/pip" install -q -c "$ENV/constraints.txt" "verl==$VERL"
# what verl's rollout modules import and its metadata does not declare
"$ENV/bin/pip" install -q -c "$ENV/constraints.txt" cachetools uvicorn fastapi
"$ENV/bin/pip" install -q -c "$ENV/constraints.txt" -e .
"$ENV/bin/python" -c "import verl, torch, transformers, ray; from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop; print('[verl]', verl.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__, 'ray', ray.__version__)" >&2
touch "$ENV/.complete"
