"""Names used again (lifecycle.md): in the decider, a deleted workload's name submitted again is a new
incarnation; the name means the latest one; the fold, the fast replay and snapshots keep them apart."""
from __future__ import annotations

import pickle

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.app.snapshots import light_copy
from service.domain import ClusterState
from service.domain.model import events as ev
from service.domain.read.views import canonical, workload_view
from tests.domain import strategies, test_properties
from tests.domain.sim import Sim, gang, pods
from tests.domain.test_replay import check_same, plain


def _reruns() -> Sim:
    s = Sim()
    s.node("n1", cpu="4")
    s.submit("job", gang("g", 2, pods(2, cpu="2")))
    s.delete("job")
    s.submit("job", gang("g", 1, pods(1, cpu="4")))  # another body under the same name
    s.submit("other", gang("g", 1, pods(1, cpu="1")), priority=5)  # preempts the second incarnation
    s.delete("job")
    s.submit("job", gang("g", 1, pods(1, cpu="1")))
    return s


def test_each_submission_after_a_deletion_is_an_incarnation_of_its_own() -> None:
    s = _reruns()
    submitted = [e.position for e in s.events if e.type == ev.WORKLOAD_SUBMITTED and e.data["name"] == "job"]
    assert len(submitted) == 3
    views = [workload_view(s.state, s.state.by_position[p]) for p in submitted]
    assert [v["previous"] for v in views] == [None, submitted[0], submitted[1]]
    assert [v["status"]["phase"] for v in views] == ["Finished", "Finished", "Scheduled"]
    assert s.state.workloads[("default", "job")].position == submitted[2]  # the name: the latest
    assert s.state.incarnation("default", "job", submitted[0]) is s.state.by_position[submitted[0]]
    assert s.state.incarnation("default", "job", submitted[0] + 1) is None
    assert s.state.incarnation("default", "other", submitted[0]) is None
    # the second incarnation was the victim; the first had finished before
    victims = [e for e in s.events if e.type == ev.POD_GROUP_PREEMPTED]
    assert len(victims) == 1 and submitted[1] < victims[0].position < submitted[2]
    assert victims[0].position in s.state.by_position[submitted[1]].events
    assert all(p < submitted[1] for p in s.state.by_position[submitted[0]].events)
    # a live name is refused, naming the live incarnation
    refusal = s.refused("SubmitWorkload", "job", "default", {"name": "job", "podGroups": [gang("g", 1, pods(1))]})
    assert refusal.status == 409 and f"position {submitted[2]}" in refusal.detail


def test_incarnations_replay_and_snapshot_as_they_were_decided() -> None:
    s = _reruns()
    s.assert_replay_equal()
    expected = plain(ClusterState("c1"), s.events)
    assert canonical(expected) == canonical(s.state)
    assert canonical(pickle.loads(pickle.dumps(expected))) == canonical(expected)
    assert len(canonical(expected)["workloads"]) == 4
    lite = light_copy(s.state)  # the live ones only: the latest incarnation of "job" and "other"
    assert sorted(lite.workloads) == [("default", "job"), ("default", "other")]
    assert lite.workloads[("default", "job")].previous is not None


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_random_streams_use_names_again_and_keep_the_invariants() -> None:
    """The streams of the properties (strategies.streams) submit deleted names again: counted."""
    reused: list[int] = []

    @SETTINGS
    @given(strategies.streams(), st.data())
    def run(cmds, data) -> None:  # type: ignore[no-untyped-def]
        s = test_properties.run(cmds)  # the invariants after every command
        s.assert_replay_equal()
        check_same(s, data)
        reused.append(sum(1 for wl in s.state.by_position.values() if wl.previous is not None))

    run()
    assert sum(1 for n in reused if n) >= 5, (len(reused), reused)
