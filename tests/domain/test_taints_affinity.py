"""Taints, tolerations and node affinity in the decider (model.md *Nodes*, *Placing a group*, *Node
affinity and tolerations*, *Explanations*): one example per rule, and properties over random
streams (no pod placed on a node whose taint it does not tolerate or whose required affinity it
fails; NoExecute never leaves a pod on a node; replay equals live state; skipping by the queue's
classes and bounds changes no decision)."""
from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.domain.model import events as ev
from service.domain.nodes import affinity as af
from service.domain.state import queue
from tests.domain.sim import Sim, basic, gang, pods
from tests.domain.test_replay import check_same

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
AFFINITY_MESSAGE = "node(s) didn't match Pod's node affinity/selector"


def node(s: Sim, name: str, labels: dict[str, str] | None = None, taints: list[dict[str, str]] | None = None,
         unschedulable: bool = False, **alloc: Any) -> list[ev.Event]:
    body: dict[str, Any] = {"labels": labels or {}, "allocatable": {k.replace("_", "."): v for k, v in alloc.items()},
                            "unschedulable": unschedulable}
    if taints:
        body["taints"] = taints
    return s.run("UpsertNode", name, body=body)


def entry(count: int = 1, name: str = "p", tolerations: list[dict[str, str]] | None = None,
          required: list[dict[str, Any]] | None = None, preferred: list[dict[str, Any]] | None = None,
          selector: dict[str, str] | None = None, **requests: Any) -> dict[str, Any]:
    e = pods(count, name, **requests)
    if tolerations:
        e["tolerations"] = tolerations
    node_affinity: dict[str, Any] = {}
    if required is not None:
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": required}
    if preferred is not None:
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    if node_affinity:
        e["affinity"] = {"nodeAffinity": node_affinity}
    if selector:
        e["nodeSelector"] = selector
    return e


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        out["values"] = list(values)
    return out


def message(s: Sim, wl: str) -> str:
    explanation = s.group(wl)["explanation"]
    assert explanation is not None
    return str(explanation["message"])


# -- taints and tolerations ------------------------------------------------------------------------
def test_no_schedule_keeps_pods_that_do_not_tolerate_it_off():
    s = Sim()
    node(s, "gpu", taints=[GPU_TAINT], cpu="8")
    node(s, "cpu", cpu="2")
    s.submit("plain", basic("g", pods(1, cpu="1")))
    assert s.placements("plain") == {"p-0": "cpu"}
    s.submit("big", basic("g", pods(1, cpu="4")))
    assert s.types() == [ev.POD_GROUP_UNSCHEDULABLE]
    assert message(s, "big") == ("0/2 nodes are available: 1 Insufficient cpu, "
                                 "1 node(s) had untolerated taint {nvidia.com/gpu: present}.")
    s.submit("tolerant", basic("g", entry(1, tolerations=[GPU_TOLERATION], cpu="4")))
    assert s.placements("tolerant") == {"p-0": "gpu"}
    s.assert_replay_equal()


@pytest.mark.parametrize(("toleration", "fits"), [
    ({"operator": "Exists"}, True),  # an empty key with Exists tolerates every taint
    ({"operator": "Exists", "effect": "NoSchedule"}, True),
    ({"operator": "Exists", "effect": "NoExecute"}, False),
    ({"key": "nvidia.com/gpu", "operator": "Exists"}, True),
    ({"key": "nvidia.com/gpu", "value": "present"}, True),  # Equal is the default operator
    ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}, True),
    ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "absent"}, False),
    ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "PreferNoSchedule"}, False),
    ({"key": "example.com/other", "operator": "Exists"}, False),
])
def test_tolerations_as_kubernetes_matches_them(toleration, fits):
    s = Sim()
    node(s, "gpu", taints=[GPU_TAINT], cpu="8")
    s.submit("w", basic("g", entry(1, tolerations=[toleration], cpu="1")))
    assert s.placements("w") == {"p-0": "gpu" if fits else None}


def test_prefer_no_schedule_only_orders_nodes():
    s = Sim()
    soft = {"key": "example.com/spot", "value": "", "effect": "PreferNoSchedule"}
    node(s, "a", taints=[soft], cpu="4")
    node(s, "b", cpu="8")
    node(s, "c", taints=[soft, {"key": "example.com/old", "value": "", "effect": "PreferNoSchedule"}], cpu="2")
    s.submit("x", basic("g", pods(1, cpu="1")))
    assert s.placements("x") == {"p-0": "b"}  # the worst score (1/8), but no soft taint
    s.submit("t", basic("g", entry(1, tolerations=[{"operator": "Exists", "effect": "PreferNoSchedule"}], cpu="1")))
    assert s.placements("t") == {"p-0": "c"}  # every soft taint tolerated: the score alone (1/2)
    s.submit("y", basic("g", pods(1, cpu="7")))
    assert s.placements("y") == {"p-0": "b"}
    s.submit("z", basic("g", pods(3, cpu="1")))
    assert s.placements("z") == {"p-0": "a", "p-1": "a", "p-2": "a"}  # one soft taint before two, whatever the score
    s.assert_replay_equal()


def test_prefer_no_schedule_count_then_score():
    s = Sim()
    soft = {"key": "example.com/spot", "value": "", "effect": "PreferNoSchedule"}
    node(s, "a", taints=[soft], cpu="2")
    node(s, "b", taints=[soft], cpu="4")
    node(s, "c", cpu="16")
    s.submit("x", basic("g", pods(1, cpu="1")))
    assert s.placements("x") == {"p-0": "c"}
    s.submit("y", basic("g", entry(1, tolerations=[{"key": "example.com/spot", "operator": "Exists"}], cpu="1")))
    assert s.placements("y") == {"p-0": "a"}  # tolerated: the score alone (1/2 beats 1/4 and 2/16)
    s.submit("z", basic("g", pods(17, cpu="1")))
    assert list(s.placements("z").values()) == ["c"] * 15 + ["a", "b"]  # then a (2/2) before b (1/4)


def test_no_execute_releases_the_pods_that_do_not_tolerate_it():
    s = Sim()
    node(s, "n1", cpu="8")
    node(s, "n2", cpu="8")
    s.submit("plain", basic("g", pods(2, cpu="3")))  # both on n1 (most allocated, then name)
    s.submit("tolerant", basic("g", entry(1, tolerations=[{"key": "example.com/drain", "operator": "Exists"}],
                                          cpu="1")))
    assert set(s.placements("plain").values()) == {"n1"} and s.placements("tolerant") == {"p-0": "n1"}
    drain = {"key": "example.com/drain", "value": "", "effect": "NoExecute"}
    out = node(s, "n1", taints=[drain], cpu="8")
    lost = [e for e in out if e.type == ev.PODS_LOST]
    assert len(lost) == 1 and lost[0].data["reason"] == "TaintedNoExecute" and lost[0].data["node"] == "n1"
    assert [p["pod"] for p in lost[0].data["pods"]] == ["p-0", "p-1"] and lost[0].data["workload"] == "plain"
    assert s.placements("plain") == {"p-0": "n2", "p-1": "n2"}  # placed again in the same pass
    assert s.placements("tolerant") == {"p-0": "n1"}  # it tolerates the taint: it stays
    assert s.node_view("n1")["taints"] == [drain]
    # a NoSchedule taint added later evicts nothing
    out = node(s, "n2", taints=[GPU_TAINT], cpu="8")
    assert [e.type for e in out if e.type == ev.PODS_LOST] == []
    s.assert_replay_equal()


def test_no_execute_releases_a_gang_as_node_loss_does():
    drain = {"key": "example.com/drain", "value": "", "effect": "NoExecute"}
    s = Sim()
    for n in ("n1", "n2", "n3"):
        node(s, n, cpu="2")
    s.submit("train", gang("w", 3, pods(3, cpu="2")))  # one pod per node
    assert set(s.placements("train").values()) == {"n1", "n2", "n3"}
    out = node(s, "n2", taints=[drain], cpu="2")
    (lost,) = [e.data for e in out if e.type == ev.PODS_LOST]
    assert lost["reason"] == "TaintedNoExecute" and lost["node"] == "n2"
    assert lost["wholeGroup"] is True and len(lost["pods"]) == 3  # left below minCount: all of it, on every node
    assert s.group("train")["placedPods"] == 0 and s.group("train")["phase"] == "Pending"  # 2 nodes cannot hold it
    s.assert_replay_equal()

    s = Sim()
    for n in ("n1", "n2", "n3"):
        node(s, n, cpu="2")
    s.submit("elastic", gang("w", 2, pods(3, cpu="2")))
    victim = s.placements("elastic")["p-1"]
    out = node(s, victim, taints=[drain], cpu="2")
    (lost,) = [e.data for e in out if e.type == ev.PODS_LOST]
    assert lost["wholeGroup"] is False and [p["pod"] for p in lost["pods"]] == ["p-1"]  # still at minCount
    assert s.group("elastic")["placedPods"] == 2 and s.group("elastic")["phase"] == "Scheduled"
    s.assert_replay_equal()


# -- node affinity --------------------------------------------------------------------------------------
MODELS = {"h100": {"gpu": "H100", "gen": "9", "zone": "a"}, "h200": {"gpu": "H200", "gen": "10", "zone": "b"},
          "a100": {"gpu": "A100", "gen": "8"}}


@pytest.mark.parametrize(("requirement", "expected"), [
    (expr("gpu", "In", "H100", "H200"), {"h100", "h200"}),
    (expr("gpu", "NotIn", "H100"), {"a100", "h200"}),
    (expr("zone", "NotIn", "a"), {"a100", "h200"}),  # a node without the label matches NotIn
    (expr("zone", "Exists"), {"h100", "h200"}),
    (expr("zone", "DoesNotExist"), {"a100"}),
    (expr("gen", "Gt", "8"), {"h100", "h200"}),  # integers: "10" > "8"
    (expr("gen", "Lt", "10"), {"a100", "h100"}),
    (expr("zone", "Gt", "0"), set()),  # not an integer: no match
])
def test_each_operator_places_only_where_it_holds(requirement, expected):
    s = Sim()
    for name, labels in MODELS.items():
        node(s, name, labels, cpu="1")
    s.submit("w", basic("g", entry(3, required=[{"matchExpressions": [requirement]}], cpu="1")))
    assert {n for n in s.placements("w").values() if n} == expected
    if len(expected) < 3:
        assert s.group("w")["explanation"]["reasons"][0]["message"] in (AFFINITY_MESSAGE, "Insufficient cpu")


def test_terms_are_alternatives_and_fields_name_nodes():
    s = Sim()
    for name, labels in MODELS.items():
        node(s, name, labels, cpu="1")
    terms = [{"matchExpressions": [expr("gpu", "In", "A100")]},
             {"matchFields": [expr("metadata.name", "In", "h200")]},
             {}]  # an empty term matches nothing
    s.submit("w", basic("g", entry(3, required=terms, cpu="1")))
    assert {n for n in s.placements("w").values() if n} == {"a100", "h200"}
    s.submit("v", basic("g", entry(1, required=[{"matchFields": [expr("metadata.name", "NotIn", "h100")]}],
                                   cpu="0")))
    assert s.placements("v")["p-0"] in ("a100", "h200")


def test_node_selector_and_required_affinity_must_both_hold():
    s = Sim()
    for name, labels in MODELS.items():
        node(s, name, labels, cpu="4")
    s.submit("w", basic("g", entry(1, selector={"zone": "a"}, required=[{"matchExpressions": [expr("gpu", "In", "H200")]}],
                                   cpu="1")))
    assert s.placements("w") == {"p-0": None}
    assert message(s, "w") == f"0/3 nodes are available: 3 {AFFINITY_MESSAGE}."
    s.submit("v", basic("g", entry(1, selector={"zone": "b"}, required=[{"matchExpressions": [expr("gpu", "In", "H200")]}],
                                   cpu="1")))
    assert s.placements("v") == {"p-0": "h200"}


def test_preferred_weights_order_nodes_before_the_score():
    s = Sim()
    node(s, "small", {"pool": "spot", "disk": "ssd"}, cpu="2")  # best score
    node(s, "big", {"pool": "reserved"}, cpu="64")
    node(s, "mid", {"pool": "reserved", "disk": "ssd"}, cpu="8")
    preferred = [{"weight": 50, "preference": {"matchExpressions": [expr("pool", "In", "reserved")]}},
                 {"weight": 30, "preference": {"matchExpressions": [expr("disk", "Exists")]}}]
    s.submit("w", basic("g", entry(1, preferred=preferred, cpu="1")))
    assert s.placements("w") == {"p-0": "mid"}  # 80 > 50 (big) > 30 (small)
    s.submit("v", basic("g", entry(10, preferred=preferred, cpu="1")))
    placed = list(s.placements("v").values())
    assert placed == ["mid"] * 7 + ["big"] * 3  # mid until full, then big, never small while big has room
    s.submit("u", basic("g", entry(1, preferred=[{"weight": 1, "preference": {"matchExpressions": [
        expr("pool", "In", "spot")]}}], cpu="1")))
    assert s.placements("u") == {"p-0": "small"}
    s.assert_replay_equal()


def test_affinity_within_a_topology_domain():
    s = Sim()
    for rack in ("r1", "r2"):
        for i, model in enumerate(("H100", "A100")):
            node(s, f"{rack}-{i}", {"rack": rack, "gpu": model}, cpu="2")
    s.submit("fill", basic("g", entry(1, required=[{"matchExpressions": [expr("gpu", "In", "H100")]}], cpu="1")))
    s.submit("w", gang("g", 2, entry(2, required=[{"matchExpressions": [expr("gpu", "In", "H100")]}], cpu="1")),
             )
    placed = s.placements("w")
    assert set(placed.values()) <= {"r1-0", "r2-0"}
    s.submit("t", gang("g", 3, entry(3, required=[{"matchExpressions": [expr("gpu", "In", "H100")]}], cpu="1"),
                       topology={"key": "rack"}))
    assert s.group("t")["placedPods"] == 0  # no rack has room for 3 H100 pods
    s.assert_replay_equal()


def test_explanations_count_each_node_under_its_first_failing_filter():
    s = Sim()
    node(s, "cordoned", {"gpu": "H100"}, taints=[GPU_TAINT], unschedulable=True, cpu="4")
    node(s, "tainted", {"gpu": "A100"}, taints=[{"key": "b", "value": "1", "effect": "NoExecute"}, GPU_TAINT], cpu="4")
    node(s, "gpu", {"gpu": "H100"}, taints=[GPU_TAINT], cpu="4")
    node(s, "other", {"gpu": "A100"}, cpu="4")
    node(s, "small", {"gpu": "H100"}, cpu="1")
    s.submit("w", basic("g", entry(1, required=[{"matchExpressions": [expr("gpu", "In", "H100")]}], cpu="2")))
    explanation = s.group("w")["explanation"]
    assert explanation["message"] == (
        "0/5 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had untolerated taint {b: 1}, 1 node(s) had untolerated taint {nvidia.com/gpu: present}, "
        "1 node(s) were unschedulable.")
    assert {r["message"]: r["nodes"] for r in explanation["reasons"]} == {
        "Insufficient cpu": 1, AFFINITY_MESSAGE: 1, "node(s) had untolerated taint {b: 1}": 1,
        "node(s) had untolerated taint {nvidia.com/gpu: present}": 1, "node(s) were unschedulable": 1}


# -- shapes, the queue and preemption ---------------------------------------------------------------------
def test_pods_differing_in_tolerations_or_affinity_are_different_shapes():
    s = Sim()
    node(s, "n1", cpu="4")
    s.submit("w", basic("g", entry(1, "a", cpu="1"), entry(1, "b", tolerations=[GPU_TOLERATION], cpu="1"),
                        entry(1, "c", required=[{"matchExpressions": [expr("x", "DoesNotExist")]}], cpu="1"),
                        entry(1, "d", preferred=[{"weight": 1, "preference": {}}], cpu="1"),
                        entry(1, "e", cpu="1")))
    spec = s.state.workloads[("default", "w")].spec
    assert len(spec.shapes) == 4  # a and e share a shape
    assert spec.groups[0].pod_shapes == (0, 1, 2, 3, 0)


def test_a_class_bounded_out_by_a_taint_is_tried_again_when_the_taint_goes():
    """Two identical pending groups share a class; their bound (0 pods, the only node is tainted)
    must not skip them once a node replace removes the taint (the row is dirty: its gain counts)."""
    s = Sim()
    node(s, "n1", taints=[GPU_TAINT], cpu="4")
    s.submit("a", gang("g", 2, pods(2, cpu="1")))
    s.submit("b", gang("g", 2, pods(2, cpu="1")))
    node(s, "n1", cpu="1")  # the taint goes but room for one pod only: still bounded out
    assert s.group("a")["placedPods"] == 0 == s.group("b")["placedPods"]
    node(s, "n1", cpu="4")
    assert s.group("a")["placedPods"] == 2 and s.group("b")["placedPods"] == 2
    node(s, "n2", taints=[GPU_TAINT], cpu="2")
    s.submit("c", gang("g", 2, pods(2, cpu="1")))
    s.submit("d", gang("g", 2, pods(2, cpu="1")))
    node(s, "n2", taints=[{**GPU_TAINT, "effect": "PreferNoSchedule"}], cpu="2")  # NoSchedule -> PreferNoSchedule
    assert s.group("c")["placedPods"] == 2 and s.group("d")["placedPods"] == 0
    s.assert_replay_equal()


def test_a_class_is_not_dropped_after_a_try_that_placed_some_pods():
    """A basic group of a class places one pod and its other pod fails (preemption refused): the
    identical group behind it must still be tried (it found room the same sweep; found by the
    skipping property below)."""
    s = Sim()
    node(s, "n0", cpu="1")
    never = entry(1, "e1", required=[{"matchExpressions": []}], cpu="500m")  # an empty term: no node
    for name in ("a", "b", "c"):
        s.submit(name, basic("g", pods(1, "e0", cpu="500m"), never, topology={"key": "rack"}))
    assert [s.group(n)["placedPods"] for n in "abc"] == [0, 0, 0]  # no node has a rack yet
    node(s, "n0", {"rack": "r1"}, cpu="1")
    assert [s.group(n)["placedPods"] for n in "abc"] == [1, 1, 0]


def test_preemption_respects_taints_and_affinity():
    s = Sim()
    node(s, "gpu", {"gpu": "H100"}, taints=[GPU_TAINT], cpu="4")
    node(s, "cpu", {"gpu": "none"}, cpu="4")
    h100 = [{"matchExpressions": [expr("gpu", "In", "H100")]}]
    s.submit("low-gpu", basic("g", entry(1, tolerations=[GPU_TOLERATION], required=h100, cpu="4")), priority=0)
    s.submit("low-cpu", basic("g", pods(1, cpu="4")), priority=0)
    assert s.placements("low-gpu") == {"p-0": "gpu"} and s.placements("low-cpu") == {"p-0": "cpu"}
    s.submit("high", basic("g", entry(1, tolerations=[GPU_TOLERATION], required=h100, cpu="4")), priority=100)
    victims = [e.data["workload"] for e in s.last if e.type == ev.POD_GROUP_PREEMPTED]
    assert victims == ["low-gpu"]  # not low-cpu: its node fails the preemptor's affinity
    assert s.placements("high") == {"p-0": "gpu"}
    s.submit("high-plain", basic("g", pods(1, cpu="4")), priority=100)
    victims = [e.data["workload"] for e in s.last if e.type == ev.POD_GROUP_PREEMPTED]
    assert victims == ["low-cpu"]  # the tainted node is no candidate for a pod without the toleration
    s.assert_replay_equal()


# -- properties ------------------------------------------------------------------------------------------
NODE_NAMES = [f"n{i}" for i in range(5)]
TAINTS = [GPU_TAINT, {"key": "b", "value": "1", "effect": "NoExecute"}, {"key": "c", "value": "", "effect": "PreferNoSchedule"},
          {"key": "b", "value": "2", "effect": "NoSchedule"}]
TOLERATIONS = [GPU_TOLERATION, {"key": "b", "operator": "Exists"}, {"key": "b", "value": "1", "effect": "NoExecute"},
               {"operator": "Exists", "effect": "PreferNoSchedule"}, {"operator": "Exists"}]
EXPRESSIONS = [expr("gpu", "In", "H100", "H200"), expr("gpu", "NotIn", "A100"), expr("rack", "Exists"),
               expr("rack", "DoesNotExist"), expr("gen", "Gt", "8"), expr("gen", "Lt", "10"),
               expr("gpu", "In", "H200")]


@st.composite
def node_cmd(draw: st.DrawFn) -> tuple[str, str, dict[str, Any]]:
    labels = {"gpu": draw(st.sampled_from(["H100", "H200", "A100"])), "gen": draw(st.sampled_from(["8", "9", "10", "x"]))}
    if draw(st.booleans()):
        labels["rack"] = draw(st.sampled_from(["r1", "r2"]))
    taints = draw(st.lists(st.sampled_from(TAINTS), max_size=2, unique_by=lambda t: (t["key"], t["effect"])))
    body: dict[str, Any] = {"labels": labels, "allocatable": {"cpu": str(draw(st.integers(1, 6)))}}
    if taints:
        body["taints"] = taints
    return ("node", draw(st.sampled_from(NODE_NAMES)), body)


@st.composite
def pod_entry(draw: st.DrawFn, i: int) -> dict[str, Any]:
    e: dict[str, Any] = {"name": f"e{i}", "count": draw(st.integers(1, 3)),
                         "requests": {"cpu": draw(st.sampled_from(["500m", "1", "2"]))}}
    tolerations = draw(st.lists(st.sampled_from(TOLERATIONS), max_size=2, unique_by=lambda t: json.dumps(t, sort_keys=True)))
    if tolerations:
        e["tolerations"] = tolerations
    node_affinity: dict[str, Any] = {}
    if draw(st.booleans()):
        terms = draw(st.lists(st.lists(st.sampled_from(EXPRESSIONS), max_size=2), min_size=1, max_size=2))
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]}
    if draw(st.booleans()):
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": draw(st.integers(1, 100)), "preference": {"matchExpressions": [draw(st.sampled_from(EXPRESSIONS))]}}
            for _ in range(draw(st.integers(1, 2)))]
    if node_affinity:
        e["affinity"] = {"nodeAffinity": node_affinity}
    return e


@st.composite
def group_template(draw: st.DrawFn) -> dict[str, Any]:
    entries = [draw(pod_entry(i)) for i in range(draw(st.integers(1, 2)))]
    total = sum(e["count"] for e in entries)
    group: dict[str, Any] = {"name": "g", "pods": entries, "schedulingPolicy": {"basic": {}}}
    if draw(st.booleans()):
        group["schedulingPolicy"] = {"gang": {"minCount": draw(st.integers(1, total))}}
    if draw(st.integers(0, 3)) == 0:
        group["topology"] = {"key": "rack"}
    return group


@st.composite
def streams(draw: st.DrawFn) -> list[tuple[str, str, Any]]:
    """Workloads drawn from a few group templates (identical pending groups share a queue class, so
    the bounds get exercised), nodes replaced often (taints and labels come and go)."""
    templates = [draw(group_template()) for _ in range(draw(st.integers(1, 3)))]
    cmds: list[tuple[str, str, Any]] = [draw(node_cmd()) for _ in range(draw(st.integers(1, 4)))]
    for i in range(draw(st.integers(1, 16))):
        kind = draw(st.sampled_from(["submit", "submit", "submit", "delete", "node", "node"]))
        if kind == "submit":
            body = {"name": f"w{i}", "podGroups": [draw(st.sampled_from(templates))],
                    "priority": draw(st.sampled_from([0, 0, 10, 100]))}
            cmds.append(("submit", f"w{i}", body))
        elif kind == "delete":
            cmds.append(("delete", f"w{draw(st.integers(0, max(0, i - 1)))}", None))
        else:
            cmds.append(draw(node_cmd()))
    return cmds


def run(cmds: list[tuple[str, str, Any]]) -> Sim:
    s = Sim()
    for kind, name, body in cmds:
        if kind == "node":
            s.run("UpsertNode", name, body=body)
        elif kind == "submit" and ("default", name) not in s.state.workloads:
            s.run("SubmitWorkload", name, "default", body)
        elif kind == "delete":
            wl = s.state.workloads.get(("default", name))
            if wl is not None and wl.deleted_at is None:
                s.run("DeleteWorkload", name, "default")
        check_placements(s)
    return s


def check_placements(s: Sim) -> None:
    """Each placement of the last input honours taints and required affinity on the node as it
    is now (decisions follow their input, and nothing else changes a node in between); and no
    pod stays on a node with a NoExecute taint it does not tolerate."""
    state = s.state
    nodes = state.nodes
    for e in s.last:
        if e.type in (ev.POD_GROUP_SCHEDULED, ev.PODS_SCHEDULED):
            g = state.group(e.data["namespace"], e.data["workload"], e.data["podGroup"])
            for p in e.data["pods"]:
                row = nodes.index[p["node"]]
                spec = nodes.specs[row]
                shape = g.workload.spec.shapes[g.spec.pod_shapes[g.pod_index(p["pod"])]]
                assert af.first_untolerated(shape.tolerations, spec.taints) is None, "untolerated taint"
                assert af.required_matches(shape.required, nodes.labels[row], p["node"]), "affinity violated"
    for wl in state.workloads.values():
        for g in wl.groups:
            for pod, row in enumerate(g.node_of):
                if row >= 0:
                    shape = wl.spec.shapes[g.spec.pod_shapes[pod]]
                    assert af.tolerates_no_execute(shape.tolerations, nodes.specs[row].taints), "NoExecute ignored"


SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def dump(s: Sim) -> list[str]:
    return [json.dumps([e.position, e.type, e.data], sort_keys=True, separators=(",", ":")) for e in s.events]


@SETTINGS
@given(streams())
def test_placements_honour_taints_and_affinity_and_replay_equals_live(cmds):
    s = run(cmds)
    s.assert_replay_equal()


@SETTINGS
@given(streams(), st.data())
def test_the_fast_replay_and_snapshots_equal_the_fold(cmds, data):
    check_same(run(cmds), data, end_all=data.draw(st.booleans()))


@SETTINGS
@given(streams())
def test_skipping_by_classes_and_bounds_changes_no_decision(cmds):
    skipping = run(cmds)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(queue, "bucket_key", lambda g: ("solo", g.key))  # every group tried on every sweep
        trying = run(cmds)
    assert dump(skipping) == dump(trying)
