"""`runwatch notify --test`: a test message in every channel the config routes to, against
a Slack as strict as the real one about scopes and membership, and what to do about each
thing that is missing."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from harness.slack_server import SCOPE, FakeSlack
from runwatch import cli

TOKEN = "xoxb-trial"
ALL = frozenset({"chat:write", "channels:history", "channels:read"})


@pytest.fixture
def token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", TOKEN)
    monkeypatch.delenv("SLACK_BOT_TOKEN_FILE", raising=False)


def slack(scopes: frozenset[str] = ALL, joined: set[str] | None = None) -> FakeSlack:
    fake = FakeSlack(token=TOKEN, channels=(), scopes=scopes, joined=joined)
    fake.add_channel("#rl-alerts", "CALERTS")
    fake.add_channel("#math-rl", "CMATH")
    return fake


def config(tmp_path: Path, fake: FakeSlack) -> str:
    path = tmp_path / "slack.toml"
    routes = '[[slack.routes]]\nmatch = { team = "math" }\nchannel = "#math-rl"\n'
    path.write_text(f'[slack]\nchannel = "#rl-alerts"\nbase_url = "{fake.url}"\n\n{routes}')
    return str(path)


@pytest.fixture
def run(tmp_path: Path, token: None, capsys: pytest.CaptureFixture[str]) -> Iterator[object]:
    fakes: list[FakeSlack] = []

    def go(fake: FakeSlack) -> tuple[int, str, str]:
        fakes.append(fake)
        rc = cli.main(["notify", "--test", "--config", config(tmp_path, fake)])
        out, err = capsys.readouterr()
        return rc, out, err

    yield go
    for f in fakes:
        f.close()


def test_every_routed_channel_gets_a_test_message(run) -> None:  # type: ignore[no-untyped-def]
    fake = slack()
    rc, out, err = run(fake)
    assert rc == 0, err
    assert [m.channel for m in fake.messages] == ["CALERTS", "CMATH"]
    assert "runwatch test message" in fake.messages[0].text
    assert "#rl-alerts: posted a test message (CALERTS" in out
    assert "warning" not in err


def test_a_channel_the_bot_is_not_in_says_to_invite_it(run) -> None:  # type: ignore[no-untyped-def]
    fake = slack(joined={"CALERTS"})
    rc, _out, err = run(fake)
    assert rc == 1
    assert "#math-rl: cannot post: not_in_channel: invite the bot to the channel" in err
    assert [m.channel for m in fake.messages] == ["CALERTS"]


def test_a_missing_scope_is_named(run) -> None:  # type: ignore[no-untyped-def]
    rc, _, err = run(slack(scopes=frozenset({"chat:write"})))
    assert rc == 0  # alerts go out; what a restart needs is missing
    assert "missing_scope: add the channels:history scope to the app and reinstall" in err
    assert "missing_scope: add the channels:read scope" in err
    rc, _out, err = run(slack(scopes=frozenset({"channels:read"})))
    assert rc == 1
    assert "cannot post: missing_scope: add the chat:write scope" in err


def test_a_refused_token_stops_at_the_first_channel(run, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-wrong")
    fake = slack()
    rc, out, err = run(fake)
    assert rc == 2
    assert "invalid_auth: Slack does not know this token" in err
    assert fake.count("chat.postMessage") == 1
    assert "xoxb-wrong" not in err + out


def manifest() -> dict[str, object]:
    """The app manifest docs/slack.md tells a new user to paste into Slack."""
    page = Path(__file__).resolve().parents[3] / "docs" / "slack.md"
    block = re.search(r"```yaml\n(.*?)```", page.read_text(), re.S)
    assert block is not None, "docs/slack.md shows no manifest"
    return yaml.safe_load(textwrap.dedent(block[1]))  # type: ignore[no-any-return]


def test_the_manifest_slack_md_shows_gives_the_bot_what_it_needs(run) -> None:  # type: ignore[no-untyped-def]
    app = manifest()
    assert app["display_information"]["name"]  # type: ignore[index]  # Slack requires it
    assert app["features"]["bot_user"]["display_name"]  # type: ignore[index]
    scopes = frozenset(app["oauth_config"]["scopes"]["bot"])  # type: ignore[index]
    assert set(SCOPE.values()) <= scopes  # every method the notifier calls, public channels
    rc, out, err = run(slack(scopes=scopes))
    assert rc == 0, err
    assert "missing_scope" not in err
    assert "#math-rl: posted a test message" in out
