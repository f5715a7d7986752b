"""Fast replay: fold a long run of recorded events into a state, to exactly the state that
folding each of them with `evolve` gives, skipping the work that cancels out.

A workload that is submitted AND deleted within the events being replayed ("transient")
leaves nothing in the state but its finished (compact) view and history: its placements
are added to and taken off the usage arrays, node pod sets, the running index, the queue
and its skip index, and come out net zero. Its events are folded here into a small record
instead (pods placed per group, conditions, explanation, event positions) and the workload
is stored finished, as `Workload.compact()` would leave it (`Workload.recorded_only`, then
`Workload.finish`). What such a workload does leave in the shared state goes through the same
public operations of the state as evolve's placements and releases, in order: the journal of
moves and `placed_by_priority` (`ClusterState.counted_placed` / `counted_released`, which also
mark the released rows dirty), and its entries in `workloads` / `by_position`
(`ClusterState.add_workload`, at its submission, as evolve does). No state is written around them.
Everything else (nodes, classes, slices, workloads still live at the end, workloads with
device claims, workloads needing a new resource column) goes through `evolve` unchanged.

Rows are (position, type, schemaVersion, data) as the store gives them; `data` is a dict,
or the stored canonical JSON text (a str): then the events of transient workloads are
decoded only as far as folding them needs (typed msgspec structs; a finished workload keeps
its spec as that text, the form a snapshot restores), and every other event in full.

The caller announces the events it WILL fold, ahead of folding them (`ahead`), so that a
submission knows whether its deletion is coming; every announced event must then be folded
(`fold`), in order, before the state is used (`finish` checks that nothing is left open).
The state is only consistent after `finish`.

Pure: no I/O, clock, randomness or logging (like the rest of service/domain).
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import msgspec

from service.domain.fold.evolve import FOLDS, disruption_target, evolve, placed_rule, satisfied_rule
from service.domain.model import events as ev
from service.domain.model.events import Event
from service.domain.model.upcasting import upcast
from service.domain.state.cluster import ClusterState, Workload

Row = tuple[int, str, int, Any]  # (position, type, schemaVersion, data dict or JSON text)

_CURRENT = ev.SCHEMA_VERSIONS
_LIFECYCLE = frozenset({ev.PODS_FINISHED, ev.WORKLOAD_SCALED, ev.POD_GROUP_CREATED, ev.POD_GROUP_DELETED})
_NULL = msgspec.Raw(b"null")


class ReplayError(RuntimeError):
    """The events do not fold as the decider records them (a stream the fast path cannot
    mirror exactly); the caller folds them with `evolve` instead."""


# -- lean views of the stored JSON (unknown fields are skipped; a value of another type than
#    these say fails the decode, and the event is then decoded in full) ------------------------
class _PodRef(msgspec.Struct):
    node: str
    pod: str


class _Gang(msgspec.Struct):
    minCount: int


class _Policy(msgspec.Struct):
    gang: _Gang | msgspec.UnsetType = msgspec.UNSET


class _Entry(msgspec.Struct):
    count: int = 1
    requests: dict[str, Any] | None = None
    resourceClaims: list[Any] | None = None


class _PodGroup(msgspec.Struct):
    name: str
    pods: list[_Entry]
    schedulingPolicy: _Policy | None = None
    resourceClaims: list[Any] | None = None


class _Spec(msgspec.Struct):
    podGroups: list[_PodGroup]  # required: a tree (compositePodGroups only) fails to decode, left to evolve
    resourceClaims: list[Any] | None = None
    resourceClaimTemplates: list[Any] | None = None


class _Submitted(msgspec.Struct, forbid_unknown_fields=True):
    """Exactly the keys accept() records: in canonical JSON (keys sorted) "spec" comes last."""
    name: str
    namespace: str
    preemptionPolicy: str
    priority: int
    spec: _Spec


class _Placed(msgspec.Struct):  # the pods are counted in the text, decoded only when needed
    namespace: str
    workload: str
    podGroup: str
    placedPods: int | None = None
    explanation: msgspec.Raw = _NULL
    claims: list[Any] | None = None


class _PlacedPods(msgspec.Struct):
    pods: list[_PodRef]


class _Deleted(msgspec.Struct):
    namespace: str
    name: str


_decode_submitted = msgspec.json.Decoder(_Submitted).decode
_decode_placed = msgspec.json.Decoder(_Placed).decode
_decode_deleted = msgspec.json.Decoder(_Deleted).decode
_decode_pods = msgspec.json.Decoder(_PlacedPods).decode
_decode_any = msgspec.json.Decoder().decode
_LEAN_ERRORS = (msgspec.DecodeError, msgspec.ValidationError)
_POD_KEY = '"pod":'
_SPEC_KEY = ',"spec":'  # 8 characters


def loads(text: str | bytes | msgspec.Raw) -> Any:
    """JSON text to values, as the store decodes it (msgspec; json for what it refuses)."""
    try:
        return _decode_any(text)
    except msgspec.DecodeError:
        return json.loads(bytes(text) if isinstance(text, msgspec.Raw) else text)


# -- the records of transient workloads ---------------------------------------------------------
class _Group:
    __slots__ = ("name", "total", "min_count", "gang", "placed", "lists", "nodes", "explanation",
                 "needs_explanation", "conditions", "ever_scheduled", "running_key")

    def __init__(self, name: str, total: int, min_count: int, gang: bool, running_key: tuple[int, int, int]):
        self.name = name
        self.total = total
        self.min_count = min_count
        self.gang = gang
        self.placed = 0
        # the placements' pod lists as recorded (list of {"pod", "node"}, or its JSON text);
        # the map pod -> node is only built when pods are released before the deletion
        self.lists: list[Any] = []
        self.nodes: dict[str, str] | None = None
        self.explanation: Any = None  # a dict, or its JSON text (msgspec.Raw) until the end
        self.needs_explanation = True
        self.conditions: dict[str, dict[str, Any]] = {}
        self.ever_scheduled = False
        self.running_key = running_key

    @property
    def pending(self) -> bool:
        return self.placed < self.total  # a transient workload's pods never finish (Replay.ahead)

    def pod_nodes(self) -> dict[str, str]:
        if self.nodes is None:
            self.nodes = dict(pair for pods in self.lists for pair in _pairs(pods))
            self.lists = []
        return self.nodes

    def node_names(self) -> list[str]:
        """Nodes of the placed pods."""
        if self.nodes is not None:
            return list(self.nodes.values())
        return [node for pods in self.lists for _, node in _pairs(pods)]


def _pairs(pods: Any) -> list[tuple[str, str]]:
    """(pod, node) of a placement's pods: a list of {"pod", "node"}, or the event's JSON text."""
    if isinstance(pods, str):
        return [(p.pod, p.node) for p in _decode_pods(pods).pods]
    return [(p["pod"], p["node"]) for p in pods]


class _Transient:
    __slots__ = ("wl", "groups", "namespace", "name", "priority", "policy", "body")

    def __init__(self, wl: Workload, groups: list[_Group], namespace: str, name: str, priority: int,
                 policy: str, body: Any):
        self.wl = wl
        self.groups = groups
        self.namespace = namespace
        self.name = name
        self.priority = priority
        self.policy = policy
        self.body = body  # the spec as submitted: a dict, or its canonical JSON text


class Replay:
    """Fold events into `state` (see the module docstring): `ahead(rows)` for every row before
    `fold(rows)` of the same rows, then `finish()`."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.ending: set[tuple[str, str]] = set()  # workloads whose deletion is announced
        self.open: dict[tuple[str, str], _Transient] = {}
        self.deleting: dict[int, tuple[str, str]] = {}  # position -> workload, of announced deletions
        # workloads with announced lifecycle inputs (finished pods, sizes changed): folded by evolve
        self.excluded: set[tuple[str, str]] = set()

    # -- the protocol ------------------------------------------------------------------
    def ahead(self, rows: Sequence[Row]) -> None:
        """Announce rows that will be folded: their deletions make submissions transient."""
        ending = self.ending
        deleted = ev.WORKLOAD_DELETED
        current = _CURRENT[deleted]
        deleting = self.deleting
        for _, type_, version, data in [r for r in rows if r[1] in _LIFECYCLE]:
            if isinstance(data, str):
                data = loads(data)
            if version != _CURRENT.get(type_, 1):
                data = upcast(type_, version, data)
            self.excluded.add((data["namespace"], data["workload"]))
        for position, type_, version, data in [r for r in rows if r[1] == deleted]:
            if isinstance(data, str):
                if version == current:
                    try:
                        lean = _decode_deleted(data)
                    except _LEAN_ERRORS:
                        pass
                    else:
                        key = (lean.namespace, lean.name)
                        ending.add(key)
                        deleting[position] = key  # its fold needs no decoding
                        continue
                data = loads(data)
            if version != current:
                data = upcast(type_, version, data)
            ending.add((data["namespace"], data["name"]))

    def fold(self, rows: Iterable[Row]) -> None:
        state = self.state
        fast = _FAST
        lean = _LEAN
        current = _CURRENT
        prev = state.position  # kept in a local: the fast handlers do not read it
        for position, type_, version, data in rows:
            if type(data) is str:
                lean_handler = lean.get(type_)
                if lean_handler is not None and version == current[type_] and lean_handler(self, position, data):
                    prev = position
                    continue
                data = loads(data)
            if version != current.get(type_, 1):
                data = upcast(type_, version, data)
            handler = fast.get(type_)
            if handler is None or not handler(self, position, data):
                state.position = prev  # evolve may read it (devices: the event's position)
                evolve(state, Event(position, type_, data))
            prev = position
        state.position = prev

    def finish(self) -> ClusterState:
        if self.open:
            key = next(iter(self.open))
            raise ReplayError(f"workload {key[0]}/{key[1]}: its announced deletion was not folded")
        self.ending.clear()
        self.excluded.clear()
        return self.state

    # -- submission ------------------------------------------------------------------------
    def _submitted(self, position: int, data: dict[str, Any]) -> bool:
        key = (data["namespace"], data["name"])
        if key not in self.ending or key in self.state.workloads or key in self.excluded:
            return False
        self.ending.discard(key)  # a name is submitted once: the set stays as small as the look-ahead
        body = data["spec"]
        if "podGroups" not in body:
            return False  # a tree or a workload of templates: evolve keeps its structure
        if body.get("resourceClaims") or body.get("resourceClaimTemplates"):
            return False  # device claims: evolve keeps the device state
        if "compositePodGroups" in body:
            return False  # a tree: evolve keeps its CPGs
        columns = self.state.nodes.resources.keys()
        priority = int(data["priority"])
        groups: list[_Group] = []
        for i, g in enumerate(body["podGroups"]):
            if g.get("resourceClaims"):
                return False
            total = 0
            for entry in g["pods"]:
                if entry.get("resourceClaims"):
                    return False
                requests = entry.get("requests")
                if requests and not requests.keys() <= columns:  # `pods` is a column from the start
                    return False  # a new resource column: evolve adds it, in its order
                total += int(entry.get("count", 1))
            policy = g.get("schedulingPolicy") or {"basic": {}}
            gang = "gang" in policy
            groups.append(_Group(g["name"], total, int(policy["gang"]["minCount"]) if gang else 1, gang,
                                 (priority, position, i)))
        self._open(position, key, groups, priority, data["preemptionPolicy"], body)
        return True

    def _submitted_lean(self, position: int, text: str) -> bool:
        try:
            lean = _decode_submitted(text)
        except _LEAN_ERRORS:
            return False
        key = (lean.namespace, lean.name)
        if key not in self.ending or key in self.state.workloads or key in self.excluded:
            return False
        self.ending.discard(key)
        spec = lean.spec
        if spec.resourceClaims or spec.resourceClaimTemplates:
            return False
        columns = self.state.nodes.resources.keys()
        priority = lean.priority
        groups: list[_Group] = []
        for i, g in enumerate(spec.podGroups):
            if g.resourceClaims:
                return False
            total = 0
            for entry in g.pods:
                if entry.resourceClaims:
                    return False
                requests = entry.requests
                if requests and not requests.keys() <= columns:
                    return False
                total += entry.count
            gang_policy = g.schedulingPolicy.gang if g.schedulingPolicy is not None else msgspec.UNSET
            gang = isinstance(gang_policy, _Gang)
            groups.append(_Group(g.name, total, gang_policy.minCount if isinstance(gang_policy, _Gang) else 1, gang,
                                 (priority, position, i)))
        # the spec's own canonical text: the value of the last key ("spec" is the first such key:
        # a quote inside the string values before it is escaped)
        start = text.find(_SPEC_KEY)
        if start < 0 or not text.endswith("}"):
            return False
        self._open(position, key, groups, priority, lean.preemptionPolicy, text[start + 8:-1])
        return True

    def _open(self, position: int, key: tuple[str, str], groups: list[_Group], priority: int, policy: str,
              body: Any) -> None:
        wl = Workload.recorded_only(position)
        self.state.add_workload(key, wl)  # inserted at its submission, as evolve does
        self.open[key] = _Transient(wl, groups, key[0], key[1], priority, policy, body)

    # -- decisions ---------------------------------------------------------------------------
    def _find(self, namespace: str, workload: str, group: str) -> tuple[_Transient, _Group] | None:
        t = self.open.get((namespace, workload))
        if t is None:
            return None
        for g in t.groups:
            if g.name == group:
                return t, g
        raise ReplayError(f"no pod group {group!r} in {namespace}/{workload}")

    def _scheduled(self, position: int, data: dict[str, Any]) -> bool:
        found = self._find(data["namespace"], data["workload"], data["podGroup"])
        if found is None:
            return False
        if data.get("claims"):
            raise ReplayError(f"position {position}: claims allocated to a workload without claims")
        pods = data["pods"]
        self._placed(position, found[0], found[1], len(pods), pods, data.get("explanation"))
        return True

    def _scheduled_lean(self, position: int, text: str) -> bool:
        try:
            lean = _decode_placed(text)
        except _LEAN_ERRORS:
            return False
        t = self.open.get((lean.namespace, lean.workload))  # _find, inlined
        if t is None:
            return False
        name = lean.podGroup
        for g in t.groups:
            if g.name == name:
                break
        else:
            raise ReplayError(f"no pod group {name!r} in {lean.namespace}/{lean.workload}")
        if lean.claims:
            raise ReplayError(f"position {position}: claims allocated to a workload without claims")
        pods: Any = text
        count = text.count(_POD_KEY)
        # the decider records placedPods = pods placed before + these pods, each one a "pod" key;
        # when the count of "pod" keys in the text says otherwise, decode the list
        if lean.placedPods != g.placed + count:
            pods = [{"pod": p.pod, "node": p.node} for p in _decode_pods(text).pods]
            count = len(pods)
        self._placed(position, t, g, count, pods, None if lean.explanation == _NULL else lean.explanation)
        return True

    def _placed(self, position: int, t: _Transient, g: _Group, count: int, pods: Any, explanation: Any) -> None:
        if count:
            if g.nodes is None:
                g.lists.append(pods)
            else:
                g.nodes.update(_pairs(pods))
            self.state.counted_placed(g.running_key, t.priority, count)
            was_scheduled = g.placed >= g.min_count  # scheduled(): min_count is 1 for a basic group
            g.placed += count
        else:
            was_scheduled = g.placed >= g.min_count
        placed_rule(g, was_scheduled, g.placed >= g.min_count, g.min_count, explanation, position)
        satisfied_rule(g, g.placed >= g.min_count, 0, g.min_count, position)
        t.wl.events.append(position)

    def _unschedulable(self, position: int, data: dict[str, Any]) -> bool:
        found = self._find(data["namespace"], data["workload"], data["podGroup"])
        if found is None:
            return False
        t, g = found
        g.explanation = data["explanation"]
        g.needs_explanation = False
        t.wl.events.append(position)
        return True

    def _release(self, t: _Transient, g: _Group, pods: Sequence[str]) -> None:
        """Release placed pods (names, in the order evolve releases them)."""
        nodes = g.pod_nodes()
        released = [node for node in (nodes.pop(p, None) for p in pods) if node is not None]
        self._released(t, g, len(released), released)

    def _released(self, t: _Transient, g: _Group, count: int, nodes: list[str] | None) -> None:
        """What releasing `count` placed pods (from these nodes; None: every placed pod)
        leaves in the shared state."""
        if not count:
            return
        index = self.state.nodes.index
        rows = (index[node] for node in (g.node_names() if nodes is None else nodes))  # read if needed
        self.state.counted_released(g.running_key, t.priority, count, rows)
        g.placed -= count

    def _check_released_claims(self, position: int, data: dict[str, Any]) -> None:
        if data.get("claimsReleased"):
            raise ReplayError(f"position {position}: claims released by a workload without claims")

    def _fold_release(self, position: int, data: dict[str, Any]) -> tuple[Any, Any] | None:
        """A PodGroupPreempted / PodsLost of a transient workload: its pods go, it is pending again."""
        found = self._find(data["namespace"], data["workload"], data["podGroup"])
        if found is None:
            return None
        t, g = found
        self._check_released_claims(position, data)
        self._release(t, g, [p["pod"] for p in data["pods"]])
        g.needs_explanation = True
        satisfied_rule(g, g.placed >= g.min_count, 0, g.min_count, position)
        t.wl.events.append(position)
        return t, g

    def _preempted(self, position: int, data: dict[str, Any]) -> bool:
        found = self._fold_release(position, data)
        if found is None:
            return False
        t, g = found
        pre = data["preemptor"]
        g.conditions["DisruptionTarget"] = disruption_target(pre, position)
        preemptor = self.state.workloads.get((pre["namespace"], pre["workload"]))
        if preemptor is not None and preemptor is not t.wl:
            preemptor.events.append(position)
        return True

    def _lost(self, position: int, data: dict[str, Any]) -> bool:
        return self._fold_release(position, data) is not None

    def _lifecycle(self, position: int, data: dict[str, Any]) -> bool:
        """Finished pods, sizes changed: always folded by evolve (`ahead` keeps their workloads out
        of the fast path)."""
        if (data["namespace"], data["workload"]) in self.open:
            raise ReplayError(f"position {position}: a lifecycle input of a workload folded the fast way")
        return False

    # -- deletion --------------------------------------------------------------------------
    def _deleted(self, position: int, data: dict[str, Any]) -> bool:
        t = self.open.pop((data["namespace"], data["name"]), None)
        if t is None:
            return False
        self._finish(position, t)
        return True

    def _deleted_lean(self, position: int, text: str) -> bool:
        key = self.deleting.pop(position, None)
        if key is None:
            try:
                lean = _decode_deleted(text)
            except _LEAN_ERRORS:
                return False
            key = (lean.namespace, lean.name)
        t = self.open.pop(key, None)
        if t is None:
            return False
        self._finish(position, t)
        return True

    def _finish(self, position: int, t: _Transient) -> None:
        for g in t.groups:
            if g.placed:  # every placed pod goes (evolve: in pod order, which only a set sees)
                self._released(t, g, g.placed, None)
        wl = t.wl
        wl.events.append(position)
        extras = [{"conditions": g.conditions,
                   "explanation": loads(g.explanation) if isinstance(g.explanation, msgspec.Raw) else g.explanation,
                   "needsExplanation": g.needs_explanation, "everScheduled": g.ever_scheduled}
                  for g in t.groups]
        # as Workload.compact() leaves a finished workload (a spec kept as JSON text is the
        # form a snapshot restores; it is parsed on first read)
        wl.finish(position, (t.body, extras, t.namespace, t.name, t.priority, t.policy))


# handlers by event type, from evolve's table (plain functions: a Replay holding bound methods
# would be a reference cycle, keeping a rebuilt state alive until the cyclic GC runs)
_FAST: dict[str, Callable[[Replay, int, dict[str, Any]], bool]] = {  # dict data
    t: getattr(Replay, f.replay) for t, f in FOLDS.items() if f.replay is not None}
_LEAN: dict[str, Callable[[Replay, int, str], bool]] = {  # JSON text of the current schema version
    t: getattr(Replay, f.replay_lean) for t, f in FOLDS.items() if f.replay_lean is not None}


def replay(state: ClusterState, rows: Sequence[Row]) -> ClusterState:
    """Fold `rows` (all of them) into `state` the fast way."""
    r = Replay(state)
    r.ahead(rows)
    r.fold(rows)
    return r.finish()
