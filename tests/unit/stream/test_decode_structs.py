"""The decoder's structs (stream/decode_structs.py) are what the event models make of them now,
and a consumer's start-up does not build the models."""

from __future__ import annotations

from helpers import printed_by_fresh_interpreter

from runwatch.stream import decode_gen


def test_the_generated_structs_are_the_models_own() -> None:
    """A model changed without `make docs` fails here (and the decoder would disagree with
    the emitter's checks)."""
    assert decode_gen.TARGET.read_text() == decode_gen.render(), (
        "stream/decode_structs.py is not what the models make: run `make docs`"
    )


def test_replay_imports_neither_pydantic_nor_the_models() -> None:
    """`runwatch replay`'s modules, its default rules and a config that only switches rules
    leave pydantic and the event models unimported: they load where a record or a table
    needs them (a refusal's reason, a parameter set), not at every start."""
    code = (
        "import sys, runwatch.commands.replay, runwatch.configfile\n"
        "from runwatch.stream.config import RulesConfig\n"
        "from runwatch.stream.decode import decode\n"
        "RulesConfig.from_mapping({'rules': {'zero_reward': {'enabled': False}}})\n"
        'decode(b\'{"v":1,"id":"e1","ts":1.7e9,"run":"r","kind":"step.metrics",'
        '"src":{"component":"trainer"},"step":3,"metrics":{"loss":NaN}}\')\n'
        "print(sorted(m for m in sys.modules if m.startswith('pydantic') "
        "or m.startswith('runwatch.emitters.events')))\n"
    )
    assert printed_by_fresh_interpreter(code) == "[]"
