"""Composite pod groups (composite.md): one example per scenario, the reference routine,
and properties over random trees."""
from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.domain.fold.evolve import evolve
from service.domain.model import events as ev
from service.domain.model.events import Event
from service.domain.model.reasons import render_explanation
from service.domain.model.workload import cpg_satisfied, subtree_groups
from service.domain.trees.routine import Routine
from service.schemas import validate_body
from service.schemas.errors import InputValidationError
from tests.domain import reference_tree
from tests.domain.sim import Sim, basic, gang, pods


def cpg(name: str, groups: list[dict] | None = None, cpgs: list[dict] | None = None, *, min_groups: int | None = None,
        topo: str | None = None, count: int | None = None, mode: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    if groups:
        out["podGroups"] = groups
    if cpgs:
        out["compositePodGroups"] = cpgs
    if min_groups is not None:
        out["schedulingPolicy"] = {"gang": {"minGroupCount": min_groups}}
    if topo is not None:
        out["topology"] = {"key": topo}
    if count is not None:
        out["count"] = count
    if mode is not None:
        out["disruptionMode"] = mode
    return out


def submit_tree(s: Sim, name: str, *roots: dict, **extra: Any) -> list[Event]:
    body = {"name": name, "compositePodGroups": list(roots), **extra}
    validate_body("Workload", json.dumps(body))  # every body here is valid
    return s.run("SubmitWorkload", name, "default", body)


def cpg_view(s: Sim, wl: str, name: str) -> dict[str, Any]:
    return next(c for c in s.wl(wl)["status"]["compositePodGroups"] if c["name"] == name)


def assert_invariants(s: Sim) -> None:
    """No CPG unsatisfied with pods placed, no gang below minCount with pods placed, every pod
    inside the pinned domain of every ancestor, no node over capacity."""
    state = s.state
    for wl in state.workloads.values():
        if wl.deleted_at is not None:
            continue
        for g in wl.groups:
            if g.spec.gang and g.placed:
                assert g.placed >= g.spec.min_count, (wl.spec.name, g.spec.name)
        for c in wl.composites:
            members = subtree_groups(wl, c.spec.index)
            if any(wl.groups[gi].placed for gi in members):
                assert cpg_satisfied(wl, c.spec.index), (wl.spec.name, c.spec.name)
                if c.spec.topology_key is not None:
                    assert c.domain is not None
                    for gi in members:
                        for node in wl.groups[gi].node_of:
                            if node >= 0:
                                assert state.nodes.labels[node].get(c.spec.topology_key) == c.domain
    n = state.nodes.count
    over = state.nodes.used[:n] > state.nodes.alloc[:n]
    assert not over[state.nodes.alive[:n]].any()


# -- examples -----------------------------------------------------------------------------------
def test_kep_6012_block_rack_example_lands_in_block_b_one_gang_per_rack():
    s = Sim()
    for block, rack, free in (("A", "A1", 3), ("A", "A2", 5), ("B", "B1", 5), ("B", "B2", 5)):
        s.node(f"n-{rack}", labels={"block": block, "rack": rack}, cpu=str(free))
    submit_tree(s, "kep", cpg("root", cpgs=[cpg("g", [gang("w", 5, pods(5, cpu="1"))], topo="rack", count=2)],
                              min_groups=2, topo="block"))
    assert s.types() == [ev.COMPOSITE_POD_GROUP_SCHEDULED]
    data = s.last[0].data
    assert {g["podGroup"]: {p["node"] for p in g["pods"]} for g in data["groups"]} == \
        {"g-0-w": {"n-B1"}, "g-1-w": {"n-B2"}}
    assert [g["parent"] for g in data["groups"]] == ["g-0", "g-1"]
    assert {c["compositePodGroup"]: c["domain"]["value"] for c in data["composites"]} == \
        {"root": "B", "g-0": "B1", "g-1": "B2"}
    assert data["explanation"] is None and data["preemption"] is None
    assert cpg_view(s, "kep", "root")["domain"] == {"key": "block", "value": "B"}
    assert s.wl("kep")["status"]["phase"] == "Scheduled"
    assert s.group("kep", "g-0-w")["parent"] == "g-0"
    assert_invariants(s)
    s.assert_replay_equal()


def test_three_level_tree_with_a_quorum_two_of_three():
    s = Sim()
    for i in range(3):
        s.node(f"n{i}", labels={"rack": f"r{i}"}, cpu="4")
    shard = cpg("shard", [gang("w", 2, pods(2, cpu="2"))], topo="rack", count=3)
    submit_tree(s, "q", cpg("top", cpgs=[cpg("mid", cpgs=[shard], min_groups=2)]))
    assert s.types() == [ev.COMPOSITE_POD_GROUP_SCHEDULED]
    assert cpg_view(s, "q", "mid")["satisfiedChildren"] == 3
    s.submit("filler", basic("b", pods(1, cpu="4")))  # no room: waits
    submit_tree(s, "q2", cpg("top", cpgs=[cpg("mid", cpgs=[shard], min_groups=2)]))
    assert s.types() == [ev.COMPOSITE_POD_GROUP_UNSCHEDULABLE]
    assert "message" not in s.last[0].data["explanation"]  # rendered when read
    x = render_explanation(s.last[0].data["explanation"], "top")
    assert x["message"] == 'composite pod group "top": 0/1 children can be scheduled, minGroupCount 1'
    mid = x["children"][0]
    assert mid["kind"] == "CompositePodGroup" and mid["satisfied"] is False
    assert mid["explanation"]["message"] == 'composite pod group "mid": 0/3 children can be scheduled, minGroupCount 2'
    s.delete("q")
    # queue order: the filler (submitted first) takes a rack; the quorum holds on the other two
    assert s.types() == [ev.POD_GROUP_SCHEDULED, ev.COMPOSITE_POD_GROUP_SCHEDULED]
    assert cpg_view(s, "q2", "mid")["satisfiedChildren"] == 2 and cpg_view(s, "q2", "mid")["phase"] == "Scheduled"
    assert s.last[1].data["explanation"]["children"][0]["explanation"]["satisfiableChildren"] == 2
    assert_invariants(s)
    s.assert_replay_equal()


def test_a_basic_cpg_is_satisfied_by_one_child_and_places_every_child_that_fits():
    s = Sim()
    s.node("n1", cpu="3")
    submit_tree(s, "b", cpg("r", [gang("big", 2, pods(2, cpu="2")), gang("small", 1, pods(1, cpu="1"))]))
    data = s.last[0].data
    assert s.types() == [ev.COMPOSITE_POD_GROUP_SCHEDULED]
    assert [g["podGroup"] for g in data["groups"]] == ["small"]  # big does not fit; small does
    assert data["explanation"]["satisfiableChildren"] == 1
    assert s.wl("b")["status"]["phase"] == "Scheduled"
    s.node("n2", cpu="4")  # room: big is a leftover child, placed later as a pod group
    assert s.types() == [ev.POD_GROUP_SCHEDULED]
    assert s.last[0].data["parent"] == "r" and s.last[0].data["podGroup"] == "big"
    s.assert_replay_equal()


def test_only_the_parent_has_a_topology():
    s = Sim()
    for i, zone in enumerate(("z1", "z1", "z2", "z2")):
        s.node(f"n{i}", labels={"zone": zone}, cpu="4")
    submit_tree(s, "t", cpg("r", [gang("a", 2, pods(2, cpu="2")), gang("b", 2, pods(2, cpu="2"))],
                            min_groups=2, topo="zone"))
    nodes = {p["node"] for g in s.last[0].data["groups"] for p in g["pods"]}
    assert nodes == {"n0", "n1"}  # both children inside one zone (z1: the smaller value of a tie)
    assert cpg_view(s, "t", "r")["domain"] == {"key": "zone", "value": "z1"}
    assert_invariants(s)


def test_zone_block_rack_tree_every_pod_inside_its_ancestors_domains():
    s = Sim()
    for z in ("z1", "z2"):
        for b in ("b1", "b2"):
            for r in ("r1", "r2"):
                s.node(f"{z}-{b}-{r}", labels={"zone": z, "block": f"{z}-{b}", "rack": f"{z}-{b}-{r}"}, cpu="4")
    rack = cpg("rack", [gang("w", 2, pods(2, cpu="2"))], topo="rack", count=2)
    block = cpg("blk", cpgs=[rack], topo="block", min_groups=2, count=2)
    submit_tree(s, "zbr", cpg("zone", cpgs=[block], topo="zone", min_groups=2))
    assert s.types() == [ev.COMPOSITE_POD_GROUP_SCHEDULED]
    assert cpg_view(s, "zbr", "zone")["domain"]["value"] == "z1"
    assert len({cpg_view(s, "zbr", f"blk-{i}")["domain"]["value"] for i in range(2)}) == 2
    assert s.group("zbr", "blk-0-rack-1-w")["parent"] == "blk-0-rack-1"
    assert_invariants(s)
    s.assert_replay_equal()


def test_all_at_the_middle_releases_its_whole_subtree_on_loss():
    s = Sim()
    for i in range(4):
        s.node(f"n{i}", cpu="2")
    replica = cpg("rep", [gang("leader", 1, pods(1, cpu="2")), basic("workers", pods(2, cpu="2"))], mode="All", count=2)
    submit_tree(s, "mid", cpg("root", cpgs=[replica]))
    placed = {g["podGroup"]: [p["node"] for p in g["pods"]] for g in s.last[0].data["groups"]}
    victim_node = placed["rep-0-workers"][0]
    s.remove_node(victim_node)
    lost = [e for e in s.last if e.type == ev.PODS_LOST]
    assert {e.data["podGroup"] for e in lost} == {"rep-0-leader", "rep-0-workers"}
    assert all(e.data["compositePodGroup"] == "rep-0" and e.data["wholeGroup"] for e in lost)
    assert_invariants(s)
    s.assert_replay_equal()


def test_all_at_the_root_releases_the_whole_tree():
    s = Sim()
    for i in range(4):
        s.node(f"n{i}", cpu="2")
    submit_tree(s, "root-all", cpg("root", [basic("a", pods(2, cpu="2")), basic("b", pods(2, cpu="2"))], mode="All"))
    node = s.last[0].data["groups"][0]["pods"][0]["node"]
    s.remove_node(node)
    lost = [e for e in s.last if e.type == ev.PODS_LOST]
    assert {e.data["podGroup"] for e in lost} == {"a", "b"}
    assert all(e.data["compositePodGroup"] == "root" for e in lost)
    # pending whole and placed again on the nodes left (3 nodes, 4 pods: a basic root fits partly)
    assert ev.COMPOSITE_POD_GROUP_SCHEDULED in s.types()
    assert_invariants(s)
    s.assert_replay_equal()


def test_node_loss_below_min_group_count_releases_the_cpg_and_it_repends_whole():
    s = Sim()
    for i in range(3):
        s.node(f"n{i}", labels={"rack": f"r{i}"}, cpu="2")
    submit_tree(s, "quorum", cpg("r", cpgs=[cpg("part", [gang("w", 1, pods(1, cpu="2"))], topo="rack", count=3)],
                                 min_groups=3))
    assert s.wl("quorum")["status"]["phase"] == "Scheduled"
    s.remove_node("n1")
    lost = [e for e in s.last if e.type == ev.PODS_LOST]
    assert len(lost) == 3 and all(e.data["compositePodGroup"] == "r" for e in lost)
    assert s.types()[-1] == ev.COMPOSITE_POD_GROUP_UNSCHEDULABLE
    view = cpg_view(s, "quorum", "r")
    assert view["phase"] == "Pending" and view["domain"] is None and view["explanation"] is not None
    assert all(cpg_view(s, "quorum", f"part-{i}")["domain"] is None for i in range(3))
    s.node("n1", labels={"rack": "r1"}, cpu="2")
    assert s.types() == [ev.COMPOSITE_POD_GROUP_SCHEDULED]
    assert_invariants(s)
    s.assert_replay_equal()


def test_a_leftover_child_is_placed_later_inside_the_pinned_domain():
    s = Sim()
    s.node("a1", labels={"block": "a"}, cpu="2")
    s.node("b1", labels={"block": "b"}, cpu="3")
    submit_tree(s, "lo", cpg("r", [gang("x", 1, pods(1, cpu="1")), gang("y", 2, pods(2, cpu="2"))], topo="block"))
    assert cpg_view(s, "lo", "r")["domain"]["value"] == "a"
    placed = {g["podGroup"] for g in s.last[0].data["groups"]}
    assert placed == {"x"}  # y fits in no block; a scores higher (1/2 > 1/3)
    s.node("b2", labels={"block": "b"}, cpu="4")  # room in block b: not the pinned block
    assert s.types() == []
    s.node("a2", labels={"block": "a"}, cpu="4")
    assert s.types() == [ev.POD_GROUP_SCHEDULED] and s.last[0].data["podGroup"] == "y"
    assert {p["node"] for p in s.last[0].data["pods"]} <= {"a1", "a2"}
    assert_invariants(s)
    s.assert_replay_equal()


INVALID = [
    ({"name": "w", "podGroups": [gang("g", 1, pods(1))], "compositePodGroups": [cpg("r", [gang("g2", 1, pods(1))])]},
     ["body", "compositePodGroups"]),
    ({"name": "w", "compositePodGroups": [cpg("r", [gang("g", 1, pods(1))], min_groups=2)]},
     ["body", "compositePodGroups", 0, "schedulingPolicy", "gang", "minGroupCount"]),
    ({"name": "w", "compositePodGroups": [cpg("r", [{**gang("g", 1, pods(1)), "disruptionMode": "Single"}],
                                              mode="All")]},
     ["body", "compositePodGroups", 0, "podGroups", 0, "disruptionMode"]),
    ({"name": "w", "compositePodGroups": [cpg("a", cpgs=[cpg("b", cpgs=[cpg("c", cpgs=[cpg("d", [gang("g", 1, pods(1))])])])])]},
     ["body", "compositePodGroups", 0, "compositePodGroups", 0, "compositePodGroups", 0, "compositePodGroups", 0]),
    ({"name": "w", "compositePodGroups": [cpg("r", [gang("g", 1, pods(1)), gang("g", 1, pods(1))])]},
     ["body", "compositePodGroups", 0, "podGroups", 1, "name"]),
    ({"name": "w", "compositePodGroups": [cpg("r", [{**gang("g", 1, pods(1)), "count": 2}, gang("g-1", 1, pods(1))])]},
     ["body", "compositePodGroups", 0, "podGroups", 1, "name"]),
    ({"name": "w", "compositePodGroups": [cpg("r")]}, ["body", "compositePodGroups", 0]),
    ({"name": "w", "compositePodGroups": [cpg("r", [{**gang("g", 1, pods(1)), "count": 64}], count=2)]},
     ["body", "compositePodGroups"]),
    ({"name": "w", "podGroups": [{**gang("g", 1, pods(1)), "count": 2}]}, ["body", "podGroups", 0, "count"]),
    ({"name": "w", "compositePodGroups": [cpg("a" * 62, [gang("g", 1, pods(1))], count=2)]},
     ["body", "compositePodGroups", 0, "name"]),
]


@pytest.mark.parametrize(("body", "loc"), INVALID)
def test_invalid_trees_are_422_naming_the_entry(body, loc):
    with pytest.raises(InputValidationError) as info:
        validate_body("Workload", json.dumps(body))
    assert loc in [e["loc"] for e in info.value.errors]


def test_count_stamps_prefixed_names():
    s = Sim()
    s.node("n", cpu="64")
    submit_tree(s, "names", cpg("serve", cpgs=[cpg("replica", [gang("leader", 1, pods(1, cpu="1"))],
                                                   cpgs=[cpg("shard", [gang("workers", 1, pods(1, cpu="1"))], count=2)],
                                                   count=2)]))
    names = [g["name"] for g in s.wl("names")["status"]["podGroups"]]
    assert names == ["replica-0-leader", "replica-0-shard-0-workers", "replica-0-shard-1-workers",
                     "replica-1-leader", "replica-1-shard-0-workers", "replica-1-shard-1-workers"]
    cpgs = [c["name"] for c in s.wl("names")["status"]["compositePodGroups"]]
    assert cpgs == ["serve", "replica-0", "replica-0-shard-0", "replica-0-shard-1", "replica-1",
                    "replica-1-shard-0", "replica-1-shard-1"]
    assert s.wl("names")["status"]["podGroups"][0]["pods"][0]["name"] == "p-0"  # pod names unchanged


def test_flat_workloads_show_no_composites():
    s = Sim()
    s.node("n", cpu="1")
    s.submit("flat", gang("g", 1, pods(1, cpu="1")))
    view = s.wl("flat")["status"]
    assert view["compositePodGroups"] == [] and view["podGroups"][0]["parent"] is None


# -- the reference routine and properties -------------------------------------------------------
def _group(draw: Any, name: str) -> dict[str, Any]:
    n = draw(st.integers(1, 4))
    cpu = draw(st.integers(1, 3))
    if draw(st.booleans()):
        return gang(name, draw(st.integers(1, n)), pods(n, cpu=str(cpu)))
    return basic(name, pods(n, cpu=str(cpu)))


@st.composite
def trees(draw: Any, level: int = 1) -> dict[str, Any]:
    groups = [_group(draw, f"g{i}") for i in range(draw(st.integers(0 if level < 3 else 1, 2)))]
    children = [] if level >= 3 else [draw(trees(level + 1)) | {"name": f"c{i}"}
                                      for i in range(draw(st.integers(0 if groups else 1, 2)))]
    total = len(groups) + len(children)
    out = cpg("x", groups, children, topo=draw(st.sampled_from([None, "rack", "block"])),
              min_groups=draw(st.integers(1, total)) if draw(st.booleans()) else None,
              mode=draw(st.sampled_from([None, "All"])) if level == 1 else None)
    if level > 1 and draw(st.booleans()):
        out["count"] = 2
    return out


@st.composite
def clusters(draw: Any) -> list[tuple[str, dict[str, str], int]]:
    out = []
    for i in range(draw(st.integers(2, 8))):
        block = draw(st.sampled_from(["b1", "b2"]))
        out.append((f"n{i}", {"block": block, "rack": f"{block}-r{draw(st.integers(0, 1))}"}, draw(st.integers(1, 6))))
    return out


def _unique_names(entry: dict[str, Any], counter: list[int]) -> dict[str, Any]:
    """Every entry of a drawn tree gets a name of its own (names are distinct in a workload)."""
    counter[0] += 1
    out = {**entry, "name": f"e{counter[0]}"}
    if "podGroups" in entry:
        out["podGroups"] = [_unique_names(g, counter) for g in entry["podGroups"]]
    if "compositePodGroups" in entry:
        out["compositePodGroups"] = [_unique_names(c, counter) for c in entry["compositePodGroups"]]
    return out


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(clusters(), trees(), st.lists(st.integers(1, 4), max_size=3))
def test_the_tree_routine_decides_as_the_reference(nodes, root, fillers):
    s = Sim()
    for name, labels, cpu in nodes:
        s.node(name, labels=labels, cpu=str(cpu))
    for i, cpu in enumerate(fillers):
        s.submit(f"f{i}", basic("b", pods(1, cpu=str(cpu))))
    body = {"name": "t", "compositePodGroups": [_unique_names(root, [0])]}
    validate_body("Workload", json.dumps(body))
    data = json.loads(json.dumps({"namespace": "default", "name": "t", "priority": 0,
                                  "preemptionPolicy": "PreemptLowerPriority", "spec": body}))
    evolve(s.state, Event(s.state.position + 1, ev.WORKLOAD_SUBMITTED, data))
    wl = s.state.workloads[("default", "t")]
    before = copy.deepcopy(s.state)
    routine = Routine(s.state, wl, explain=True)
    out = routine.place(wl.spec.roots[0], None)
    real = (out.satisfied, [(gi, res.placements) for gi, res in routine.placed] if out.satisfied else [],
            dict(routine.domains) if out.satisfied else {})
    routine.rollback()
    assert (s.state.nodes.used == before.nodes.used).all()  # the routine leaves no trace
    ok, _, placed, domains = reference_tree.place(before, ("default", "t"), wl.spec.roots[0], None)
    assert real == (ok, placed if ok else [], domains if ok else {})


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(clusters(), st.lists(trees(), min_size=1, max_size=3),
       st.lists(st.tuples(st.sampled_from(["remove", "add", "delete"]), st.integers(0, 7)), max_size=6))
def test_random_streams_keep_the_invariants_and_replay_equals_live(nodes, roots, steps):
    s = Sim()
    for name, labels, cpu in nodes:
        s.node(name, labels=labels, cpu=str(cpu))
    for i, root in enumerate(roots):
        submit_tree(s, f"t{i}", _unique_names(root, [0]), priority=i % 2)
        s.submit(f"f{i}", basic("b", pods(1, cpu="1")))
        assert_invariants(s)
    for kind, i in steps:
        name = nodes[i % len(nodes)][0]
        if kind == "remove" and name in s.state.nodes.index and s.state.nodes.alive[s.state.nodes.index[name]]:
            s.remove_node(name)
        elif kind == "add":
            s.node(name, labels=nodes[i % len(nodes)][1], cpu="6")
        elif kind == "delete" and s.state.workloads[("default", f"t{i % len(roots)}")].deleted_at is None:
            s.delete(f"t{i % len(roots)}")
        assert_invariants(s)
    s.assert_replay_equal()
    # determinism: the same inputs decide the same, byte for byte
    again = Sim()
    for e in [e for e in s.events if e.is_input]:
        etype, data = e.type, e.data
        decisions = __import__("service.domain", fromlist=["handle"]).handle(
            again.state, Event(again.state.position + 1, etype, copy.deepcopy(data)))
        again.events += [Event(e.position, etype, data), *decisions]
    assert [(e.position, e.type, json.dumps(e.data, sort_keys=True)) for e in again.events] == \
        [(e.position, e.type, json.dumps(e.data, sort_keys=True)) for e in s.events]


def _stream(roots: list[dict], nodes: list, steps: list) -> list[tuple[int, str, str]]:
    s = Sim()
    for name, labels, cpu in nodes:
        s.node(name, labels=labels, cpu=str(cpu))
    for i, root in enumerate(roots):
        submit_tree(s, f"t{i}", _unique_names(root, [0]), priority=i % 2)
        s.submit(f"f{i}", gang("g", 1, pods(1, cpu="2")))
    for kind, i in steps:
        name = nodes[i % len(nodes)][0]
        if kind == "remove" and name in s.state.nodes.index and s.state.nodes.alive[s.state.nodes.index[name]]:
            s.remove_node(name)
        elif kind == "add":
            s.node(name, labels=nodes[i % len(nodes)][1], cpu="3")
        elif kind == "delete" and s.state.workloads[("default", f"f{i % len(roots)}")].deleted_at is None:
            s.delete(f"f{i % len(roots)}")
        elif kind in ("label", "rack") and name in s.state.nodes.index:
            labels = dict(nodes[i % len(nodes)][1])
            if kind == "label":  # a label no selector, affinity or topology reads
                labels["example.com/unread"] = str(i)
            else:  # one every tree with a rack topology reads
                labels["rack"] = f"{labels['block']}-r{(i + 1) % 2}"
            s.node(name, labels=labels, cpu=str(nodes[i % len(nodes)][2]))
    return [(e.position, e.type, json.dumps(e.data, sort_keys=True)) for e in s.events]


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(clusters(), st.lists(trees(), min_size=1, max_size=3),
       st.lists(st.tuples(st.sampled_from(["remove", "add", "delete", "label", "rack"]), st.integers(0, 7)),
                max_size=10))
def test_skipping_trees_never_changes_a_decision(nodes, roots, steps):
    """Skipping a failed tree while the state is unchanged (its memo), the whole lane of trees while
    every one of them failed at this state, and every try after an upsert of labels nothing queued
    reads: the same decisions as trying every tree on every input."""
    import importlib
    from unittest import mock

    from service.domain.decide import decider
    from service.domain.decide import trees as tree_decide
    evolve = importlib.import_module("service.domain.fold.evolve")  # the module (the package exports the function)
    skipping = _stream(roots, nodes, steps)
    with mock.patch.object(tree_decide, "_memo", lambda state, wl: None), \
            mock.patch.object(tree_decide, "_proven", lambda state, root: False), \
            mock.patch.object(decider, "TREES", ("no", "lane")), \
            mock.patch.object(evolve, "_may_change_placement", lambda state, old, new: True):
        trying = _stream(roots, nodes, steps)  # every tree tried, always
    assert skipping == trying


def test_an_input_that_frees_nothing_runs_no_tree_routine():
    from unittest import mock

    s = Sim()
    s.node("n", cpu="1")
    for i in range(20):
        submit_tree(s, f"t{i}", cpg("r", [gang("g", 2, pods(2, cpu="1"))]))
    s.submit("pending", gang("g", 1, pods(1, cpu="5")))
    s.submit("other", gang("g", 1, pods(1, cpu="5")))
    s.delete("other")  # a full pass: every tree is tried once more (and remembered as failed)
    calls = []
    real = Routine.place
    with mock.patch.object(Routine, "place", lambda self, ci, allowed: calls.append(ci) or real(self, ci, allowed)):
        s.delete("pending")  # frees nothing
    assert calls == [] and s.types() == []


def test_a_label_nothing_reads_runs_no_tree_routine_and_a_read_one_does():
    from unittest import mock

    s = Sim()
    s.node("n", labels={"rack": "a"}, cpu="1")
    for i in range(20):
        submit_tree(s, f"t{i}", cpg("r", [gang("g", 2, pods(2, cpu="1"))], topo="rack"))
    s.submit("other", gang("g", 1, pods(1, cpu="5")))
    s.delete("other")
    calls = []
    real = Routine.place
    with mock.patch.object(Routine, "place", lambda self, ci, allowed: calls.append(ci) or real(self, ci, allowed)):
        s.node("n", labels={"rack": "a", "example.com/owner": "team-7"}, cpu="1")  # nobody reads it
        assert calls == [] and s.types() == []
        s.node("n", labels={"rack": "b", "example.com/owner": "team-7"}, cpu="1")  # the trees read rack
        assert len(calls) == 20
