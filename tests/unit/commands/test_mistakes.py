"""A mistyped command, flag, choice or rule id gets the usage of the (sub)command it was
typed for -- not the top-level one -- and the name it was most likely meant to be."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from runwatch import cli


def fails(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as exit_:
        cli.main(list(argv))
    assert exit_.value.code == 2
    return capsys.readouterr().err


def test_a_bad_flag_gets_its_subcommands_usage_and_a_suggestion(capsys) -> None:
    err = fails(capsys, "watch", "--rn", "x", "--", "python", "train.py")
    assert err.startswith("usage: runwatch watch ")
    assert "runwatch watch: error: unrecognized arguments: --rn (did you mean --run?)" in err


def test_a_bad_flag_of_a_nested_command_gets_that_commands_usage(capsys) -> None:
    err = fails(capsys, "kafka", "start", "--prot", "0")
    assert err.startswith("usage: runwatch kafka start ")
    assert "unrecognized arguments: --prot 0 (did you mean --port?)" in err


def test_a_flag_like_none_gets_no_suggestion(capsys) -> None:
    err = fails(capsys, "runs", "--zzzzzz")
    assert err.startswith("usage: runwatch runs ")
    assert err.rstrip().endswith("unrecognized arguments: --zzzzzz")


def test_a_bad_command_is_named_with_the_closest(capsys) -> None:
    err = fails(capsys, "watc", "--", "true")
    assert "invalid choice: 'watc' (did you mean watch?)" in err


def test_a_bad_choice_is_named_with_the_closest(capsys) -> None:
    err = fails(capsys, "spool", "stauts")
    assert err.startswith("usage: runwatch spool ")
    assert "invalid choice: 'stauts' (did you mean status?)" in err


def test_a_bad_rule_id_is_named_with_the_closest(capsys, tmp_path: Path) -> None:
    state = str(tmp_path / "n.sqlite")
    assert cli.main(["silence", "r1", "zero_rewrd", "--for", "1h", "--state", state]) == 2
    err = capsys.readouterr().err
    assert "no rule 'zero_rewrd' (did you mean zero_reward?)" in err
    assert "give --config with the rules file" in err
    # a custom rule's id is known from the rules file that defines it
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rules.custom]]\nid = "loss_high"\ntype = "metric"\nmetric = "loss"\n'
                     'op = ">"\nvalue = 9.0\nfor_steps = 2\n')  # fmt: skip
    argv = ["silence", "r1", "loss_high", "--for", "1h", "--state", state]
    assert cli.main([*argv, "--config", str(rules)]) == 0
    assert cli.main(argv) == 2


def test_a_misspelt_config_table_stops_the_command(capsys, tmp_path: Path) -> None:
    config = tmp_path / "rules.toml"
    config.write_text("[rule.zero_reward]\nsteps = 3\n")  # for [rules.zero_reward]
    events = tmp_path / "events.jsonl"
    events.write_text("")
    assert cli.main(["replay", str(events), "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert f"{config}:1: rule: unknown table (did you mean rules?)" in err


def test_a_url_where_no_serve_answers_says_so(capsys) -> None:
    with socket.socket() as s:  # a port nothing listens on: bound, never listened
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
        for argv in (["runs"], ["alerts"], ["show", "r"], ["silence", "--list"]):
            assert cli.main([*argv, "--url", url]) == 1
            err = capsys.readouterr().err
            assert f"runwatch serve at {url}: connection refused: is runwatch serve" in err
            assert "running at that address?" in err


def test_a_serve_that_asks_for_a_token_says_how_to_give_it(
    capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runwatch.service.core import Service
    from runwatch.service.http import ServiceServer

    monkeypatch.delenv("RUNWATCH_TOKEN", raising=False)
    service = Service(tmp_path / "h.duckdb", tmp_path / "h.serve")
    service.recover()
    front = ServiceServer(("127.0.0.1", 0), service, "s3cret", threads=1)
    front.start()
    try:
        url = f"http://127.0.0.1:{front.server_address[1]}"
        for argv in (["runs"], ["alerts", "--follow"], ["silence", "--list"]):
            assert cli.main([*argv, "--url", url]) == 2
            err = capsys.readouterr().err
            assert "missing or wrong token" in err
            assert "give the token with --token-file PATH or $RUNWATCH_TOKEN" in err
        monkeypatch.setenv("RUNWATCH_TOKEN", "s3cret")
        assert cli.main(["runs", "--url", url]) == 0
    finally:
        front.stop(timeout=30)
        service.close()


def test_runwatch_alone_lists_its_commands(capsys) -> None:
    assert cli.main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: runwatch ")
    for command in ("serve", "watch", "alerts", "runs", "show", "sql", "notify"):
        assert f"\n    {command} " in err, command
