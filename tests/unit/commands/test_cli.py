"""The console script's command table matches what the command modules register."""

from __future__ import annotations

import argparse

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
