"""What the notifier did with one transition (counted per outcome on /metrics)."""

from __future__ import annotations

from enum import StrEnum


class Outcome(StrEnum):
    SENT = "sent"
    DUPLICATE = "duplicate"  # its id was handled before (a restart, a re-read)
    DISABLED = "disabled"  # Slack refused the token: nothing goes out until it is fixed
    STALE = "stale"  # older than `max_age`
    SKIPPED = "skipped"  # a severity not routed, or a resolve whose firing was never shown
    SILENCED = "silenced"
    FAILED = "failed"  # Slack refused the message itself (channel_not_found, ...)
