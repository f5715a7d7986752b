"""Property tests of the decider's invariants over random clusters and input streams."""
from __future__ import annotations

import json

import numpy as np
from hypothesis import HealthCheck, given, settings

from service.domain.model import events as ev
from service.domain.read.views import canonical
from tests.domain import strategies
from tests.domain.sim import Sim
from tests.domain.strategies import streams


def run(cmds) -> Sim:
    return strategies.run(cmds, check_invariants)


def check_invariants(s: Sim) -> None:
    state = s.state
    nodes = state.nodes
    n = nodes.count
    # usage equals the sum of placed pods' requests
    used = np.zeros_like(nodes.used[:n])
    for wl in state.workloads.values():
        for g in wl.groups:
            placed = [i for i, r in enumerate(g.node_of) if r >= 0]
            assert len(placed) == g.placed
            if g.spec.gang:
                assert g.placed == 0 or g.placed >= g.spec.min_count, "gang below minCount with pods placed"
            for p in placed:
                row = g.node_of[p]
                assert nodes.alive[row], "pod on a removed node"
                used[row] += state.shape_vector(wl, g.spec.pod_shapes[p])
            if wl.deleted_at is not None:
                assert g.placed == 0
    assert np.array_equal(used, nodes.used[:n])


def check_capacity_of_new_placements(s: Sim) -> None:
    """Placements never push a node over allocatable (shrinks may, evictions never are needed)."""
    state = s.state
    # replay: after every decision event that places pods, each touched node fits
    from service.domain import ClusterState, Event, evolve
    replay = ClusterState(state.cluster)
    for e in s.events:
        evolve(replay, Event(e.position, e.type, json.loads(json.dumps(e.data))))
        if e.type in (ev.POD_GROUP_SCHEDULED, ev.PODS_SCHEDULED):
            g = replay.group(e.data["namespace"], e.data["workload"], e.data["podGroup"])
            for p in e.data["pods"]:
                row = replay.nodes.index[p["node"]]
                assert np.all(replay.nodes.used[row] <= replay.nodes.alloc[row]), f"node {p['node']} over capacity"
                assert replay.nodes.schedulable[row], "placed on a cordoned or removed node"
                shape = g.workload.spec.shapes[g.spec.pod_shapes[g.pod_index(p["pod"])]]
                labels = replay.nodes.labels[row]
                assert all(labels.get(k) == v for k, v in shape.node_selector), "selector violated"
            if g.spec.topology_key:
                # new pods land in the group's domain (labels may change later: no eviction)
                values = {replay.nodes.labels[replay.nodes.index[p["node"]]].get(g.spec.topology_key)
                          for p in e.data["pods"]}
                assert values == {e.data["domain"]["value"]} == {g.domain}, "topology broken"


SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(streams())
def test_invariants_and_replay(cmds):
    s = run(cmds)
    check_capacity_of_new_placements(s)
    s.assert_replay_equal()


@SETTINGS
@given(streams())
def test_deterministic_bytes(cmds):
    a, b = run(cmds), run(cmds)
    def dump(sim):
        return [json.dumps([e.position, e.type, e.data], sort_keys=True, separators=(",", ":"))
                            for e in sim.events]
    assert dump(a) == dump(b)
    assert canonical(a.state) == canonical(b.state)


@SETTINGS
@given(streams())
def test_preemption_invariants(cmds):
    s = run(cmds)
    for e in s.events:
        if e.type == ev.POD_GROUP_PREEMPTED:
            assert e.data["priority"] < e.data["preemptor"]["priority"], "victim not of lower priority"
