"""Hypothesis properties of finished pods (lifecycle.md) over random streams mixing reports,
submissions at several priorities (preemption), deletions and node loss."""
from __future__ import annotations

import json

import numpy as np
from hypothesis import HealthCheck, given, settings

from service.domain import ClusterState, Event, evolve
from service.domain.model import events as ev
from service.domain.read.views import canonical
from tests.domain import strategies
from tests.domain.sim import Sim
from tests.domain.strategies import lifecycle_streams

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _check_stream(s: Sim, strict_gangs: bool) -> None:
    """Replay every event, checking against the state just before it: placed pods were Pending,
    evicted and lost pods Running (never finished); no node over capacity after a placement; a
    gang with Running pods has Running + Succeeded >= minCount after every pass (strict_gangs:
    when no pod was reported Failed, the decider alone shapes the gangs)."""
    state = ClusterState(s.state.cluster)
    inputs = [e.position for e in s.events if e.is_input]
    for e in s.events:
        data = json.loads(json.dumps(e.data))
        if e.type in (ev.POD_GROUP_SCHEDULED, ev.PODS_SCHEDULED, ev.POD_GROUP_PREEMPTED, ev.PODS_LOST):
            g = state.group(data["namespace"], data["workload"], data["podGroup"])
            for p in data["pods"]:
                phase = g.phase_of(g.pod_index(p["pod"]))
                want = "Pending" if e.type in (ev.POD_GROUP_SCHEDULED, ev.PODS_SCHEDULED) else "Running"
                assert phase == want, f"{e.type} of a {phase} pod {p['pod']}"
        evolve(state, Event(e.position, e.type, data))
        if e.type in (ev.POD_GROUP_SCHEDULED, ev.PODS_SCHEDULED):
            for p in data["pods"]:
                row = state.nodes.index[p["node"]]
                assert np.all(state.nodes.used[row] <= state.nodes.alloc[row]), f"node {p['node']} over capacity"
        last_of_pass = e.position + 1 in inputs or e is s.events[-1]
        if strict_gangs and last_of_pass:
            for wl in state.workloads.values():
                for g in wl.groups:
                    if g.spec.gang and g.placed:
                        assert g.placed + g.succeeded >= g.spec.min_count, f"{g.spec.name} below minCount"
    # finished pods hold nothing: usage is the sum of Running pods' requests
    used = np.zeros_like(s.state.nodes.used[: s.state.nodes.count])
    for wl in s.state.workloads.values():
        for g in wl.groups:
            for p, row in enumerate(g.node_of):
                if row >= 0:
                    used[row] += s.state.shape_vector(wl, g.spec.pod_shapes[p])
            assert g.placed + g.succeeded + g.failed <= g.total
    assert np.array_equal(used, s.state.nodes.used[: s.state.nodes.count])


@SETTINGS
@given(lifecycle_streams())
def test_finished_pods_are_never_placed_evicted_or_lost_and_replay_equals_live(cmds):
    s = strategies.run(cmds)
    _check_stream(s, strict_gangs=False)
    s.assert_replay_equal()


@SETTINGS
@given(lifecycle_streams(phases=("Succeeded",)))
def test_the_decider_never_leaves_a_gang_below_min_count_with_pods_running(cmds):
    s = strategies.run(cmds)
    _check_stream(s, strict_gangs=True)


@SETTINGS
@given(lifecycle_streams())
def test_same_inputs_same_bytes(cmds):
    a, b = strategies.run(cmds), strategies.run(cmds)
    assert [(e.position, e.type, json.dumps(e.data, sort_keys=True)) for e in a.events] == \
        [(e.position, e.type, json.dumps(e.data, sort_keys=True)) for e in b.events]
    assert canonical(a.state) == canonical(b.state)
