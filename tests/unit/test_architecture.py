"""The house rules, checked: which folder may import which library and which other folder, a
core that reads no clock and does no I/O, a product that imports no harness (harness/, never
shipped), and every exception of ours a `RunwatchError` in its package's exceptions.py.

The import contract reads every module's import statements (including the ones inside
functions), so a lazy import that breaks a rule fails here as much as a top-level one.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import re
import time
from collections.abc import Iterator
from itertools import chain
from pathlib import Path

import pytest

from runwatch.dev import scenarios
from runwatch.emitters.exceptions import RunwatchError
from runwatch.emitters.guard import StopTraining
from runwatch.stream.engine import Engine
from runwatch.stream.replay import replay

ROOT = Path(__file__).resolve().parents[2]
#: runwatch.* package -> folder, as pyproject.toml's package-dir maps them
FOLDERS = {"runwatch": "runwatch", "runwatch.emitters": "emitters",
           "runwatch.stream": "stream", "runwatch.store": "store"}  # fmt: skip

#: The pure core: run state, rules, the engine and the drivers' logic.
CORE = ("runwatch.stream.state", "runwatch.stream.rules", "runwatch.stream.engine",
        "runwatch.stream.alerts", "runwatch.stream.timekeeping", "runwatch.stream.live",
        "runwatch.stream.replay", "runwatch.stream.decode", "runwatch.stream.records",
        "runwatch.stream.recovery", "runwatch.stream.checkpointer")  # fmt: skip
#: What the core may not import: clocks, I/O, processes, networks, and the I/O libraries.
IMPURE = ("time", "datetime", "os", "io", "pathlib", "socket", "subprocess", "threading",
          "asyncio", "random", "urllib", "http", "shutil", "tempfile", "faust", "aiokafka",
          "kafka", "duckdb", "pyarrow", "prometheus_client", "slack_sdk")  # fmt: skip


def modules() -> Iterator[tuple[str, Path]]:
    for package, folder in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            yield ".".join([package, *parts]), path


@functools.cache
def _read(path: Path) -> tuple[frozenset[str], frozenset[str]]:
    """What the checks read of a module: the names it imports, and the RUNWATCH_* names it
    spells out. Parsed once a process: each rule, and the environment's check, asks again."""
    imported: set[str] = set()
    variables: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imported.add(node.module)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and _VARIABLE.fullmatch(node.value)
        ):
            variables.add(node.value)
    return frozenset(imported), frozenset(variables)


def imports(path: Path) -> set[str]:
    return set(_read(path)[0])


def under(name: str, *prefixes: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def breaches(rule: str) -> list[str]:
    out = []
    for name, path in modules():
        for imported in imports(path):
            if RULES[rule](name, imported):
                out.append(f"{name} imports {imported}")
    return out


RULES = {
    "only the Kafka driver imports Faust or aiokafka": lambda m, i: (
        under(i, "faust", "aiokafka", "mode") and not under(m, "runwatch.stream.kafka")
    ),
    "only stream.metrics imports prometheus-client (and the scraper its text parser)": (
        lambda m, i: (
            under(i, "prometheus_client")
            and not under(m, "runwatch.stream.metrics")
            and not (m == "runwatch.emitters.scrape" and i == "prometheus_client.parser")
        )
    ),
    "only the notifier imports slack-sdk": lambda m, i: (
        under(i, "slack_sdk") and not under(m, "runwatch.notify")
    ),
    "emitters import no other part of runwatch": lambda m, i: (
        under(m, "runwatch.emitters") and under(i, "runwatch") and not under(i, "runwatch.emitters")
    ),
    "the core imports no clock, I/O or I/O library": lambda m, i: (
        under(m, *CORE) and under(i, *IMPURE)
    ),
    "stream and store import no command, service, notifier or dev tool": lambda m, i: (
        under(m, "runwatch.stream", "runwatch.store")
        and under(
            i,
            "runwatch.commands",
            "runwatch.service",
            "runwatch.notify",
            "runwatch.dev",
            "runwatch.cli",
        )
    ),
    "the product imports no harness": lambda m, i: under(i, "harness"),
    "no production role imports the dev tools": lambda m, i: (
        under(i, "runwatch.dev")
        and not under(m, "runwatch.dev")
        and m
        not in (
            "runwatch.commands.demo",
            "runwatch.commands.kafka",
            "runwatch.commands.simulate",
        )
    ),
}


def test_the_contract_sees_every_module() -> None:
    names = {name for name, _ in modules()}
    assert {"runwatch.cli", "runwatch.emitters.emitter", "runwatch.stream.engine",
            "runwatch.stream.kafka.consume", "runwatch.store.sink",
            "runwatch.notify.notifier", "runwatch.dev.broker"} <= names  # fmt: skip
    assert len(names) > 100


@pytest.mark.parametrize("rule", sorted(RULES))
def test_import_contract(rule: str) -> None:
    assert breaches(rule) == []


def test_a_breach_is_caught() -> None:
    """The checker itself: an emitter importing the stream core breaks a rule."""
    assert RULES["emitters import no other part of runwatch"](
        "runwatch.emitters.emitter", "runwatch.stream.decode"
    )
    assert RULES["the core imports no clock, I/O or I/O library"](
        "runwatch.stream.rules.zero_reward", "time"
    )
    assert RULES["the product imports no harness"]("runwatch.dev.demo", "harness.slack_server")


def test_the_core_reads_no_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every scenario through the engine with the clocks made to fail: the core only ever
    uses the time it is given."""

    def no_clock() -> float:
        raise AssertionError("the core read the clock")

    for name in ("time", "monotonic", "perf_counter", "time_ns", "monotonic_ns"):
        monkeypatch.setattr(time, name, no_clock)
    import orjson

    for build in scenarios.SCENARIOS.values():
        lines = [("i", n, orjson.dumps(e)) for n, e in enumerate(build())]
        assert list(replay(lines, Engine())) is not None


def harness_modules() -> Iterator[tuple[str, Path]]:
    for path in sorted((ROOT / "harness").rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        yield ".".join(p for p in rel.parts if p != "__init__"), path


def exception_classes(found: Iterator[tuple[str, Path]]) -> Iterator[tuple[str, type]]:
    """(module, class) of every exception class a module defines."""
    for name, path in found:
        if not any(tok in path.read_text() for tok in ("Error(", "Exception)", "Error)")):
            continue
        module = importlib.import_module(name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == name and issubclass(cls, BaseException):
                yield name, cls


#: the one module of each package that defines its errors
EXCEPTIONS = {"runwatch.exceptions", "runwatch.emitters.exceptions", "runwatch.stream.exceptions",
              "runwatch.store.exceptions", "harness.exceptions"}  # fmt: skip


def test_every_exception_of_ours_is_a_runwatch_error_in_its_packages_exceptions() -> None:
    found = []
    for name, cls in exception_classes(chain(modules(), harness_modules())):
        found.append(cls)
        if cls is StopTraining:  # an exit, not an error: no `except Exception` eats it; the
            assert not issubclass(cls, Exception)  # guard's signal, beside the guard
            continue
        assert issubclass(cls, RunwatchError), f"{name}.{cls.__name__}"
        assert name in EXCEPTIONS, f"{name}.{cls.__name__}: not in its package's exceptions.py"
    assert len(found) >= 30


#: a whole string that names one of runwatch's environment variables
_VARIABLE = re.compile(r"RUNWATCH_[A-Z0-9_]+")


def variables_named(path: Path) -> set[str]:
    """The RUNWATCH_* names a module spells out as a whole string (a name it can read)."""
    return set(_read(path)[1])


def test_the_environment_is_named_in_one_module() -> None:
    """Names, precedence and defaults of RUNWATCH_* live in runwatch.emitters.env alone."""
    elsewhere = {
        f"{name}: {variable}"
        for name, path in modules()
        if name != "runwatch.emitters.env"
        for variable in variables_named(path)
    }
    assert elsewhere == set()
    env_module = dict(modules())["runwatch.emitters.env"]
    assert {"RUNWATCH_KAFKA", "RUNWATCH_DB", "RUNWATCH_KAFKA_SASL_PASSWORD"} <= variables_named(
        env_module
    )


def test_no_import_circle_in_bench() -> None:
    """A bench imports another bench's module (a shared helper, a bench's traffic) only where
    that one does not come back to it, lazily or not."""
    folder = ROOT / "bench"
    local = {p.stem for p in folder.glob("*.py")}
    graph = {p.stem: {i.split(".")[0] for i in imports(p)} & local for p in folder.glob("*.py")}

    def circle_from(start: str) -> list[str]:
        paths = [[start]]
        while paths:
            path = paths.pop()
            for nxt in sorted(graph[path[-1]]):
                if nxt == start:
                    return [*path, nxt]
                if nxt not in path:
                    paths.append([*path, nxt])
        return []

    assert [c for c in map(circle_from, sorted(graph)) if c] == []
