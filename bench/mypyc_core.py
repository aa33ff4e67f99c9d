"""Does compiling the core with mypyc pay? The pure core against two compiled builds of it,
alternating in one run (issue 44: "the lever left is a compiled core").

The compiled modules: `stream/engine.py`, `stream/state/*` and the two helper modules of the
rules that the state's readers call (`rules/streaks.py`, `rules/levels.py`). The rule modules
themselves stay Python in both builds: each defines its parameters as a `msgspec.Struct`
subclass with class keywords (`frozen=True`, `kw_only=True`), which mypyc drops without a
word when it compiles a module (the class is built without them), and they are ~3% of the
core's time (py-spy, bench/RESULTS.md).

Each build is made from a copy of the sources with a patch applied (`bench/mypyc/*.patch`),
never from the tree itself, under `build/mypyc-core/`:

  python-classes  what mypyc refuses fixed, nothing else: every class left a Python class
                  (`@mypyc_attr(native_class=False)`), so slots, pickling (`Compact`'s
                  methods written per class), the blank records' class swap and the engine's
                  weak reference behave as now (a blank record's dicts and lists become
                  refusing dict and list subclasses: compiled code checks that a dict is
                  one); the functions and methods are compiled.
  native          the state's classes and the engine made native classes (C structs): the
                  upper bound. Measurement only, not shippable: `Compact` writes no pickling
                  methods (a checkpoint fails), `blank` swaps no class (a blank record is not
                  read-only), the engine's bookkeeper holds it strongly (native classes take no
                  weak reference).

Figures: `bench/core.py` (the core alone, CPU µs an event, every rule and the seven) and
`bench/replay.py --shape fleet` (replay against the plain reading of the seven rules), each in
its own process, pure and the builds taking turns `--pairs` times; the load average beside.
A patch that no longer applies (the sources moved on) stops the script: refresh it from a
copy of the sources made to compile again. Figures only: nothing asserts a timing.

    .venv/bin/python bench/mypyc_core.py [--pairs 2] [--variants python-classes,native]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from benchinfo import machine, say

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "build" / "mypyc-core"
PATCHES = Path(__file__).resolve().parent / "mypyc"
COMPILED = ["stream/engine.py", "stream/rules/streaks.py", "stream/rules/levels.py"]
#: the project's mypy settings less the note about unused sections, which mypyc counts as
#: an error
MYPY_INI = """\
[mypy]
strict = True
plugins = pydantic.mypy
[mypy-kafka.*,faust.*,aiokafka.*,mode.*,transformers,torch,torch.*]
ignore_missing_imports = True
follow_imports = skip
"""
SETUP = """\
import sys
from setuptools import setup
from mypyc.build import mypycify
paths = sys.argv[1:]
sys.argv[1:] = ["build_ext", "-b", "../out", "-t", "../tmp"]
setup(name="runwatch-core", ext_modules=mypycify(
    ["--config-file", "../mypy.ini", *paths], opt_level="3", separate=True))
"""
#: run in the measured process before the bench: the compiled modules found first
PRELUDE = """\
import glob, runpy, sys
from importlib.machinery import ExtensionFileLoader
from importlib.util import spec_from_file_location
out, script, *args = sys.argv[1:]

class Compiled:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if out and name.startswith("runwatch.stream."):
            hits = glob.glob(f"{out}/{name.replace('.', '/')}.*.so")
            if hits:
                return spec_from_file_location(name, hits[0],
                                               loader=ExtensionFileLoader(name, hits[0]))
        return None

sys.meta_path.insert(0, Compiled)
import runwatch.stream.engine as engine
assert engine.__file__.endswith(".so") == bool(out), engine.__file__
sys.path.insert(0, script.rpartition("/")[0])
sys.argv = [script, *args]
runpy.run_path(script, run_name="__main__")
"""


def build(variant: str) -> Path:
    """The compiled modules of `variant`, built afresh (mypyc's incremental cache, which
    `separate` builds use, once made a build that did not link)."""
    tree = WORK / variant
    shutil.rmtree(tree, ignore_errors=True)
    src = tree / "src" / "runwatch"
    src.mkdir(parents=True)
    shutil.copytree(ROOT / "stream", tree / "stream", ignore=shutil.ignore_patterns("__pycache__"))
    with (PATCHES / f"{variant}.patch").open("rb") as patch:
        subprocess.run(["patch", "-s", "-p1", "-d", str(tree)], stdin=patch, check=True)
    for f in (ROOT / "runwatch").iterdir():
        (src / f.name).symlink_to(f)
    for name in ("emitters", "store"):
        (src / name).symlink_to(ROOT / name)
    (src / "stream").symlink_to(tree / "stream")
    (tree / "mypy.ini").write_text(MYPY_INI)
    (tree / "setup.py").write_text(SETUP)
    modules = [f"runwatch/{p}" for p in COMPILED]
    modules += sorted(
        f"runwatch/stream/state/{p.name}"
        for p in (tree / "stream" / "state").glob("*.py")
        if p.name != "__init__.py"
    )
    done = subprocess.run(
        [sys.executable, "../setup.py", *modules],
        cwd=tree / "src",
        capture_output=True,
        text=True,
    )
    if done.returncode:
        sys.exit(f"the {variant} build failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return tree / "out"


def measure(out: Path | None, script: str, args: list[str]) -> str:
    """One bench's printout, the compiled modules of `out` first (None: pure)."""
    done = subprocess.run(
        [sys.executable, "-c", PRELUDE, str(out or ""), str(ROOT / "bench" / script), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if done.returncode:
        sys.exit(f"{script} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def figures(core: str, replay: str) -> dict[str, float]:
    every = re.search(r"every rule, 100,000-id ring\s+([\d.]+) µs", core)
    seven = re.search(r"the seven rules, the same ring\s+([\d.]+) µs", core)
    r_every = re.search(r"every rule vs the plain reading of seven: ([\d.]+)x", replay)
    r_seven = re.search(r"the seven vs the plain reading of seven:\s+([\d.]+)x", replay)
    found = (every, seven, r_every, r_seven)
    if not all(found):
        sys.exit(f"no figures in the benches' printout:\n{core}\n{replay}")
    return dict(
        zip(("core every", "core seven", "replay every", "replay seven"),
            (float(m.group(1)) for m in found if m), strict=True)
    )  # fmt: skip


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=2, help="turns of each build (default 2)")
    ap.add_argument("--variants", default="python-classes,native")
    ap.add_argument("--core-args", default="--runs 1250 --seconds 120 --repeat 3")
    ap.add_argument("--replay-args", default="--shape fleet --no-naive --mem-runs 10")
    args = ap.parse_args()
    say(machine())
    variants = args.variants.split(",")
    builds: dict[str, Path | None] = {"pure": None}
    for variant in variants:
        say(f"building {variant} (mypyc, a minute or two) ...")
        builds[variant] = build(variant)
    seen: dict[str, list[dict[str, float]]] = {name: [] for name in builds}
    for turn in range(args.pairs):
        for name, out in builds.items():
            before = load()
            core = measure(out, "core.py", args.core_args.split())
            replay = measure(out, "replay.py", args.replay_args.split())
            got = figures(core, replay)
            seen[name].append(got)
            shown = "  ".join(f"{k} {v:.2f}" for k, v in got.items())
            say(f"  turn {turn + 1} {name:<15} {shown}   load {before} -> {load()}")
    say(
        f"medians: core in CPU µs an event (bench/core.py {args.core_args}); replay as its "
        f"ratio to the plain reading of the seven rules (bench/replay.py {args.replay_args})"
    )
    pure = {k: statistics.median(d[k] for d in seen["pure"]) for k in seen["pure"][0]}
    for name, runs in seen.items():
        med = {k: statistics.median(d[k] for d in runs) for k in runs[0]}
        speed = pure["core every"] / med["core every"], pure["core seven"] / med["core seven"]
        say(
            f"  {name:<15} core {med['core every']:.2f} / {med['core seven']:.2f} µs "
            f"(every rule / the seven: {speed[0]:.2f}x / {speed[1]:.2f}x pure's); replay "
            f"{med['replay every']:.2f}x / {med['replay seven']:.2f}x the plain reading"
        )


if __name__ == "__main__":
    main()
