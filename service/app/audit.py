"""Audit: replay a stream, re-decide it byte for byte, and tell a workload's story.

Works on event envelopes (dicts, as stored or exported), so the CLI can audit an
export without any database.
"""
from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from service.app import audit_lifecycle, audit_tree
from service.app import verify as vd
from service.domain import ClusterState, Event, evolve, handle
from service.domain.fold.evolve import check_foldable
from service.domain.model import events as ev
from service.domain.model.reasons import preemption_words, render_decision
from service.domain.model.rules import RULES
from service.domain.model.upcasting import upcast
from service.store.base import GENESIS_HASH, chain_hash


def to_domain(envelope: dict[str, Any]) -> Event:
    return Event(envelope["position"], envelope["type"],
                 upcast(envelope["type"], envelope.get("schemaVersion", 1), envelope["data"]))


def read_data(envelope: dict[str, Any]) -> Any:
    """An event's data as people read it: at the current schemaVersion, a decision's messages
    rendered from its codes (an upcast one: its recorded words)."""
    t = envelope["type"]
    data = upcast(t, envelope.get("schemaVersion", 1), envelope["data"])
    return render_decision(t, data) if t in ev.DECISION_TYPES else data


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
    recorded_rules: set[int] = field(default_factory=set)  # of the decisions compared (--verify)
    explanation_diffs: int = 0
    divergence: dict[str, Any] | None = None

    @property
    def verdict(self) -> str:
        return vd.verdict(self.chain_ok, self.first_mismatch is not None, self.recorded_rules)

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
        if self.chain_checked:  # the verdict of replay --verify (audit.md)
            out.update(vd.report(self.verdict, self.recorded_rules, self.explanation_diffs, self.divergence))
        return out


class StreamOrderError(ValueError):
    """A stream with a gap or with events out of order: nothing after that point can be folded."""

    def __init__(self, cluster: str, expected: int, found: int) -> None:
        super().__init__(f"the stream of cluster {cluster!r} has a gap or is out of order: "
                         f"expected position {expected}, found {found}")


class StreamContentError(ValueError):
    """An event this code cannot fold (data it did not write): nothing after it can be folded."""

    def __init__(self, cluster: str, position: int, cause: Exception) -> None:
        super().__init__(f"event {position} of cluster {cluster!r} cannot be folded: "
                         f"{type(cause).__name__}: {cause}")
        self.position = position


def replay(envelopes: Iterable[dict[str, Any]], cluster: str, *, verify: bool = False,
           until: int | None = None, progress: Callable[[int], None] | None = None,
           last: int | None = None) -> ReplayResult:
    """Fold the events; with `verify`, re-decide each input from the recorded inputs only and
    compare every recorded decision (canonical JSON), and check the hash chain. A gap or events
    out of order end a verification there (chain broken at the position expected); without
    `verify` they raise StreamOrderError. An event that cannot be folded ends a verification whose
    chain is already broken; otherwise it raises StreamContentError. `last`: the cluster's recorded
    last position, so that a verification notices a cut tail."""
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
        try:
            expected = _fold(result, to_domain(env), expected, verify)
        except vd.NewerRules:
            if verify and not result.chain_ok:
                result.head = prev_hash
                return result  # the broken chain is the answer
            raise
        except Exception as exc:  # what this code did not write: a record altered, or from elsewhere
            if verify and not result.chain_ok:
                result.head = prev_hash
                return result  # the broken chain is the answer
            raise StreamContentError(cluster, position, exc) from exc
        if progress is not None:
            progress(position)
    if verify and last is not None and expected_position <= (last if until is None else min(last, until)):
        return _broken(result, expected_position, prev_hash)  # the tail is cut: fewer events than recorded
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


def _fold(result: ReplayResult, event: Event, expected: list[Event], verify: bool) -> list[Event]:
    """Fold one event (re-deciding an input with `verify`); the decisions still expected."""
    check_foldable(event)  # an unknown type stops here: neither an input nor a decision of this code
    state = result.state
    if event.type in ev.INPUT_TYPES:
        result.inputs += 1
        if verify and result.first_mismatch is None:
            if expected:
                _mismatch(result, expected[0].position, expected[0], None)
            else:
                return handle(state, event)
        else:
            evolve(state, event)
    else:
        result.decisions += 1
        if verify and result.first_mismatch is None:
            recorded_rules = vd.rules_of(event.data)
            if recorded_rules > RULES:
                raise vd.NewerRules(event.position, recorded_rules)
            result.recorded_rules.add(recorded_rules)
            same = vd.DIVERGED
            if expected and expected[0].position == event.position:
                same = vd.compare(event.type, event.data, expected[0].type, expected[0].data)
            if same == vd.DIVERGED:
                _mismatch(result, event.position, expected[0] if expected else None, event)
            else:
                result.explanation_diffs += same == vd.EXPLANATION
                expected.pop(0)
        else:
            evolve(state, event)
    return expected


def chain_break(envelopes: Iterable[dict[str, Any]], cluster: str | None = None) -> int | None:
    """The first position (of `cluster`'s events, default: every event) where the hash chain is
    broken: missing, out of order, or a hash that does not recompute; None when it holds."""
    prev, expected = GENESIS_HASH, 1
    for env in envelopes:
        if cluster is not None and env.get("cluster") != cluster:
            continue
        body = {k: v for k, v in env.items() if k not in ("hash", "prevHash")}
        if env.get("position") != expected or env.get("prevHash") != prev or chain_hash(prev, body) != env.get("hash"):
            return expected
        prev, expected = env["hash"], expected + 1
    return None


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
    if redecided is not None and redecided.position != position:
        redecided = None  # re-decided at another position: none at this one
    result.divergence = vd.divergence(position, None if recorded is None else (recorded.type, recorded.data),
                                          None if redecided is None else (redecided.type, redecided.data))
    result.mismatch = {
        "recorded": None if recorded is None else {"type": recorded.type, "data": recorded.data},
        "redecided": None if redecided is None else {"type": redecided.type, "data": redecided.data},
    }


def read_jsonl(path: str) -> Iterable[dict[str, Any]]:
    """The envelopes of an export; ValueError naming the line that is not one."""
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if line.strip():
                env = json.loads(line)
                if isinstance(env, dict) and env.get("type") == "ChainCheckpoint" and "data" not in env:
                    continue  # a signed checkpoint (audit.md), not an event
                if not (isinstance(env, dict) and type(env.get("position")) is int
                        and isinstance(env.get("type"), str) and isinstance(env.get("data"), dict)
                        and isinstance(env.get("cluster", ""), str)
                        and type(env.get("schemaVersion", 1)) is int):
                    raise ValueError(f"{path} line {number} is not an event envelope (an object with "
                                     f"integer position and schemaVersion, string type and cluster, object data)")
                yield env


# -- explain -----------------------------------------------------------------------------------
def _n(count: int, word: str) -> str:
    """"1 pod", "2 pods"."""
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _pods(items: list[dict[str, Any]]) -> str:
    by_node: dict[str, list[str]] = {}
    for p in items:
        by_node.setdefault(p.get("node") or "?", []).append(p["pod"])
    return ", ".join(f"{node} ({', '.join(pods)})" for node, pods in sorted(by_node.items()))


class Names:
    """A workload named in words: `ns/name`, and `ns/name (submitted at #N)` when its name has more
    than one incarnation in the record (lifecycle.md, *Names used again*): N is the submission of the
    incarnation live at the position the words are about. `incarnations`: the submission positions of
    each name, ascending."""

    def __init__(self, incarnations: Mapping[tuple[str, str], Sequence[int]] | None = None) -> None:
        self.incarnations = {k: list(v) for k, v in (incarnations or {}).items() if len(v) > 1}

    def __call__(self, namespace: Any, name: Any, at: int) -> str:
        return f"{namespace}/{name}" + (f" (submitted at #{p})" if (p := self.submitted(namespace, name, at)) else "")

    def submitted(self, namespace: Any, name: Any, at: int) -> int | None:
        """The submission of the incarnation live at `at`, when the name has several; else None."""
        positions = self.incarnations.get((namespace, name))
        if not positions:
            return None
        i = bisect.bisect_right(positions, at)
        return positions[i - 1] if i else None

    def before(self, namespace: str, name: str, submitted_at: int) -> int | None:
        """The incarnation of the name submitted before the one submitted at `submitted_at`."""
        positions = self.incarnations.get((namespace, name)) or []
        i = bisect.bisect_left(positions, submitted_at)
        return positions[i - 1] if i else None


def _input_words(env: dict[str, Any] | None, position: int, names: Names | None = None) -> str:
    """What the input at `position` did, in words ("team-a/x was deleted at #22")."""
    at = f"at #{position}"
    if env is None:
        return f"the input {at}"
    who = names or Names()
    t, d = env.get("type"), env.get("data") or {}
    name = d.get("name")
    if t == ev.WORKLOAD_DELETED:
        return f"{who(d.get('namespace'), name, position)} was deleted {at}"
    if t == ev.WORKLOAD_SUBMITTED:
        return f"{d.get('namespace')}/{name} was submitted {at}"
    if t == ev.PODS_FINISHED:
        pods = ", ".join(f"{p.get('pod')} {str(p.get('phase')).lower()} on {p.get('node')}" for p in d.get("pods") or ())
        return f"{who(d.get('namespace'), d.get('workload'), position)} reported {pods} {at}"
    if t == ev.WORKLOAD_SCALED:
        return audit_lifecycle.scaled_input(d, at)
    if t in (ev.POD_GROUP_CREATED, ev.POD_GROUP_DELETED):
        return f"PodGroup {d.get('namespace')}/{name} was {'created' if t == ev.POD_GROUP_CREATED else 'deleted'} {at}"
    if t == ev.NODE_REMOVED:
        return f"node {name} was removed {at}"
    if t == ev.NODE_UPSERTED:
        taints = [f"{x.get('key')}={x.get('value', '')}:{x.get('effect')}" for x in d.get("taints") or ()
                  if x.get("effect") == "NoExecute"]
        if taints:
            return f"node {name} was replaced with taint {', '.join(taints)} {at}"
        return f"node {name} was added or replaced {at}"
    words = {ev.RESOURCE_SLICE_UPSERTED: "resource slice {} was added or replaced",
             ev.RESOURCE_SLICE_REMOVED: "resource slice {} was removed",
             ev.DEVICE_CLASS_UPSERTED: "device class {} was added or replaced",
             ev.DEVICE_CLASS_REMOVED: "device class {} was removed",
             ev.PRIORITY_CLASS_UPSERTED: "priority class {} was set"}
    return f"{words[t].format(name)} {at}" if t in words else f"the {t} {at}"


def _device_lines(explanation: dict[str, Any]) -> list[str]:
    """Why each claim could not be allocated (explanation.devices.claims, docs/dra.md)."""
    lines = []
    for c in (explanation.get("devices") or {}).get("claims") or ():
        who = f"claim {c.get('claim')}" + (f" of pod {c['pod']}" if c.get("pod") else "")
        if c.get("request"):
            who += f", request {c['request']}"
        if c.get("deviceClassName"):
            who += f" (class {c['deviceClassName']})"
        nodes = c.get("nodes")
        line = f"    {who}: {c.get('reason')}" + (f" on {_n(nodes, 'node')}" if isinstance(nodes, int) else "")
        if c.get("needed") is not None:
            line += f", needs {c['needed']}"
        if c.get("available") is not None:
            line += f", at most {c['available']} free"
        if c.get("reachable") is not None:
            line += f" of {c['reachable']} reachable on one node"
        for k in c.get("constraints") or ():
            line += f"; matchAttribute {k.get('matchAttribute')} over {', '.join(k.get('requests') or ())}"
        lines.append(line + ".")
    return lines


def _claim_lines(claims: list[dict[str, Any]]) -> list[str]:
    lines = []
    for c in claims:
        devs = ", ".join(f"{x['driver']}/{x['pool']}/{x['device']}" for x in c.get("devices", []))
        of = f" of pod {c['pod']}" if c.get("pod") else ""
        lines.append(f"    claim {c['name']}{of} ({c.get('sharing')}): {devs}")
    return lines


def _released(d: dict[str, Any]) -> str:
    claims = d.get("claimsReleased") or []
    if not claims:
        return ""
    names = ", ".join(c["name"] + (f" of {c['pod']}" if c.get("pod") else "") for c in claims)
    return f" Released {'claim' if len(claims) == 1 else 'claims'} {names}."


@dataclass
class _Group:
    """A group as its history leaves it: placed pods and the last wait reason."""
    min_count: int
    size: int
    pods: dict[str, str] = field(default_factory=dict)  # pod -> node
    waiting: str | None = None
    succeeded: int = 0  # pods reported Succeeded: they count for the gang (lifecycle.md)


def _submitted(d: dict[str, Any], when: str, namespace: str, name: str, who: Names, pos: int) -> str:
    """A flat workload's submission (of pod groups, or of templates) in words."""
    specs = d["spec"].get("podGroups") or d["spec"].get("podGroupTemplates") or []
    what = "pod group template" if "podGroupTemplates" in d["spec"] else "pod group"
    return (f"{when} Submitted {namespace}/{name} with priority {d['priority']} "
            f"({d['preemptionPolicy']}), {_n(len(specs), what)}"
            + (": " + ", ".join(_group_summary(g) for g in specs) if specs else "") + "."
            + _again(who, namespace, name, pos))


def explain(namespace: str, name: str, history: list[dict[str, Any]],
            causes: dict[int, dict[str, Any]] | None = None, names: Names | None = None) -> list[str]:
    """The workload's history in words, like `kubectl describe` events, with what caused each
    decision (`causes`: the inputs at the decisions' causationPosition, by position; those in the
    history are found there) and a closing line with the state the history leaves. `names` tells
    the incarnations of a name used again apart."""
    me = (namespace, name)
    who = names or Names()
    inputs = {e["position"]: e for e in history if e["type"] in ev.INPUT_TYPES} | (causes or {})
    lines: list[str] = []
    groups: dict[str, _Group] = {}
    submitted_at, deleted_at, tree = None, None, False
    for env in history:
        t, d, pos = env["type"], read_data(env), env["position"]
        when = f"{env.get('recordedAt', '?')} [#{pos}]"
        cause_at = (env.get("metadata") or {}).get("causationPosition")
        cause = None if cause_at in (None, submitted_at) else _input_words(inputs.get(cause_at), cause_at, who)
        ref = (d.get("namespace"), d.get("workload"))
        group = d.get("podGroup")
        if t == ev.WORKLOAD_SUBMITTED and "compositePodGroups" in d["spec"]:
            submitted_at, tree = pos, True
            lines.append(audit_tree.submitted(d, when, namespace, name))
        elif t == ev.COMPOSITE_POD_GROUP_SCHEDULED:
            lines += audit_tree.scheduled(d, when)
        elif t == ev.COMPOSITE_POD_GROUP_UNSCHEDULABLE:
            lines += audit_tree.unschedulable(d, when)
        elif t == ev.WORKLOAD_SUBMITTED:
            submitted_at = pos
            groups = {g["name"]: _Group(_min_count(g), _size(g)) for g in d["spec"].get("podGroups") or ()}
            lines.append(_submitted(d, when, namespace, name, who, pos))
        elif t == ev.POD_GROUP_UNSCHEDULABLE:
            x = d["explanation"]
            msg = x["message"]
            if x.get("preemption"):
                msg += f" Preemption: {x['preemption']} ({preemption_words(x['preemption'])})."
            lines.append(f"{when} Group {group} waiting: {_n(x['placeablePods'], 'pod')} placeable, "
                         f"needs {x['minCount']}. {msg}")
            lines.extend(_device_lines(x))
            if group in groups:
                groups[group].waiting = x["message"]
        elif t in (ev.POD_GROUP_SCHEDULED, ev.PODS_SCHEDULED):
            lines.extend(_scheduled(when, t, d, cause, who, pos))
            if group in groups:
                groups[group].pods.update((p["pod"], p.get("node") or "?") for p in d["pods"])
                groups[group].waiting = d["explanation"]["message"] if d.get("explanation") else None
        elif t == ev.POD_GROUP_PREEMPTED:
            p = d["preemptor"]
            if ref == me:
                why = f", when {cause}" if cause else ""
                lines.append(f"{when} Group {group} preempted by {who(p['namespace'], p['workload'], pos)} group "
                             f"{p['podGroup']} (priority {p['priority']} > {d['priority']}){why}: evicted "
                             f"{_pods(d['pods'])}{' — the whole group' if d['wholeGroup'] else ''}. "
                             f"Chosen because: {d['message']}; lower priorities and less important units "
                             f"go first, and the fewest that make room.{_released(d)}")
                _unplace(groups.get(group), d["pods"])
            else:
                lines.append(f"{when} As preemptor, evicted {who(d['namespace'], d['workload'], pos)} group "
                             f"{group} (priority {d['priority']}): {_pods(d['pods'])}.")
        elif t == ev.PODS_LOST:
            with_cpg = f" (with composite pod group {d['compositePodGroup']})" if d.get("compositePodGroup") else ""
            lines.append(f"{when} Group {group} lost {_n(len(d['pods']), 'pod')}, {_pods(d['pods'])}, "
                         f"because {cause if cause_at in inputs else _loss_words(d)}"
                         f"{'; the whole group went back to the queue' if d['wholeGroup'] else ''}{with_cpg}."
                         f"{_released(d)}")
            _unplace(groups.get(group), d["pods"])
        elif t == ev.PODS_FINISHED:
            lines.extend(_finished(when, d, groups))
        elif t == ev.WORKLOAD_SCALED:
            lines.extend(audit_lifecycle.scaled(when, d, groups, _Group))  # type: ignore[arg-type]
        elif t in (ev.POD_GROUP_CREATED, ev.POD_GROUP_DELETED):
            lines.append(audit_lifecycle.podgroup(when, t, d, groups, _Group))  # type: ignore[arg-type]
        elif t == ev.WORKLOAD_DELETED:
            deleted_at = pos
            lines.append(f"{when} Finished: deleted; all its pods and claims were released.")
        elif t == ev.COMMAND_REJECTED:
            lines.append(f"{when} A {d['command']} command was rejected: {d['message']}.")
    if history and not tree:  # a tree's state is its status.compositePodGroups
        lines.append(_now(groups, deleted_at))
    return lines


def _again(who: Names, namespace: str, name: str, submitted_at: int) -> str:
    """On a name used again: which incarnation this is, and the one before."""
    before = who.before(namespace, name, submitted_at)
    return "" if before is None else f" A new incarnation of the name: the one before was submitted at #{before}."


def _scheduled(when: str, t: str, d: dict[str, Any], cause: str | None, who: Names | None = None,
               pos: int = 0) -> list[str]:
    who = who or Names()
    verb = "Scheduled" if t == ev.POD_GROUP_SCHEDULED else "Placed more pods of"
    after = f", after {cause}" if cause else ""
    where = f" in {d['domain']['key']}={d['domain']['value']}" if d.get("domain") else ""
    lines = [f"{when} {verb} group {d.get('podGroup')}{after}: {_n(len(d['pods']), 'pod')}{where} on "
             f"{_pods(d['pods'])}; {d['placedPods']} placed (minCount {d['minCount']})."]
    lines.extend(_claim_lines(d.get("claims") or []))
    pre = d.get("preemption")
    if pre:
        for v in pre["victims"]:
            lines.append(f"    preempted {who(v['namespace'], v['workload'], pos)} group {v['podGroup']} "
                         f"(priority {v['priority']}): {_n(len(v['pods']), 'pod')}"
                         f"{', the whole group' if v['wholeGroup'] else ''} — {v['message']}.")
        for r in pre["reprieved"]:
            lines.append(f"    spared {who(r['namespace'], r['workload'], pos)} group {r['podGroup']} "
                         f"(priority {r['priority']}): {r['message']}.")
    if d.get("explanation"):
        lines.append(f"    still waiting: {d['explanation']['message']}")
        lines.extend(_device_lines(d["explanation"]))
    return lines


def _loss_words(d: dict[str, Any]) -> str:
    if d.get("reason") == "TaintedNoExecute":
        return f"node {d.get('node')} was tainted NoExecute"
    return f"node {d['node']} was removed" if d.get("node") else "their devices went away"


def _finished(when: str, d: dict[str, Any], groups: dict[str, _Group]) -> list[str]:
    """PodsFinished (lifecycle.md): each pod, its phase and where it ran."""
    pos = when.rsplit("#", 1)[-1].rstrip("]")
    lines = []
    for p in d["pods"]:
        lines.append(f"{when} Group {p['podGroup']}: {p['pod']} {p['phase'].lower()} on {p['node']} "
                     f"at position {pos} (reported by the controller; it left its node).")
        group = groups.get(p["podGroup"])
        if group is not None:
            group.pods.pop(p["pod"], None)
            group.succeeded += p["phase"] == "Succeeded"
    return lines


def _unplace(group: _Group | None, pods: list[dict[str, Any]]) -> None:
    if group is not None:
        for p in pods:
            group.pods.pop(p["pod"], None)


def _now(groups: dict[str, _Group], deleted_at: int | None) -> str:
    """The closing line: the workload's phase and each group's placed pods, as the history leaves them."""
    if deleted_at is not None:
        return f"Now: Finished (deleted at #{deleted_at})."
    parts, scheduled = [], True
    for name, g in groups.items():
        placed = len(g.pods)
        scheduled = scheduled and placed + g.succeeded >= g.min_count
        part = f"group {name}: {placed} of {_n(g.size, 'pod')} placed (minCount {g.min_count})"
        if g.succeeded:
            part += f", {g.succeeded} succeeded"
        if g.pods:
            part += " on " + _pods([{"pod": p, "node": n} for p, n in g.pods.items()])
        if g.waiting:
            part += f", waiting: {g.waiting.rstrip('.')}"
        parts.append(part)
    return f"Now: {'Scheduled' if scheduled else 'Pending'} — " + "; ".join(parts) + "."


def _min_count(g: dict[str, Any]) -> int:
    """Pods placed for the group to count as scheduled: a gang's minCount, a basic group's one."""
    policy = g.get("schedulingPolicy") or {"basic": {}}
    return int(policy["gang"]["minCount"]) if "gang" in policy else 1


def _size(g: dict[str, Any]) -> int:
    return sum(int(p.get("count", 1)) for p in g["pods"])


def _group_summary(g: dict[str, Any]) -> str:
    pods = _size(g)
    policy = g.get("schedulingPolicy") or {"basic": {}}
    rule = f"gang minCount {policy['gang']['minCount']}" if "gang" in policy else "basic"
    topo = f", topology {g['topology']['key']}" if g.get("topology") else ""
    return f"{g['name']} ({_n(pods, 'pod')}, {rule}{topo})"


def causation_positions(history: list[dict[str, Any]]) -> list[int]:
    """The inputs that caused the history's decisions and are not in it (explain's `causes`)."""
    inside = {e["position"] for e in history}
    wanted = {(e.get("metadata") or {}).get("causationPosition") for e in history}
    return sorted(p for p in wanted if isinstance(p, int) and p not in inside)
