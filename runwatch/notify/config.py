"""The Slack notifier's settings: the `[slack]` table of a TOML file, plus command-line flags.

```toml
[slack]
channel = "#rl-alerts"                       # default channel (name or id)
grafana_url = "https://grafana.example.com"  # adds a drill-down button to each message
repeat_interval = 14400                      # remind in the thread while firing (s; 0: off)
fold_within = 60                             # a quicker resolve edits its firing's message
member_threads = "fleet"                     # a fleet incident's runs: in its thread, or "own"
state = "/var/lib/runwatch/notify.sqlite"    # what was sent, and silences
token_file = "/var/run/secrets/slack/token"  # else $SLACK_BOT_TOKEN

[[slack.routes]]                             # first match wins; else `channel`
match = { team = "math" }                    # run.started labels (fnmatch patterns)
channel = "#math-rl"
# rules = ["zero_reward"]                    # optional: only these rules
# severities = ["critical"]                  # optional: only these severities
```
"""

from __future__ import annotations

from collections.abc import Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runwatch.exceptions import ConfigProblem
from runwatch.stream.config import invalid
from runwatch.stream.exceptions import ConfigError

#: Slack's Web API (`SlackPoster`'s default too)
DEFAULT_BASE_URL = "https://slack.com/api/"


class Route(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    channel: str = Field(min_length=1)
    match: dict[str, str] = Field(default_factory=dict)
    rules: list[str] | None = None
    severities: list[str] | None = None

    def matches(self, labels: Mapping[str, str], rule: str, severity: str) -> bool:
        if self.rules is not None and rule not in self.rules:
            return False
        if self.severities is not None and severity not in self.severities:
            return False
        return all(
            name in labels and fnmatchcase(labels[name], pattern)
            for name, pattern in self.match.items()
        )


class NotifyConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    #: the default channel: required to send (`load` says so), not to check a file
    channel: str = Field(default="", min_length=0)
    routes: list[Route] = Field(default_factory=list)
    grafana_url: str | None = None
    repeat_interval: float = Field(default=4 * 3600, ge=0)
    state: str | None = None
    token_file: str | None = None
    base_url: str = DEFAULT_BASE_URL
    #: transitions older than this (wall clock) are recorded, not sent (first start on an
    #: old topic must not flood a channel)
    max_age: float = Field(default=24 * 3600, gt=0)
    #: a resolve this soon (s, event time) after its firing edits the firing's message to
    #: show both instead of a reply of its own (0: never); not a resolve because the run
    #: ended, which is always a message (contract §8)
    fold_within: float = Field(default=60.0, ge=0)
    #: where a fleet incident's member runs post (contract section 8): "fleet", replies in
    #: the fleet incident's thread; "own", each run's incident in its own thread, whose root
    #: links to the fleet thread
    member_threads: Literal["fleet", "own"] = "fleet"
    #: send only these severities (others are recorded as skipped)
    severities: list[str] = Field(default_factory=lambda: ["critical", "warning", "info"])

    def channel_for(self, labels: Mapping[str, str], rule: str, severity: str) -> str:
        for route in self.routes:
            if route.matches(labels, rule, severity):
                return route.channel
        return self.channel

    def drilldown(self, run: str, since: float) -> str | None:
        if not self.grafana_url:
            return None
        from urllib.parse import quote

        base = self.grafana_url.rstrip("/")
        start = int((since - 3600) * 1000)
        return f"{base}/d/runwatch-run/?var-run={quote(run, safe='')}&from={start}&to=now"

    @classmethod
    def check(cls, table: Any) -> NotifyConfig:
        """The `[slack]` table of a config file, checked (ConfigError naming a bad key)."""
        if not isinstance(table, Mapping):
            raise ConfigError("slack: expected a table ([slack])", ("slack",))
        try:
            return cls.model_validate(dict(table))
        except ValidationError as err:
            raise invalid(err, ("slack",), cls) from None

    @classmethod
    def load(cls, path: str | Path | None, **overrides: Any) -> NotifyConfig:
        """The `[slack]` table of the config file at `path` (the whole file checked:
        `runwatch.configfile`), with the flags' `overrides` over it."""
        from runwatch.configfile import read

        raw: dict[str, Any] = {}
        if path is not None:
            try:
                raw = dict(read(path).data.get("slack") or {})
            except ConfigError as err:
                raise ConfigProblem(str(err)) from None
        raw.update({k: v for k, v in overrides.items() if v is not None})
        if not raw.get("channel"):
            raise ConfigProblem("no Slack channel: pass --channel or set slack.channel")
        try:
            return cls.check(raw)
        except ConfigError as err:
            raise ConfigProblem(str(err)) from None
