"""Issue 21, deliverable 5: the tree routine's pruning changes nothing.

The routine compares candidate domains unexplained and, for a rigid CPG (satisfied only with every
pod of its subtree placed), simulates candidates best known domain score first, skipping those that
per-shape capacity proves infeasible, and stops at the first feasible one; an unexplained run stops a
CPG's children once its quorum is out of reach. Over random clusters and trees biased towards rigid
ones, explained and unexplained runs place exactly what the naive reference of composite.md
(tests/domain/reference_tree.py, a state copy per candidate, every candidate simulated) places."""
from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.domain import Event
from service.domain.fold.evolve import evolve
from service.domain.model import events as ev
from service.domain.trees.routine import Routine
from tests.domain import reference_tree
from tests.domain.sim import Sim, basic, gang, pods


def _group(draw: Any, name: str) -> dict[str, Any]:
    entries = [pods(draw(st.integers(1, 3)), "a", cpu=str(draw(st.integers(1, 3))))]
    if draw(st.integers(0, 3)) == 0:
        entries.append(pods(draw(st.integers(1, 2)), "b", cpu="1", memory=str(draw(st.integers(1, 2)))))
    total = sum(e["count"] for e in entries)
    if draw(st.integers(0, 4)) == 0:
        return basic(name, *entries)
    rigid = draw(st.integers(0, 3)) > 0
    return gang(name, total if rigid else draw(st.integers(1, total)), *entries)


@st.composite
def trees(draw: Any, level: int = 1, counter: list[int] | None = None) -> dict[str, Any]:
    counter = counter if counter is not None else [0]
    groups = []
    for _ in range(draw(st.integers(0 if level < 3 else 1, 2))):
        counter[0] += 1
        groups.append(_group(draw, f"g{counter[0]}"))
    children = [] if level >= 3 else [draw(trees(level + 1, counter))
                                      for _ in range(draw(st.integers(0 if groups else 1, 2)))]
    counter[0] += 1
    total = len(groups) + len(children)
    entry: dict[str, Any] = {"name": f"c{counter[0]}", "podGroups": groups, "compositePodGroups": children}
    key = draw(st.sampled_from([None, "rack", "block", "rack"]))
    if key:
        entry["topology"] = {"key": key}
    if draw(st.integers(0, 3)) > 0:
        entry["schedulingPolicy"] = {"gang": {"minGroupCount": total}}
    elif draw(st.booleans()):
        entry["schedulingPolicy"] = {"gang": {"minGroupCount": draw(st.integers(1, total))}}
    return entry


@st.composite
def clusters(draw: Any) -> list[tuple[str, dict[str, str], int, int]]:
    out = []
    for i in range(draw(st.integers(2, 10))):
        block = draw(st.sampled_from(["b1", "b2", "b3"]))
        out.append((f"n{i}", {"block": block, "rack": f"{block}-r{draw(st.integers(0, 2))}"},
                    draw(st.integers(1, 6)), draw(st.integers(1, 3))))
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(clusters(), trees(), st.lists(st.integers(1, 4), max_size=4), st.booleans())
def test_the_pruned_routine_places_as_the_naive_reference(nodes, root, fillers, explain):
    s = Sim()
    for name, labels, cpu, mem in nodes:
        s.node(name, labels=labels, cpu=str(cpu), memory=str(mem))
    for i, cpu in enumerate(fillers):
        s.submit(f"f{i}", basic("b", pods(1, cpu=str(cpu))))
    body = {"name": "t", "compositePodGroups": [root]}
    data = json.loads(json.dumps({"namespace": "default", "name": "t", "priority": 0,
                                  "preemptionPolicy": "PreemptLowerPriority", "spec": body}))
    evolve(s.state, Event(s.state.position + 1, ev.WORKLOAD_SUBMITTED, data))
    wl = s.state.workloads[("default", "t")]
    before = copy.deepcopy(s.state)
    routine = Routine(s.state, wl, explain=explain)
    out = routine.place(wl.spec.roots[0], None)
    real = (out.satisfied, [(gi, res.placements) for gi, res in routine.placed] if out.satisfied else [],
            dict(routine.domains) if out.satisfied else {})
    routine.rollback()
    assert (s.state.nodes.used == before.nodes.used).all()  # the routine leaves no trace
    ok, _, placed, domains = reference_tree.place(before, ("default", "t"), wl.spec.roots[0], None)
    assert real == (ok, placed if ok else [], domains if ok else {})


@st.composite
def _stream_clusters(draw: Any) -> list[tuple[str, dict[str, str], int]]:
    out = []
    for i in range(draw(st.integers(2, 8))):
        block = draw(st.sampled_from(["b1", "b2", "b3"]))
        out.append((f"n{i}", {"block": block, "rack": f"{block}-r{draw(st.integers(0, 1))}"}, draw(st.integers(1, 6))))
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(_stream_clusters(), st.lists(trees(), min_size=1, max_size=3),
       st.lists(st.tuples(st.sampled_from(["remove", "add", "delete", "label", "rack"]), st.integers(0, 7)),
                max_size=10))
def test_skipping_rigid_trees_never_changes_a_decision(nodes, roots, steps):
    """As test_composite's skipping property, over trees biased to rigid ones (capacity proofs)."""
    import importlib
    from unittest import mock

    from service.domain.decide import decider
    from service.domain.decide import trees as tree_decide
    from tests.domain.test_composite import _stream
    evolve_module = importlib.import_module("service.domain.fold.evolve")
    skipping = _stream(roots, nodes, steps)
    with mock.patch.object(tree_decide, "_memo", lambda state, wl: None), \
            mock.patch.object(tree_decide, "_proven", lambda state, root: False), \
            mock.patch.object(decider, "TREES", ("no", "lane")), \
            mock.patch.object(evolve_module, "_may_change_placement", lambda state, old, new: True):
        trying = _stream(roots, nodes, steps)  # every tree tried, always
    assert skipping == trying


def test_a_capacity_proof_skips_a_tree_until_rows_gain_room():
    """A rigid tree on `block` whose pods exceed every block's room is proven unable to fit: later
    inputs that free nothing (a flat placement, a label nobody reads) run no tree routine; a deletion
    that frees a block voids the proof, and the tree is placed there."""
    from unittest import mock

    s = Sim()
    for b in ("b1", "b2"):
        for i in range(2):
            s.node(f"{b}-n{i}", labels={"block": b, "rack": f"{b}-r{i}"}, cpu="2")
    s.submit("fill", basic("f", pods(3, cpu="2")))  # 3 of the 4 nodes full
    root = {"name": "r", "topology": {"key": "block"}, "schedulingPolicy": {"gang": {"minGroupCount": 1}},
            "podGroups": [gang("g", 2, pods(2, cpu="2"))]}
    s.run("SubmitWorkload", "t", "default", {"name": "t", "compositePodGroups": [root]})
    assert s.types() == [ev.COMPOSITE_POD_GROUP_UNSCHEDULABLE]
    assert s.state.index.proofs  # fewer than 2 nodes' worth of room in each block
    calls: list[int] = []
    real = Routine.place
    with mock.patch.object(Routine, "place", lambda self, ci, allowed: calls.append(ci) or real(self, ci, allowed)):
        s.submit("small", basic("f", pods(1, cpu="1")))  # placed: room only shrinks
        s.node("b1-n0", labels={"block": "b1", "rack": "b1-r0", "owner": "x"}, cpu="2")  # read by nobody
        s.submit("other", gang("g", 1, pods(1, cpu="5")))
        s.delete("other")  # frees nothing
        assert calls == []
        s.delete("fill")  # frees every node
        assert calls
    assert set(s.placements("t", "g").values()) <= {"b1-n0", "b1-n1", "b2-n0", "b2-n1"}
    assert None not in s.placements("t", "g").values()
