"""A storm of a fleet incident's transitions into Slack, against the local Slack with Slack's
rate limits on (`harness/slack_server.py`: one chat.postMessage a second per channel after a
burst, chat.update Tier 3), in wall-clock time.

`--runs` member runs (20 by default: 50-odd transitions) join one fleet incident and heal
(`harness/fleet_alerts.py`): all queued at once, as a poll or serve's queue holds them after
an outage, and arriving `--rate` a second (3), as a storm comes in live.
runwatch's notifier (`runwatch.notify`: paced under the limits, a batch's replies one
message, a reply that finds the channel busy folded into the latest) against the obvious
alternative measured in the same run: one reply per transition in one thread, sent with
slack-sdk's `WebClient` and its `RateLimitErrorRetryHandler` (post until Slack says 429,
sleep its Retry-After plus up to a second, retry). For each: seconds until the last
transition is in Slack, messages, calls, 429s answered. Figures only.

    .venv/bin/python bench/slack_storm.py [--runs 20] [--rate 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from benchinfo import SAID, machine, say, write_section
from slack_sdk import WebClient
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

from harness.fleet_alerts import in_time, storm
from harness.slack_server import FakeSlack
from runwatch.notify.background import BackgroundNotifier
from runwatch.notify.config import NotifyConfig
from runwatch.notify.notifier import Notifier
from runwatch.notify.slack import SlackPoster
from runwatch.notify.store import NotifyStore

TOKEN = "xoxb-bench"


Figures = tuple[float, int, int, int, int]  # seconds, transitions, messages, calls, 429s


def runwatch_notifier(runs: int, rate: float | None, tmp: Path) -> Figures:
    slack = FakeSlack(token=TOKEN, channels=("C-ALERTS",))
    try:
        alerts = in_time(storm(runs, initial=0, t0=time.time() - 3600))
        config = NotifyConfig(channel="C-ALERTS", base_url=slack.url)
        notifier = Notifier(config, SlackPoster(TOKEN, base_url=slack.url),
                            NotifyStore(tmp / "notify.sqlite"))  # fmt: skip
        start = time.monotonic()
        background = BackgroundNotifier(notifier, remind_every=3600)
        for a in alerts:
            background.submit(a)
            if rate:
                time.sleep(1 / rate)
        background.close(timeout=600)  # sends what is queued, the roots' last edits too
        took = time.monotonic() - start
        return took, len(alerts), len(slack.messages), len(slack.calls), len(slack.limited)
    finally:
        slack.close()


def one_per_transition(runs: int, rate: float | None) -> Figures:
    slack = FakeSlack(token=TOKEN, channels=("C-ALERTS",))
    try:
        alerts = in_time(storm(runs, initial=0, t0=time.time() - 3600))
        retry = RateLimitErrorRetryHandler(max_retry_count=100)
        client = WebClient(token=TOKEN, base_url=slack.url, retry_handlers=[retry])
        start = time.monotonic()
        root = client.chat_postMessage(channel="C-ALERTS", text=alerts[0].summary)["ts"]
        for i, a in enumerate(alerts[1:], 1):
            if rate:  # not before it arrives
                time.sleep(max(0.0, start + i / rate - time.monotonic()))
            client.chat_postMessage(channel="C-ALERTS", text=a.summary, thread_ts=root)
        took = time.monotonic() - start
        return took, len(alerts), len(slack.messages), len(slack.calls), len(slack.limited)
    finally:
        slack.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--rate", type=float, default=3.0)
    args = ap.parse_args()
    say(machine())
    for rate in (None, args.rate):
        with tempfile.TemporaryDirectory() as tmp:
            ours = runwatch_notifier(args.runs, rate, Path(tmp))
        theirs = one_per_transition(args.runs, rate)
        how = "all queued at once" if rate is None else f"arriving {rate:g} a second"
        say(f"{ours[1]} transitions of {args.runs} runs, {how}:")
        for name, (took, _, messages, calls, limited) in (
            ("runwatch notify (paced, folded)", ours),
            ("one reply each, slack-sdk retry handler", theirs),
        ):
            say(f"  {name:40} {took:6.1f} s to the last, {messages:3} messages, {calls:3} calls, "
                f"{limited:3} answered 429")  # fmt: skip
        say(f"  runwatch: {theirs[0] / max(ours[0], 1e-9):.1f}x sooner, "
            f"{theirs[2] / max(ours[2], 1):.1f}x fewer messages")  # fmt: skip
    write_section("slack_storm", ["## A storm into Slack (`bench/slack_storm.py`)", "", "```",
                                  *SAID, "```"])  # fmt: skip


if __name__ == "__main__":
    main()
