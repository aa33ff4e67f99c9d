#!/usr/bin/env bash
# A real TRL for the tests that train (issue 32): trl from PyPI in its own venv under
# .cache/trl-env, built once. Its own venv because huggingface_hub 2 (which trl's
# transformers wants) needs click>=8.4.2 and faust-streaming, in .venv, needs click<8.4.
# torch is the plain PyPI wheel without its CUDA libraries (--no-deps): the tests train on
# the CPU. runwatch goes in from this checkout (editable), with its base dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."
ENV=.cache/trl-env
TRL=1.16.0
TORCH=2.15.0
if [ -f "$ENV/.complete" ]; then exit 0; fi
rm -rf "$ENV"
echo "[trl] building $ENV (trl $TRL, torch $TORCH on the CPU; first use only, ~1.5 GB)" >&2
export PIP_CACHE_DIR="$PWD/.cache/pip" PIP_DISABLE_PIP_VERSION_CHECK=1
python3.11 -m venv "$ENV"
"$ENV/bin/pip" install -q --upgrade pip
"$ENV/bin/pip" install -q --no-deps "torch==$TORCH"
# what torch itself imports (its nvidia-* wheels are what --no-deps left out)
"$ENV/bin/pip" install -q filelock typing-extensions sympy networkx jinja2 fsspec
echo "torch==$TORCH" > "$ENV/constraints.txt"
"$ENV/bin/pip" install -q -c "$ENV/constraints.txt" "trl==$TRL"
"$ENV/bin/pip" install -q -c "$ENV/constraints.txt" -e .
"$ENV/bin/python" -c "import trl, torch, transformers; print('[trl]', trl.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__)" >&2
touch "$ENV/.complete"
