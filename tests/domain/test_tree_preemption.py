"""Preemption by trees and of trees (composite.md *Preemption*): examples."""
from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.domain import ClusterState, Event, evolve
from service.domain.model import events as ev
from service.domain.model.workload import cpg_satisfied, subtree_groups
from tests.domain.sim import Sim, basic, gang, pods
from tests.domain.test_composite import _unique_names, assert_invariants, clusters, cpg, cpg_view, submit_tree, trees


def racks(s: Sim, layout: dict[str, dict[str, int]]) -> None:
    """layout: block -> rack -> nodes of 4 cpu."""
    for block, rs in layout.items():
        for rack, n in rs.items():
            for i in range(n):
                s.node(f"{rack}-n{i}", labels={"block": block, "rack": rack}, cpu="4")


def preempted(s: Sim) -> list[dict]:
    return [e.data for e in s.last if e.type == ev.POD_GROUP_PREEMPTED]


def test_a_high_tree_preempts_flat_gangs_across_two_racks_of_one_block():
    s = Sim()
    racks(s, {"A": {"A1": 1, "A2": 1}, "B": {"B1": 1}})
    # low flat gangs fill every node
    for i, node_rack in enumerate(("A1", "A2", "B1")):
        s.submit(f"low{i}", gang("g", 1, pods(1, cpu="4")), priority=1)
        assert s.placements(f"low{i}") == {"p-0": f"{node_rack}-n0"}
    s.submit("lower", gang("g", 1, pods(1, cpu="4")), priority=0)  # nowhere to go: pending
    tree = cpg("root", cpgs=[cpg("part", [gang("w", 1, pods(1, cpu="4"))], topo="rack", count=2)],
               min_groups=2, topo="block")
    submit_tree(s, "big", tree, priority=10)
    kinds = s.types()
    assert kinds[:2] == [ev.POD_GROUP_PREEMPTED] * 2 and kinds[2] == ev.COMPOSITE_POD_GROUP_SCHEDULED
    victims = preempted(s)
    assert sorted(v["workload"] for v in victims) == ["low0", "low1"]  # block A: the two racks
    assert all(v["preemptor"] == {"namespace": "default", "workload": "big", "compositePodGroup": "root",
                                  "priority": 10} for v in victims)
    assert all("compositePodGroup" not in v for v in victims)  # flat victims
    data = next(e.data for e in s.last if e.type == ev.COMPOSITE_POD_GROUP_SCHEDULED)
    assert {g["podGroup"]: g["pods"][0]["node"] for g in data["groups"]} == {"part-0-w": "A1-n0",
                                                                             "part-1-w": "A2-n0"}
    assert [v["workload"] for v in data["preemption"]["victims"]] == [v["workload"] for v in victims]
    assert cpg_view(s, "big", "root")["domain"] == {"key": "block", "value": "A"}
    assert s.group("low0")["phase"] == "Pending"
    assert_invariants(s)
    s.assert_replay_equal()


def test_a_flat_gang_preempts_a_whole_all_replica_of_a_low_tree():
    s = Sim()
    racks(s, {"A": {"A1": 2, "A2": 2}})
    replica = cpg("replica", [gang("leader", 1, pods(1, cpu="1")), gang("workers", 2, pods(2, cpu="3"))],
                  topo="rack", count=2, mode="All", min_groups=2)
    submit_tree(s, "lws", cpg("serve", cpgs=[replica]), priority=0)  # basic root: one replica suffices
    assert s.types() == [ev.COMPOSITE_POD_GROUP_SCHEDULED]
    assert all(s.group("lws", g)["phase"] == "Scheduled" for g in
               ("replica-0-leader", "replica-0-workers", "replica-1-leader", "replica-1-workers"))
    # a flat gang of two 3-cpu pods: one replica's rack must be emptied
    s.submit("hi", gang("g", 2, pods(2, cpu="3")), priority=5)
    victims = preempted(s)
    assert len(victims) == 2 and {v["podGroup"] for v in victims} in (
        {"replica-0-leader", "replica-0-workers"}, {"replica-1-leader", "replica-1-workers"})
    name = victims[0]["podGroup"].rsplit("-", 1)[0]
    assert all(v["compositePodGroup"] == name and v["wholeGroup"] for v in victims)
    assert s.types()[-1] == ev.POD_GROUP_SCHEDULED
    assert s.group("hi")["phase"] == "Scheduled"
    # the other replica stays: the basic root is still satisfied
    assert s.wl("lws")["status"]["phase"] == "Scheduled"
    assert cpg_view(s, "lws", name)["phase"] == "Pending"
    assert any(c["type"] == "DisruptionTarget" for c in cpg_view(s, "lws", name)["conditions"])
    assert_invariants(s)
    s.assert_replay_equal()


def test_all_at_the_root_goes_whole_for_one_pod():
    s = Sim()
    s.node("n1", cpu="4")
    s.node("n2", cpu="4")
    submit_tree(s, "low", cpg("root", [basic("a", pods(1, cpu="4")), basic("b", pods(1, cpu="4"))], mode="All"),
                priority=0)
    assert s.types() == [ev.COMPOSITE_POD_GROUP_SCHEDULED]
    s.submit("hi", basic("g", pods(1, cpu="4")), priority=5)
    victims = preempted(s)
    assert {v["podGroup"] for v in victims} == {"a", "b"}  # one pod was needed; the root is one unit
    assert all(v["compositePodGroup"] == "root" and v["wholeGroup"] for v in victims)
    # the same pass places the root again, whole as a pending root, on the node left free
    assert s.types() == [ev.POD_GROUP_PREEMPTED] * 2 + [ev.POD_GROUP_SCHEDULED, ev.COMPOSITE_POD_GROUP_SCHEDULED]
    assert [g["podGroup"] for g in s.last[-1].data["groups"]] == ["a"]
    assert any(c["type"] == "DisruptionTarget" for c in cpg_view(s, "low", "root")["conditions"])
    assert_invariants(s)
    s.assert_replay_equal()


def test_taking_a_child_that_leaves_its_cpg_unsatisfied_takes_the_whole_cpg():
    s = Sim()
    s.node("n1", cpu="4")
    s.node("n2", cpu="4")
    submit_tree(s, "low", cpg("root", [gang("a", 1, pods(1, cpu="4")), gang("b", 1, pods(1, cpu="4"))],
                              min_groups=2), priority=0)
    s.submit("hi", gang("g", 1, pods(1, cpu="4")), priority=5)
    victims = preempted(s)
    assert {v["podGroup"] for v in victims} == {"a", "b"}
    assert all(v["compositePodGroup"] == "root" for v in victims)
    pre = next(e.data for e in s.last if e.type == ev.POD_GROUP_SCHEDULED)["preemption"]
    assert {v["podGroup"] for v in pre["victims"]} == {"a", "b"}
    assert_invariants(s)
    s.assert_replay_equal()


def test_a_useless_preemption_evicts_nothing():
    s = Sim()
    racks(s, {"A": {"A1": 1}, "B": {"B1": 1}})
    s.submit("low", gang("g", 1, pods(1, cpu="4")), priority=0)
    # a tree needing 8 cpu in one block: no block holds that, whatever is evicted
    tree = cpg("root", cpgs=[cpg("part", [gang("w", 1, pods(1, cpu="4"))], topo="rack", count=2)],
               min_groups=2, topo="block")
    submit_tree(s, "big", tree, priority=10)
    assert s.types() == [ev.COMPOSITE_POD_GROUP_UNSCHEDULABLE]
    assert s.last[0].data["explanation"]["preemption"] == "PreemptionWouldNotHelp"
    assert s.group("low")["phase"] == "Scheduled"
    assert_invariants(s)


def test_a_tree_with_no_lower_priority_work_says_so():
    s = Sim()
    s.node("n1", cpu="4")
    s.submit("same", gang("g", 1, pods(1, cpu="4")), priority=3)
    submit_tree(s, "t", cpg("root", [gang("w", 1, pods(1, cpu="4"))]), priority=3)
    assert s.last[0].data["explanation"]["preemption"] == "NoLowerPriorityVictims"
    submit_tree(s, "n", cpg("root", [gang("w", 1, pods(1, cpu="4"))]), priority=9, preemptionPolicy="Never")
    assert s.last[0].data["explanation"]["preemption"] == "PreemptionNotAllowed"


def test_a_tree_preempts_single_pods_of_a_lower_tree_and_reprieves_what_it_can():
    s = Sim()
    for i in range(3):
        s.node(f"n{i}", cpu="4")
    # low tree: a basic group of three 4-cpu pods, one per node
    submit_tree(s, "low", cpg("root", [basic("b", pods(3, cpu="4"))]), priority=0)
    assert s.group("low", "b")["phase"] == "Scheduled"
    submit_tree(s, "hi", cpg("root", [gang("w", 1, pods(1, cpu="4"))]), priority=5)
    victims = preempted(s)
    assert len(victims) == 1 and len(victims[0]["pods"]) == 1 and victims[0]["compositePodGroup"] is None
    data = next(e.data for e in s.last if e.type == ev.COMPOSITE_POD_GROUP_SCHEDULED)
    assert data["preemption"]["victims"][0]["podGroup"] == "b"
    assert s.wl("low")["status"]["phase"] == "Scheduled"  # two pods stay; the basic root is satisfied
    assert_invariants(s)
    s.assert_replay_equal()


# -- property: every decision keeps the rules -------------------------------------------------------
def _check_every_decision(s: Sim) -> int:
    """Fold the stream event by event; after each decision's last event, no gang below minCount and
    no CPG unsatisfied with pods placed, no node over capacity; victims are of lower priority.
    Returns the preemptions seen."""
    state = ClusterState(s.state.cluster)
    events = s.events
    seen = 0
    for i, e in enumerate(events):
        evolve(state, Event(e.position, e.type, json.loads(json.dumps(e.data))))
        if e.type == ev.POD_GROUP_PREEMPTED:
            assert e.data["priority"] < e.data["preemptor"]["priority"]
            continue  # one step with the decision that places the preemptor
        if e.data.get("preemption"):
            seen += 1
        nxt = events[i + 1].type if i + 1 < len(events) else None
        if nxt == ev.POD_GROUP_PREEMPTED or (e.type == ev.PODS_LOST and nxt == ev.PODS_LOST):
            continue  # the rest of the decision's events come first (a tree's losses are one step)
        for wl in state.workloads.values():
            if wl.deleted_at is not None:
                continue
            for g in wl.groups:
                assert not (g.spec.gang and g.placed and g.placed < g.spec.min_count), (e.type, g.ref)
            for c in wl.composites:
                if any(wl.groups[gi].placed for gi in subtree_groups(wl, c.spec.index)):
                    assert cpg_satisfied(wl, c.spec.index), (e.position, e.type, wl.spec.name, c.spec.name)
        n = state.nodes.count
        over = state.nodes.used[:n] > state.nodes.alloc[:n]
        assert not over[state.nodes.alive[:n]].any()
    return seen


def _mixed_stream(nodes: list, roots: list, flats: list, steps: list) -> Sim:
    s = Sim()
    for name, labels, cpu in nodes:
        s.node(name, labels=labels, cpu=str(cpu))
    items: list[tuple[str, Any]] = [("tree", r) for r in roots] + [("flat", f) for f in flats]
    for i, (kind, item) in enumerate(sorted(items, key=lambda x: str(x[1]))):
        if kind == "tree":
            root, prio = item
            submit_tree(s, f"t{i}", _unique_names(root, [0]), priority=prio)
        else:
            n, cpu, prio = item
            s.submit(f"f{i}", gang("g", n, pods(n, cpu=str(cpu))), priority=prio)
    for kind, i in steps:
        name = nodes[i % len(nodes)][0]
        if kind == "remove" and s.state.nodes.alive[s.state.nodes.index[name]]:
            s.remove_node(name)
        elif kind == "delete":
            live = [wl.spec.name for wl in s.state.workloads.values() if wl.deleted_at is None]
            if live:
                s.delete(live[i % len(live)])
    return s


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(clusters(), st.lists(st.tuples(trees(), st.integers(0, 3)), min_size=1, max_size=4),
       st.lists(st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(0, 3)), max_size=4),
       st.lists(st.tuples(st.sampled_from(["remove", "delete"]), st.integers(0, 7)), max_size=3))
def test_preemption_never_leaves_a_cpg_unsatisfied_nor_a_gang_below_min_count(nodes, roots, flats, steps):
    s = _mixed_stream(nodes, roots, flats, steps)
    _check_every_decision(s)
    s.assert_replay_equal()


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(clusters(), st.lists(st.tuples(trees(), st.integers(0, 3)), min_size=1, max_size=4),
       st.lists(st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(0, 3)), max_size=4))
def test_tree_victim_units_decide_as_the_reference(nodes, roots, flats):
    from unittest import mock

    from service.domain.preemption import flat, victims
    from service.domain.preemption import roots as root_preemption
    from tests.domain import reference_tree_victims as ref

    def dump(s: Sim) -> list[str]:
        return [json.dumps([e.position, e.type, e.data], sort_keys=True) for e in s.events]

    real = dump(_mixed_stream(nodes, roots, flats, []))
    with mock.patch.object(victims, "tree_units", ref.tree_units), mock.patch.object(root_preemption, "close", ref.close), \
            mock.patch.object(flat, "close", ref.close):
        assert dump(_mixed_stream(nodes, roots, flats, [])) == real
