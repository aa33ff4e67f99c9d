"""The Slack notifier: alert transitions in, one Slack thread per alert key out, exactly once.
Stages (runwatch/notify/notifier.py): dedup → silence → route → send → record."""
