"""What the Slack notifier has sent, in a small SQLite file (fsync on every commit).

Keyed by alert transition id, so a transition read twice (a restart, a Kafka redelivery)
is sent once. Before a message goes out (or an edit that shows more transitions: a fold) the
ids it shows are written to `pending`, with what the thread and the message will be once
Slack has it; once Slack answers, one transaction moves them to `sent` and records the thread
and the message. A crash between the two leaves pending ids, and `Notifier.recover` asks Slack
(message metadata) whether they arrived, so a restart neither repeats nor drops them.
`messages` keeps what each reply shows, section by section, so a later fold edits it without
losing what it already said. Silences live in the same file (`runwatch silence`).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runwatch.emitters import env
from runwatch.notify.threads import THREAD_FIELDS, After, Message, Thread
from runwatch.stream.alerts import Alert

__all__ = ["After", "Message", "NotifyStore", "Pending", "Silence", "Thread", "default_path"]

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
CREATE TABLE IF NOT EXISTS messages (
    channel TEXT NOT NULL, ts TEXT NOT NULL, key TEXT NOT NULL, kind TEXT NOT NULL,
    posted REAL NOT NULL, sections TEXT NOT NULL, PRIMARY KEY (channel, ts)
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
class Pending:
    """A message begun and not yet recorded as sent: a crash may have hidden its answer."""

    id: str
    key: str
    channel: str
    at: float
    thread_ts: str | None  # the root of its thread, for a reply or a reminder
    after: After | None = None  # what its sending makes of the ledger (None: older ledgers)


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
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(threads)")}
        for column in ("fleet", "link"):  # a ledger from before fleet threads
            if column not in columns:
                self._db.execute(f"ALTER TABLE threads ADD COLUMN {column} TEXT")
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(pending)")}
        if "after" not in columns:  # a ledger from before folded bursts
            self._db.execute("ALTER TABLE pending ADD COLUMN after TEXT")

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

    def message_ts(self, ident: str, key: str | None = None) -> str | None:
        """The Slack message (its ts) that a transition sent was posted as, or folded into
        -- in thread `key`, if given."""
        row = self._db.execute("SELECT ts, key FROM sent WHERE id = ?", (ident,)).fetchone()
        if row is None or row[0] is None or (key is not None and row[1] != key):
            return None
        return str(row[0])

    def shown_in(self, key: str, ts: str) -> list[str]:
        """The transitions thread `key`'s message `ts` shows (posted as, or folded into)."""
        rows = self._db.execute("SELECT id FROM sent WHERE key = ? AND ts = ? ORDER BY at, rowid",
                                (key, ts))  # fmt: skip
        return [str(r[0]) for r in rows]

    def begin(
        self,
        ident: str | Sequence[str],
        key: str,
        channel: str,
        thread_ts: str | None = None,
        since: float | None = None,
        after: After | None = None,
    ) -> None:
        """A message about to go out (to `channel`; in the thread of `thread_ts` if a reply)
        showing the transition(s) `ident`. `since`: for an edit, when the edited message was
        posted (where to look for it); `after`: what sending it makes of the ledger."""
        ids = [ident] if isinstance(ident, str) else list(ident)
        at = time.time() if since is None else since
        effect = None if after is None else after.to_json()
        with self.transaction() as db:
            db.executemany(
                "INSERT OR REPLACE INTO pending (id, key, channel, at, thread_ts, after) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(i, key, channel, at, thread_ts, effect) for i in ids],
            )

    def pending(self) -> list[Pending]:
        rows = self._db.execute(
            "SELECT id, key, channel, at, thread_ts, after FROM pending ORDER BY at, rowid"
        )
        return [Pending(str(a), str(b), str(c), float(d), e,
                        None if f is None else After.from_json(f))
                for a, b, c, d, e, f in rows]  # fmt: skip

    def drop_pending(self, ident: str | Sequence[str]) -> None:
        ids = [ident] if isinstance(ident, str) else list(ident)
        with self.transaction() as db:
            db.executemany("DELETE FROM pending WHERE id = ?", [(i,) for i in ids])

    # -- threads ---------------------------------------------------------------------------

    def thread(self, key: str) -> Thread | None:
        row = self._db.execute(f"SELECT {_COLUMNS} FROM threads WHERE key = ?", (key,)).fetchone()
        return None if row is None else _thread(row)

    def firing_threads(self) -> list[Thread]:
        rows = self._db.execute(
            f"SELECT {_COLUMNS} FROM threads WHERE state = 'firing' ORDER BY key"
        )
        return [_thread(r) for r in rows]

    def sent_and_thread(
        self,
        ident: str | Sequence[str],
        what: str,
        thread: Thread,
        ts: str | None = None,
        message: Message | None = None,
        also: Sequence[Thread] = (),
    ) -> None:
        """One transaction: the transition(s) `ident` are recorded as sent (`ts`: the message
        they were posted as, or folded into), their thread updated (and the threads `also`),
        and the reply `message` as it shows now."""
        ids = [ident] if isinstance(ident, str) else list(ident)
        now = time.time()
        with self.transaction() as db:
            db.executemany("DELETE FROM pending WHERE id = ?", [(i,) for i in ids])
            db.executemany(
                "INSERT OR REPLACE INTO sent VALUES (?, ?, ?, ?, ?, ?)",
                [(i, thread.key, what, "sent", now, ts) for i in ids],  # Outcome.SENT
            )
            for th in (thread, *also):
                _write_thread(db, th)
            if message is not None:
                _write_message(db, message)

    def put_thread(self, thread: Thread) -> None:
        """A thread's state changed without a message of its own (moved, linked, tracked)."""
        with self.transaction() as db:
            _write_thread(db, thread)

    def message(self, channel: str, ts: str) -> Message | None:
        row = self._db.execute(
            "SELECT channel, ts, key, kind, posted, sections FROM messages "
            "WHERE channel = ? AND ts = ?", (channel, ts)).fetchone()  # fmt: skip
        return None if row is None else _message(row)

    def last_message(self, key: str) -> Message | None:
        """The thread's latest reply or reminder of ours (None: none, or an older ledger)."""
        row = self._db.execute(
            "SELECT channel, ts, key, kind, posted, sections FROM messages WHERE key = ? "
            "ORDER BY posted DESC, rowid DESC LIMIT 1", (key,)).fetchone()  # fmt: skip
        return None if row is None else _message(row)

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


_COLUMNS = ", ".join(THREAD_FIELDS)


def _write_thread(db: sqlite3.Connection, th: Thread) -> None:
    d = th.to_dict()
    d["alert"] = json.dumps(d["alert"], default=str)
    d["members"] = json.dumps(d["members"], default=str)
    marks = ", ".join("?" for _ in THREAD_FIELDS)
    db.execute(f"INSERT OR REPLACE INTO threads ({_COLUMNS}) VALUES ({marks})",
               [d[f] for f in THREAD_FIELDS])  # fmt: skip


def _write_message(db: sqlite3.Connection, m: Message) -> None:
    sections = json.dumps(m.to_dict()["sections"])
    updated = db.execute("UPDATE messages SET sections = ? WHERE channel = ? AND ts = ?",
                         (sections, m.channel, m.ts)).rowcount  # fmt: skip
    if not updated:
        db.execute("INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?)",
                   (m.channel, m.ts, m.key, m.kind, m.posted, sections))  # fmt: skip


def _message(row: tuple[Any, ...]) -> Message:
    channel, ts, key, kind, posted, sections = row
    return Message.from_dict({"channel": channel, "ts": ts, "key": key, "kind": kind,
                              "posted": posted, "sections": json.loads(sections)})  # fmt: skip


def _thread(row: tuple[Any, ...]) -> Thread:
    (key, channel, ts, run, rule, sev, state, since, summary, alert, last, reminders, members,
     fleet, link) = row  # fmt: skip
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
        fleet=None if fleet is None else str(fleet),
        link=None if link is None else str(link),
    )
