"""What-if replay (audit.md, *What-if*): re-decide a recorded stream, or a range of it, under
changes, next to the stream as recorded, and report both worlds per workload and in totals.

Two states leave the start (the recorded inputs at or before `from` with all their decisions):
the recorded world folds the recorded decisions (`evolve`), the what-if world re-decides every
recorded input (`handle`) under the changes, with the `nodes` entries decided as inputs of their
own. The recorded inputs are the clock of both: a decision is dated by the recorded position of
the input that caused it (a `nodes` entry by its `at`). Pure: the same record and changes give
the same report.
"""
from __future__ import annotations

import bisect
import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from fractions import Fraction
from typing import Any

from service.domain.decide.commands import Rejection, accept
from service.domain.decide.decider import handle
from service.domain.fold.evolve import check_foldable, evolve
from service.domain.model import events as ev
from service.domain.model.quantity import CPU, MAX_UNITS, QuantityError, format_quantity, parse_quantity
from service.domain.placement import scoring
from service.domain.read.views import workload_phase
from service.domain.state.cluster import ClusterState

Key = tuple[str, str]
# one incarnation of a name (lifecycle.md, *Names used again*): namespace, name and the recorded
# position of its submission; a withdrawal names one (`ns/name@N`) or, with None, every one
Incarnation = tuple[str, str, int]
Withdrawal = tuple[str, str, "int | None"]


class WhatIfInvalid(ValueError):
    """A change that cannot apply: `loc` names the entry (from the document's root)."""

    def __init__(self, loc: Sequence[str | int], msg: str) -> None:
        super().__init__(msg)
        self.loc, self.msg = list(loc), msg


class WhatIfUnfoldable(ValueError):
    """A recorded event the what-if cannot fold or re-decide (a record this code did not write):
    nothing after it can be re-decided. `position` is the event's."""

    def __init__(self, position: int, event_type: str, cause: Exception) -> None:
        super().__init__(f"event {position} ({event_type}) cannot be re-decided: {type(cause).__name__}: {cause}")
        self.position = position


@dataclass(frozen=True)
class NodeChange:
    index: int  # in the document's `nodes`
    at: int
    kind: str  # remove | add | cordon | uncordon
    name: str
    data: dict[str, Any] | None = None  # add: the NodeUpserted data of its body


@dataclass(frozen=True)
class CapacityChange:
    resource: str
    factor: Fraction
    selector: dict[str, str] = field(default_factory=dict)
    index: int = 0  # in the document's `capacity`


@dataclass
class Changes:
    start: int = 0  # `from`
    until: int | None = None
    priority_classes: dict[str, int] = field(default_factory=dict)
    nodes: list[NodeChange] = field(default_factory=list)
    capacity: list[CapacityChange] = field(default_factory=list)
    withdraw: list[Withdrawal] = field(default_factory=list)
    # the scoringStrategy in force for the whole range (a SchedulerConfigured's, defaults filled in)
    scoring: dict[str, Any] | None = None


@dataclass
class _Track:
    """One workload in one world."""
    priority: int
    scheduled_at: int | None = None
    suffered: int = 0
    caused: int = 0


@dataclass
class _World:
    state: ClusterState
    tracks: dict[Incarnation, _Track] = field(default_factory=dict)
    current: dict[Key, int] = field(default_factory=dict)  # a name -> its latest incarnation's submission
    incarnations: dict[Incarnation, Any] = field(default_factory=dict)  # -> its Workload in this world
    bodies: dict[str, dict[str, Any]] = field(default_factory=dict)  # live nodes' NodeUpserted data
    skipped: set[int] = field(default_factory=set)  # recorded input positions skipped
    preemptions: int = 0

    def note(self, date: int, inp: ev.Event | None, decisions: Sequence[ev.Event], in_range: bool) -> None:
        """After an input and its decisions: submissions, preemptions, first Scheduled dates."""
        touched: list[Incarnation] = []
        if inp is not None and inp.type == ev.WORKLOAD_SUBMITTED:
            key = (inp.data["namespace"], inp.data["name"])
            self.current[key] = date
            self.tracks.setdefault((*key, date), _Track(int(inp.data["priority"])))
            self.incarnations[(*key, date)] = self.state.workloads.get(key)
            touched.append((*key, date))
        if inp is not None and inp.type == ev.NODE_UPSERTED:
            self.bodies[inp.data["name"]] = inp.data
        elif inp is not None and inp.type == ev.NODE_REMOVED:
            self.bodies.pop(inp.data["name"], None)
        for d in decisions:
            inc = self.live((d.data.get("namespace", ""), d.data.get("workload", "")))
            touched.append(inc)
            if d.type == ev.POD_GROUP_PREEMPTED and in_range:
                self.preemptions += 1
                if (victim := self.tracks.get(inc)) is not None:
                    victim.suffered += 1
                pre = d.data.get("preemptor") or {}
                if (by := self.tracks.get(self.live((pre.get("namespace", ""), pre.get("workload", ""))))) is not None:
                    by.caused += 1
        for inc in touched:
            track, wl = self.tracks.get(inc), self.incarnations.get(inc)
            if track is not None and track.scheduled_at is None and wl is not None \
                    and workload_phase(wl) == "Scheduled":
                track.scheduled_at = date

    def live(self, key: Key) -> Incarnation:
        """The incarnation a decision naming `key` concerns: the latest one (-1: none yet)."""
        return (*key, self.current.get(key, -1))


def _groups(events: Sequence[ev.Event]) -> list[tuple[ev.Event, list[ev.Event]]]:
    """Each input with the decisions it caused (the events after it, up to the next input)."""
    out: list[tuple[ev.Event, list[ev.Event]]] = []
    for e in events:
        if e.type in ev.INPUT_TYPES or not out:
            out.append((e, []))
        else:
            out[-1][1].append(e)
    return out


def scaled(data: dict[str, Any], capacity: Sequence[CapacityChange]) -> dict[str, Any]:
    """A NodeUpserted's data with the capacity factors applied (rounded down to the unit)."""
    alloc = data.get("allocatable") or {}
    labels = data.get("labels") or {}
    changed = dict(alloc)
    for c in capacity:
        if c.resource in changed and all(labels.get(k) == v for k, v in c.selector.items()):
            try:
                units = parse_quantity(changed[c.resource], c.resource)
            except QuantityError:
                continue  # a body this code did not accept: left for the fold to refuse
            out = (units * c.factor.numerator) // c.factor.denominator
            if out > MAX_UNITS:
                raise WhatIfInvalid(["capacity", c.index, "factor"],
                                    f"{c.resource} of node {data.get('name')!r} would be {out} units, beyond the "
                                    f"largest quantity ({MAX_UNITS})")
            changed[c.resource] = format_quantity(out, c.resource) if c.resource == CPU else str(out)
    return data if changed == alloc else {**data, "allocatable": changed}


def what_if(cluster: str, events: Sequence[ev.Event], changes: Changes, rules_current: int) -> dict[str, Any]:
    """The what-if report (audit.md) of `events` (a cluster's stream from position 1, upcast) under
    `changes`. Raises WhatIfInvalid for an entry that cannot apply."""
    last = events[-1].position if events else 0
    start, until = changes.start, last if changes.until is None else changes.until
    if start > until:
        raise WhatIfInvalid(["from"], f"from ({start}) is after until ({until})")
    groups = _groups(events)
    base = _World(ClusterState(cluster))
    prefix = [(i, d) for i, d in groups if i.position <= start]
    for inp, decisions in prefix:
        _fold(base, inp, decisions)
        base.note(inp.position, inp, decisions, False)
    ranged = [(i, d) for i, d in groups[len(prefix):] if i.position <= until]
    submitted = {(i.data["namespace"], i.data["name"], i.position): i.position for i, _ in ranged
                 if i.type == ev.WORKLOAD_SUBMITTED}
    _check(changes, start, until, submitted)
    recorded, whatif = base, copy.deepcopy(base)
    if changes.scoring is not None:  # for the whole range, through the one strategy seam (sharing.md)
        scoring.configure(whatif.state, changes.scoring)
    whatif_run = _WhatIfRun(whatif, changes, until, recorded)
    whatif_run.scale_live()
    rules: set[int] = set()
    for inp, decisions in ranged:
        whatif_run.entries_before(inp.position)
        _fold(recorded, inp, decisions)
        recorded.note(inp.position, inp, decisions, True)
        rules.update(int(d.data.get("rules", 0)) for d in decisions)
        try:
            whatif_run.recorded_input(inp)
        except WhatIfInvalid:
            raise
        except Exception as exc:  # an input this code did not write: it cannot be re-decided
            raise WhatIfUnfoldable(inp.position, inp.type, exc) from exc
    whatif_run.entries_before(None)
    inputs = [i.position for i, _ in groups if i.type in ev.INPUT_TYPES]
    return _report(cluster, start, until, recorded, whatif, changes, submitted, inputs, len(ranged),
                   whatif_run.decided, rules_current, sorted(rules))


def _fold(world: _World, inp: ev.Event, decisions: Sequence[ev.Event]) -> None:
    """The recorded input and its decisions folded into the world (WhatIfUnfoldable for an event
    this code cannot fold: data it did not write, a type it does not know)."""
    for e in (inp, *decisions):
        try:
            check_foldable(e)
            evolve(world.state, e)
        except Exception as exc:
            raise WhatIfUnfoldable(e.position, e.type, exc) from exc


def _check(changes: Changes, start: int, until: int, submitted: dict[Incarnation, int]) -> None:
    for c in changes.nodes:
        if not start <= c.at <= until:
            raise WhatIfInvalid(["nodes", c.index, "at"], f"at {c.at} is outside the range {start}..{until}")
    for i, (ns, name, at) in enumerate(changes.withdraw):
        if at is None and not any(inc[:2] == (ns, name) for inc in submitted):
            raise WhatIfInvalid(["withdraw", i], f"workload {ns}/{name} is not submitted in the range "
                                                 f"{start}..{until}")
        if at is not None and (ns, name, at) not in submitted:
            raise WhatIfInvalid(["withdraw", i], f"workload {ns}/{name} has no incarnation submitted at "
                                                 f"position {at} in the range {start}..{until}")


def withdrawn(changes: Changes, inc: Incarnation) -> bool:
    """Whether the changes withdraw that incarnation (by its name, or by its submission's position)."""
    return any(w[:2] == inc[:2] and w[2] in (None, inc[2]) for w in changes.withdraw)


class _WhatIfRun:
    """The what-if world's inputs: recorded ones under the changes, and the `nodes` entries."""

    def __init__(self, world: _World, changes: Changes, until: int, recorded: _World) -> None:
        self.world, self.changes, self.until, self.recorded = world, changes, until, recorded
        self.pending = sorted(changes.nodes, key=lambda c: (c.at, c.index))
        self.decided = 0

    def _decide(self, date: int, inp: ev.Event | None, etype: str, data: dict[str, Any]) -> None:
        state = self.world.state
        event = ev.Event(state.position + 1, etype, data)
        decisions = handle(state, event)
        self.world.note(date, event if inp is None else ev.Event(event.position, etype, data), decisions, True)

    def scale_live(self) -> None:
        """Every node live at `from` under the capacity factors (folded: no decision of its own)."""
        if not self.changes.capacity:
            return
        state = self.world.state
        for name, data in sorted(self.world.bodies.items()):
            new = scaled(data, self.changes.capacity)
            if new is not data:
                evolve(state, ev.Event(state.position + 1, ev.NODE_UPSERTED, new))
                self.world.bodies[name] = new

    def entries_before(self, position: int | None) -> None:
        """Decide the `nodes` entries whose `at` is before `position` (None: all that are left)."""
        while self.pending and (position is None or self.pending[0].at < position):
            c = self.pending.pop(0)
            self._entry(c)
            self.decided += 1

    def _entry(self, c: NodeChange) -> None:
        bodies = self.world.bodies
        loc: list[str | int] = ["nodes", c.index, c.kind]
        if c.kind == "add":
            assert c.data is not None
            self._decide(c.at, None, ev.NODE_UPSERTED, scaled({**c.data, "name": c.name}, self.changes.capacity))
            return
        if c.name not in bodies:
            raise WhatIfInvalid(loc, f"node {c.name!r} does not exist at position {c.at}")
        if c.kind == "remove":
            self._decide(c.at, None, ev.NODE_REMOVED, {"name": c.name})
        else:
            self._decide(c.at, None, ev.NODE_UPSERTED, {**bodies[c.name], "unschedulable": c.kind == "cordon"})

    def recorded_input(self, inp: ev.Event) -> None:
        data = self._under_changes(inp)
        if data is None:
            self.world.skipped.add(inp.position)
            return
        self._decide(inp.position, inp, inp.type, data)

    def _under_changes(self, inp: ev.Event) -> dict[str, Any] | None:
        """The input's data in the what-if world, or None when it cannot apply there (skipped)."""
        data, state = inp.data, self.world.state
        t = inp.type
        if t == ev.WORKLOAD_SUBMITTED:
            key = (data["namespace"], data["name"])
            live = state.workloads.get(key)
            if withdrawn(self.changes, (*key, inp.position)) or (live is not None and live.deleted_at is None):
                return None
            cls = (data.get("spec") or {}).get("priorityClassName")
            if cls in self.changes.priority_classes and "priority" not in (data.get("spec") or {}):
                return {**data, "priority": self.changes.priority_classes[cls]}
            return data
        if t == ev.WORKLOAD_DELETED:  # the incarnation the record deleted, if it lives here
            key = (data["namespace"], data["name"])
            wl = state.workloads.get(key)
            same = self.world.current.get(key) == self.recorded.current.get(key)
            return data if wl is not None and wl.deleted_at is None and same else None
        if t == ev.PODS_FINISHED:
            return _running(state, data)
        if t in (ev.WORKLOAD_SCALED, ev.POD_GROUP_CREATED, ev.POD_GROUP_DELETED):
            return _lifecycle_input(state, t, data)
        if t == ev.NODE_REMOVED:
            return data if data["name"] in self.world.bodies else None
        if t == ev.NODE_UPSERTED:
            return scaled(data, self.changes.capacity)
        if t == ev.RESOURCE_SLICE_REMOVED:
            return data if data["name"] in state.resource_slices else None
        if t == ev.DEVICE_CLASS_REMOVED:
            return data if data["name"] in state.device_classes else None
        if t == ev.SCHEDULER_CONFIGURED and self.changes.scoring is not None:
            return None  # the changes' strategy governs the whole range (sharing.md)
        return data


def _running(state: ClusterState, data: dict[str, Any]) -> dict[str, Any] | None:
    """A PodsFinished in the what-if world: the named pods that run there finish where they run;
    None (skipped) when none does, or the workload is not live there (withdrawn, deleted)."""
    wl = state.workloads.get((data["namespace"], data["workload"]))
    if wl is None or wl.deleted_at is not None:
        return None
    by_name = {g.spec.name: g for g in wl.groups}
    names = state.nodes.names
    pods = []
    for p in data["pods"]:
        g = by_name.get(p["podGroup"])
        try:
            node = g.node_of[g.pod_index(p["pod"])] if g is not None else -1
        except KeyError:
            continue
        if node >= 0:
            pods.append({**p, "node": names[node]})
    return {**data, "pods": pods} if pods else None


def _lifecycle_input(state: ClusterState, t: str, data: dict[str, Any]) -> dict[str, Any] | None:
    """A change of sizes or a PodGroup input in the what-if world, decided again by the command's own
    accept against that world (the pods it removes may run elsewhere there, or not at all); None
    (skipped) when its workload is not live there (withdrawn, deleted) or the state refuses it."""
    ns = data["namespace"]
    if t == ev.POD_GROUP_DELETED:
        pg = state.podgroups.get((ns, data["name"]))
        return data if pg is not None and pg.deleted_at is None else None
    if t == ev.WORKLOAD_SCALED:
        got = accept(state, "ScaleWorkload", data["workload"], ns, data["patch"])
    else:
        spec = data["spec"]
        ref = {"workloadName": data["workload"], **({"templateName": data["template"]} if data["template"] else {})}
        body = {**{k: v for k, v in spec.items() if k != "name"}, "name": data["name"], "workloadRef": ref,
                "priority": data["priority"], "preemptionPolicy": data["preemptionPolicy"]}
        got = accept(state, "CreatePodGroup", data["name"], ns, body)
    return None if isinstance(got, Rejection) else got[1]


# -- the report ----------------------------------------------------------------------------------
def _fraction(value: Fraction) -> float:
    """Rounded to 3 decimal places, half to even, from the exact value."""
    exact = Decimal(value.numerator) / Decimal(value.denominator)
    return float(exact.quantize(Decimal("0.001"), rounding=ROUND_HALF_EVEN))


def _utilisation(state: ClusterState) -> dict[str, float]:
    nodes = state.nodes
    alive = nodes.alive[:nodes.count]
    out: dict[str, float] = {}
    for resource, col in nodes.resources.items():
        rows = alive & nodes.declared[:nodes.count, col]
        if not rows.any():
            continue
        total = int(nodes.alloc[:nodes.count, col][rows].sum())
        used = int(nodes.used[:nodes.count, col][rows].sum())
        out[resource] = _fraction(Fraction(used, total)) if total else 0.0
    return dict(sorted(out.items()))


def _side(world: _World, inc: Incarnation, submitted_at: int, inputs: list[int]) -> dict[str, Any]:
    track = world.tracks.get(inc) or _Track(0)
    wl = world.incarnations.get(inc)
    phase = workload_phase(wl) if wl is not None else "Finished"
    placed = sum(g.placed for g in wl.groups) if wl is not None and wl.deleted_at is None else 0
    wait = None
    if track.scheduled_at is not None:
        lo = bisect.bisect_right(inputs, submitted_at)
        hi = bisect.bisect_right(inputs, track.scheduled_at)
        wait = (hi - lo) - sum(1 for p in world.skipped if submitted_at < p <= track.scheduled_at)
    return {"priority": track.priority, "phase": phase, "scheduledAt": track.scheduled_at, "wait": wait,
            "placedPods": placed, "preemptionsSuffered": track.suffered, "preemptionsCaused": track.caused}


def _totals(world: _World, rows: list[dict[str, Any]], side: str) -> dict[str, Any]:
    sides = [r[side] for r in rows if r[side] is not None]
    waits = [s["wait"] for s in sides if s["wait"] is not None]
    return {"workloads": len(sides), "scheduled": sum(1 for s in sides if s["phase"] == "Scheduled"),
            "neverScheduled": sum(1 for s in sides if s["scheduledAt"] is None),
            "meanWait": _fraction(Fraction(sum(waits), len(waits))) if waits else None,
            "preemptions": world.preemptions, "utilisation": _utilisation(world.state)}


def _report(cluster: str, start: int, until: int, recorded: _World, whatif: _World, changes: Changes,
            submitted: dict[Incarnation, int], inputs: list[int], ranged: int, decided: int, rules_current: int,
            rules_recorded: list[int]) -> dict[str, Any]:
    listed: dict[Incarnation, int] = {}
    for inc, wl in recorded.incarnations.items():
        if wl.position <= start and (wl.deleted_at is None or wl.deleted_at > start) or inc in submitted:
            listed[inc] = wl.position
    rows = []
    for inc, at in sorted(listed.items(), key=lambda kv: kv[1]):
        out = withdrawn(changes, inc)
        rows.append({"namespace": inc[0], "name": inc[1], "submittedAt": at, "withdrawn": out,
                     "recorded": _side(recorded, inc, at, inputs),
                     "whatIf": None if out else _side(whatif, inc, at, inputs)})
    return {"cluster": cluster, "from": start, "until": until,
            "rules": {"current": rules_current, "recorded": rules_recorded},
            "inputs": {"recorded": ranged, "changes": decided, "skipped": len(whatif.skipped)},
            "totals": {"recorded": _totals(recorded, rows, "recorded"), "whatIf": _totals(whatif, rows, "whatIf")},
            "workloads": rows}
