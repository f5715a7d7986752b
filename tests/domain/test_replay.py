"""The fast replay (service/domain/fold/fast.py) gives exactly the state that folding every event
with `evolve` gives: on random streams with preemption, node loss and DRA, with data as dicts
or as the stored JSON text, in batches announced more or less far ahead, from an empty state or
from a snapshot."""
from __future__ import annotations

import json
import pickle
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.domain import ClusterState, Event, evolve
from service.domain.fold.fast import Replay, ReplayError, replay
from service.domain.model import events as ev
from service.domain.read.views import canonical, workload_view
from service.store.base import canonical_json
from tests.domain import strategies, test_composite, test_devices, test_properties
from tests.domain.sim import Sim, gang, pods
from tests.domain.state_equality import assert_same_state

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def assert_same(got: ClusterState, expected: ClusterState) -> None:
    """Everything the state holds, every attribute, caches only left out (state_equality.EXCLUDED),
    and what only views show (canonical)."""
    assert_same_state(got, expected)
    assert canonical(got) == canonical(expected)


def rows_of(events: list[Event], text: bool) -> list[tuple[int, str, int, Any]]:
    """As the store gives them back: canonical JSON (keys sorted), as text or decoded."""
    return [(e.position, e.type, ev.SCHEMA_VERSIONS[e.type],
             canonical_json(e.data) if text else json.loads(canonical_json(e.data))) for e in events]


def plain(state: ClusterState, events: list[Event]) -> ClusterState:
    for e in events:
        evolve(state, Event(e.position, e.type, json.loads(canonical_json(e.data))))
    return state


def fast(state: ClusterState, events: list[Event], *, text: bool, batch: int, ahead: int) -> ClusterState:
    """As the service folds a rebuild: batches announced `ahead` batches before their fold."""
    rows = rows_of(events, text)
    batches = [rows[i:i + batch] for i in range(0, len(rows), batch)]
    r = Replay(state)
    for b in batches[:ahead + 1]:
        r.ahead(b)
    for i, b in enumerate(batches):
        if i + ahead + 1 < len(batches):
            r.ahead(batches[i + ahead + 1])
        r.fold(b)
    return r.finish()


def check_same(sim: Sim, data: st.DataObject, *, end_all: bool = False) -> None:
    if end_all:  # every workload transient: preempted and lost ones too
        for (ns, name), wl in list(sim.state.workloads.items()):
            if wl.deleted_at is None:
                sim.delete(name, ns)
    events = sim.events
    text, batch, ahead = data.draw(st.booleans()), data.draw(st.integers(1, 12)), data.draw(st.integers(0, 3))
    expected = plain(ClusterState(sim.state.cluster), events)
    got = fast(ClusterState(sim.state.cluster), events, text=text, batch=batch, ahead=ahead)
    assert_same(got, expected)
    assert canonical(got) == canonical(sim.state)
    # snapshots of either are interchangeable
    assert_same(pickle.loads(pickle.dumps(got)), pickle.loads(pickle.dumps(expected)))
    # from a snapshot part way (its skip index starts without dirty rows)
    cut = data.draw(st.integers(0, len(events)))
    snap = pickle.dumps(plain(ClusterState(sim.state.cluster), events[:cut]))
    expected = plain(pickle.loads(snap), events[cut:])
    got = fast(pickle.loads(snap), events[cut:], text=text, batch=batch, ahead=ahead)
    assert_same(got, expected)


@SETTINGS
@given(strategies.streams(), st.data())
def test_fast_replay_equals_fold_on_random_streams(cmds, data):
    check_same(test_properties.run(cmds), data, end_all=data.draw(st.booleans()))


@SETTINGS
@given(strategies.preemption_streams(), st.data())
def test_fast_replay_equals_fold_with_preemption_and_devices(cmds, data):
    check_same(strategies.run(cmds), data, end_all=data.draw(st.booleans()))


@contextmanager
def sims_checked(data: st.DataObject) -> Iterator[None]:
    """Every Sim.assert_replay_equal() of the block also checks the fast replay."""
    original = Sim.assert_replay_equal

    def both(self: Sim) -> None:
        original(self)
        check_same(self, data, end_all=data.draw(st.booleans()))

    with mock.patch.object(Sim, "assert_replay_equal", both):
        yield


@SETTINGS
@given(test_devices.scenario(), st.data())
def test_fast_replay_equals_fold_with_dra_scenarios(steps, data):
    with sims_checked(data):
        test_devices.test_property_no_device_in_two_live_claims_and_replay_equals_live.hypothesis.inner_test(steps)


@SETTINGS
@given(test_composite.clusters(), st.lists(test_composite.trees(), min_size=1, max_size=3),
       st.lists(st.tuples(st.sampled_from(["remove", "add", "delete"]), st.integers(0, 7)), max_size=6), st.data())
def test_fast_replay_equals_fold_with_trees(nodes, roots, steps, data):
    """Trees (composite.md) are left to evolve by the fast path, transient ones too."""
    with sims_checked(data):
        test_composite.test_random_streams_keep_the_invariants_and_replay_equals_live.hypothesis.inner_test(
            nodes, roots, steps)


def test_streams_here_exercise_the_fast_path_and_its_exits():
    """Transient workloads with preemption, node loss and unschedulable decisions, next to
    ones that stay (the plain path)."""
    s = Sim()
    s.node("n1", cpu="4", labels={"rack": "r1"})
    s.node("n2", cpu="4", labels={"rack": "r2"})
    s.submit("low", gang("g", 2, pods(2, cpu="2")), priority=1)
    s.submit("big", gang("g", 3, pods(3, cpu="4")), priority=1)  # waits: explained
    s.submit("high", gang("g", 2, pods(2, cpu="4")), priority=10)  # preempts low
    assert ev.POD_GROUP_PREEMPTED in s.types()
    s.remove_node("n2")  # pods lost
    s.node("n3", cpu="8")
    s.submit("gpu", gang("g", 1, pods(1, cpu="1", **{"example.com/fpga": "1"})), priority=5)  # a new column
    for name in ("low", "high", "gpu"):
        s.delete(name)
    s.submit("stays", gang("g", 1, pods(1, cpu="1")))
    types = {e.type for e in s.events}
    assert {ev.POD_GROUP_PREEMPTED, ev.PODS_LOST, ev.POD_GROUP_UNSCHEDULABLE} <= types
    expected = plain(ClusterState("c1"), s.events)
    for text in (False, True):
        r = Replay(ClusterState("c1"))
        rows = rows_of(s.events, text)
        r.ahead(rows)
        r.fold(rows)
        got = r.finish()
        assert_same(got, expected)
        assert len(r.open) == 0
        if text:  # fast path: the spec kept as text; a new resource column: evolve's path
            kinds = {n: type(got.workloads[("default", n)].__dict__["_finished"][0]) for n in ("low", "high", "gpu")}
            assert kinds == {"low": str, "high": str, "gpu": dict}
        # finished workloads read back as the plain fold's
        for name in ("low", "high", "gpu"):
            assert workload_view(got, got.workloads[("default", name)]) == \
                workload_view(expected, expected.workloads[("default", name)])


def test_an_announced_deletion_must_be_folded():
    s = Sim()
    s.node("n1", cpu="4")
    s.submit("w", gang("g", 1, pods(1, cpu="1")))
    s.delete("w")
    rows = rows_of(s.events, True)
    r = Replay(ClusterState("c1"))
    r.ahead(rows)
    r.fold(rows[:-1])
    with pytest.raises(ReplayError):
        r.finish()
    assert_same(replay(ClusterState("c1"), rows), plain(ClusterState("c1"), s.events))


@SETTINGS
@given(strategies.lifecycle_streams(), st.data())
def test_fast_replay_equals_fold_with_finished_pods(cmds, data):
    # workloads with finished pods are folded by evolve, the others the fast way
    check_same(strategies.run(cmds), data, end_all=data.draw(st.booleans()))
