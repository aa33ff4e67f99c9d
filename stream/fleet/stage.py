"""The fleet stage of a driver that sees every run in one process (replay, `serve`, the
backtest): the engine's alert transitions in; out, the same with the fleet's among them --
a `shared_cause` firing just before the run transition that made it, a resolution just
after the one that closed its last member -- and every member run's transitions carrying
the fleet incident's id (`incident.fleet`), joiners from their first transition on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from msgspec.structs import replace

from runwatch.emitters.bounds import FLEET_RUN
from runwatch.stream.alerts import Alert, alert_key, transition_id
from runwatch.stream.config import RulesConfig
from runwatch.stream.engine import Engine
from runwatch.stream.fleet.causes import causes, points_at, subject
from runwatch.stream.fleet.decide import Change, FleetBook, Population, Summary
from runwatch.stream.fleet.population import EnginePopulation
from runwatch.stream.incidents import IncidentRef
from runwatch.stream.rules.base import fmt_duration
from runwatch.stream.rules.shared_cause import SharedCause, SharedCauseParams
from runwatch.stream.state.fleet import FleetState

if TYPE_CHECKING:
    from runwatch.emitters.runview import FleetView

RULE = SharedCause.id
#: the rule whose resolution says a process beats again (a service's own, `_beating`)
BEATS = "heartbeat_lost"
#: what the failures that point at a thing of a kind say (`causes.points_at`)
POINTING = {"dep": "of them wait on it", "host": "of them went silent on it"}


class FleetStage:
    """Fleet incidents beside an engine (module docstring); does nothing when the config
    turns `shared_cause` off."""

    def __init__(
        self,
        engine: Engine | None,
        config: RulesConfig | None = None,
        population: Population | None = None,
    ) -> None:
        """Beside `engine`, whose config and run states it reads; or, for the Kafka fleet
        stage, with no engine: `config` and a `population` from the workers' records."""
        if engine is not None:
            config, population = config or engine.config, population or EnginePopulation(engine)
        if config is None or population is None:
            raise TypeError("a fleet stage without an engine needs a config and a population")
        rule = config.by_id().get(RULE)
        self.params: SharedCauseParams = (
            rule.params if rule is not None else SharedCauseParams(enabled=False)
        )
        self.enabled = self.params.enabled
        self.state = FleetState()
        self.book = FleetBook(self.state, self.params)
        self.population = population

    def transitions(self, alerts: list[Alert]) -> list[Alert]:
        """The engine's transitions (in order), with the fleet's (module docstring)."""
        if not self.enabled or not alerts:
            return alerts
        out: list[Alert] = []
        state = self.state
        for alert in alerts:
            if alert.rule == BEATS and state.fleets and not alert.firing:
                self._beating(alert)
            ref = alert.incident
            if ref is None or alert.run == FLEET_RUN:
                out.append(alert)
                continue
            if ref.open and ref.id not in state.incidents:  # it opens (its root fires)
                named = causes(alert) if ref.role == "root" else ()
                state.incidents[ref.id] = named
                for thing in named:
                    points = points_at(alert, thing)
                    out += self._alerts(Summary(thing, alert.run, ref.id, alert.ts, True, points))
            fleet = state.member_of.get(ref.id)
            out.append(alert if fleet is None else _member(alert, ref, fleet))
            if not ref.open and ref.id in state.incidents:
                for thing in state.incidents.pop(ref.id):
                    out += self._alerts(Summary(thing, alert.run, ref.id, alert.ts, False))
        return out

    def left(self, runs: set[str], ts: float) -> list[Alert]:
        """Runs let go of without a word (a driver evicts a run silent for long): their open
        incidents count as closed at `ts`, so a fleet incident they held can resolve."""
        if not self.enabled or not runs:
            return []
        out: list[Alert] = []
        state = self.state
        for incident in list(state.incidents):
            run = incident.split("|")[1] if incident.count("|") >= 2 else None
            if run in runs:
                for thing in state.incidents.pop(incident):
                    out += self._alerts(Summary(thing, run, incident, ts, False))
        return out

    def _beating(self, alert: Alert) -> None:
        """A process beats again after its heartbeats were lost: if its instance names a
        service whose fleet incident is open, the service is back (`FleetIncident.back`).
        A run's end resolves its alerts too; that is no sign of life."""
        proc = alert.subject or ""
        if alert.details.get("reason") == "run_finished" or "/" not in proc:
            return
        fleet = self.state.fleets.get(("dep", proc.split("/", 1)[1]))
        if fleet is not None and alert.ts >= fleet.since:
            fleet.back = alert.ts

    def view(self, ts: float) -> FleetView:
        """What every run's view is told (`runwatch.emitters.runview.FleetView`): the
        services whose fleet incident is open, which the runs that opted in hold."""
        from runwatch.emitters.runview import MAX_HELD, FleetView, HeldDep  # (live roles only)

        fleets = sorted(self.state.fleets.items())
        held = [HeldDep(dep=name, fleet=fleet.id, since=fleet.since, back=fleet.back)
                for (kind, name), fleet in fleets if kind == "dep"]  # fmt: skip
        return FleetView(ts=ts, held=held[:MAX_HELD])

    def _alerts(self, summary: Summary) -> list[Alert]:
        changes = self.book.summary(summary, self.population)
        return [self._alert(c) for c in changes if c.what != "joined"]

    def _alert(self, change: Change) -> Alert:
        """The `shared_cause` transition of a fleet incident that opened or resolved."""
        fleet, firing = change.fleet, change.what == "opened"
        name = subject(fleet.thing)
        key = alert_key(RULE, FLEET_RUN, name)
        number = self.state.transitions.get(key, 0) + 1
        self.state.transitions[key] = number
        kind, thing = fleet.thing
        if firing:
            figures = change.figures
            assert figures is not None
            runs = fleet.founders
            contrast = (
                f"{figures.others_affected} of the {figures.others} that do not"
                if figures.others
                else f"and every run uses it: {figures.pointed} {POINTING.get(kind, 'point at it')}"
            )
            summary = (
                f"{len(runs)} runs stalled together on {kind} {thing}: {figures.affected} of "
                f"the {figures.users} runs that use it, {contrast}"
            )
            details = {
                "runs": runs,
                "kind": kind,
                "name": thing,
                "users": figures.users,
                "affected": figures.affected,
                "others": figures.others,
                "others_affected": figures.others_affected,
                "pointed": figures.pointed,
                "incidents": dict(sorted(fleet.members.items())),
            }
        else:
            runs = sorted(set(fleet.members.values()))
            held = change.ts - fleet.opened  # (one duration: the history's, `lasted`)
            summary = (
                f"{RULE} ({name}) resolved after {fmt_duration(held)}: the incidents of its "
                f"{len(runs)} runs have closed"
            )
            details = {"runs": runs, "kind": kind, "name": thing, "duration_s": round(held, 3),
                       "incidents": dict(sorted(fleet.members.items()))}  # fmt: skip
        incident = IncidentRef(fleet.id, "root", key, RULE, fleet.opened, firing)
        return Alert(
            id=transition_id(key, number),
            ts=change.ts,
            rule=RULE,
            run=FLEET_RUN,
            state="firing" if firing else "resolved",
            severity=SharedCause.severity,
            key=key,
            since=fleet.since,
            summary=summary,
            details=details,
            subject=name,
            action=self.params.action,
            incident=incident,
        )

    def reconcile(self, last: Alert, count: int, now: float) -> Alert | None:
        """After a rebuild (`LiveDriver.finish_replay`): `count` transitions of fleet alert
        `last.key` were published, the last one `last`. Where this stage made fewer, its
        count moves up and its state follows what was published; a published firing it does
        not hold is resolved now (returned), so firing and resolved still alternate."""
        key = last.key
        if self.count(key) >= count or last.subject is None:
            return None
        state = self.state
        state.transitions[key] = count
        kind, _, name = last.subject.partition(":")
        fleet = state.fleets.get((kind, name))
        if not last.firing:
            if fleet is not None:  # it ended before the restart: let it go without a word
                del state.fleets[fleet.thing]
                for incident in [i for i, f in state.member_of.items() if f == fleet.id]:
                    del state.member_of[incident]
            return None
        if fleet is not None:
            return None
        state.transitions[key] = count + 1
        ref = last.incident
        return replace(
            last, id=transition_id(key, count + 1), ts=now, state="resolved",
            summary=f"resolved: {last.summary}",
            incident=replace(ref, open=False) if ref is not None else None,
        )  # fmt: skip

    def load(self, state: FleetState) -> None:
        """Go on from a checkpoint's state."""
        self.state = self.book.state = state

    def count(self, key: str) -> int:
        """Transitions the fleet alert `key` has had (a rebuild's numbering)."""
        return self.state.transitions.get(key, 0)


def _member(alert: Alert, ref: IncidentRef, fleet: str) -> Alert:
    return replace(alert, incident=replace(ref, fleet=fleet))
