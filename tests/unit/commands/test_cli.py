"""The console script's command table matches what the command modules register."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from runwatch import cli


def _choices(parser: argparse.ArgumentParser) -> set[str]:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return set(sub.choices)


def test_full_parser_lists_exactly_the_table():
    assert _choices(cli.build_parser()) == set(cli.COMMANDS)


@pytest.mark.parametrize("command", sorted(cli.COMMANDS))
def test_each_command_is_defined_by_its_own_module(command):
    assert command in _choices(cli.build_parser(command))


def test_unknown_command_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["frobnicate"])
    assert exit_.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


@pytest.mark.parametrize("run", ["-3ab", "-123", "-1.5"])
def test_a_run_id_may_begin_with_a_dash(run: str) -> None:
    argv = ["alerts", "--kafka", "127.0.0.1:1", "--run", run]
    parser = cli.build_parser("alerts")
    assert cli._undashed(parser.parse_args(cli._dashed(parser, "alerts", argv))).run == run


def test_a_negative_number_reaches_its_option_as_a_number(capsys):
    """(Marked as a dashed value, it was refused as the float "\\x00-1".)"""
    assert cli.main(["worker", "--kafka", "127.0.0.1:1", "--checkpoint-every", "-1"]) == 2
    assert "cannot be negative" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["scenarios", "incidents"])
def test_scenarios_and_their_former_name_write_the_same_files(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`runwatch incidents` (scenarios' name before incidents meant alert groups) is an alias:
    scripts and docs out there call it."""
    assert cli.main([name, "zero_reward", "--out", str(tmp_path)]) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["zero_reward.jsonl"]
    assert cli.main([name, "no_such_one", "--out", str(tmp_path)]) == 2
    assert "no such scenario: no_such_one" in capsys.readouterr().err


def test_help_lists_scenarios_with_its_alias() -> None:
    assert "scenarios (incidents)" in cli.build_parser().format_help()


def test_an_error_of_ours_ends_the_command_with_its_status(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`RunwatchError.status` (2 unless the error says otherwise) is the exit status."""
    from runwatch.commands import demo
    from runwatch.emitters.exceptions import RunwatchError

    class NotThere(RunwatchError):
        status = 1

    def fails(error: RunwatchError) -> Any:
        def run(args: argparse.Namespace) -> int:
            raise error

        return run

    monkeypatch.setattr(demo, "run_scenarios", fails(NotThere("the broker is not there")))
    assert cli.main(["scenarios"]) == 1
    monkeypatch.setattr(demo, "run_scenarios", fails(RunwatchError("a bad file")))
    assert cli.main(["scenarios"]) == 2
    assert "the broker is not there" in capsys.readouterr().err
