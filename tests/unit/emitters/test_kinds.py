"""An event kind is its model: its examples are well formed, the contract's table of kinds is
made from the models in the contract's words, and a toy kind defined by a model alone is
checked on emit, decoded and documented."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Literal

import pytest

from harness.docs import tables
from runwatch.emitters import events
from runwatch.emitters.events import KNOWN_KINDS, Event

ROOT = Path(__file__).resolve().parents[3]
ENVELOPE = {"v": 1, "id": "i", "ts": 1.7e9, "run": "r", "src": {"component": "trainer"}}

#: Section 1's table of kinds as contract v1 pins it, word for word: a model changed so that
#: `make docs` would write it otherwise fails here (a pinned kind's new field is an addition,
#: listed in section 7, not a change to this table).
PINNED = """\
| kind | fields | emitted when |
|---|---|---|
| `run.started` | `labels` {str: str} opt; `config` {rule id: {param: value}} opt; `total_steps` int opt | a run begins |
| `run.finished` | `status`: `ok` / `failed` / `killed` | a run ends |
| `heartbeat` | `final` bool opt (true = this process is shutting down cleanly) | every `heartbeat_interval` (default 10 s) from each live emitting process |
| `step.started` | `step` int | the trainer starts a training step |
| `step.done` | `step` int; `duration_s` float opt; `timing` {phase: seconds} opt (e.g. `gen`, `old_log_prob`, `update_actor`, `testing`, `save_checkpoint`) | the trainer finishes a step |
| `step.metrics` | `step` int; `metrics` {str: float or null} | the trainer logs a step's metrics (the dict it would hand to wandb) |
| `reward` | `step` int; `mean` float; `count` int opt | a step's aggregated reward is known |
| `trajectory.started` | `traj` str; `step` int opt | a rollout trajectory begins |
| `trajectory.phase` | `traj` str; `phase` str (`generate`, `tool`, `sandbox`, `reward`, or another word) | a trajectory enters a phase |
| `trajectory.done` | `traj` str; `status`: `ok` / `error` / `timeout` / `aborted`; `reward` float opt; `duration_s` float opt | a trajectory ends |
| `request.queued` | `req` str; `server` str opt | a generation request is sent to an inference server |
| `request.done` | `req` str; `server` str opt; `prompt_tokens` int opt; `completion_tokens` int opt; `status` `ok` / `error` / `aborted` opt | a generation request completes |
| `inference.stats` | `server` str; `running` int; `waiting` int; `kv_cache_usage` float 0..1 opt; `gen_tokens_per_s` float opt | a snapshot of an inference server's queue (scraped from its metrics endpoint or read from its log) |
| `progress` | `name` str; `n` int; `total` int opt | a progress counter (a tqdm bar) changes |
| `rank.status` | `rank` int; `world_size` int; `phase` str; `since` float opt (ts the rank entered the phase); `step` int opt | a distributed trainer rank reports its phase (e.g. `forward`, `backward`, `all_reduce`, `recv`, `destroy_process_group`, `exited`) |"""  # noqa: E501


def own_fields(model: type[Event]) -> dict[str, Any]:
    return {n: f for n, f in model.model_fields.items() if n not in Event.model_fields}


@pytest.mark.parametrize("kind", sorted(KNOWN_KINDS))
def test_each_kind_has_a_full_and_a_minimal_example_and_says_when_it_is_emitted(
    kind: str,
) -> None:
    model = KNOWN_KINDS[kind]
    fields = own_fields(model)
    assert set(model.examples.full) == set(fields), "full: every field set"
    assert set(model.examples.minimal) == {n for n, f in fields.items() if f.is_required()}
    for example in (model.examples.full, model.examples.minimal):
        assert type(events.validate({**ENVELOPE, "kind": kind, **example})) is model
    assert model.emitted_when.strip()
    assert set(model.pinned or ()) <= set(fields)


def test_the_table_of_kinds_is_made_in_the_contracts_words() -> None:
    assert tables.kinds_table() == PINNED
    assert PINNED in (ROOT / "docs" / "contract.md").read_text()


def test_every_kind_and_field_is_in_one_of_the_two_tables() -> None:
    both = tables.kinds_table() + tables.added_kinds_table()
    for kind, model in KNOWN_KINDS.items():
        rows = [r for r in both.splitlines() if r.startswith(f"| `{kind}` |")]
        documented = " ".join(rows)
        assert all(f"`{name}`" in documented for name in own_fields(model)), kind


def test_a_kind_is_one_model_with_one_literal_name() -> None:
    with pytest.raises(TypeError, match="is Heartbeat's"):

        class Again(Event):
            kind: Literal["heartbeat"]

    with pytest.raises(TypeError, match="Literal"):

        class Loose(Event):
            pass

    assert KNOWN_KINDS["heartbeat"] is events.Heartbeat


TOY = '''
import json, sys
from pathlib import Path
from typing import Literal

from runwatch.emitters.events import Event, Examples, Int64, Name, note


class ToyPing(Event):
    """A toy kind: what a newcomer writes, and nothing else."""

    emitted_when = "a toy pings"
    examples = Examples(full={"n": 3, "says": "hi"}, minimal={"n": 0})

    kind: Literal["toy.ping"]
    n: Int64
    says: Name | None = note("what the toy says")


import types
from runwatch.stream import decode_gen

# what `make docs` writes (stream/decode_structs.py), made here from the models
generated = types.ModuleType("runwatch.stream.decode_structs")
exec(decode_gen.render(), generated.__dict__)
sys.modules[generated.__name__] = generated

from harness.docs import tables
from runwatch.emitters import Emitter
from runwatch.emitters.checks import FIELD_CHECKS
from runwatch.stream.decode import InvalidEvent, decode

spool = Path(sys.argv[1])
out = {"cheap": FIELD_CHECKS["toy.ping"](ToyPing.examples.full)}
em = Emitter(run="r", component="toy", path=spool, heartbeat=False, strict=True)
for example in (ToyPing.examples.full, ToyPing.examples.minimal):
    em.emit("toy.ping", **example)
try:
    em.emit("toy.ping", n="three")
except ValueError as err:
    out["refused on emit"] = str(err)
em.close()
lines = [x for p in sorted(spool.glob("*.jsonl")) for x in p.read_text().splitlines()]
got = [decode(x) for x in lines]
out["decoded"] = [[type(e).__name__, e.n, e.says] for e in got]
try:
    decode(lines[0].replace('"n":3', '"n":"3"'))
except InvalidEvent as err:
    out["refused on decode"] = str(err)
out["row"] = [r for r in tables.added_kinds_table().splitlines() if "toy.ping" in r]
print(json.dumps(out))
'''


def test_a_toy_kind_from_its_model_alone_is_checked_on_emit_decoded_and_documented(
    tmp_path: Path,
) -> None:
    """What `Adding an event kind` in docs/architecture.md promises: the model (with its
    examples) is the only thing written; in a fresh interpreter, where the model is defined
    before the rest is imported (as in events.py), everything else follows from it."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(TOY), str(tmp_path)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.splitlines()[-1])
    assert out["cheap"] is True  # emit() takes the cheap path for it, not pydantic
    assert out["refused on emit"].startswith("invalid toy.ping event: n: ")
    assert out["decoded"] == [["FastToyPing", 3, "hi"], ["FastToyPing", 0, None]]
    assert out["refused on decode"].startswith("n: ")
    assert out["row"] == [
        "| `toy.ping` | `n` int; `says` str opt (what the toy says) | a toy pings |"
    ]
