"""verl's real `Tracking` class, for tests that must run against it: the pinned verl wheel
from PyPI, fetched once (`pip download --no-deps`) into a git-ignored cache, and its
`verl/utils/tracking.py` loaded by path.

Importing `verl.utils.tracking` the usual way runs `verl/__init__.py`, which needs Ray,
torch, tensordict and transformers; the module itself needs only the standard library,
orjson and packaging (its backends import their libraries when chosen). Loaded by path it
is verl's own code, byte for byte, without the rest of verl.
"""

from __future__ import annotations

import fcntl
import importlib.util
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from types import ModuleType

from harness.exceptions import VerlWheelError

VERL_VERSION = "0.9.1"
MODULE = "runwatch_dev_verl_tracking"
_MEMBER = "verl/utils/tracking.py"


def tracking_file(cache: Path, version: str = VERL_VERSION) -> Path:
    """verl's tracking.py of `version`, fetched into `cache` on first use."""
    target = cache / f"verl-{version}" / _MEMBER
    if target.exists():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two test sessions fetching at once
        if target.exists():
            return target
        with tempfile.TemporaryDirectory(dir=cache) as tmp:
            got = subprocess.run(
                [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                 "--only-binary", ":all:", "--dest", tmp, f"verl=={version}"],
                capture_output=True, text=True, timeout=600,
            )  # fmt: skip
            wheels = sorted(Path(tmp).glob("verl-*.whl"))
            if got.returncode != 0 or not wheels:
                raise VerlWheelError(f"pip download verl=={version} failed: {got.stderr[-500:]}")
            with zipfile.ZipFile(wheels[0]) as wheel:
                data = wheel.read(_MEMBER)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".part")
        partial.write_bytes(data)
        partial.rename(target)
    return target


def load_tracking(cache: Path, version: str = VERL_VERSION) -> ModuleType:
    """verl's tracking module, importable as `MODULE` (what `patch_tracking` is given)."""
    loaded = sys.modules.get(MODULE)
    if loaded is not None:
        return loaded
    spec = importlib.util.spec_from_file_location(MODULE, tracking_file(cache, version))
    if spec is None or spec.loader is None:
        raise VerlWheelError(f"cannot load {MODULE} from the verl wheel")
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE] = module
    spec.loader.exec_module(module)
    return module
