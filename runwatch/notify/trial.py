"""`runwatch notify --test`: a test message in every channel the config routes to, and a
check of what the notifier will need later -- before the first real alert finds out.

For each channel: post a message (`chat:write`, and the bot invited to the channel); read
it back as a restart would look for a message it is not sure was posted (`channels:history`,
`groups:history` for a private channel); and, for a channel given by name, find its ID as
the notifier does (`channels:read` / `groups:read`). A post that fails is an error with what
to do about it; a check that fails after a post worked is a warning (alerts will go out; a
crash mid-post may repeat one).
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass, field

from runwatch.exceptions import SlackError
from runwatch.notify.config import NotifyConfig
from runwatch.notify.slack import AUTH_ERRORS, SlackPoster, is_channel_id

#: What to do about an error Slack gives a post.
ADVICE = {
    "not_in_channel": "invite the bot to the channel (/invite @your-app in it), or add the "
    "chat:write.public scope for public channels",
    "channel_not_found": "no channel of that name or ID that the bot can see: check the name; "
    "a private channel needs the bot invited first",
    "is_archived": "the channel is archived: unarchive it or route elsewhere",
    "invalid_auth": "Slack does not know this token: use the app's Bot User OAuth Token "
    "(xoxb-...) from OAuth & Permissions",
    "not_authed": "no token reached Slack: set SLACK_BOT_TOKEN or token_file",
    "token_revoked": "the token was revoked: reinstall the app and use its new bot token",
    "account_inactive": "the bot's account is deactivated: reinstall the app",
}


@dataclass
class Trial:
    """What the test found: lines to print, and whether alerts can go out."""

    posted: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    token_refused: bool = False


def _why(err: SlackError) -> str:
    if err.error == "missing_scope" and err.needed:
        return f"missing_scope: add the {err.needed} scope to the app and reinstall it"
    advice = ADVICE.get(err.error)
    return f"{err.error}: {advice}" if advice else err.error


def channels(config: NotifyConfig) -> list[str]:
    """The default channel and every route's, once each, in the config's order."""
    return list(dict.fromkeys([config.channel, *(r.channel for r in config.routes)]))


def run_trial(config: NotifyConfig, poster: SlackPoster) -> Trial:
    out = Trial()
    host = socket.gethostname()
    for channel in channels(config):
        text = (f":wave: runwatch test message (runwatch notify --test on {host}): alerts "
                "routed to this channel will be posted here, one thread per incident.")  # fmt: skip
        try:
            answer = poster.post(channel, text)
        except SlackError as err:
            out.errors.append(f"{channel}: cannot post: {_why(err)}")
            if err.error in AUTH_ERRORS:
                out.token_refused = True
                break
            continue
        ident, ts = str(answer.get("channel") or channel), str(answer.get("ts") or "")
        out.posted.append(f"{channel}: posted a test message ({ident}, ts {ts})")
        try:
            poster.history(ident, float(ts or time.time()) - 1)
        except SlackError as err:
            out.warnings.append(f"{channel}: cannot read the channel back ({_why(err)}): "
                                "after a crash mid-post, runwatch cannot tell whether Slack "
                                "has the message and may post it again")  # fmt: skip
        if not is_channel_id(channel):
            try:
                found = poster.channel_id(channel)
            except SlackError as err:
                found = None
                out.warnings.append(f"{channel}: cannot look the name up ({_why(err)}); "
                                    f"give the channel's ID ({ident}) instead")  # fmt: skip
            else:
                if found is None:
                    out.warnings.append(f"{channel}: conversations.list does not show it "
                                        f"(a private channel needs groups:read); give its "
                                        f"ID ({ident}) instead")  # fmt: skip
    return out
