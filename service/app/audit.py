"""Audit: replay a stream, re-decide it byte for byte, and tell a workload's story.

Works on event envelopes (dicts, as stored or exported), so the CLI can audit an
export without any database.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from service.domain import ClusterState, Event, evolve, handle
from service.domain import events as ev
from service.domain.upcasting import upcast
from service.store.base import GENESIS_HASH, canonical_json, chain_hash


def to_domain(envelope: dict[str, Any]) -> Event:
    return Event(envelope["position"], envelope["type"],
                 upcast(envelope["type"], envelope.get("schemaVersion", 1), envelope["data"]))


def _decision_bytes(event: Event) -> str:
    return canonical_json({"position": event.position, "type": event.type, "data": event.data})


@dataclass
class ReplayResult:
    state: ClusterState
    events: int = 0
    inputs: int = 0
    decisions: int = 0
    chain_ok: bool = True
    chain_checked: bool = False  # chain_ok means something only when the chain was recomputed (--verify)
    first_bad_hash: int | None = None
    head: str = GENESIS_HASH
    first_mismatch: int | None = None
    mismatch: dict[str, Any] | None = None
    by_type: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.chain_ok and self.first_mismatch is None

    def summary(self) -> dict[str, Any]:
        state = self.state
        placed = sum(g.placed for wl in state.workloads.values() if wl.deleted_at is None for g in wl.groups)
        out: dict[str, Any] = {
            "cluster": state.cluster, "position": state.position, "events": self.events,
            "inputs": self.inputs, "decisions": self.decisions, "eventsByType": dict(sorted(self.by_type.items())),
            "nodes": len(state.nodes.live_indices()),
            "workloads": len(state.workloads),
            "activeWorkloads": sum(1 for wl in state.workloads.values() if wl.deleted_at is None),
            "pendingGroups": len(state.queue), "placedPods": placed,
            # without --verify the chain is not recomputed: say so (null) rather than claim it is intact;
            # `head` is then the hash recorded on the last event folded, as read
            "chainOk": self.chain_ok if self.chain_checked else None, "head": self.head,
        }
        if self.first_bad_hash is not None:
            out["firstBadPosition"] = self.first_bad_hash
        if self.first_mismatch is not None:
            out["firstMismatch"] = self.first_mismatch
            out["mismatch"] = self.mismatch
        return out


class StreamOrderError(ValueError):
    """A stream with a gap or with events out of order: nothing after that point can be folded."""

    def __init__(self, cluster: str, expected: int, found: int) -> None:
        super().__init__(f"the stream of cluster {cluster!r} has a gap or is out of order: "
                         f"expected position {expected}, found {found}")


def replay(envelopes: Iterable[dict[str, Any]], cluster: str, *, verify: bool = False,
           until: int | None = None, progress: Callable[[int], None] | None = None) -> ReplayResult:
    """Fold the events; with `verify`, re-decide each input from the recorded inputs only and
    compare every recorded decision (canonical JSON), and check the hash chain. A gap or events
    out of order end a verification there (chain broken at the position expected); without
    `verify` they raise StreamOrderError."""
    if verify and until is not None:
        envelopes = list(envelopes)  # may be folded a second time (below)
    result = ReplayResult(ClusterState(cluster), chain_checked=verify)
    state = result.state
    prev_hash = GENESIS_HASH
    last_hash = GENESIS_HASH
    expected: list[Event] = []  # decisions re-decided for the current input, not yet matched
    expected_position = 1
    for env in envelopes:
        position = env["position"]
        if until is not None and position > until and expected_position > until:
            break
        if position != expected_position:
            # the decider (and evolve) take the inputs in order only: nothing after this can be checked
            if not verify:
                raise StreamOrderError(cluster, expected_position, position)
            return _broken(result, expected_position, prev_hash)
        result.events += 1
        result.by_type[env["type"]] = result.by_type.get(env["type"], 0) + 1
        if verify and result.chain_ok:
            body = {k: v for k, v in env.items() if k not in ("hash", "prevHash")}
            if env.get("prevHash") != prev_hash or chain_hash(prev_hash, body) != env.get("hash"):
                result.chain_ok = False
                result.first_bad_hash = position
            prev_hash = env.get("hash", "")
        expected_position = position + 1
        last_hash = env.get("hash", last_hash)
        event = to_domain(env)
        if event.type in ev.INPUT_TYPES:
            result.inputs += 1
            if verify and result.first_mismatch is None:
                if expected:
                    _mismatch(result, expected[0].position, expected[0], None)
                else:
                    expected = handle(state, event)
            else:
                evolve(state, event)
        else:
            result.decisions += 1
            if verify and result.first_mismatch is None:
                if not expected or _decision_bytes(expected[0]) != _decision_bytes(event):
                    _mismatch(result, position, expected[0] if expected else None, event)
                else:
                    expected.pop(0)
            else:
                evolve(state, event)
        if progress is not None:
            progress(position)
    if until is not None and expected and expected[0].position > until:
        # the last input's decisions that fall after --until are outside the range checked
        expected = [e for e in expected if e.position <= until]
    if verify and result.first_mismatch is None and expected:
        _mismatch(result, expected[0].position, expected[0], None)
    if verify and until is not None and state.position > until:
        # re-deciding the input at --until folded its decisions too: the state "as it stood after
        # event N" is the one between them (as /state?at=N shows), so fold the recorded events again
        result.state = replay(envelopes, cluster, until=until).state
    result.head = prev_hash if verify else last_hash
    return result


def _broken(result: ReplayResult, position: int, head: str) -> ReplayResult:
    """Verification ends at `position`, missing or with another found there; the decisions still
    expected are not reported: they may well be recorded, further on."""
    if result.chain_ok:
        result.chain_ok = False
        result.first_bad_hash = position
    result.head = head
    return result


def _mismatch(result: ReplayResult, position: int, redecided: Event | None, recorded: Event | None) -> None:
    result.first_mismatch = position
    result.mismatch = {
        "recorded": None if recorded is None else {"type": recorded.type, "data": recorded.data},
        "redecided": None if redecided is None else {"type": redecided.type, "data": redecided.data},
    }


def read_jsonl(path: str) -> Iterable[dict[str, Any]]:
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


# -- explain -----------------------------------------------------------------------------------
def _pods(items: list[dict[str, Any]]) -> str:
    by_node: dict[str, list[str]] = {}
    for p in items:
        by_node.setdefault(p.get("node") or "?", []).append(p["pod"])
    return ", ".join(f"{node} ({', '.join(pods)})" for node, pods in sorted(by_node.items()))


def explain(namespace: str, name: str, history: list[dict[str, Any]]) -> list[str]:
    """The workload's history in words, like `kubectl describe` events."""
    me = (namespace, name)
    lines: list[str] = []
    last_wait: dict[str, str] = {}
    for env in history:
        t, d, pos = env["type"], env["data"], env["position"]
        when = f"{env.get('recordedAt', '?')} [#{pos}]"
        ref = (d.get("namespace"), d.get("workload"))
        group = d.get("podGroup")
        if t == ev.WORKLOAD_SUBMITTED:
            groups = d["spec"]["podGroups"]
            lines.append(f"{when} Submitted {namespace}/{name} with priority {d['priority']} "
                         f"({d['preemptionPolicy']}), {len(groups)} pod group(s): "
                         + ", ".join(_group_summary(g) for g in groups) + ".")
        elif t == ev.POD_GROUP_UNSCHEDULABLE:
            x = d["explanation"]
            msg = x["message"]
            if x.get("preemption"):
                msg += f" Preemption: {x['preemption']}."
            lines.append(f"{when} Group {group} waiting: {x['placeablePods']} pod(s) placeable, "
                         f"needs {x['minCount']}. {msg}")
            last_wait[group] = msg
        elif t in (ev.POD_GROUP_SCHEDULED, ev.PODS_SCHEDULED):
            verb = "Scheduled" if t == ev.POD_GROUP_SCHEDULED else "Placed more pods of"
            where = f" in {d['domain']['key']}={d['domain']['value']}" if d.get("domain") else ""
            lines.append(f"{when} {verb} group {group}: {len(d['pods'])} pod(s){where} on "
                         f"{_pods(d['pods'])}; {d['placedPods']} placed (minCount {d['minCount']}).")
            for c in d.get("claims") or []:
                devs = ", ".join(f"{x['driver']}/{x['pool']}/{x['device']}" for x in c.get("devices", []))
                lines.append(f"    claim {c['name']} ({c.get('sharing')}): {devs}")
            pre = d.get("preemption")
            if pre:
                for v in pre["victims"]:
                    lines.append(f"    preempted {v['namespace']}/{v['workload']} group {v['podGroup']} "
                                 f"(priority {v['priority']}): {len(v['pods'])} pod(s), "
                                 f"{'whole group' if v['wholeGroup'] else 'single pods'} — {v['why']}.")
                for r in pre["reprieved"]:
                    lines.append(f"    spared {r['namespace']}/{r['workload']} group {r['podGroup']} "
                                 f"(priority {r['priority']}): {r['why']}.")
            if d.get("explanation"):
                lines.append(f"    still waiting: {d['explanation']['message']}")
        elif t == ev.POD_GROUP_PREEMPTED:
            p = d["preemptor"]
            if ref == me:
                lines.append(f"{when} Group {group} preempted by {p['namespace']}/{p['workload']} group "
                             f"{p['podGroup']} (priority {p['priority']} > {d['priority']}): evicted "
                             f"{_pods(d['pods'])}{' — the whole group' if d['wholeGroup'] else ''}. "
                             f"Chosen because: {d['reason']}; lower priorities and less important units "
                             f"go first, and the fewest that make room.")
            else:
                lines.append(f"{when} As preemptor, evicted {d['namespace']}/{d['workload']} group "
                             f"{group} (priority {d['priority']}): {_pods(d['pods'])}.")
        elif t == ev.PODS_LOST:
            cause = f"node {d['node']} was removed" if d.get("node") else "their devices went away"
            lines.append(f"{when} Group {group} lost {_pods(d['pods'])} because {cause}"
                         f"{'; the whole group went back to the queue' if d['wholeGroup'] else ''}.")
        elif t == ev.WORKLOAD_DELETED:
            lines.append(f"{when} Finished: deleted; all its pods and claims were released.")
        elif t == ev.COMMAND_REJECTED:
            lines.append(f"{when} A {d['command']} command was rejected: {d['message']}.")
    return lines


def _group_summary(g: dict[str, Any]) -> str:
    pods = sum(int(p.get("count", 1)) for p in g["pods"])
    policy = g.get("schedulingPolicy") or {"basic": {}}
    rule = f"gang minCount {policy['gang']['minCount']}" if "gang" in policy else "basic"
    topo = f", topology {g['topology']['key']}" if g.get("topology") else ""
    return f"{g['name']} ({pods} pods, {rule}{topo})"
