"""Property tests of workload-aware preemption (model.md *Preemption*) over random small
clusters crowded with lower-priority work: what every preemption decision must hold,
determinism, replay, and identical decisions from the optimised service/domain/preemption/flat.py
and the straightforward tests/domain/reference_preemption.py."""
from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.domain import ClusterState, Event, evolve
from service.domain.decide import decider
from service.domain.model import events as ev
from service.domain.preemption import candidates
from tests.domain import reference_preemption as ref
from tests.domain import strategies
from tests.domain.sim import Sim

run = strategies.run
streams = strategies.preemption_streams


def dump(s: Sim) -> list[str]:
    return [json.dumps([e.position, e.type, e.data], sort_keys=True, separators=(",", ":")) for e in s.events]


def check_preemptions(s: Sim) -> int:
    """Fold the events one by one; check every decision. Returns the preemptions seen."""
    state = ClusterState(s.state.cluster)
    seen = 0
    victims_of_input: list[dict[str, Any]] = []
    for e in s.events:
        evolve(state, Event(e.position, e.type, json.loads(json.dumps(e.data))))
        # no gang is left below minCount with pods placed, after any decision
        for wl in state.workloads.values():
            if wl.deleted_at is None:
                for g in wl.groups:
                    if g.spec.gang:
                        assert g.placed == 0 or g.placed >= g.spec.min_count, (e.type, g.ref)
        if e.type == ev.POD_GROUP_PREEMPTED:
            # never equal or higher priority
            assert e.data["priority"] < e.data["preemptor"]["priority"]
            victims_of_input.append(e.data)
        elif e.type in (ev.POD_GROUP_SCHEDULED, ev.PODS_SCHEDULED) and e.data.get("preemption"):
            seen += 1
            pre_ref = {k: e.data[k] for k in ("namespace", "workload", "podGroup")}
            assert victims_of_input and all(
                {k: v["preemptor"][k] for k in pre_ref} == pre_ref for v in victims_of_input)
            assert [v["workload"] for v in e.data["preemption"]["victims"]] == \
                [v["workload"] for v in victims_of_input]
            # the preemptor is placed in the same decision, as much as its rule needs, and fits
            g = state.group(e.data["namespace"], e.data["workload"], e.data["podGroup"])
            assert e.data["pods"], "a preemption that places nothing"
            assert g.scheduled, "the preemptor is not scheduled after its preemption"
            for p in e.data["pods"]:
                row = state.nodes.index[p["node"]]
                assert np.all(state.nodes.used[row] <= state.nodes.alloc[row]), f"{p['node']} over capacity"
            victims_of_input = []
        elif e.type not in (ev.POD_GROUP_PREEMPTED,) and victims_of_input:
            raise AssertionError(f"victims evicted without their preemptor's placement ({e.type})")
    assert not victims_of_input
    return seen


SETTINGS = settings(max_examples=45, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(streams())
def test_every_preemption_decision_holds(cmds):
    s = run(cmds)
    check_preemptions(s)
    s.assert_replay_equal()


@SETTINGS
@given(streams())
def test_deterministic_and_same_as_reference(cmds):
    a = run(cmds)
    b = run(cmds)
    assert dump(a) == dump(b)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(decider, "pre", ref)
        r = run(cmds)
    assert dump(a) == dump(r)


@SETTINGS
@given(streams())
def test_candidate_order_rebuilt_from_scratch_decides_the_same(cmds):
    """The fallback of `_Order.sync` (the journal of moves dropped what it had not applied)."""
    a = run(cmds)
    sync = candidates._Order.sync

    def forgetful(self, state):
        self.cursor = None
        sync(self, state)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(candidates._Order, "sync", forgetful)
        b = run(cmds)
    assert dump(a) == dump(b)


def test_streams_do_preempt():
    """The strategy is not vacuous: a fixed crowded stream preempts, with both implementations."""
    cmds = [("node", "n0", {"labels": {"rack": "r1"}, "allocatable": {"pods": 2, "cpu": "4", "memory": "16Gi"}}),
            ("node", "n1", {"labels": {"rack": "r2"}, "allocatable": {"pods": 2, "cpu": "4", "memory": "16Gi"}}),
            ("submit", "w0", {"name": "w0", "priority": 1, "podGroups": [
                {"name": "g0", "schedulingPolicy": {"gang": {"minCount": 2}},
                 "pods": [{"name": "e0", "count": 3, "requests": {"cpu": "1"}}]}]}),
            ("submit", "w1", {"name": "w1", "priority": 2, "podGroups": [
                {"name": "g0", "schedulingPolicy": {"basic": {}}, "pods": [{"name": "e0", "count": 1}]}]}),
            ("submit", "w2", {"name": "w2", "priority": 10, "podGroups": [
                {"name": "g0", "schedulingPolicy": {"gang": {"minCount": 2}}, "topology": {"key": "rack"},
                 "pods": [{"name": "e0", "count": 2, "requests": {"cpu": "2"}}]}]})]
    s = run(cmds)
    assert check_preemptions(s) == 1
    with pytest.MonkeyPatch.context() as m:
        m.setattr(decider, "pre", ref)
        assert dump(run(cmds)) == dump(s)


@st.composite
def rack_streams(draw) -> list[tuple[str, str, Any]]:
    """Several racks crowded with small lower-priority pods, then gangs of one shape that keep to a
    rack and place more than minCount when they can: the preemption search walks the removal
    prefixes one unit at a time (the routine's count need not grow with the prefix)."""
    cmds: list[tuple[str, str, Any]] = []
    for r in range(draw(st.integers(3, 5))):
        for n in range(draw(st.integers(1, 3))):
            cmds.append(("node", f"r{r}n{n}", {"labels": {"rack": f"r{r}"}, "allocatable": {
                "cpu": str(draw(st.integers(2, 6))), "memory": f"{draw(st.integers(4, 16))}Gi"}}))
    i = 0
    for _ in range(draw(st.integers(6, 20))):
        requests = {"cpu": draw(st.sampled_from(["1", "2"])), "memory": draw(st.sampled_from(["1Gi", "3Gi"]))}
        policy = draw(st.sampled_from([{"basic": {}}, {"gang": {"minCount": 1}}]))
        cmds.append(("submit", f"w{i}", {"name": f"w{i}", "priority": draw(st.integers(1, 5)), "podGroups": [
            {"name": "g", "schedulingPolicy": policy,
             "pods": [{"name": "p", "count": draw(st.integers(1, 2)), "requests": requests}]}]}))
        i += 1
    for _ in range(draw(st.integers(1, 4))):
        count = draw(st.integers(2, 6))
        entries = [{"name": "p", "count": count, "requests": {"cpu": draw(st.sampled_from(["1", "2"])),
                                                                "memory": "2Gi"}}]
        if draw(st.booleans()):  # a second shape: the routine simulates the domains
            entries.insert(0, {"name": "d", "count": 1, "requests": {"cpu": "3", "memory": "1Gi"}})
            count += 1
        cmds.append(("submit", f"w{i}", {"name": f"w{i}", "priority": draw(st.integers(6, 9)), "podGroups": [
            {"name": "g", "schedulingPolicy": {"gang": {"minCount": draw(st.integers(1, count))}},
             "topology": {"key": "rack"}, "pods": entries}]}))
        i += 1
        if draw(st.booleans()):
            cmds.append(("delete", f"w{draw(st.integers(0, i - 1))}", None))
    return cmds


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rack_streams())
def test_rack_gangs_preempt_as_the_unit_by_unit_reference(cmds):
    a = run(cmds)
    check_preemptions(a)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(decider, "pre", ref)
        r = run(cmds)
    assert dump(a) == dump(r)
