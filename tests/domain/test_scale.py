"""lifecycle.md *Growing and shrinking*, one example per rule: `scale` and its WorkloadScaled input
for pod entries, minCount, stamped CPG entries and minGroupCount; highest indices first; the 409
and 422 refusals; the pass; trees; claims; replay."""
from __future__ import annotations

import json
import pickle
from typing import Any

import pytest

from service.domain.model import events as ev
from service.domain.read.views import canonical
from service.domain.state.cluster import ClusterState
from service.schemas import validate_body
from tests.domain.sim import Sim, basic, gang, pods
from tests.domain.test_composite import cpg, cpg_view, submit_tree


def scale(s: Sim, name: str, body: dict[str, Any]) -> list[ev.Event]:
    validate_body("Scale", json.dumps(body))  # every body here is valid in shape
    return s.scale(name, body)


def entry(group: str, pod: str, count: int, min_count: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": group, "pods": [{"name": pod, "count": count}]}
    if min_count is not None:
        out["schedulingPolicy"] = {"gang": {"minCount": min_count}}
    return out


def pod_phases(s: Sim, wl: str, group: str | None = None) -> dict[str, tuple[str, str | None]]:
    return {p["name"]: (p["phase"], p["node"]) for p in s.group(wl, group)["pods"]}


def assert_consistent(state: ClusterState) -> None:
    """The indexes that hold group and pod indices agree with the groups (after any surgery)."""
    seen: set[tuple[int, int, int]] = set()
    for wl in state.workloads.values():
        for g in wl.groups:
            assert len(g.node_of) == len(g.placed_at) == len(g.spec.pod_names)
            assert g.placed == sum(1 for n in g.node_of if n >= 0)
            for pod, row in enumerate(g.node_of):
                if row >= 0:  # (a PodGroup object's group is in its owner's list: g.workload is its own)
                    assert (g.workload.position, g.index, pod) in state.node_pods[row]
                    seen.add((g.workload.position, g.index, pod))
            if g.placed:
                assert state.running[g.running_key] is g
    assert seen == {t for row in state.node_pods for t in row}
    for key in state.dra.claims:
        wl = state.by_position[key[1]]
        if key[0] == "Pod":
            assert wl.groups[key[2]].node_of[key[3]] >= 0, key


def assert_all(s: Sim) -> None:
    assert_consistent(s.state)
    s.assert_replay_equal()
    restored = pickle.loads(pickle.dumps(s.state))  # a snapshot
    assert canonical(restored) == canonical(s.state)


# -- pod entries ---------------------------------------------------------------------------------
def test_growing_adds_the_next_indices_pending_and_places_them_as_leftovers():
    s = Sim()
    s.node("n1", cpu="8")
    s.submit("train", gang("workers", 4, pods(4, "worker", cpu="1")))
    decisions = scale(s, "train", {"podGroups": [entry("workers", "worker", 6)]})
    inp = s.events[-1 - len(decisions)]
    assert inp.type == ev.WORKLOAD_SCALED
    assert inp.data == {
        "namespace": "default", "workload": "train",
        "patch": {"podGroups": [entry("workers", "worker", 6)]},
        "podGroups": [{"podGroup": "workers", "parent": None, "change": "Updated", "minCount": 4, "podCount": 6,
                       "addedPods": ["worker-4", "worker-5"], "removedPods": []}],
        "compositePodGroups": []}
    # the group is satisfied: the new pods are leftovers, placed one by one (PodsScheduled)
    assert s.types(decisions) == [ev.PODS_SCHEDULED]
    assert [p["pod"] for p in decisions[0].data["pods"]] == ["worker-4", "worker-5"]
    assert s.wl("train")["spec"]["podGroups"][0]["pods"][0]["count"] == 6
    assert s.group("train")["placedPods"] == 6
    assert_all(s)


def test_growth_without_room_is_explained_once():
    s = Sim()
    s.node("n1", cpu="4")
    s.submit("train", gang("workers", 4, pods(4, "worker", cpu="1")))
    assert s.types(scale(s, "train", {"podGroups": [entry("workers", "worker", 5)]})) == [ev.POD_GROUP_UNSCHEDULABLE]
    assert s.group("train")["phase"] == "Scheduled" and s.group("train")["pendingPods"] == 1
    assert s.group("train")["explanation"] is not None
    s.node("n2", cpu="1")
    assert s.types() == [ev.PODS_SCHEDULED]
    assert_all(s)


def test_shrinking_removes_the_highest_indices_first_whatever_they_are_doing():
    s = Sim()
    s.node("n1", cpu="3")
    s.submit("train", basic("workers", pods(4, "worker", cpu="1")))
    assert pod_phases(s, "train")["worker-3"] == ("Pending", None)
    s.submit("other", basic("o", pods(1, cpu="1")))  # waits for room
    decisions = scale(s, "train", {"podGroups": [entry("workers", "worker", 2)]})
    inp = s.events[-1 - len(decisions)]
    assert inp.data["podGroups"][0]["removedPods"] == [{"pod": "worker-2", "node": "n1"},
                                                        {"pod": "worker-3", "node": None}]
    assert list(pod_phases(s, "train")) == ["worker-0", "worker-1"]
    # a Running pod removed leaves its node at once: the pass sweeps, and the waiting group fits
    assert s.types(decisions) == [ev.POD_GROUP_SCHEDULED] and decisions[0].data["workload"] == "other"
    assert sorted(p["pod"] for p in s.node_view("n1")["pods"]) == ["p-0", "worker-0", "worker-1"]
    assert_all(s)


def test_a_later_growth_gives_the_same_names_to_new_pods():
    s = Sim()
    s.node("n1", cpu="4")
    s.submit("train", basic("workers", pods(3, "worker", cpu="1")))
    scale(s, "train", {"podGroups": [entry("workers", "worker", 1)]})
    scale(s, "train", {"podGroups": [entry("workers", "worker", 3)]})
    assert pod_phases(s, "train") == {f"worker-{i}": ("Running", "n1") for i in range(3)}
    assert_all(s)


def test_growing_an_earlier_entry_moves_the_pods_after_it_and_their_claims():
    s = Sim()
    s.node("n1", cpu="8")
    s.run("UpsertDeviceClass", "gpu", body={"selectors": []})
    s.run("UpsertResourceSlice", "n1-gpus", body={"driver": "gpu.example.com", "pool": {"name": "n1"},
                                                  "nodeName": "n1",
                                                  "devices": [{"name": f"g{i}"} for i in range(4)]})
    tpl = [{"name": "gpu", "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu"}}]}}}]
    claim = [{"name": "gpu", "resourceClaimTemplateName": "gpu"}]
    s.submit("mix", basic("g", {"name": "driver", "count": 1, "requests": {"cpu": "1"}},
                          {"name": "exec", "count": 2, "requests": {"cpu": "1"}, "resourceClaims": claim}),
             resourceClaimTemplates=tpl)
    pos = s.state.workloads[("default", "mix")].position
    assert sorted(k[3] for k in s.state.dra.claims) == [1, 2]
    devices = {k[3]: a.device_ids for k, a in s.state.dra.claims.items()}
    before = s.group("mix")["claims"]
    scale(s, "mix", {"podGroups": [{"name": "g", "pods": [{"name": "driver", "count": 2}]}]})
    # exec-0 and exec-1 are pods 2 and 3 now: their claims keep their devices under the new keys
    assert {k: a.device_ids for k, a in s.state.dra.claims.items()} == {
        ("Pod", pos, 0, 2, "gpu"): devices[1], ("Pod", pos, 0, 3, "gpu"): devices[2]}
    assert list(pod_phases(s, "mix")) == ["driver-0", "driver-1", "exec-0", "exec-1"]
    assert all(v == ("Running", "n1") for v in pod_phases(s, "mix").values())
    assert_consistent(s.state)
    assert s.group("mix")["claims"] == before
    scale(s, "mix", {"podGroups": [{"name": "g", "pods": [{"name": "exec", "count": 1}]}]})
    assert list(pod_phases(s, "mix")) == ["driver-0", "driver-1", "exec-0"]
    assert len(s.state.dra.claims) == 1  # exec-1's own claim was freed with it
    assert_all(s)


# -- minCount ------------------------------------------------------------------------------------
def test_issue_142330_growing_the_entry_admits_the_replacement_as_the_deficit():
    s = Sim()
    s.node("n1", cpu="4")
    s.submit("pi", gang("job", 4, pods(4, "pi", cpu="1")))
    s.finish("pi", ("job", "pi-0", "Succeeded"))
    s.finish("pi", ("job", "pi-1", "Failed"))
    assert s.group("pi")["phase"] == "Pending"
    decisions = scale(s, "pi", {"podGroups": [entry("job", "pi", 5)]})
    assert s.types(decisions) == [ev.POD_GROUP_SCHEDULED]
    assert decisions[0].data["pods"] == [{"pod": "pi-4", "node": "n1"}]
    g = s.group("pi")
    assert g["phase"] == "Scheduled" and (g["placedPods"], g["succeededPods"], g["failedPods"]) == (3, 1, 1)
    assert_all(s)


def test_raising_min_count_leaves_pods_running_and_the_gang_unsatisfied():
    s = Sim()
    s.node("n1", cpu="4")
    s.submit("el", gang("w", 2, pods(2, cpu="1")))
    decisions = scale(s, "el", {"podGroups": [{"name": "w", "schedulingPolicy": {"gang": {"minCount": 2}},
                                               "pods": [{"name": "p", "count": 2}]}]})
    assert decisions == []  # nothing changed: no pass work, no record of a group
    assert s.events[-1].data["podGroups"] == []
    # elastic growth all at once: count and minCount in one body; 2 fit, the gang needs 4
    decisions = scale(s, "el", {"podGroups": [entry("w", "p", 6, min_count=6)]})
    assert s.types(decisions) == [ev.POD_GROUP_UNSCHEDULABLE]
    g = s.group("el")
    assert (g["phase"], g["placedPods"], g["pendingPods"]) == ("Pending", 2, 4)
    cond = next(c for c in g["conditions"] if c["type"] == "PodGroupSatisfied")
    assert cond["status"] == "False" and cond["message"] == "2 running, 0 succeeded, minCount 6"
    # room for the deficit: all four are placed together
    s.node("n2", cpu="4")
    assert s.types() == [ev.POD_GROUP_SCHEDULED] and len(s.last[0].data["pods"]) == 4
    assert_all(s)


def test_lowering_min_count_makes_a_waiting_gang_placeable():
    s = Sim()
    s.node("n1", cpu="3")
    s.submit("w", gang("g", 4, pods(4, cpu="1")))
    assert s.types() == [ev.POD_GROUP_UNSCHEDULABLE]
    decisions = scale(s, "w", {"podGroups": [{"name": "g", "schedulingPolicy": {"gang": {"minCount": 3}}}]})
    assert s.types(decisions) == [ev.POD_GROUP_SCHEDULED] and len(decisions[0].data["pods"]) == 3
    assert_all(s)


def test_a_change_tries_only_what_it_touched():
    s = Sim()
    s.node("n1", cpu="2")
    s.submit("a", gang("g", 3, pods(3, cpu="1")))
    s.submit("b", basic("g", pods(1, cpu="1")))
    s.submit("c", gang("g", 4, pods(4, cpu="1")))
    assert s.group("c")["phase"] == "Pending"
    # lowering a's minCount: only a is tried (c stays unplaced although it is pending)
    decisions = scale(s, "a", {"podGroups": [{"name": "g", "schedulingPolicy": {"gang": {"minCount": 1}}}]})
    assert {d.data["workload"] for d in decisions} == {"a"}
    assert_all(s)


# -- refusals ------------------------------------------------------------------------------------
def _job() -> Sim:
    s = Sim()
    s.node("n1", cpu="8")
    s.submit("job", gang("w", 4, pods(4, "w", cpu="1")), basic("b", pods(1, "b", cpu="1")))
    return s


def test_a_change_that_removes_a_finished_pod_is_refused():
    s = _job()
    s.finish("job", ("w", "w-3", "Succeeded"))
    r = s.refused("ScaleWorkload", "job", "default", {"podGroups": [entry("w", "w", 3, min_count=3)]})
    assert (r.status, r.reason) == (409, "PodFinished") and "w/w-3" in r.detail


def test_a_change_leaving_a_gang_below_min_count_with_pods_running_is_refused():
    s = Sim()
    s.node("n1", cpu="8")
    s.submit("job", gang("w", 2, pods(4, "w", cpu="1")))
    s.finish("job", ("w", "w-0", "Failed"))
    # w-2 and w-3 go: w-1 alone would run, below minCount 2
    r = s.refused("ScaleWorkload", "job", "default", {"podGroups": [entry("w", "w", 2)]})
    assert (r.status, r.reason) == (409, "BelowMinCount") and "minCount 2" in r.detail
    scale(s, "job", {"podGroups": [entry("w", "w", 2, min_count=1)]})  # lowered in the same body
    assert s.group("job", "w")["placedPods"] == 1
    assert_all(s)


@pytest.mark.parametrize(("body", "loc"), [
    ({"podGroups": [{"name": "nope"}]}, ("body", "podGroups", 0, "name")),
    ({"podGroups": [{"name": "w", "pods": [{"name": "x", "count": 2}]}]}, ("body", "podGroups", 0, "pods", 0, "name")),
    ({"podGroups": [{"name": "b", "schedulingPolicy": {"gang": {"minCount": 1}}}]},
     ("body", "podGroups", 0, "schedulingPolicy")),
    ({"podGroups": [{"name": "w", "schedulingPolicy": {"gang": {"minCount": 5}}}]},
     ("body", "podGroups", 0, "schedulingPolicy", "gang", "minCount")),
    ({"podGroups": [entry("w", "w", 2)]}, ("body", "podGroups", 0)),  # minCount 4 > 2 pods
    ({"podGroups": [entry("b", "b", 9997)]}, ("body", "podGroups")),  # 10,001 pods
    ({"compositePodGroups": [{"name": "w", "count": 2}]}, ("body", "compositePodGroups")),
])
def test_an_invalid_change_is_a_422_naming_the_field(body, loc):
    s = _job()
    validate_body("Scale", json.dumps(body))
    r = s.refused("ScaleWorkload", "job", "default", body)
    assert r.status == 422 and r.loc == loc, r


def test_an_unknown_or_deleted_workload():
    s = _job()
    assert s.refused("ScaleWorkload", "nope", "default", {"podGroups": [entry("w", "w", 5)]}).status == 404
    s.delete("job")
    r = s.refused("ScaleWorkload", "job", "default", {"podGroups": [entry("w", "w", 5)]})
    assert (r.status, r.reason) == (409, "WorkloadDeleted")


# -- trees ---------------------------------------------------------------------------------------
def _lws(s: Sim, replicas: int = 2) -> None:
    serve = cpg("serve", [gang("leader", 1, pods(1, "leader", cpu="1")),
                          gang("workers", 2, pods(2, "worker", cpu="1"))], min_groups=2, count=replicas)
    submit_tree(s, "lws", serve)


def test_a_leader_worker_set_from_2_to_3_replicas_and_back():
    s = Sim()
    for i in range(3):
        s.node(f"n{i}", cpu="3")
    _lws(s)
    assert [c["name"] for c in s.wl("lws")["status"]["compositePodGroups"]] == ["serve-0", "serve-1"]
    decisions = scale(s, "lws", {"compositePodGroups": [{"name": "serve", "count": 3}]})
    inp = s.events[-1 - len(decisions)]
    assert [(r["podGroup"], r["change"], r["parent"]) for r in inp.data["podGroups"]] == [
        ("serve-2-leader", "Added", "serve-2"), ("serve-2-workers", "Added", "serve-2")]
    assert inp.data["compositePodGroups"] == [{"compositePodGroup": "serve-2", "parent": None, "change": "Added",
                                               "minGroupCount": 2}]
    assert s.types(decisions) == [ev.COMPOSITE_POD_GROUP_SCHEDULED]
    assert decisions[0].data["compositePodGroup"] == "serve-2"
    assert cpg_view(s, "lws", "serve-2")["phase"] == "Scheduled"
    decisions = scale(s, "lws", {"compositePodGroups": [{"name": "serve", "count": 2}]})
    inp = s.events[-1 - len(decisions)]
    assert [(r["podGroup"], r["change"]) for r in inp.data["podGroups"]] == [
        ("serve-2-leader", "Removed"), ("serve-2-workers", "Removed")]
    assert [c["name"] for c in s.wl("lws")["status"]["compositePodGroups"]] == ["serve-0", "serve-1"]
    assert sum(len(s.node_view(f"n{i}")["pods"]) for i in range(3)) == 6
    assert_all(s)


def test_a_nested_stamped_entry_grows_and_moves_what_follows():
    s = Sim()
    s.node("n1", cpu="16")
    trainer = cpg("trainer", [{**gang("workers", 1, pods(1, "w", cpu="1")), "count": 2},
                              gang("ps", 1, pods(1, "ps", cpu="1"))], min_groups=3)
    submit_tree(s, "t", trainer)
    before = s.placements("t", "ps")
    decisions = scale(s, "t", {"compositePodGroups": [{"name": "trainer", "schedulingPolicy": {
        "gang": {"minGroupCount": 5}}, "podGroups": [{"name": "workers", "count": 4}]}]})
    assert [g["name"] for g in s.wl("t")["status"]["podGroups"]] == [
        "workers-0", "workers-1", "workers-2", "workers-3", "ps"]
    assert s.placements("t", "ps") == before
    # the raised minGroupCount leaves trainer unsatisfied with pods Running: its new children are
    # leftovers, placed group by group (lifecycle.md *Trees*), and it is satisfied again
    assert [(d.type, d.data["podGroup"]) for d in decisions] == [
        (ev.POD_GROUP_SCHEDULED, "workers-2"), (ev.POD_GROUP_SCHEDULED, "workers-3")]
    assert cpg_view(s, "t", "trainer")["phase"] == "Scheduled"
    assert_all(s)


def test_removing_children_below_min_group_count_is_refused():
    s = Sim()
    s.node("n1", cpu="16")
    trainer = cpg("trainer", [{**gang("workers", 1, pods(1, "w", cpu="1")), "count": 4}], min_groups=4)
    submit_tree(s, "t", trainer)
    body = {"compositePodGroups": [{"name": "trainer", "podGroups": [{"name": "workers", "count": 3}]}]}
    r = s.refused("ScaleWorkload", "t", "default", body)
    assert r.status == 422  # minGroupCount 4 > 3 children: invalid as a submission
    r = s.refused("ScaleWorkload", "t", "default", {"compositePodGroups": [{
        "name": "trainer", "podGroups": [{"name": "workers", "count": 3, "pods": [{"name": "w", "count": 1}]}]}]})
    assert r.status == 422
    # the tree's count of copies may not be given where none was submitted
    r = s.refused("ScaleWorkload", "t", "default", {"compositePodGroups": [{"name": "trainer", "count": 2}]})
    assert r.status == 422 and r.loc == ("body", "compositePodGroups", 0, "count")
    scale(s, "t", {"compositePodGroups": [{"name": "trainer", "schedulingPolicy": {"gang": {"minGroupCount": 3}},
                                           "podGroups": [{"name": "workers", "count": 3}]}]})
    assert len(s.wl("t")["status"]["podGroups"]) == 3
    assert_all(s)


def test_below_min_group_count_when_a_basic_child_loses_its_running_pods():
    s = Sim()
    s.node("n1", cpu="16")
    trainer = cpg("trainer", [{**basic("workers", pods(1, "w", cpu="1")), "count": 2},
                              basic("ps", pods(2, "ps", cpu="1"))], min_groups=3)
    submit_tree(s, "t", trainer)
    # shrinking ps removes a Running pod but leaves ps one: still satisfied
    scale(s, "t", {"compositePodGroups": [{"name": "trainer", "podGroups": [
        {"name": "ps", "pods": [{"name": "ps", "count": 1}]}]}]})
    assert cpg_view(s, "t", "trainer")["phase"] == "Scheduled"
    assert_all(s)
