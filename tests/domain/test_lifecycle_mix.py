"""Hypothesis properties of a job's life (lifecycle.md) over streams that mix the features: finished
pods, scales (pod entries, minCount, stamped tree copies), PodGroup objects created and deleted, trees,
shared devices, node loss and preemption. Each property counts the cases it exercised and asserts them.

- shrinking removes the highest indices of an entry first;
- no finished pod is ever placed, evicted or lost;
- (streams where only the decider can unsatisfy a gang) a gang with pods Running has Running +
  Succeeded >= minCount after every pass;
- replay equals the live state (the plain fold and the fast one), and the same inputs give the same bytes.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.domain import ClusterState, Event, Rejection, accept, evolve
from service.domain.model import events as ev
from service.domain.read.views import canonical
from tests.domain.sim import Sim
from tests.domain.test_replay import check_same
from tests.domain.test_scale import assert_consistent

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
GPU = "gpu.example.com"
_INDEX = re.compile(r"^(?P<entry>.+)-(?P<k>\d+)$")


def _setup(s: Sim, data: st.DataObject) -> None:
    for i in range(data.draw(st.integers(2, 4))):
        s.node(f"n{i}", labels={"rack": f"r{i % 2}"}, cpu=str(data.draw(st.integers(2, 6))))
    if data.draw(st.booleans()):
        s.run("UpsertDeviceClass", "gpu", body={"selectors": [{"cel": {"expression": f"device.driver == '{GPU}'"}}]})
        for n in ("n0", "n1"):
            s.run("UpsertResourceSlice", f"{n}-gpus", body={"driver": GPU, "pool": {"name": n}, "nodeName": n,
                                                           "devices": [{"name": f"g{i}"} for i in range(2)]})


_TEMPLATE = [{"name": "gpu", "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu"}}]}}}]


def _flat(data: st.DataObject, name: str) -> dict[str, Any]:
    shared = data.draw(st.booleans())
    entries = [{"name": f"e{j}", "count": data.draw(st.integers(1, 3)), "requests": {"cpu": "1"}}
               for j in range(data.draw(st.integers(1, 2)))]
    if shared:
        entries[0]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "gpu"}]
    total = sum(e["count"] for e in entries)
    policy = {"gang": {"minCount": data.draw(st.integers(1, total))}} if data.draw(st.booleans()) else {"basic": {}}
    body: dict[str, Any] = {"name": name, "priority": data.draw(st.sampled_from([1, 5, 10])),
                            "podGroups": [{"name": "g", "schedulingPolicy": policy, "pods": entries}]}
    if shared:  # one claim for the workload, shared by its pods (shared devices)
        body["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "gpu"}]
        body["resourceClaimTemplates"] = _TEMPLATE
    return body


def _tree(data: st.DataObject, name: str) -> dict[str, Any]:
    return {"name": name, "priority": data.draw(st.sampled_from([1, 5, 10])), "compositePodGroups": [
        {"name": "r", "count": data.draw(st.integers(1, 2)), "schedulingPolicy": {"gang": {"minGroupCount": 2}},
         "topology": {"key": "rack"} if data.draw(st.booleans()) else None,
         "podGroups": [{"name": "lead", "schedulingPolicy": {"gang": {"minCount": 1}},
                        "pods": [{"name": "l", "requests": {"cpu": "1"}}]},
                       {"name": "w", "schedulingPolicy": {"gang": {"minCount": 1}},
                        "pods": [{"name": "w", "count": data.draw(st.integers(1, 2)), "requests": {"cpu": "1"}}]}]}]}


def _templates(data: st.DataObject, name: str) -> dict[str, Any]:
    return {"name": name, "priority": data.draw(st.sampled_from([1, 5, 10])), "podGroupTemplates": [
        {"name": "t", "schedulingPolicy": {"gang": {"minCount": data.draw(st.integers(1, 2))}},
         "pods": [{"name": "p", "count": 2, "requests": {"cpu": "1"}}]}]}


def _clean(body: dict[str, Any]) -> dict[str, Any]:
    for root in body.get("compositePodGroups") or ():
        if root.get("topology") is None:
            root.pop("topology", None)
    return body


def _try(s: Sim, kind: str, name: str, body: dict[str, Any] | None, seen: Counter[str]) -> bool:
    got = accept(s.state, kind, name, "default", body)
    if isinstance(got, Rejection):
        seen[f"refused {got.reason}"] += 1
        return False
    s.run(kind, name, "default", body)
    s.__dict__.setdefault("commands", []).append((kind, name, body))
    return True


def _live(s: Sim) -> list[Any]:
    return [wl for wl in s.state.workloads.values() if wl.deleted_at is None]


def _op(s: Sim, data: st.DataObject, seen: Counter[str], strict: bool, n: int) -> None:
    kind = data.draw(st.sampled_from(["scale", "finish", "submit", "podgroup", "scale", "finish", "submit",
                                      "unpodgroup", "delete", "remove", "node"]))
    live = _live(s)
    if kind == "submit":
        make = data.draw(st.sampled_from([_tree, _flat, _templates, _flat]))
        _try(s, "SubmitWorkload", f"w{n}", _clean(make(data, f"w{n}")), seen)
    elif kind == "finish" and live:
        wl = data.draw(st.sampled_from(live))
        running = [(g.spec.name, g.spec.pod_names[p]) for g in wl.groups for p, r in enumerate(g.node_of) if r >= 0]
        if running:
            group, pod = data.draw(st.sampled_from(running))
            phase = "Succeeded" if strict else data.draw(st.sampled_from(["Succeeded", "Failed"]))
            if _try(s, "FinishPods", wl.spec.name, {"pods": [{"podGroup": group, "name": pod, "phase": phase}]}, seen):
                seen["finished"] += 1
    elif kind == "scale" and live:
        _scale(s, data, data.draw(st.sampled_from(live)), seen, strict)
    elif kind == "podgroup":
        owners = [wl for wl in live if "podGroupTemplates" in wl.body]
        if owners:
            wl = data.draw(st.sampled_from(owners))
            body = {"name": f"pg{n}", "workloadRef": {"workloadName": wl.spec.name, "templateName": "t"},
                    "priority": data.draw(st.sampled_from([1, 5, 10]))}
            if _try(s, "CreatePodGroup", f"pg{n}", body, seen):
                seen["podgroup created"] += 1
    elif kind == "unpodgroup":
        pgs = [name for (_, name), pg in sorted(s.state.podgroups.items()) if pg.deleted_at is None]
        if pgs and _try(s, "DeletePodGroup", data.draw(st.sampled_from(pgs)), None, seen):
            seen["podgroup deleted"] += 1
    elif kind == "delete" and live:
        _try(s, "DeleteWorkload", data.draw(st.sampled_from(live)).spec.name, None, seen)
    elif kind == "remove":
        alive = [n for n, r in sorted(s.state.nodes.index.items()) if s.state.nodes.alive[r]]
        if len(alive) > 1:
            s.remove_node(data.draw(st.sampled_from(alive)))
    elif kind == "node":
        s.node(f"n{data.draw(st.integers(0, 5))}", labels={"rack": f"r{data.draw(st.integers(0, 1))}"},
               cpu=str(data.draw(st.integers(2, 6))))


def _scale(s: Sim, data: st.DataObject, wl: Any, seen: Counter[str], strict: bool) -> None:
    count = data.draw(st.integers(1, 4))
    if wl.composites:
        body: dict[str, Any] = {"compositePodGroups": [{"name": "r", "count": data.draw(st.integers(1, 3))}]}
        if not data.draw(st.booleans()):
            body = {"compositePodGroups": [{"name": "r", "podGroups": [{"name": "w", "pods": [
                {"name": "w", "count": count}]}]}]}
    else:
        groups = wl.groups
        if not groups:
            return
        g = data.draw(st.sampled_from(groups))
        spec = g.workload.body["podGroups"][0]
        entry = data.draw(st.sampled_from(spec["pods"]))
        group: dict[str, Any] = {"name": g.spec.name, "pods": [{"name": entry["name"], "count": count}]}
        if g.spec.gang and data.draw(st.booleans()):
            total = g.total - int(entry.get("count", 1)) + count
            mc = data.draw(st.integers(1, max(1, total)))
            group["schedulingPolicy"] = {"gang": {"minCount": min(mc, g.spec.min_count) if strict else mc}}
        body = {"podGroups": [group]}
    if _try(s, "ScaleWorkload", wl.spec.name, body, seen):
        data_ = s.events[-1 - len(s.last)].data
        if any(p["node"] for r in data_["podGroups"] for p in r["removedPods"]):
            seen["scale removed running pods"] += 1
        if any(r["addedPods"] for r in data_["podGroups"]):
            seen["scale added pods"] += 1
        if data_["compositePodGroups"]:
            seen["scale changed a tree"] += 1


def _check(s: Sim, strict: bool, seen: Counter[str]) -> None:
    """Fold the stream again, checking each event against the state just before it."""
    state = ClusterState(s.state.cluster)
    inputs = [e.position for e in s.events if e.is_input]
    for e in s.events:
        data = json.loads(json.dumps(e.data))
        if e.type in (ev.POD_GROUP_SCHEDULED, ev.PODS_SCHEDULED, ev.POD_GROUP_PREEMPTED, ev.PODS_LOST):
            g = state.group(data["namespace"], data["workload"], data["podGroup"])
            want = "Pending" if e.type in (ev.POD_GROUP_SCHEDULED, ev.PODS_SCHEDULED) else "Running"
            for p in data["pods"]:
                assert g.phase_of(g.pod_index(p["pod"])) == want, f"{e.type} of a finished or wrong pod {p['pod']}"
            if e.type != want and g.workload.owner is not None:
                seen["a PodGroup object evicted or lost"] += 1
        if e.type == ev.WORKLOAD_SCALED:
            _highest_first(state, data, seen)
        evolve(state, Event(e.position, e.type, data))
        if e.type == ev.COMPOSITE_POD_GROUP_SCHEDULED:
            for entry in data["groups"]:
                g = state.group(data["namespace"], data["workload"], entry["podGroup"])
                assert g.succeeded + g.failed + g.placed <= g.total
        if strict and (e.position + 1 in inputs or e is s.events[-1]):
            for wl in state.workloads.values():
                for g in wl.groups:
                    if g.spec.gang and g.placed:
                        assert g.placed + g.succeeded >= g.spec.min_count, f"{g.spec.name} below minCount"
                        seen["gang checked"] += 1


def _highest_first(state: ClusterState, data: dict[str, Any], seen: Counter[str]) -> None:
    """The pods a change removes from a group it keeps are the highest indices of their entries."""
    wl = state.workloads[(data["namespace"], data["workload"])]
    for record in data["podGroups"]:
        if record["change"] != "Updated" or not record["removedPods"]:
            continue
        g = next(x for x in wl.groups if x.spec.name == record["podGroup"])
        removed = {p["pod"] for p in record["removedPods"]}
        kept: dict[str, int] = {}
        for name in g.spec.pod_names:
            m = _INDEX.match(name)
            if m and name not in removed:
                kept[m["entry"]] = max(kept.get(m["entry"], -1), int(m["k"]))
        for name in removed:
            m = _INDEX.match(name)
            assert m and int(m["k"]) > kept.get(m["entry"], -1), f"{name} removed before a higher index"
            assert g.phase_of(g.pod_index(name)) in ("Pending", "Running"), f"a finished pod {name} removed"
        seen["highest indices checked"] += 1


def _play(data: st.DataObject, strict: bool, seen: Counter[str]) -> Sim:
    s = Sim()
    _setup(s, data)
    for n, make in enumerate((_tree, _flat, _templates)):  # every kind of workload in every stream
        _try(s, "SubmitWorkload", f"k{n}", _clean(make(data, f"k{n}")), seen)
    for n in range(data.draw(st.integers(10, 24))):
        _op(s, data, seen, strict, n)
        assert_consistent(s.state)
    return s


def test_mixed_streams_keep_every_rule_and_replay():
    seen: Counter[str] = Counter()

    @SETTINGS
    @given(st.data())
    def prop(data: st.DataObject) -> None:
        s = _play(data, False, seen)
        _check(s, False, seen)
        s.assert_replay_equal()
        check_same(s, data)  # the fast fold too

    prop()
    for case in ("finished", "scale removed running pods", "scale added pods", "scale changed a tree",
                 "podgroup created", "podgroup deleted", "highest indices checked"):
        assert seen[case] > 0, (case, seen)


def test_the_decider_never_leaves_a_gang_below_min_count_with_pods_running():
    seen: Counter[str] = Counter()

    @SETTINGS
    @given(st.data())
    def prop(data: st.DataObject) -> None:
        _check(_play(data, True, seen), True, seen)

    prop()
    assert seen["gang checked"] > 0 and seen["finished"] > 0 and seen["scale removed running pods"] > 0, seen


def test_same_inputs_same_bytes():
    @settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def prop(data: st.DataObject) -> None:
        a = _play(data, False, Counter())
        b = Sim()
        _setup_again(a, b)
        assert [(e.position, e.type, json.dumps(e.data, sort_keys=True)) for e in a.events] == \
            [(e.position, e.type, json.dumps(e.data, sort_keys=True)) for e in b.events]
        assert canonical(a.state) == canonical(b.state)

    prop()


def _setup_again(a: Sim, b: Sim) -> None:
    """Decide a's inputs again on b, in order."""
    for e in [e for e in a.events if e.is_input]:
        decisions = b.state and __import__("service.domain", fromlist=["handle"]).handle(
            b.state, Event(e.position, e.type, json.loads(json.dumps(e.data))))
        b.events += [Event(e.position, e.type, e.data), *decisions]
