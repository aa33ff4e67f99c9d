"""The console script's commands: one module per command group. Each holds its flags, one
call into the package that does the work, and its exit codes. A command that cannot go on
raises `CommandError` (or lets another `RunwatchError` through); `runwatch.cli` prints it as
one line and exits with its status."""

from runwatch.exceptions import CommandError


def given_time(text: str | None) -> float | None:
    """A time flag's value (epoch seconds or ISO 8601) in seconds, None when not given;
    CommandError saying what is wrong with it otherwise."""
    if text is None:
        return None
    from runwatch.timeparse import parse_time

    try:
        return parse_time(text)
    except ValueError as err:
        raise CommandError(str(err)) from None


__all__ = ["CommandError", "given_time", "known_rule"]


def known_rule(rule: str | None, config: str | None) -> None:
    """CommandError naming `rule` (and the rule id most like it) unless it is a built-in
    rule or a custom one of the rules file `config`."""
    if rule is None:
        return
    from runwatch import configfile
    from runwatch.stream.exceptions import ConfigError

    rules = configfile.rules(config)
    try:
        rules.check_rule_id(rule)
    except ConfigError as err:
        more = "" if config else "; a custom rule: give --config with the rules file that has it"
        raise CommandError(f"{err}{more}") from None


def read_token(token_file: str | None) -> str | None:
    """The bearer token: from `--token-file` (whole, trimmed; a missing or empty file is a
    one-line error), else $RUNWATCH_TOKEN, else None."""
    from pathlib import Path

    if token_file:
        try:
            token = Path(token_file).read_text().strip()
        except OSError as err:
            raise CommandError(f"--token-file: {err.strerror}: {token_file}") from None
        if not token:
            raise CommandError(f"--token-file: {token_file} is empty")
        return token
    from runwatch.emitters import env  # (its socket import: not at every command's start)

    return env.get(env.TOKEN)
