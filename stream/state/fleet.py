"""The fleet stage's state: which run incidents are open and what they name as their cause,
the recent ones per cause (those that point at it apart) and per kind of cause, the fleet
incidents open, and each fleet alert's transition count.

State only, checkpointed with a driver's (`runwatch.stream.checkpoint` builds every class of
this package); the decisions are `runwatch.stream.fleet`. Bounded: run incidents while they
are open, recent ones for one `window`, fleet incidents while open, one counter per thing
that ever had one.
"""

from __future__ import annotations

from collections import deque

#: A shared thing: (kind, name) -- ("dep", "reward@rm-2:8000"), ("host", "node-7"),
#: ("server", "vllm-0@node-7"). Its alert's subject is "kind:name".
Thing = tuple[str, str]


class FleetIncident:
    """One fleet incident: a thing whose users' incidents opened together."""

    __slots__ = (
        "back", "founders", "id", "members", "open_members", "opened", "since", "thing",
    )  # fmt: skip

    def __init__(self, thing: Thing, ident: str, opened: float, since: float) -> None:
        self.thing = thing
        self.id = ident
        self.opened = opened  # event time of the run incident that made it
        self.since = since  # the earliest of its founding run incidents
        self.founders: list[str] = []  # the runs affected when it opened
        self.members: dict[str, str] = {}  # run incident id -> run, every one it held
        self.open_members: set[str] = set()  # those still open: it resolves with the last
        #: a service's own process (`src.instance` its name) beat again after it had gone
        #: silent, while this was open: when (the fleet pause lifts on it)
        self.back: float | None = None


class FleetState:
    """What the fleet stage knows (module docstring)."""

    __slots__ = (
        "fleets", "incidents", "kinds", "member_of", "numbers", "open", "pointing", "recent",
        "transitions",
    )  # fmt: skip

    def __init__(self) -> None:
        #: every open run incident seen (id -> the causes its root named, maybe none)
        self.incidents: dict[str, tuple[Thing, ...]] = {}
        #: run incident id -> its run, while open, for incidents that name a cause
        self.open: dict[str, str] = {}
        #: per thing: (opened, run, run incident id) of the incidents naming it, one window
        self.recent: dict[Thing, deque[tuple[float, str, str]]] = {}
        #: per kind of thing: (opened, run) of the incidents naming one, one window
        self.kinds: dict[str, deque[tuple[float, str]]] = {}
        #: per thing: (opened, run) of the incidents whose failure points at it, one window
        self.pointing: dict[Thing, deque[tuple[float, str]]] = {}
        self.fleets: dict[Thing, FleetIncident] = {}  # the open fleet incidents
        #: open run incident id -> the id of the fleet incident it belongs to (its first)
        self.member_of: dict[str, str] = {}
        self.numbers: dict[Thing, int] = {}  # fleet incidents per thing so far (their ids)
        self.transitions: dict[str, int] = {}  # fleet alert key -> transitions so far


class RunUsage:
    """What one run was last reported to use (the Kafka fleet stage's population, made from
    the workers' usage records): its clock, the services it waited on and when, the nodes
    its processes ran on, its inference servers (`server@host`)."""

    __slots__ = ("clock", "deps", "hosts", "servers")

    def __init__(self, clock: float, deps: dict[str, float], hosts: frozenset[str],
                 servers: frozenset[str]) -> None:  # fmt: skip
        self.clock = clock
        self.deps = deps
        self.hosts = hosts
        self.servers = servers
