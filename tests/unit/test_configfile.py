"""The config file: one schema for the whole file, whoever reads it. An unknown table or key
anywhere -- rules and Slack sections alike -- is an error that names it, the known name it is
most like, and its line; the rules' readers and the notifier's say the same."""

from __future__ import annotations

from pathlib import Path

import pytest

from runwatch import configfile
from runwatch.exceptions import ConfigProblem
from runwatch.notify.config import NotifyConfig
from runwatch.stream.exceptions import ConfigError

GOOD = """\
[rules.zero_reward]
steps = 3

[rules.stuck_progress.stall_after]
"Training Progress" = 14400

[[rules.custom]]
id = "loss_high"
type = "metric"
metric = "loss"
op = ">"
value = 9.0
for_steps = 2

[slack]
channel = "#rl-alerts"

[[slack.routes]]
match = { team = "math" }
channel = "#math-rl"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "runwatch.toml"
    path.write_text(text)
    return path


def both_refuse(path: Path) -> str:
    """The rules' reader and the notifier's refuse the file with the same line."""
    with pytest.raises(ConfigError) as rules:
        configfile.rules(path)
    with pytest.raises(ConfigProblem) as slack:
        NotifyConfig.load(path, channel="#x")
    assert str(rules.value) == str(slack.value)
    return str(rules.value)


def test_a_good_file_is_read_by_both(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    rules = configfile.rules(path).by_id()
    assert rules["zero_reward"].params.steps == 3
    assert "loss_high" in rules
    assert NotifyConfig.load(path).routes[0].channel == "#math-rl"


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        # the issue's own: a table name typed in the singular
        ("[rule.zero_reward]\nsteps = 3\n", ":1: rule: unknown table (did you mean rules?)"),
        ("[rules.zero_rewrd]\nsteps = 3\n",
         ":1: rules.zero_rewrd: no such rule (did you mean zero_reward?)"),
        ("[rules.zero_reward]\nstpes = 3\n",
         ":2: rules.zero_reward.stpes: unknown key (did you mean steps?)"),
        ("[slack]\nchannel = \"#a\"\nchanel = \"#b\"\n",
         ":3: slack.chanel: unknown key (did you mean channel?)"),
        ("[slack]\nchannel = \"#a\"\n[[slack.routes]]\nchannel = \"#b\"\n[[slack.routes]]\n"
         "chanel = \"#c\"\n", ":6: slack.routes[1].chanel: unknown key (did you mean channel?)"),
        ("[[rules.custom]]\nid = \"a\"\ntype = \"metric\"\nmetric = \"m\"\nop = \">\"\n"
         "value = 1.0\nfor_steps = 1\nseverty = \"info\"\n",
         ":8: rules.custom[1].severty: unknown key (did you mean severity?)"),
        ("[rules.zero_reward]\nsteps = \"3\"\n", ":2: rules.zero_reward.steps: "),
        ("[slacks]\nchannel = \"#a\"\n", ":1: slacks: unknown table (did you mean slack?)"),
    ],
)  # fmt: skip
def test_each_mistake_names_its_table_key_and_line(tmp_path: Path, bad: str, said: str) -> None:
    before = GOOD.split("[slack]")[0].split("[rules.stuck_progress")[1]  # lines before it
    before = "[rules.stuck_progress" + before
    path = write(tmp_path, before + bad)
    said_line, rest = said.split(": ", 1)
    line = int(said_line.lstrip(":")) + before.count("\n")
    assert both_refuse(path).startswith(f"{path}:{line}: {rest}")


def test_a_key_at_the_top_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, 'channel = "#a"\n[rules.zero_reward]\nsteps = 3\n')
    assert both_refuse(path) == f"{path}:1: channel: unknown key (the file's tables: rules, slack)"


def test_inline_tables_are_placed_at_their_key(tmp_path: Path) -> None:
    path = write(tmp_path, "rules = { zero_rewrd = { steps = 3 } }\n")
    assert both_refuse(path).startswith(f"{path}:1: rules.zero_rewrd: no such rule")
    path = write(tmp_path, '[slack]\nroutes = [{ channel = "#a", chanel = "#b" }]\n')
    assert both_refuse(path).startswith(f"{path}:2: slack.routes[0].chanel: unknown key")
