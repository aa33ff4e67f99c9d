"""One type for refused input: where it came from reads the same at every ingress, and a
worker's checkpoint made before the type existed still loads its dead letters."""

from __future__ import annotations

import json

from msgspec.structs import astuple

from runwatch.stream.refused import Refused


def test_where_names_a_record_a_line_or_a_source() -> None:
    assert Refused("bad", b"x", "runwatch.events", 3, 0).where == "runwatch.events:3:0"
    assert Refused("bad", b"x", "events.jsonl", position=12).where == "events.jsonl:12"
    assert Refused("bad", b"x", "spool:rank0").where == "spool:rank0"


def test_a_checkpoint_s_dead_letters_keep_their_fields() -> None:
    # held_dead in a checkpoint: (reason, raw, topic, partition, offset, kind), the order the
    # worker's dead letters had before Refused, and the order astuple writes now
    old = ("rules failed", b'{"v":1}', "runwatch.events", 3, 7, "failed_in_rules")
    letter = Refused(*old)
    assert (letter.source, letter.partition, letter.position) == ("runwatch.events", 3, 7)
    assert (letter.kind, letter.line) == ("failed_in_rules", None)
    assert astuple(letter) == (*old, None)  # a field added goes last
    assert Refused(*astuple(letter)) == letter


def test_a_line_of_a_batch_record_is_placed_after_the_lines_before_it() -> None:
    whole = Refused("bad", b"x", "runwatch.events", 3, 7)
    lines = [Refused("bad", b"x", "runwatch.events", 3, 7, line=n) for n in (1, 2)]
    assert lines[0].place < lines[1].place < whole.place < Refused("b", b"", "t", 3, 8).place
    assert json.loads(lines[1].to_json())["line"] == 2
    assert "line" not in json.loads(whole.to_json())
