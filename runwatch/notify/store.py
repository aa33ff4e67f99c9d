"""What the Slack notifier has sent, in a small SQLite file (fsync on every commit).

Keyed by alert transition id, so a transition read twice (a restart, a Kafka redelivery)
is sent once. Before a message goes out its id is written to `pending`; once Slack answers,
one transaction moves it to `sent` and records the thread. A crash between the two leaves a
pending id, and `Notifier.recover` asks Slack (message metadata) whether it arrived, so a
restart neither repeats nor drops it. Silences live in the same file (`runwatch silence`).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runwatch.emitters import env
from runwatch.stream.alerts import Alert

DEFAULT_DB = "runwatch-notify.sqlite"

SCHEMA = """
CREATE TABLE IF NOT EXISTS threads (
    key TEXT PRIMARY KEY, channel TEXT NOT NULL, ts TEXT NOT NULL, run TEXT NOT NULL,
    rule TEXT NOT NULL, severity TEXT NOT NULL, state TEXT NOT NULL, since REAL NOT NULL,
    summary TEXT NOT NULL, alert TEXT NOT NULL, last_notified REAL NOT NULL,
    reminders INTEGER NOT NULL DEFAULT 0, members TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS sent (
    id TEXT PRIMARY KEY, key TEXT NOT NULL, what TEXT NOT NULL, outcome TEXT NOT NULL,
    at REAL NOT NULL, ts TEXT
);
CREATE TABLE IF NOT EXISTS pending (
    id TEXT PRIMARY KEY, key TEXT NOT NULL, channel TEXT NOT NULL, at REAL NOT NULL,
    thread_ts TEXT
);
CREATE TABLE IF NOT EXISTS channels (name TEXT PRIMARY KEY, id TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS labels (run TEXT PRIMARY KEY, labels TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS silences (
    id INTEGER PRIMARY KEY AUTOINCREMENT, run TEXT NOT NULL, rule TEXT, until REAL NOT NULL,
    created REAL NOT NULL, comment TEXT NOT NULL DEFAULT ''
);
"""


def default_path() -> str:
    return env.get(env.NOTIFY_DB) or DEFAULT_DB


@dataclass(frozen=True)
class Thread:
    key: str
    channel: str
    ts: str
    run: str
    rule: str
    severity: str
    state: str
    since: float
    summary: str
    alert: Alert
    last_notified: float
    reminders: int
    #: an incident's thread: its alerts by key, the latest transition of each (brief)
    members: dict[str, Alert] = field(default_factory=dict)


@dataclass(frozen=True)
class Pending:
    """A message begun and not yet recorded as sent: a crash may have hidden its answer."""

    id: str
    key: str
    channel: str
    at: float
    thread_ts: str | None  # the root of its thread, for a reply or a reminder


@dataclass(frozen=True)
class Silence:
    id: int
    run: str
    rule: str | None
    until: float
    created: float
    comment: str

    def matches(self, run: str, rule: str, now: float) -> bool:
        return self.until > now and self.run == run and self.rule in (None, rule)


class NotifyStore:
    """The notifier's ledger. One connection per instance; safe across processes."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        # used by one thread at a time (BackgroundNotifier hands it to its own thread)
        self._db = sqlite3.connect(
            self.path, timeout=30, isolation_level=None, check_same_thread=False
        )
        self._db.execute("PRAGMA synchronous=FULL")  # fsync at every commit
        self._db.executescript(SCHEMA)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(pending)")}
        if "thread_ts" not in columns:  # a ledger from before replies were recovered
            self._db.execute("ALTER TABLE pending ADD COLUMN thread_ts TEXT")
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(threads)")}
        if "members" not in columns:  # a ledger from before incidents
            self._db.execute("ALTER TABLE threads ADD COLUMN members TEXT NOT NULL DEFAULT '{}'")
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(sent)")}
        if "ts" not in columns:  # a ledger from before quick resolves were folded
            self._db.execute("ALTER TABLE sent ADD COLUMN ts TEXT")

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    # -- sent and pending ------------------------------------------------------------------

    def was_sent(self, ident: str) -> bool:
        row = self._db.execute("SELECT 1 FROM sent WHERE id = ?", (ident,)).fetchone()
        return row is not None

    def outcome(self, ident: str) -> str | None:
        row = self._db.execute("SELECT outcome FROM sent WHERE id = ?", (ident,)).fetchone()
        return None if row is None else str(row[0])

    def mark(self, ident: str, key: str, what: str, outcome: str) -> None:
        with self.transaction() as db:
            db.execute("DELETE FROM pending WHERE id = ?", (ident,))
            db.execute(
                "INSERT OR REPLACE INTO sent (id, key, what, outcome, at) VALUES (?, ?, ?, ?, ?)",
                (ident, key, what, outcome, time.time()),
            )

    def message_ts(self, ident: str) -> str | None:
        """The Slack message (its ts) that a transition sent was posted as, or folded into."""
        row = self._db.execute("SELECT ts FROM sent WHERE id = ?", (ident,)).fetchone()
        return None if row is None or row[0] is None else str(row[0])

    def begin(
        self,
        ident: str,
        key: str,
        channel: str,
        thread_ts: str | None = None,
        since: float | None = None,
    ) -> None:
        """A message about to go out (to `channel`; in the thread of `thread_ts` if a reply).
        `since`: for an edit, when the edited message was posted (where to look for it)."""
        with self.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO pending (id, key, channel, at, thread_ts) "
                "VALUES (?, ?, ?, ?, ?)",
                (ident, key, channel, time.time() if since is None else since, thread_ts),
            )

    def pending(self) -> list[Pending]:
        rows = self._db.execute("SELECT id, key, channel, at, thread_ts FROM pending ORDER BY at")
        return [Pending(str(a), str(b), str(c), float(d), e) for a, b, c, d, e in rows]

    def drop_pending(self, ident: str) -> None:
        with self.transaction() as db:
            db.execute("DELETE FROM pending WHERE id = ?", (ident,))

    # -- threads ---------------------------------------------------------------------------

    def thread(self, key: str) -> Thread | None:
        row = self._db.execute("SELECT * FROM threads WHERE key = ?", (key,)).fetchone()
        return None if row is None else _thread(row)

    def firing_threads(self) -> list[Thread]:
        rows = self._db.execute("SELECT * FROM threads WHERE state = 'firing' ORDER BY key")
        return [_thread(r) for r in rows]

    def sent_and_thread(self, ident: str, what: str, thread: Thread, ts: str | None = None) -> None:
        """One transaction: the message (`ts`: the one it was posted as, or folded into) is
        recorded as sent and its thread updated."""
        with self.transaction() as db:
            db.execute("DELETE FROM pending WHERE id = ?", (ident,))
            db.execute(
                "INSERT OR REPLACE INTO sent VALUES (?, ?, ?, ?, ?, ?)",
                (ident, thread.key, what, "sent", time.time(), ts),  # Outcome.SENT
            )
            db.execute(
                "INSERT OR REPLACE INTO threads VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    thread.key,
                    thread.channel,
                    thread.ts,
                    thread.run,
                    thread.rule,
                    thread.severity,
                    thread.state,
                    thread.since,
                    thread.summary,
                    json.dumps(thread.alert.to_dict(), default=str),
                    thread.last_notified,
                    thread.reminders,
                    json.dumps({k: m.to_dict() for k, m in thread.members.items()}, default=str),
                ),
            )

    def resolve_thread(self, key: str) -> None:
        """Mark a thread resolved without a message of its own (an incident closed on a
        transition that was not shown): no more reminders."""
        with self.transaction() as db:
            db.execute("UPDATE threads SET state = 'resolved' WHERE key = ?", (key,))

    # -- channel ids -----------------------------------------------------------------------

    def channel_id(self, name: str) -> str | None:
        row = self._db.execute("SELECT id FROM channels WHERE name = ?", (name,)).fetchone()
        return None if row is None else str(row[0])

    def set_channel_id(self, name: str, ident: str) -> None:
        with self.transaction() as db:
            db.execute("INSERT OR REPLACE INTO channels VALUES (?, ?)", (name, ident))

    # -- labels ----------------------------------------------------------------------------

    def set_labels(self, run: str, labels: Mapping[str, str]) -> None:
        with self.transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO labels VALUES (?, ?)",
                (run, json.dumps(dict(labels), sort_keys=True)),
            )

    def labels(self, run: str) -> dict[str, str]:
        row = self._db.execute("SELECT labels FROM labels WHERE run = ?", (run,)).fetchone()
        return {} if row is None else dict(json.loads(row[0]))

    # -- silences --------------------------------------------------------------------------

    def add_silence(self, run: str, rule: str | None, until: float, comment: str = "") -> int:
        with self.transaction() as db:
            cur = db.execute(
                "INSERT INTO silences (run, rule, until, created, comment) VALUES (?, ?, ?, ?, ?)",
                (run, rule, until, time.time(), comment),
            )
            return int(cur.lastrowid or 0)

    def silences(self, now: float | None = None) -> list[Silence]:
        """Silences still in force at `now` (default: the wall clock)."""
        t = time.time() if now is None else now
        rows = self._db.execute(
            "SELECT id, run, rule, until, created, comment FROM silences WHERE until > ? "
            "ORDER BY id",
            (t,),
        )
        return [
            Silence(int(i), str(r), ru, float(u), float(c), str(m)) for i, r, ru, u, c, m in rows
        ]

    def remove_silence(self, ident: int) -> bool:
        with self.transaction() as db:
            return db.execute("DELETE FROM silences WHERE id = ?", (ident,)).rowcount > 0


def _thread(row: tuple[Any, ...]) -> Thread:
    key, channel, ts, run, rule, sev, state, since, summary, alert, last, reminders, members = row
    return Thread(
        key=str(key),
        channel=str(channel),
        ts=str(ts),
        run=str(run),
        rule=str(rule),
        severity=str(sev),
        state=str(state),
        since=float(since),
        summary=str(summary),
        alert=Alert.from_dict(json.loads(str(alert))),
        last_notified=float(last),
        reminders=int(reminders),
        members={k: Alert.from_dict(m) for k, m in json.loads(str(members)).items()},
    )
