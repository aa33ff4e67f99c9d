#!/usr/bin/env bash
# A real TRL for the tests that train (issue 32): trl from PyPI in its own venv under
# .cache/trl-env, built once. Its own venv because huggingface_hub 2 (which trl's
# transformers wants) needs click>=8.4.2 and faust-streaming, in .venv, needs click<8.4.
# It is layered on .venv (`make setup`, built first): a .pth puts .venv's site-packages after
# this env's own, so torch with its CUDA libraries (torch will not import without them;
# nothing here uses a GPU), ~4.5 GB, is installed and downloaded once for the suite and
# both trainer envs; what trl needs in other versions (click, ...) goes in this env's own
# site-packages, ahead of .venv's, which pip leaves alone ("outside environment"). runwatch
# goes in from this checkout (editable). ~300 MB and about a minute on top of .venv. (pip warns
# that .venv's faust-streaming wants click<8.4: this env never imports faust.)
set -euo pipefail
cd "$(dirname "$0")/.."
ENV=.cache/trl-env
TRL=1.16.0
. scripts/env_once.sh  # one build at a time; none when built for this checkout
scripts/bootstrap.sh dev
TORCH=$(.venv/bin/python -c "from importlib.metadata import version; print(version('torch'))")
rm -rf "$ENV"
echo "[trl] building $ENV (trl $TRL on .venv's torch $TORCH; first use only)" >&2
export PIP_CACHE_DIR="$PWD/.cache/pip" PIP_DISABLE_PIP_VERSION_CHECK=1
python3.11 -m venv "$ENV"
site=$("$ENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
echo "$PWD/.venv/lib/python3.11/site-packages" > "$site/zz-venv.pth"
"$ENV/bin/pip" install -q --upgrade pip
echo "torch==$TORCH" > "$ENV/constraints.txt"
"$ENV/bin/pip" install -q -c "$ENV/constraints.txt" "trl==$TRL"
"$ENV/bin/pip" install -q -c "$ENV/constraints.txt" -e .
"$ENV/bin/python" -c "import trl, torch, transformers; print('[trl]', trl.__version__, 'torch', torch.__version__, 'transformers', transformers.__version__)" >&2
env_built
